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

What a call launches depends on the plan, the segment count and d_in's
length only: `_Launches` (the shape's launches, made once per (count,
length) and kept by the plan) holds the bytes needed, the split partials'
alias and each launch's trailing arguments and fast launcher.

The cached path (hostpath.py, as DeviceReduce's and DeviceScan's): a call
whose arrays' types and dtypes (and for `reduce` the operator and init's
type) were seen before (a *signature*, `_Sig`) re-checks only the count, the
arrays' ranks and sizes, the device, the buffer and the epoch, and replays
the launches; anything unusual (and the rare conversion of int64 offsets
first, convert_offsets 1) takes the general path, which raises the errors.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

import tilecore as ct

from ..dispatch.segmented_policy import SegmentedPolicy, Shape, choose_shape, \
    select_segmented_policy
from ..dispatch.target import Target
from ..dispatch.temp_storage import Alias, Layout, check_size
from ..language import dtypes as D
from ..language.dtypes import DType
from ..runtime import DeviceArray
from . import segmented_kernels as K
from .shared import Step, check_dtype, kernel_for, target_of, temp_buffer
from .arrays import Arg, address, check_1d, check_count_output, describe
from .hostpath import SHAPES_KEPT, Signature, device_views, epoch, host_views, kept, remember
from .operators import (NUMERIC, as_scalar, check_operand_dtype, identity, op_name, same_function,
                        scalar_dtype, sum_accumulator, work_dtype)

__all__ = ["DeviceSegmentedReduce"]

OFFSET_DTYPES = (D.int32, D.int64)
_MAX_SEGMENTS = (1 << 31) - 1
_NARROW_LIMIT = 1 << 30     # int32 kernels below it (_narrow), or twice it for one row a block
CLAMP_ITEMS = 8             # offsets per thread of clamp_offsets (block_threads threads)


@dataclass(frozen=True)
class _Plan:
    kind: str                   # "known", "user" or "arg"
    acc: DType                  # CUB's accumulator (init's dtype)
    work: DType                 # the kernels' (operators.work_dtype for min/max/arg)
    op: Any                     # the well-known name, the user function, or "min"/"max" (arg)
    policy: SegmentedPolicy
    target: Target
    offset_size: int            # 8 when either offsets array is int64, else 4
    ident: Any                  # the operator's identity in work (known and arg)
    rows: Any                   # Kernel objects: rows and final with policy.block_threads,
    long: Any                   # long with policy.long_block_threads
    final: Any
    clamp: Any                  # clamp_offsets with policy.block_threads
    # (num_segments, len(d_in)) -> _Launches (at most SHAPES_KEPT kept)
    runs: dict = field(default_factory=dict, compare=False, repr=False)

    def shape(self, num_segments: int, num_items: int) -> Shape:
        return choose_shape(self.policy, num_segments, num_items, self.target.sm_count,
                            self.kind == "known")

    def launches(self, num_segments: int, num_items: int,
                 runs: Optional[dict] = None) -> "_Launches":
        """The launches of `num_segments` segments over `num_items` items (d_in's
        length), made once and kept in `runs` (default: the plan's; a caller
        whose arguments are of other kinds keeps its own, and so its own fast
        launchers): the kernel's shape depends on both counts."""
        return kept(self.runs if runs is None else runs, (num_segments, num_items),
                    SHAPES_KEPT, _make_launches, self, num_segments, num_items)


_plans: dict[tuple, _Plan] = {}


