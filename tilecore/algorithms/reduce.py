"""DeviceReduce: CUB's device-wide reductions, two-phase temporary storage.

Every entry point takes `temp_storage` first and `stream` last. With
`temp_storage=None` it returns the bytes of temporary storage the call needs
(at least 1) and launches nothing; with a buffer of at least that many bytes
(any array, any dtype: its bytes are used) it runs and returns the same
number. No call synchronizes, allocates or reads device memory back, so calls
can be captured in a CUDA graph.

Layers, as in CUB: this module's public methods check their arguments and
call `_dispatch`; `_plan` (cached per algorithm, dtypes, operator, device and
policy source) selects the policy (dispatch.reduce_policy) and the kernels;
`_run` lays out the temporary storage (dispatch.temp_storage) and launches
the passes; the kernels are in reduce_kernels.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional


import tilecore as ct

from ..dispatch import overrides
from ..dispatch.buffers import device_buffer, host_buffer
from ..dispatch.reduce_policy import ReducePolicy, select_reduce_policy
from ..dispatch.target import Target, device_target, interpreter_target
from ..dispatch.temp_storage import Layout
from ..language import dtypes as D
from ..language.dtypes import DType
from ..tunings import lookup as tuning_lookup
from . import reduce_kernels as K
from .arrays import Arg, as_1d_output, check_1d, check_num_items, describe, same_side
from .operators import (NUMERIC, as_scalar, check_operand_dtype, identity, op_name, scalar_dtype,
                        sum_accumulator)

__all__ = ["DeviceReduce"]

_INT64_MAX = (1 << 63) - 1


def _no_transform(t):
    return t


@dataclass(frozen=True)
class _Plan:
    """What a call needs besides its sizes, cached per call signature."""
    kind: str                   # "known", "user" or "arg"
    acc: DType                  # accumulator dtype
    policy: ReducePolicy
    target: Target
    main: Any                   # Kernel: first pass and single-block path
    final: Any                  # Kernel: second pass over the partials
    final_tile: int
    consts: tuple               # the kernels' trailing Constant arguments (see _run)

    def layout(self, n: int) -> tuple[Layout, int]:
        """The temporary-storage layout for n items and the first pass's grid
        (0: the single-block path)."""
        layout = Layout(2)
        p = self.policy
        if n <= p.single_block_max_items or n < 2 * p.tile_items:
            return layout, 0
        grid = min(self.target.sm_count * p.blocks_per_sm, n // p.tile_items)
        if self.kind == "arg":
            layout.slot(0).alias(self.acc, grid)
            layout.slot(1).alias(D.int64, grid)
        else:
            layout.slot(0).alias(self.acc, grid)
        return layout, grid


_kernels: dict[tuple, Any] = {}


def _kernel(fn, threads: int):
    """The kernel object of `fn` launched with `threads` threads per block."""
    key = (fn.pyfunc, threads)
    k = _kernels.get(key)
    if k is None:
        k = _kernels[key] = ct.kernel(fn.pyfunc, num_threads=threads)
    return k


_plans: dict[tuple, _Plan] = {}


def _make_plan(kind: str, in_dtype: DType, acc: DType, op: Any, op_class: str, target: Target,
               wide: bool, transform: Optional[Callable], max_: bool = False) -> _Plan:
    key = {"value_size": in_dtype.itemsize, "accum": acc.name, "op": op_class,
           "offset_size": 8 if wide else 4}
    policy = select_reduce_policy(target.cc, key)
    if kind == "arg":
        fn, fin = K.arg_reduce, K.arg_reduce_pairs
        consts = (identity("max" if max_ else "min", acc), max_)
    elif kind == "known":
        fn = fin = K.reduce_known
        consts = (acc, op, identity(op, acc))
    else:
        fn = fin = K.reduce_user
        consts = (acc, op)
    final_tile = policy.final_block_threads * max(1, 16 // acc.itemsize)
    return _Plan(kind, acc, policy, target, _kernel(fn, policy.block_threads),
                 _kernel(fin, policy.final_block_threads), final_tile, consts)


def _plan(kind: str, in_dtype: DType, acc: DType, op: Any, target: Target, wide: bool,
          transform: Optional[Callable], max_: bool = False) -> _Plan:
    cache_key = (kind, in_dtype, acc, op, target, wide, transform, max_,
                 overrides.generation(), tuning_lookup.state())
    plan = _plans.get(cache_key)
    if plan is None:
        op_class = "arg" if kind == "arg" else op if kind == "known" else "user"
        plan = _plans[cache_key] = _make_plan(kind, in_dtype, acc, op, op_class, target, wide,
                                              transform, max_)
    return plan


def _target(args: list[tuple[str, Arg]]) -> Target:
    if same_side(args):
        return interpreter_target()
    return device_target(next(a.device_id for _, a in args if a.device_id >= 0))


def _buffer(temp_storage: Any, host: bool):
    t = describe(temp_storage, "temp_storage")
    if t.host != host:
        raise TypeError('Invalid argument "temp_storage": it is a '
                        + ("host NumPy array but the data are GPU arrays" if t.host else
                           "GPU array but the data are host NumPy arrays (the interpreter)"))
    return host_buffer(t.obj) if host else device_buffer(t.fields)


def _check_dtype(a: Arg, name: str, allowed=NUMERIC) -> None:
    if a.dtype not in allowed:
        raise TypeError(f'Invalid argument "{name}": dtype {a.dtype.name} is not supported '
                        f"(expected one of {[d.name for d in allowed]})")


def _run(plan: _Plan, temp_storage: Any, host: bool, stream: Any, n: int, x: Any,
         outs: tuple, init: Any, transform: Optional[Callable]) -> int:
    layout, grid = plan.layout(n)
    needed = layout.size()
    if temp_storage is None:
        return needed
    buf = _buffer(temp_storage, host)
    layout.map_to_buffer(buf.nbytes)
    p = plan.policy
    tile = p.tile_items
    launch = ct.launch
    if host:
        stream = None
    xf = transform if transform is not None else _no_transform
    has_xf = transform is not None
    if plan.kind == "arg":
        ident, max_ = plan.consts
        out_v, out_i = outs
        if grid == 0:
            launch(stream, (1,), plan.main, (x, out_v, out_i, n, init, tile, ident, max_, True))
            return needed
        vals = buf.view(layout.slot(0).aliases[0])
        idxs = buf.view(layout.slot(1).aliases[0])
        launch(stream, (grid,), plan.main, (x, vals, idxs, n, init, tile, ident, max_, False))
        launch(stream, (1,), plan.final, (vals, idxs, out_v, out_i, grid, init, plan.final_tile,
                                          ident, max_))
        return needed
    (out,) = outs
    if grid == 0:
        launch(stream, (1,), plan.main, (x, out, n, init, tile, *plan.consts, xf, has_xf, True))
        return needed
    partials = buf.view(layout.slot(0).aliases[0])
    launch(stream, (grid,), plan.main, (x, partials, n, init, tile, *plan.consts, xf, has_xf,
                                        False))
    launch(stream, (1,), plan.final, (partials, out, grid, init, plan.final_tile, *plan.consts,
                                      _no_transform, False, True))
    return needed


def _reduce(temp_storage, d_in, d_out, num_items, op: Any, init: Any, transform, stream,
            acc_rule: str) -> int:
    a_in = describe(d_in, "d_in")
    a_out = as_1d_output(describe(d_out, "d_out"), "d_out")
    check_1d(a_in, "d_in")
    _check_dtype(a_in, "d_in")
    _check_dtype(a_out, "d_out")
    n = check_num_items(num_items, a_in)
    target = _target([("d_in", a_in), ("d_out", a_out)])
    name = op_name(op)
    if acc_rule == "sum":
        acc = sum_accumulator(a_in.dtype, a_out.dtype)
    elif acc_rule == "extremum":  # CUB: init = numeric_limits<In>::max() (min) / lowest() (max)
        acc = a_in.dtype
        init = acc.numpy_dtype.type(acc.max if name == "min" else acc.min)
    else:  # reduce / transform_reduce: the type of init, else the output's
        acc = scalar_dtype(init) or a_out.dtype
        if acc not in NUMERIC:
            raise TypeError(f'Invalid argument "init": dtype {acc.name} is not supported')
    if name is not None:
        check_operand_dtype(name, acc, "init" if acc_rule == "init" else "d_in")
    init_value = as_scalar(init, acc, "init")
    kind = "known" if name is not None else "user"
    plan = _plan(kind, a_in.dtype, acc, name if name is not None else op, target, n >= 1 << 31,
                 transform)
    return _run(plan, temp_storage, a_in.host, stream, n, a_in.obj, (a_out.obj,), init_value,
                transform)


def _arg(temp_storage, d_in, d_out_value, d_out_index, num_items, stream, max_: bool) -> int:
    a_in = describe(d_in, "d_in")
    a_v = as_1d_output(describe(d_out_value, "d_out_value"), "d_out_value")
    a_i = as_1d_output(describe(d_out_index, "d_out_index"), "d_out_index")
    check_1d(a_in, "d_in")
    _check_dtype(a_in, "d_in")
    _check_dtype(a_v, "d_out_value")
    if not a_i.dtype.is_integer:
        raise TypeError(f'Invalid argument "d_out_index": expected an integer dtype (int64, as '
                        f"CUB writes), got {a_i.dtype.name}")
    n = check_num_items(num_items, a_in)
    target = _target([("d_in", a_in), ("d_out_value", a_v), ("d_out_index", a_i)])
    dt = a_in.dtype
    # CUB's outputs for an empty input: index 1 and numeric_limits<T>::max() (arg_min)
    # or lowest() (arg_max), the largest finite values for floats.
    empty = dt.numpy_dtype.type(dt.min if max_ else dt.max)
    plan = _plan("arg", dt, dt, "max" if max_ else "min", target, n >= 1 << 31, None, max_)
    return _run(plan, temp_storage, a_in.host, stream, n, a_in.obj, (a_v.obj, a_i.obj), empty,
                None)


class DeviceReduce:
    """Device-wide reductions with CUB's signatures (see docs/algorithms.md)."""

    @staticmethod
    def sum(temp_storage, d_in, d_out, num_items, stream=None) -> int:
        """d_out[0] = sum of d_in[:num_items] (0 for no items). The accumulator is
        CUB's: the C++ type of out + in (integers narrower than int accumulate in
        int32; float16/bfloat16 in float32), converted to d_out's dtype."""
        return _reduce(temp_storage, d_in, d_out, num_items, "add", 0, None, stream, "sum")

    @staticmethod
    def min(temp_storage, d_in, d_out, num_items, stream=None) -> int:
        """d_out[0] = min(the largest finite value of d_in's dtype, *d_in[:num_items]);
        NaNs are ignored (fmin, as CUB's cuda::minimum)."""
        return _reduce(temp_storage, d_in, d_out, num_items, "min", None, None, stream,
                       "extremum")

    @staticmethod
    def max(temp_storage, d_in, d_out, num_items, stream=None) -> int:
        """d_out[0] = max(the lowest finite value of d_in's dtype, *d_in[:num_items]);
        NaNs are ignored (fmax, as CUB's cuda::maximum)."""
        return _reduce(temp_storage, d_in, d_out, num_items, "max", None, None, stream,
                       "extremum")

    @staticmethod
    def arg_min(temp_storage, d_in, d_out_value, d_out_index, num_items, stream=None) -> int:
        """The first minimum of d_in[:num_items] and its index (ties: the smallest
        index; NaN counts as larger than every number). No items: the largest
        finite value and index 1, as CUB."""
        return _arg(temp_storage, d_in, d_out_value, d_out_index, num_items, stream, False)

    @staticmethod
    def arg_max(temp_storage, d_in, d_out_value, d_out_index, num_items, stream=None) -> int:
        """The first maximum and its index (NaN counts as smaller than every
        number). No items: the lowest finite value and index 1, as CUB."""
        return _arg(temp_storage, d_in, d_out_value, d_out_index, num_items, stream, True)

    @staticmethod
    def reduce(temp_storage, d_in, d_out, num_items, op, init, stream=None) -> int:
        """d_out[0] = op(init, op-reduction of d_in[:num_items]) (init for no items).
        `op`: "add", "mul", "min", "max", "and", "or", "xor", the matching Python
        functions, or a function of two tiles (associative and commutative). The
        accumulator has init's dtype (a NumPy scalar), or d_out's for a Python number."""
        return _reduce(temp_storage, d_in, d_out, num_items, op, init, None, stream, "init")

    @staticmethod
    def transform_reduce(temp_storage, d_in, d_out, num_items, reduce_op, transform_op, init,
                         stream=None) -> int:
        """reduce() of transform_op(d_in[i]); transform_op is a function of one tile."""
        if not callable(transform_op) or isinstance(transform_op, str):
            raise TypeError('Invalid argument "transform_op": expected a function of one tile, '
                            f"got {type(transform_op).__name__}")
        op_name(transform_op, "transform_op")  # refuses lambdas with a clear message
        return _reduce(temp_storage, d_in, d_out, num_items, reduce_op, init, transform_op,
                       stream, "init")

