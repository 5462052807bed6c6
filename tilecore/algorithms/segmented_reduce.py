"""DeviceSegmentedReduce: CUB's segmented reductions, two-phase temporary storage.

Segment s is d_in[d_begin_offsets[s]:d_end_offsets[s]]; d_out[s] gets its
reduction. Entry points take `temp_storage` first and `stream` last, as
DeviceReduce: `temp_storage=None` returns the bytes needed (at least 1) and
launches nothing; with a buffer of at least that many bytes the call runs and
returns the same number. No call synchronizes, allocates or reads device
memory back (so calls can be captured in a CUDA graph).

Layers, as in CUB: the public methods check their arguments; `_plan` (cached
per algorithm, dtypes, operator, offsets, device and policy source) selects
the policy (dispatch.segmented_policy) and kernels; `_run` chooses the
kernel's shape from what the host knows (segments, d_in's length, SM count),
lays out the temporary storage (dispatch.temp_storage) and launches; the
kernels are in segmented_kernels.py.

Both kernels take int32 bounds and indices whatever the offsets' dtype when
every index they form fits int32 (`_narrow`). The long kernel clamps its
block's two bounds itself. A rows kernel clamps int64 offsets once per row
and broadcasts them along it (policy convert_offsets 2, the default: no
temporary storage), or they are first clamped into int32 arrays of the
temporary storage (`clamp_offsets`, convert_offsets 1), once per offset
instead of once per element of the rows kernel's tiles: `offsets[:-1]`,
`offsets[1:]` of one array as num_segments + 1 values read once (two views
of one int32 array), other offsets array by array.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

import tilecore as ct

from ..dispatch import overrides
from ..dispatch.segmented_policy import SegmentedPolicy, Shape, choose_shape, \
    select_segmented_policy
from ..dispatch.target import Target
from ..dispatch.temp_storage import Alias, Layout
from ..language import dtypes as D
from ..language.dtypes import DType
from ..runtime import DeviceArray
from ..tunings import lookup as tuning_lookup
from . import segmented_kernels as K
from .shared import check_dtype, kernel_for, target_of, temp_buffer
from .arrays import Arg, address, check_1d, describe
from .operators import (NUMERIC, as_scalar, check_operand_dtype, identity, op_name, same_function,
                        scalar_dtype, sum_accumulator)

__all__ = ["DeviceSegmentedReduce"]

OFFSET_DTYPES = (D.int32, D.int64)
_MAX_SEGMENTS = (1 << 31) - 1
_NARROW_LIMIT = 1 << 30     # d_in's length and the segment count below it: int32 kernels (_narrow)
CLAMP_ITEMS = 8             # offsets per thread of clamp_offsets (block_threads threads)


@dataclass(frozen=True)
class _Plan:
    kind: str                   # "known", "user" or "arg"
    acc: DType
    op: Any                     # the well-known name, the user function, or "min"/"max" (arg)
    policy: SegmentedPolicy
    target: Target
    ident: Any                  # the operator's identity in acc (known and arg)
    rows: Any                   # Kernel objects: rows and final with policy.block_threads,
    long: Any                   # long with policy.long_block_threads
    final: Any
    clamp: Any                  # clamp_offsets with policy.block_threads

    def shape(self, num_segments: int, num_items: int) -> Shape:
        return choose_shape(self.policy, num_segments, num_items, self.target.sm_count,
                            self.kind == "known")




_plans: dict[tuple, _Plan] = {}


def _plan(kind: str, in_dtype: DType, acc: DType, op: Any, target: Target,
          offset_size: int) -> _Plan:
    cache_key = (kind, in_dtype, acc, op, target, offset_size, overrides.generation(),
                 tuning_lookup.state())
    plan = _plans.get(cache_key)
    if plan is None:
        op_class = "arg" if kind == "arg" else op if kind == "known" else "user"
        key = {"value_size": in_dtype.itemsize, "accum": acc.name, "op": op_class,
               "offset_size": offset_size}
        policy = select_segmented_policy(target.cc, key)
        t = policy.block_threads
        rows = {"known": K.rows_known, "user": K.rows_user, "arg": K.rows_arg}[kind]
        ident = identity(op, acc) if kind != "user" else None
        plan = _plans[cache_key] = _Plan(kind, acc, op, policy, target, ident, kernel_for(rows, t),
                                         kernel_for(K.long_known, policy.long_block_threads),
                                         kernel_for(K.split_final, t),
                                         kernel_for(K.clamp_offsets, t))
    return plan



def _check_count(num_segments: Any) -> int:
    if isinstance(num_segments, (bool, np.bool_)) or \
            not isinstance(num_segments, (int, np.integer)):
        raise TypeError(f'Invalid argument "num_segments": expected an int, got '
                        f"{type(num_segments).__name__}")
    n = int(num_segments)
    if n < 0:
        raise ValueError(f'Invalid argument "num_segments": expected a count >= 0, got {n}')
    if n > _MAX_SEGMENTS:
        raise ValueError(f'Invalid argument "num_segments": at most 2**31 - 1 segments are '
                         f"supported, got {n}")
    return n


def _check_len(a: Arg, name: str, n: int, what: str) -> None:
    check_1d(a, name)
    if a.size < n:
        raise ValueError(f'Invalid argument "{name}": expected at least {n} elements ({what}), '
                         f"got {a.size}")


def _ingest(d_in, outs: list[tuple[str, Any]], num_segments, d_begin_offsets, d_end_offsets):
    """Check the arrays shared by every entry point; (d_in, outs, n, begins,
    ends, target, offset_size)."""
    a_in = describe(d_in, "d_in")
    a_outs = [(name, describe(o, name)) for name, o in outs]
    a_b = describe(d_begin_offsets, "d_begin_offsets")
    a_e = describe(d_end_offsets, "d_end_offsets")
    n = _check_count(num_segments)
    check_1d(a_in, "d_in")
    check_dtype(a_in, "d_in")
    for name, a in (("d_begin_offsets", a_b), ("d_end_offsets", a_e)):
        if a.dtype not in OFFSET_DTYPES:
            raise TypeError(f'Invalid argument "{name}": expected int32 or int64 offsets, got '
                            f"{a.dtype.name}")
        _check_len(a, name, n, "one offset per segment")
    for name, a in a_outs:
        _check_len(a, name, n, "one per segment")
    arrays = [("d_in", a_in), *a_outs, ("d_begin_offsets", a_b), ("d_end_offsets", a_e)]
    target = target_of(arrays)
    wide = 8 if D.int64 in (a_b.dtype, a_e.dtype) else 4
    return a_in, [a for _, a in a_outs], n, a_b, a_e, target, wide


def _shifted(a_b: Arg, a_e: Arg) -> bool:
    """True when the ends are the begins shifted by one element (`offsets[:-1]`,
    `offsets[1:]` of one array): one dtype and stride, the ends' first element
    one stride after the begins'. Then the begins' first num_segments + 1
    elements are every offset."""
    (pb, sb), (pe, se) = address(a_b), address(a_e)
    return a_b.dtype == a_e.dtype and sb == se and pe == pb + sb


def _extended(a: Arg, count: int) -> Any:
    """A view of `count` elements of a's memory from its first element, with
    its stride (past a's end when a is the begins of shifted offsets: the
    ends' memory)."""
    ptr, stride = address(a)
    if a.host:
        return np.lib.stride_tricks.as_strided(a.obj, (count,), (stride,), writeable=False)
    return DeviceArray(ptr, (count,), (a.fields[2][0],), a.dtype, a.device_id)


def _head_tail(a: Any, n: int) -> tuple[Any, Any]:
    """a's first n elements and its last n (a has n + 1, unit stride)."""
    if a.__class__ is DeviceArray:
        return a._replace(shape=(n,)), a._replace(ptr=a.ptr + a.dtype.itemsize, shape=(n,))
    return a[:n], a[1:]


def _conversions(layout: Layout, a_b: Arg, a_e: Arg, n: int) -> list[tuple[str, Alias]]:
    """The int64 offsets to clamp into int32 arrays, each with its alias in
    `layout`: ("both", n + 1 int32) for shifted offsets, else ("begins", n)
    and/or ("ends", n) for each int64 array (an int32 one is used as it is)."""
    if a_b.dtype == D.int64 and _shifted(a_b, a_e):
        return [("both", layout.slot(1).alias(D.int32, n + 1))]
    return [(name, layout.slot(i).alias(D.int32, n))
            for i, (name, a) in enumerate((("begins", a_b), ("ends", a_e)), 1)
            if a.dtype == D.int64]


def _narrow(shape: Shape, num_segments: int, num_items: int) -> bool:
    """Whether the kernel of `shape` may take int32 bounds and indices whatever
    the offsets' dtype (its NARROW): every index it forms stays below 2**31.
    Rows kernels: d_in and the segment count below _NARROW_LIMIT (2**30). The
    long kernel: d_in plus two tiles at most 2 * _NARROW_LIMIT (2**31; its
    positions and rounded-up bounds stay less than a tile past d_in's end)."""
    if shape.kind == "rows":
        return num_items < _NARROW_LIMIT and num_segments < _NARROW_LIMIT
    return num_items + 2 * shape.items <= 2 * _NARROW_LIMIT


def _run(plan: _Plan, temp_storage: Any, host: bool, stream: Any, n: int, a_in: Arg, a_b: Arg,
         a_e: Arg, outs: tuple, init: Any) -> int:
    shape = plan.shape(n, a_in.size)
    narrow = _narrow(shape, n, a_in.size)
    layout = Layout(3)          # split partials; clamped begins (or both); clamped ends
    split = shape.kind == "long" and shape.split > 1
    if split:
        partials = layout.slot(0).alias(plan.acc, n * shape.split)
    conversions = []
    wide_offsets = D.int64 in (a_b.dtype, a_e.dtype)
    if n and narrow and shape.kind == "rows" and plan.policy.convert_offsets == 1:
        conversions = _conversions(layout, a_b, a_e, n)
    # int64 offsets the rows kernel loads itself: once per row (convert_offsets 2)
    rowwise = shape.kind == "rows" and wide_offsets and plan.policy.convert_offsets == 2
    needed = layout.size()
    if temp_storage is None:
        return needed
    buf = temp_buffer(temp_storage, host)
    layout.map_to_buffer(buf.nbytes)
    if n == 0:
        return needed
    if host:
        stream = None
    x = a_in.obj
    launch = ct.launch
    begins, ends = a_b.obj, a_e.obj
    for which, alias in conversions:
        dst = buf.view(alias)
        src = _extended(a_b, n + 1) if which == "both" else (a_b if which == "begins" else a_e).obj
        tile = plan.policy.block_threads * CLAMP_ITEMS
        launch(stream, (-(-alias.count // tile),), plan.clamp, (src, dst, a_in.size, tile))
        if which == "both":
            begins, ends = _head_tail(dst, n)
        elif which == "begins":
            begins = dst
        else:
            ends = dst
    if plan.kind == "arg":
        out_v, out_i = outs
        launch(stream, (-(-n // shape.segs),), plan.rows,
               (x, begins, ends, out_v, out_i, n, init, shape.segs, shape.items, plan.ident,
                plan.op == "max", narrow, rowwise))
        return needed
    (out,) = outs
    if plan.kind == "user":
        launch(stream, (-(-n // shape.segs),), plan.rows,
               (x, begins, ends, out, n, init, shape.segs, shape.items, plan.acc, plan.op,
                narrow, rowwise))
    elif shape.kind == "rows":
        launch(stream, (-(-n // (shape.segs * shape.waves)),), plan.rows,
               (x, begins, ends, out, n, init, shape.segs, shape.items, plan.acc, plan.op,
                plan.ident, shape.waves, narrow, rowwise))
    elif not split:
        launch(stream, (n,), plan.long, (x, begins, ends, out, init, shape.items, plan.acc,
                                         plan.op, plan.ident, 1, True, narrow))
    else:
        p = buf.view(partials)
        launch(stream, (n * shape.split,), plan.long,
               (x, begins, ends, p, init, shape.items, plan.acc, plan.op, plan.ident,
                shape.split, False, narrow))
        segs = max(1, plan.policy.block_threads * 4 // shape.split)
        launch(stream, (-(-n // segs),), plan.final,
               (p, out, n, init, segs, shape.split, plan.acc, plan.op, plan.ident))
    return needed


def _reduce(temp_storage, d_in, d_out, num_segments, d_begin_offsets, d_end_offsets, op: Any,
            init: Any, stream, acc_rule: str) -> int:
    a_in, (a_out,), n, a_b, a_e, target, wide = _ingest(
        d_in, [("d_out", d_out)], num_segments, d_begin_offsets, d_end_offsets)
    check_dtype(a_out, "d_out")
    op = same_function(op)
    name = op_name(op)
    if acc_rule == "sum":
        acc = sum_accumulator(a_in.dtype, a_out.dtype)
    elif acc_rule == "extremum":  # CUB: init = numeric_limits<In>::max() (min) / lowest() (max)
        acc = a_in.dtype
        init = acc.numpy_dtype.type(acc.max if name == "min" else acc.min)
    else:  # reduce: the type of init, else the output's
        acc = scalar_dtype(init) or a_out.dtype
        if acc not in NUMERIC:
            raise TypeError(f'Invalid argument "init": dtype {acc.name} is not supported')
    if name is not None:
        check_operand_dtype(name, acc, "init" if acc_rule == "init" else "d_in")
    init_value = as_scalar(init, acc, "init")
    kind = "known" if name is not None else "user"
    plan = _plan(kind, a_in.dtype, acc, name if name is not None else op, target, wide)
    return _run(plan, temp_storage, a_in.host, stream, n, a_in, a_b, a_e, (a_out.obj,),
                init_value)


def _arg(temp_storage, d_in, d_out_value, d_out_index, num_segments, d_begin_offsets,
         d_end_offsets, stream, max_: bool) -> int:
    a_in, (a_v, a_i), n, a_b, a_e, target, wide = _ingest(
        d_in, [("d_out_value", d_out_value), ("d_out_index", d_out_index)], num_segments,
        d_begin_offsets, d_end_offsets)
    check_dtype(a_v, "d_out_value")
    if not a_i.dtype.is_integer:
        raise TypeError(f'Invalid argument "d_out_index": expected an integer dtype (int64, as '
                        f"CUB writes), got {a_i.dtype.name}")
    dt = a_in.dtype
    # CUB's output for an empty segment: index 1 and numeric_limits<T>::max() (arg_min)
    # or lowest() (arg_max), the largest finite values for floats.
    empty = dt.numpy_dtype.type(dt.min if max_ else dt.max)
    plan = _plan("arg", dt, dt, "max" if max_ else "min", target, wide)
    return _run(plan, temp_storage, a_in.host, stream, n, a_in, a_b, a_e,
                (a_v.obj, a_i.obj), empty)


class DeviceSegmentedReduce:
    """Segmented reductions with CUB's signatures (see docs/algorithms.md).

    Segment s is d_in[d_begin_offsets[s]:d_end_offsets[s]] (int32 or int64
    offsets; empty when the end is not after the begin). Segments may overlap
    and come in any order; `offsets[:-1]`, `offsets[1:]` of one offsets array
    describe consecutive segments. d_out[s] (and d_out_index[s]) is written for
    s < num_segments and nothing else."""

    @staticmethod
    def sum(temp_storage, d_in, d_out, num_segments, d_begin_offsets, d_end_offsets,
            stream=None) -> int:
        """d_out[s] = the sum of segment s (0 when empty). The accumulator is
        DeviceReduce.sum's (CUB's out + in; narrow floats in float32)."""
        return _reduce(temp_storage, d_in, d_out, num_segments, d_begin_offsets, d_end_offsets,
                       "add", 0, stream, "sum")

    @staticmethod
    def min(temp_storage, d_in, d_out, num_segments, d_begin_offsets, d_end_offsets,
            stream=None) -> int:
        """d_out[s] = min(the largest finite value of d_in's dtype, segment s);
        NaNs are ignored (fmin, as CUB's cuda::minimum)."""
        return _reduce(temp_storage, d_in, d_out, num_segments, d_begin_offsets, d_end_offsets,
                       "min", None, stream, "extremum")

    @staticmethod
    def max(temp_storage, d_in, d_out, num_segments, d_begin_offsets, d_end_offsets,
            stream=None) -> int:
        """d_out[s] = max(the lowest finite value of d_in's dtype, segment s);
        NaNs are ignored (fmax, as CUB's cuda::maximum)."""
        return _reduce(temp_storage, d_in, d_out, num_segments, d_begin_offsets, d_end_offsets,
                       "max", None, stream, "extremum")

    @staticmethod
    def arg_min(temp_storage, d_in, d_out_value, d_out_index, num_segments, d_begin_offsets,
                d_end_offsets, stream=None) -> int:
        """The first minimum of each segment and its offset in the segment (CUB's
        KeyValuePair as two arrays; ties: the smallest offset; NaN counts as larger
        than every number). Empty segment: the largest finite value and index 1."""
        return _arg(temp_storage, d_in, d_out_value, d_out_index, num_segments,
                    d_begin_offsets, d_end_offsets, stream, False)

    @staticmethod
    def arg_max(temp_storage, d_in, d_out_value, d_out_index, num_segments, d_begin_offsets,
                d_end_offsets, stream=None) -> int:
        """The first maximum of each segment and its offset in the segment (NaN
        counts as smaller than every number). Empty segment: the lowest finite
        value and index 1."""
        return _arg(temp_storage, d_in, d_out_value, d_out_index, num_segments,
                    d_begin_offsets, d_end_offsets, stream, True)

    @staticmethod
    def reduce(temp_storage, d_in, d_out, num_segments, d_begin_offsets, d_end_offsets, op,
               init, stream=None) -> int:
        """d_out[s] = op(init, op-reduction of segment s) (init when empty). `op`
        as DeviceReduce.reduce; the accumulator has init's dtype (a NumPy scalar),
        or d_out's for a Python number."""
        return _reduce(temp_storage, d_in, d_out, num_segments, d_begin_offsets, d_end_offsets,
                       op, init, stream, "init")