def _plan(kind: str, in_dtype: DType, acc: DType, op: Any, target: Target,
          offset_size: int) -> _Plan:
    cache_key = (kind, in_dtype, acc, op, target, offset_size, epoch())
    plan = _plans.get(cache_key)
    if plan is None:
        op_class = "arg" if kind == "arg" else op if kind == "known" else "user"
        key = {"value_size": in_dtype.itemsize, "accum": acc.name, "op": op_class,
               "offset_size": offset_size}
        policy = select_segmented_policy(target.cc, key)
        t = policy.block_threads
        rows = {"known": K.rows_known, "user": K.rows_user, "arg": K.rows_arg}[kind]
        work = work_dtype(acc, op)
        ident = identity(op, work) if kind != "user" else None
        plan = _plans[cache_key] = _Plan(kind, acc, work, op, policy, target, offset_size, ident,
                                         kernel_for(rows, t),
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
    the offsets' dtype (its NARROW): every index it forms, masked positions
    included, stays below 2**31. Rows kernels: the segment count below
    _NARROW_LIMIT (2**30) and d_in too, since a row's positions run up to its
    start plus the block's longest row; where a block holds one segment the
    longest row is its own, so d_in plus two rows of lanes may reach 2**31, as
    the long kernel's d_in plus two tiles (any segment count: its positions
    and rounded-up bounds stay less than a tile past d_in's end)."""
    fits = num_items + 2 * shape.items <= 2 * _NARROW_LIMIT
    if shape.kind == "long":
        return fits
    if shape.segs == 1:
        return fits and num_segments < _NARROW_LIMIT
    return num_items < _NARROW_LIMIT and num_segments < _NARROW_LIMIT


# How a shape's launches take a call's values (see _Launches.go)
_NONE, _ROWS, _LONG, _SPLIT = range(4)


class _Launches:
    """What a call of one plan launches for a segment count and d_in's length:
    the bytes of temporary storage it needs, the split partials' alias (byte
    offset, dtype, count; none but for the split long kernel), whether int64
    offsets are clamped into int32 arrays first (`convert`: the general path's
    `_run_converted`; `needed` is then not the call's), how the steps take the
    call's values (`form`) and the steps."""

    __slots__ = ("needed", "aliases", "convert", "form", "steps", "views")

    def __init__(self, needed: int, aliases: tuple, convert: bool, form: int,
                 steps: tuple) -> None:
        self.needed, self.aliases, self.convert, self.form, self.steps = \
            needed, aliases, convert, form, steps
        self.views: dict = {}     # device pointer -> the partials there (views_at)

    def host_partials(self, temp: np.ndarray) -> Any:
        """The split partials in host buffer `temp` (None when there are none)."""
        return host_views(temp, self.aliases)[0] if self.aliases else None

    def device_partials(self, ptr: int, device: int) -> Any:
        """The split partials in the device buffer at `ptr` (kept per pointer)."""
        if not self.aliases:
            return None
        return device_views(self.views, ptr, ptr, self.aliases, device)[0]

    def go(self, stream: Any, x: Any, begins: Any, ends: Any, outs: tuple, n: int, init: Any,
           partials: Any) -> None:
        """Launch the steps for a call's arrays, count and init (`partials`: the
        split partials in the call's buffer)."""
        form = self.form
        if form == _ROWS:
            self.steps[0].go(stream, (x, begins, ends, *outs, n, init))
        elif form == _LONG:
            self.steps[0].go(stream, (x, begins, ends, *outs, init))
        elif form == _SPLIT:
            first, final = self.steps
            first.go(stream, (x, begins, ends, partials, init))
            final.go(stream, (partials, *outs, n, init))


def _make_launches(plan: _Plan, n: int, num_items: int) -> _Launches:
    """The launches of n segments over num_items items: the kernel's shape
    (choose_shape), whether its indices fit int32 (_narrow), how it takes
    int64 offsets (policy convert_offsets) and each launch's arguments."""
    if n == 0:                  # nothing launched, 1 byte asked for (as CUB)
        return _Launches(1, (), False, _NONE, ())
    shape = plan.shape(n, num_items)
    narrow = _narrow(shape, n, num_items)
    policy = plan.policy
    rows = shape.kind == "rows"
    wide_offsets = plan.offset_size == 8
    convert = rows and narrow and wide_offsets and policy.convert_offsets == 1
    segs, items = shape.segs, shape.items
    # int64 offsets the rows kernel loads itself: once per row (convert_offsets 2); int32
    # offsets too where a block holds one segment (H200, 2^18 x U(1..4096) float32 sum in
    # 1024-item steps: 3294 GB/s with every item loading its bounds, 4190 once per row)
    rowwise = rows and policy.convert_offsets == 2 and (wide_offsets or segs == 1)
    if plan.kind == "arg":
        step = Step((-(-n // segs),), plan.rows,
                     (segs, items, plan.ident, plan.op == "max", plan.work, narrow, rowwise))
        return _Launches(1, (), convert, _ROWS, (step,))
    if plan.kind == "user":
        step = Step((-(-n // segs),), plan.rows,
                     (segs, items, plan.acc, plan.op, narrow, rowwise))
        return _Launches(1, (), convert, _ROWS, (step,))
    known = (plan.work, plan.op, plan.ident)
    if rows:
        step = Step((-(-n // (segs * shape.waves)),), plan.rows,
                     (segs, items, *known, shape.waves, narrow, rowwise))
        return _Launches(1, (), convert, _ROWS, (step,))
    if shape.split == 1:
        step = Step((n,), plan.long, (items, *known, 1, True, narrow))
        return _Launches(1, (), False, _LONG, (step,))
    split = shape.split
    layout = Layout(1)
    partials = layout.slot(0).alias(plan.work, n * split)
    layout.map_to_buffer(layout.size())
    final_segs = max(1, policy.block_threads * 4 // split)
    steps = (Step((n * split,), plan.long, (items, *known, split, False, narrow)),
             Step((-(-n // final_segs),), plan.final, (final_segs, split, *known)))
    return _Launches(layout.size(), ((partials.offset, partials.dtype, partials.count),), False,
                     _SPLIT, steps)


def _run(plan: _Plan, temp_storage: Any, host: bool, stream: Any, n: int, a_in: Arg, a_b: Arg,
         a_e: Arg, outs: tuple, init: Any) -> int:
    """The general path's run: checks the buffer (ByteBuffer: any array type)."""
    run = plan.launches(n, a_in.size)
    if run.convert:
        return _run_converted(plan, run, temp_storage, host, stream, n, a_in, a_b, a_e, outs,
                              init)
    needed = run.needed
    if temp_storage is None:
        return needed
    buf = temp_buffer(temp_storage, host, plan.target.device_id)
    check_size(needed, buf.nbytes)
    if host:
        run.go(None, a_in.obj, a_b.obj, a_e.obj, outs, n, init, run.host_partials(buf.host))
    else:
        run.go(stream, a_in.obj, a_b.obj, a_e.obj, outs, n, init,
               run.device_partials(buf.ptr, buf.device_id))
    return needed


def _run_converted(plan: _Plan, run: _Launches, temp_storage: Any, host: bool, stream: Any,
                   n: int, a_in: Arg, a_b: Arg, a_e: Arg, outs: tuple, init: Any) -> int:
    """A rows kernel's run after its int64 offsets are clamped into int32 arrays
    of the temporary storage (convert_offsets 1: see the module docstring)."""
    layout = Layout(3)          # (unused); clamped begins (or both); clamped ends
    conversions = _conversions(layout, a_b, a_e, n)
    needed = layout.size()
    if temp_storage is None:
        return needed
    buf = temp_buffer(temp_storage, host, plan.target.device_id)
    layout.map_to_buffer(buf.nbytes)
    if host:
        stream = None
    begins, ends = a_b.obj, a_e.obj
    tile = plan.policy.block_threads * CLAMP_ITEMS
    for which, alias in conversions:
        dst = buf.view(alias)
        src = _extended(a_b, n + 1) if which == "both" else (a_b if which == "begins" else a_e).obj
        ct.launch(stream, (-(-alias.count // tile),), plan.clamp, (src, dst, a_in.size, tile))
        if which == "both":
            begins, ends = _head_tail(dst, n)
        elif which == "begins":
            begins = dst
        else:
            ends = dst
    run.go(stream, a_in.obj, begins, ends, outs, n, init, None)
    return needed


def _reduce(temp_storage, d_in, d_out, num_segments, d_begin_offsets, d_end_offsets, op: Any,
            init: Any, stream, acc_rule: str, key: Optional[tuple]) -> int:
    """The general path of sum, min, max and reduce: every argument checked;
    the call's signature cached under `key` (see _cached) once it succeeded."""
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
    needed = _run(plan, temp_storage, a_in.host, stream, n, a_in, a_b, a_e, (a_out.obj,),
                  init_value)
    remember(_sigs, key, (d_in, d_out, d_begin_offsets, d_end_offsets),
             lambda libs: _Sig(plan, libs, None if acc_rule == "init" else init_value))
    return needed


def _arg(temp_storage, d_in, d_out_value, d_out_index, num_segments, d_begin_offsets,
         d_end_offsets, stream, max_: bool, key: Optional[tuple]) -> int:
    """The general path of arg_min and arg_max (as _reduce)."""
    a_in, (a_v, a_i), n, a_b, a_e, target, wide = _ingest(
        d_in, [("d_out_value", d_out_value), ("d_out_index", d_out_index)], num_segments,
        d_begin_offsets, d_end_offsets)
    check_dtype(a_v, "d_out_value")
    check_count_output(a_i, "d_out_index", max(a_in.size - 1, 1),
                       "an index into a segment as long as d_in")
    dt = a_in.dtype
    # CUB's output for an empty segment: index 1 and numeric_limits<T>::max() (arg_min)
    # or lowest() (arg_max), the largest finite values for floats.
    empty = dt.numpy_dtype.type(dt.min if max_ else dt.max)
    plan = _plan("arg", dt, dt, "max" if max_ else "min", target, wide)
    needed = _run(plan, temp_storage, a_in.host, stream, n, a_in, a_b, a_e,
                  (a_v.obj, a_i.obj), empty)
    remember(_sigs, key, (d_in, d_out_value, d_out_index, d_begin_offsets, d_end_offsets),
             lambda libs: _Sig(plan, libs, empty))
    return needed


# -- the cached path -----------------------------------------------------------------------------

_NO_INIT = object()


class _Sig(Signature):
    """A DeviceSegmentedReduce call signature's cached host work
    (hostpath.Signature): the plan, the accessors of the arrays' libraries
    (d_in, the outputs, the begin and end offsets) and the launch value of
    init for every method but `reduce` (whose init is checked and converted
    per call, as the general path does; the last one is kept). `call`
    re-checks what may differ between calls of the signature and returns 0
    when anything is unusual (the caller then takes the general path); the
    launches are the plan's for the call's count and d_in's length."""

    __slots__ = ("plan", "init", "last_init", "last_value")

    def __init__(self, plan: _Plan, libs: tuple, init: Any) -> None:
        super().__init__(libs, plan.target.device_id)
        self.plan, self.init = plan, init
        # the last run-time init (a scalar: immutable, so the same object is the same value)
        # and its launch value
        self.last_init: Any = _NO_INIT
        self.last_value: Any = None

    def call(self, temp: Any, x: Any, outs: tuple, n: Any, begins: Any, ends: Any, stream: Any,
             init: Any) -> int:
        if type(n) is not int or not 0 <= n <= _MAX_SEGMENTS or self.epoch != epoch():
            return 0
        libs = self.libs
        m = libs[0].vec(x)
        if m < 0 or libs[1].vec(outs[0]) < n or libs[-2].vec(begins) < n or \
                libs[-1].vec(ends) < n or len(outs) > 1 and libs[2].vec(outs[1]) < n:
            return 0
        if self.device >= 0 and not self.on_device((x, *outs, begins, ends)):
            return 0
        if self.init is not None:
            init = self.init
        else:
            init = self._init_value(init)
            if init is None:
                return 0
        run = self.plan.runs.get((n, m)) or self.plan.launches(n, m)
        if run.convert:
            return 0
        needed = run.needed
        if temp is None:
            return needed
        ptr = self.temp_at(temp, needed)
        if ptr < 0:
            return 0
        if self.host:
            run.go(None, x, begins, ends, outs, n, init,
                   run.host_partials(temp) if run.aliases else None)
        else:
            run.go(stream, x, begins, ends, outs, n, init,
                   run.device_partials(ptr, self.plan.target.device_id))
        return needed

    def _init_value(self, init: Any) -> Any:
        """reduce's init as the launches take it (the general path's conversion),
        or None when the general path should decide (and raise)."""
        if init is self.last_init:
            return self.last_value
        try:
            value = as_scalar(init, self.plan.acc, "init")
        except (TypeError, ValueError):
            return None
        if not isinstance(init, np.ndarray):    # (a 1-element array may change)
            self.last_init, self.last_value = init, value
        return value


_sigs: dict[tuple, _Sig] = {}
# signature tags (the first element of a cached signature's key)
_SUM, _MIN, _MAX, _ARGMIN, _ARGMAX, _REDUCE = range(6)


def _key(tag: int, d_in, outs: tuple, begins, ends, extra: tuple) -> tuple:
    """A signature's key: the tag, each array's type and dtype, then `extra`
    (unrolled: a loop of tuple concatenations costs more; AttributeError for
    an argument without a dtype)."""
    o = outs[0]
    key = (tag, type(d_in), d_in.dtype, type(o), o.dtype, type(begins), begins.dtype,
           type(ends), ends.dtype)
    if len(outs) > 1:
        o = outs[1]
        key += (type(o), o.dtype)
    return key + extra if extra else key


def _cached(tag: int, temp_storage, d_in, outs: tuple, num_segments, begins, ends, stream,
            extra: tuple = (), init: Any = None) -> tuple[int, Optional[tuple]]:
    """(bytes, key): the cached signature's result for this call (bytes > 0), or
    0 and the key under which the general path will cache it (None when the
    arguments cannot key a signature: not arrays, an unhashable operator)."""
    try:
        key = _key(tag, d_in, outs, begins, ends, extra)
        sig = _sigs.get(key)
    except (AttributeError, TypeError):
        return 0, None
    if sig is None:
        return 0, key
    return sig.call(temp_storage, d_in, outs, num_segments, begins, ends, stream, init), key


def sum_signature(d_in, d_out, begins, ends) -> Optional[_Sig]:
    """The cached signature of DeviceSegmentedReduce.sum for arrays like these,
    or None (the convenience layer's cached path runs on its plan and init)."""
    try:
        return _sigs.get(_key(_SUM, d_in, (d_out,), begins, ends, ()))
    except (AttributeError, TypeError):
        return None


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
        got, key = _cached(_SUM, temp_storage, d_in, (d_out,), num_segments, d_begin_offsets,
                           d_end_offsets, stream)
        return got or _reduce(temp_storage, d_in, d_out, num_segments, d_begin_offsets,
                              d_end_offsets, "add", 0, stream, "sum", key)

    @staticmethod
    def min(temp_storage, d_in, d_out, num_segments, d_begin_offsets, d_end_offsets,
            stream=None) -> int:
        """d_out[s] = min(the largest finite value of d_in's dtype, segment s);
        NaNs are ignored (fmin, as CUB's cuda::minimum)."""
        got, key = _cached(_MIN, temp_storage, d_in, (d_out,), num_segments, d_begin_offsets,
                           d_end_offsets, stream)
        return got or _reduce(temp_storage, d_in, d_out, num_segments, d_begin_offsets,
                              d_end_offsets, "min", None, stream, "extremum", key)

    @staticmethod
    def max(temp_storage, d_in, d_out, num_segments, d_begin_offsets, d_end_offsets,
            stream=None) -> int:
        """d_out[s] = max(the lowest finite value of d_in's dtype, segment s);
        NaNs are ignored (fmax, as CUB's cuda::maximum)."""
        got, key = _cached(_MAX, temp_storage, d_in, (d_out,), num_segments, d_begin_offsets,
                           d_end_offsets, stream)
        return got or _reduce(temp_storage, d_in, d_out, num_segments, d_begin_offsets,
                              d_end_offsets, "max", None, stream, "extremum", key)

    @staticmethod
    def arg_min(temp_storage, d_in, d_out_value, d_out_index, num_segments, d_begin_offsets,
                d_end_offsets, stream=None) -> int:
        """The first minimum of each segment and its offset in the segment (CUB's
        KeyValuePair as two arrays; ties: the smallest offset; NaN counts as larger
        than every number). Empty segment: the largest finite value and index 1."""
        got, key = _cached(_ARGMIN, temp_storage, d_in, (d_out_value, d_out_index),
                           num_segments, d_begin_offsets, d_end_offsets, stream)
        return got or _arg(temp_storage, d_in, d_out_value, d_out_index, num_segments,
                           d_begin_offsets, d_end_offsets, stream, False, key)

    @staticmethod
    def arg_max(temp_storage, d_in, d_out_value, d_out_index, num_segments, d_begin_offsets,
                d_end_offsets, stream=None) -> int:
        """The first maximum of each segment and its offset in the segment (NaN
        counts as smaller than every number). Empty segment: the lowest finite
        value and index 1."""
        got, key = _cached(_ARGMAX, temp_storage, d_in, (d_out_value, d_out_index),
                           num_segments, d_begin_offsets, d_end_offsets, stream)
        return got or _arg(temp_storage, d_in, d_out_value, d_out_index, num_segments,
                           d_begin_offsets, d_end_offsets, stream, True, key)

    @staticmethod
    def reduce(temp_storage, d_in, d_out, num_segments, d_begin_offsets, d_end_offsets, op,
               init, stream=None) -> int:
        """d_out[s] = op(init, op-reduction of segment s) (init when empty). `op`
        as DeviceReduce.reduce; the accumulator has init's dtype (a NumPy scalar),
        or d_out's for a Python number."""
        op = same_function(op)
        got, key = _cached(_REDUCE, temp_storage, d_in, (d_out,), num_segments,
                           d_begin_offsets, d_end_offsets, stream,
                           (op, type(init), getattr(init, "dtype", None)), init)
        return got or _reduce(temp_storage, d_in, d_out, num_segments, d_begin_offsets,
                              d_end_offsets, op, init, stream, "init", key)
