"""DeviceReduce: CUB's device-wide reductions, two-phase temporary storage.

Every entry point takes `temp_storage` first and `stream` last. With
`temp_storage=None` it returns the bytes of temporary storage the call needs
(at least 1) and launches nothing; with a buffer of at least that many bytes
(any array, any dtype: its bytes are used) it runs and returns the same
number. No call synchronizes, allocates or reads device memory back, so calls
can be captured in a CUDA graph.

Layers, as in CUB: this module's public methods check their arguments
(`_reduce`, `_arg`); `_plan` (cached per algorithm, dtypes, operator, device
and policy source) selects the policy (dispatch.reduce_policy) and the
kernels; `_Plan.layout` lays out the temporary storage (dispatch.temp_storage,
once per grid size) and `_Plan.run` launches the passes; the kernels are in
reduce_kernels.py.

The cached path (hostpath.py): a call whose argument types and dtypes were
seen before (a *signature*: one dict lookup) re-checks only sizes, ranks and
the buffer, and launches with precomputed arguments; anything unusual takes
the general path above, which raises the errors.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

import tilecore as ct

from .. import config
from ..dispatch.reduce_policy import ReducePolicy, select_reduce_policy
from ..dispatch.target import Target
from ..dispatch.temp_storage import Layout, check_size
from ..language import dtypes as D
from ..language.dtypes import DType
from . import reduce_by_key as _rbk
from . import reduce_kernels as K
from .shared import check_dtype, kernel_for, target_of, temp_buffer
from .arrays import as_1d_output, check_1d, check_count_output, check_num_items, describe
from ..host.launch import fast_launcher
from .hostpath import (NARROW, SHAPES_KEPT, VIEWS_KEPT, Signature, device_views, epoch, find,
                       host_views, remember)
from .operators import (NUMERIC, as_scalar, check_operand_dtype, identity, op_name, same_function,
                        scalar_dtype, sum_accumulator, work_dtype)

__all__ = ["DeviceReduce", "signature_plan"]

_WIDE = 1 << 31              # counts from here on specialize the kernels to 64-bit offsets
_MAX_BLOCK_ITEMS = 1 << 31   # a first-pass block's items stay below (see _Plan.grid)
_ONE = (1,)


def _no_transform(t):
    return t


class _Plan:
    """What a call needs besides its sizes, cached per call signature: the
    policy, the kernels and their trailing Constant arguments, and per grid
    size the temporary-storage layout.

    kind: "fixed" (sum, min, max: init is a Constant), "known" (a well-known
    operator with a run-time init), "user" (a user operator) or "arg". `acc`
    is the accumulator (CUB's: init's dtype), `work` the dtype the kernels
    combine in and keep the partials in: `acc`, or for min/max/arg of narrow
    floats float32 (operators.work_dtype: the same results).
    Launch arguments: the single-block kernel (single_block_threads threads)
    gets (x, *outs, n, *init) + single_tail, the first pass (x, *partials, n, *init) + first_tail, the
    second pass (*partials, *outs, grid, *init) + final_tail, where init is
    () for "fixed" and "arg"."""

    __slots__ = ("kind", "acc", "work", "policy", "target", "single", "main", "final", "tile",
                 "single_max", "grid_max", "single_tail", "first_tail", "final_tail", "_layouts",
                 "_views")

    def __init__(self, kind: str, acc: DType, work: DType, policy: ReducePolicy, target: Target,
                 single, main, final, tails: tuple[tuple, tuple, tuple]) -> None:
        self.kind, self.acc, self.work, self.policy, self.target = kind, acc, work, policy, target
        self.single, self.main, self.final = single, main, final
        self.tile = policy.tile_items
        # n <= single_max: one single-block kernel (at most single_block_max_items, or
        # fewer than two tiles)
        self.single_max = max(policy.single_block_max_items, 2 * self.tile - 1)
        self.grid_max = target.sm_count * policy.blocks_per_sm
        self.single_tail, self.first_tail, self.final_tail = tails
        self._layouts: dict[int, tuple[int, tuple]] = {}
        self._views: dict[tuple, tuple] = {}

    def grid(self, n: int) -> int:
        """The first pass's grid for n items (0: the single-block path): the
        fewest blocks that take no more tiles each than grid_max blocks would,
        so that no few blocks run a last round alone (2^27 bfloat16 items in
        8192-item tiles: 512 blocks of 32 tiles, not 528 of which 16 take 32), and
        never so few that a block's items (its tiles and the partial last one)
        number 2^31 - 1: arg_reduce numbers them in int32, and its largest
        number marks no item."""
        if n <= self.single_max:
            return 0
        tiles = n // self.tile
        per = min(-(-tiles // min(self.grid_max, tiles)), _MAX_BLOCK_ITEMS // self.tile - 2)
        return -(-tiles // per)

    def layout(self, grid: int) -> tuple[int, tuple]:
        """(bytes needed, the aliases (byte offset, dtype, count)) for `grid`
        blocks, laid out once per grid size by dispatch.temp_storage."""
        got = self._layouts.get(grid)
        if got is None:
            layout = Layout(2)
            if grid:
                layout.slot(0).alias(self.work, grid)
                if self.kind == "arg":
                    layout.slot(1).alias(D.int64, grid)
            layout.map_to_buffer(layout.size())
            aliases = tuple((a.offset, a.dtype, a.count) for s in layout.slots for a in s.aliases)
            got = self._layouts[grid] = (layout.size(), aliases)
        return got

    def device_views(self, ptr: int, grid: int, aliases, device: int) -> tuple:
        """The partials as DeviceArrays at their offsets in device buffer `ptr`
        (cached per buffer and grid: no object is made on a repeated call)."""
        return device_views(self._views, (ptr, grid, device), ptr, aliases, device)

    def run(self, stream, x, outs: tuple, n: int, init: tuple, grid: int, views: tuple,
            fast: Optional[list] = None) -> None:
        """Launch the passes. `fast`: the caller's kept fast launchers (single
        block, first pass, second pass; see host.launch.fast_launcher), tried
        first and refreshed after a launch that took tilecore.launch (a
        cached path's, whose argument kinds repeat); None: tilecore.launch."""
        launch = ct.launch  # looked up per call: tests replace it
        if grid == 0:
            args = (x, *outs, n, *init) + self.single_tail
            f = fast[0] if fast is not None else None
            if f is None or not f(stream, _ONE, args):
                launch(stream, _ONE, self.single, args)
                if fast is not None:
                    fast[0] = fast_launcher(self.single)
            return
        grid1 = (grid,)
        args = (x, *views, n, *init) + self.first_tail
        f = fast[1] if fast is not None else None
        if f is None or not f(stream, grid1, args):
            launch(stream, grid1, self.main, args)
            if fast is not None:
                fast[1] = fast_launcher(self.main)
        args = (*views, *outs, grid, *init) + self.final_tail
        f = fast[2] if fast is not None else None
        if f is None or not f(stream, _ONE, args):
            launch(stream, _ONE, self.final, args)
            if fast is not None:
                fast[2] = fast_launcher(self.final)


_plans: dict[tuple, _Plan] = {}
plans_made = [0]  # how many plans were built (a test checks cached calls build none)


def _make_plan(kind: str, in_dtype: DType, acc: DType, op: Any, target: Target, wide: bool,
               transform: Optional[Callable], max_: bool = False) -> _Plan:
    plans_made[0] += 1
    op_class = "arg" if kind == "arg" else "user" if kind == "user" else op
    key = {"value_size": in_dtype.itemsize, "accum": acc.name, "op": op_class,
           "offset_size": 8 if wide else 4}
    policy = select_reduce_policy(target.cc, key)
    tile = policy.tile_items
    one = policy.single_block_threads * policy.items_per_thread   # the single block's tile
    work = work_dtype(acc, op)
    final_tile = policy.final_block_threads * max(1, 16 // work.itemsize)
    xf = transform if transform is not None else _no_transform
    has_xf = transform is not None
    if kind == "arg":
        fn, fin = K.arg_reduce, K.arg_reduce_pairs
        # CUB's value for an empty input: numeric_limits<In>::max() (arg_min) or lowest()
        # (arg_max), the largest finite values for floats
        empty = acc.min if max_ else acc.max
        ident = identity("max" if max_ else "min", work)
        tails = ((empty, one, ident, max_, True, work), (empty, tile, ident, max_, False, work),
                 (empty, final_tile, ident, max_))
    elif kind == "fixed":  # sum: init 0; min/max: CUB's max() / lowest() of the input type
        fn = fin = K.reduce_known_fixed
        init = 0 if op == "add" else acc.max if op == "min" else acc.min
        rest = (work, op, identity(op, work))
        tails = ((init, one, *rest, xf, has_xf, True), (init, tile, *rest, xf, has_xf, False),
                 (init, final_tile, *rest, _no_transform, False, True))
    elif kind == "known":
        fn = fin = K.reduce_known
        rest = (work, op, identity(op, work))
        tails = ((one, *rest, xf, has_xf, True), (tile, *rest, xf, has_xf, False),
                 (final_tile, *rest, _no_transform, False, True))
    else:
        fn = fin = K.reduce_user
        tails = ((one, acc, op, xf, has_xf, True), (tile, acc, op, xf, has_xf, False),
                 (final_tile, acc, op, _no_transform, False, True))
    # arg_reduce's loop over 1- and 2-byte items holds four tiles at once: its registers
    # are fitted to the policy's blocks an SM, and the single block's to one (ptxas's
    # own choice for bfloat16, 64 registers, spilled 8-16 bytes; at 3 blocks an SM 77
    # registers and no stack; NVRTC 13, sm_90)
    fit = policy.blocks_per_sm if kind == "arg" and in_dtype.itemsize < 4 else 0
    return _Plan(kind, acc, work, policy, target,
                 kernel_for(fn, policy.single_block_threads, occupancy=min(fit, 1)),
                 kernel_for(fn, policy.block_threads, occupancy=fit),
                 kernel_for(fin, policy.final_block_threads), tails)


def _plan(kind: str, in_dtype: DType, acc: DType, op: Any, target: Target, wide: bool,
          transform: Optional[Callable], max_: bool = False) -> _Plan:
    cache_key = (kind, in_dtype, acc, op, target, wide, transform, max_, epoch())
    plan = _plans.get(cache_key)
    if plan is None:
        config.validate_environment()
        plan = _plans[cache_key] = _make_plan(kind, in_dtype, acc, op, target, wide, transform,
                                              max_)
    return plan


def _run(plan: _Plan, temp_storage: Any, host: bool, stream: Any, n: int, x: Any,
         outs: tuple, init: tuple) -> int:
    """The general path's run: checks the buffer (ByteBuffer: any array type)."""
    grid = plan.grid(n)
    needed, aliases = plan.layout(grid)
    if temp_storage is None:
        return needed
    buf = temp_buffer(temp_storage, host, plan.target.device_id)
    check_size(needed, buf.nbytes)
    if host:
        stream = None
        views = host_views(buf.host, aliases)
    else:
        views = plan.device_views(buf.ptr, grid, aliases, buf.device_id) if grid else ()
    plan.run(stream, x, outs, n, init, grid, views)
    return needed


# -- the cached path -----------------------------------------------------------------------------

_NO_INIT = object()


class _Sig(Signature):
    """A call signature's cached host work (see hostpath.py): the plan, the
    accessors of the arguments' libraries, per count the temporary storage's
    size and layout (and its views per device buffer), and the launches' fast
    launchers. `call` re-checks only what may differ between calls of the
    signature and returns 0 when anything is unusual (the caller then takes
    the general path)."""

    __slots__ = ("plan", "sizes", "fast", "last_init", "last_args")

    def __init__(self, plan: _Plan, libs: tuple) -> None:
        super().__init__(libs, plan.target.device_id)
        self.plan = plan
        self.sizes: dict[int, tuple] = {}  # n -> (bytes, grid, aliases, {buffer ptr: views})
        self.fast: Optional[list] = None if self.host else [None, None, None]
        # the last init (a scalar: immutable, so the same object is the same value) and
        # its launch arguments
        self.last_init: Any = _NO_INIT
        self.last_args: tuple = ()

    def call(self, temp, d_in, outs: tuple, n, stream, init: tuple) -> int:
        if type(n) is not int or not 0 <= n < NARROW or self.epoch != epoch():
            return 0
        libs = self.libs
        if n > libs[0].vec(d_in) or libs[1].vec(outs[0]) < 1 or \
                len(outs) > 1 and libs[2].vec(outs[1]) < 1:
            return 0
        if self.device >= 0 and not self.on_device((d_in, *outs)):
            return 0
        size = self.sizes.get(n)
        if size is None:
            size = self._size(n)
        needed, grid, aliases, views = size
        if temp is None:
            return needed
        tl = self.temp_ok(temp, needed)
        if tl is None:
            return 0
        if self.host:
            self.plan.run(None, d_in, outs, n, init, grid,
                          host_views(temp, aliases) if grid else ())
            return needed
        if grid:
            ptr = tl.ptr(temp)
            at = views.get(ptr)
            if at is None:
                if len(views) >= VIEWS_KEPT:
                    views.clear()
                at = views[ptr] = self.plan.device_views(ptr, grid, aliases,
                                                         self.plan.target.device_id)
        else:
            at = ()
        self.plan.run(stream, d_in, outs, n, init, grid, at, self.fast)
        return needed

    def _size(self, n: int) -> tuple:
        if len(self.sizes) >= SHAPES_KEPT:
            self.sizes.clear()
        grid = self.plan.grid(n)
        needed, aliases = self.plan.layout(grid)
        size = self.sizes[n] = (needed, grid, aliases, {})
        return size


_sigs: dict[tuple, _Sig] = {}


def _remember(key: Optional[tuple], plan: _Plan, objs: tuple, n: int) -> None:
    """Make `key` a cached signature after a general-path call of `plan` with
    the arrays `objs` (d_in, then the outputs) succeeded (narrow counts only)."""
    if n < _WIDE:
        remember(_sigs, key, objs, lambda libs: _Sig(plan, libs))


def _reduce(temp_storage, d_in, d_out, num_items, op: Any, init: Any, transform, stream,
            acc_rule: str, key: Optional[tuple]) -> int:
    a_in = describe(d_in, "d_in")
    a_out = as_1d_output(describe(d_out, "d_out"), "d_out")
    check_1d(a_in, "d_in")
    check_dtype(a_in, "d_in")
    check_dtype(a_out, "d_out")
    n = check_num_items(num_items, a_in)
    target = target_of([("d_in", a_in), ("d_out", a_out)])
    name = op_name(op)
    if acc_rule == "sum":
        acc = sum_accumulator(a_in.dtype, a_out.dtype)
    elif acc_rule == "extremum":
        acc = a_in.dtype
    else:  # reduce / transform_reduce: the type of init, else the output's
        acc = scalar_dtype(init) or a_out.dtype
        if acc not in NUMERIC:
            raise TypeError(f'Invalid argument "init": dtype {acc.name} is not supported')
    if name is not None:
        check_operand_dtype(name, acc, "init" if acc_rule == "init" else "d_in")
    wide = n >= _WIDE
    if acc_rule != "init":  # sum, min, max: CUB fixes init (a Constant of the kernels)
        plan = _plan("fixed", a_in.dtype, acc, name, target, wide, None)
        init_args: tuple = ()
    else:
        init_args = (as_scalar(init, acc, "init"),)
        plan = _plan("known" if name is not None else "user", a_in.dtype, acc,
                     name if name is not None else op, target, wide, transform)
    needed = _run(plan, temp_storage, a_in.host, stream, n, a_in.obj, (a_out.obj,), init_args)
    if a_out.obj is d_out:  # (a 0-d output was viewed as 1-d: no cached signature)
        _remember(key, plan, (d_in, d_out), n)
    return needed


def _arg(temp_storage, d_in, d_out_value, d_out_index, num_items, stream, max_: bool,
         key: Optional[tuple]) -> int:
    a_in = describe(d_in, "d_in")
    a_v = as_1d_output(describe(d_out_value, "d_out_value"), "d_out_value")
    a_i = as_1d_output(describe(d_out_index, "d_out_index"), "d_out_index")
    check_1d(a_in, "d_in")
    check_dtype(a_in, "d_in")
    check_dtype(a_v, "d_out_value")
    n = check_num_items(num_items, a_in)
    check_count_output(a_i, "d_out_index", max(n - 1, 1), "the last item's index")
    target = target_of([("d_in", a_in), ("d_out_value", a_v), ("d_out_index", a_i)])
    dt = a_in.dtype
    plan = _plan("arg", dt, dt, "max" if max_ else "min", target, n >= _WIDE, None, max_)
    needed = _run(plan, temp_storage, a_in.host, stream, n, a_in.obj, (a_v.obj, a_i.obj), ())
    if a_v.obj is d_out_value and a_i.obj is d_out_index:
        _remember(key, plan, (d_in, d_out_value, d_out_index), n)
    return needed


def _init_args(sig: _Sig, init) -> Optional[tuple]:
    """A cached reduce signature's init (a NumPy scalar of the accumulator
    dtype, as the general path passes it), or None when the general path
    should decide (and raise). The last init's conversion is kept: a loop
    passes the same scalar object call after call."""
    if init is sig.last_init:
        return sig.last_args
    try:
        args = (as_scalar(init, sig.plan.acc, "init"),)
    except (TypeError, ValueError):
        return None
    if not isinstance(init, np.ndarray):    # (a 1-element array may change)
        sig.last_init, sig.last_args = init, args
    return args


# signature tags (the first element of a cached signature's key)
_SUM, _MIN, _MAX, _ARGMIN, _ARGMAX, _REDUCE, _TRANSFORM = range(7)
_TAGS = {"sum": _SUM, "min": _MIN, "max": _MAX, "arg_min": _ARGMIN, "arg_max": _ARGMAX}


def signature_plan(method: str, d_in, *outs) -> Optional[_Plan]:
    """The plan of the cached signature of DeviceReduce.<method> (sum, min,
    max, arg_min, arg_max) for arguments like these, or None (the convenience
    layer builds its cached path on it)."""
    sig = find(_sigs, _TAGS[method], (d_in,) + outs)[0]
    return sig.plan if sig is not None else None


def _cached(tag: int, temp_storage, d_in, outs: tuple, num_items, stream, extra: tuple = (),
            init: Any = None):
    """(bytes, key): the cached signature's result for this call (bytes > 0), or
    0 and the key under which the general path will cache it (None when the
    arguments cannot key a signature: not arrays, an unhashable operator)."""
    sig, key = find(_sigs, tag, (d_in,) + outs, extra)
    if sig is None:
        return 0, key
    init_args = () if not extra else _init_args(sig, init)
    if init_args is None:
        return 0, key
    return sig.call(temp_storage, d_in, outs, num_items, stream, init_args), key


class DeviceReduce:
    """Device-wide reductions with CUB's signatures (see docs/algorithms.md)."""

    @staticmethod
    def sum(temp_storage, d_in, d_out, num_items, stream=None) -> int:
        """d_out[0] = sum of d_in[:num_items] (0 for no items). The accumulator is
        CUB's: the C++ type of out + in (integers narrower than int accumulate in
        int32; float16/bfloat16 in float32), converted to d_out's dtype."""
        got, key = _cached(_SUM, temp_storage, d_in, (d_out,), num_items, stream)
        if got:
            return got
        return _reduce(temp_storage, d_in, d_out, num_items, "add", 0, None, stream, "sum", key)

    @staticmethod
    def min(temp_storage, d_in, d_out, num_items, stream=None) -> int:
        """d_out[0] = min(the largest finite value of d_in's dtype, *d_in[:num_items]);
        NaNs are ignored (fmin, as CUB's cuda::minimum)."""
        got, key = _cached(_MIN, temp_storage, d_in, (d_out,), num_items, stream)
        if got:
            return got
        return _reduce(temp_storage, d_in, d_out, num_items, "min", None, None, stream,
                       "extremum", key)

    @staticmethod
    def max(temp_storage, d_in, d_out, num_items, stream=None) -> int:
        """d_out[0] = max(the lowest finite value of d_in's dtype, *d_in[:num_items]);
        NaNs are ignored (fmax, as CUB's cuda::maximum)."""
        got, key = _cached(_MAX, temp_storage, d_in, (d_out,), num_items, stream)
        if got:
            return got
        return _reduce(temp_storage, d_in, d_out, num_items, "max", None, None, stream,
                       "extremum", key)

    @staticmethod
    def arg_min(temp_storage, d_in, d_out_value, d_out_index, num_items, stream=None) -> int:
        """The first minimum of d_in[:num_items] and its index (ties: the smallest
        index; NaN counts as larger than every number). No items: the largest
        finite value and index 1, as CUB."""
        got, key = _cached(_ARGMIN, temp_storage, d_in, (d_out_value, d_out_index), num_items,
                           stream)
        if got:
            return got
        return _arg(temp_storage, d_in, d_out_value, d_out_index, num_items, stream, False, key)

    @staticmethod
    def arg_max(temp_storage, d_in, d_out_value, d_out_index, num_items, stream=None) -> int:
        """The first maximum and its index (NaN counts as smaller than every
        number). No items: the lowest finite value and index 1, as CUB."""
        got, key = _cached(_ARGMAX, temp_storage, d_in, (d_out_value, d_out_index), num_items,
                           stream)
        if got:
            return got
        return _arg(temp_storage, d_in, d_out_value, d_out_index, num_items, stream, True, key)

    @staticmethod
    def reduce(temp_storage, d_in, d_out, num_items, op, init, stream=None) -> int:
        """d_out[0] = op(init, op-reduction of d_in[:num_items]) (init for no items).
        `op`: "add", "mul", "min", "max", "and", "or", "xor", the matching Python
        functions, or a function of two tiles (associative and commutative). The
        accumulator has init's dtype (a NumPy scalar), or d_out's for a Python number."""
        op = same_function(op)
        got, key = _cached(_REDUCE, temp_storage, d_in, (d_out,), num_items, stream,
                           (op, type(init), getattr(init, "dtype", None)), init)
        if got:
            return got
        return _reduce(temp_storage, d_in, d_out, num_items, op, init, None, stream, "init", key)

    @staticmethod
    def transform_reduce(temp_storage, d_in, d_out, num_items, reduce_op, transform_op, init,
                         stream=None) -> int:
        """reduce() of transform_op(d_in[i]); transform_op is a function of one tile."""
        reduce_op, transform_op = same_function(reduce_op), same_function(transform_op)
        got, key = _cached(_TRANSFORM, temp_storage, d_in, (d_out,), num_items, stream,
                           (reduce_op, transform_op, type(init), getattr(init, "dtype", None)),
                           init)
        if got:
            return got
        if not callable(transform_op) or isinstance(transform_op, str):
            raise TypeError('Invalid argument "transform_op": expected a function of one tile, '
                            f"got {type(transform_op).__name__}")
        return _reduce(temp_storage, d_in, d_out, num_items, reduce_op, init, transform_op,
                       stream, "init", key)

    @staticmethod
    def reduce_by_key(temp_storage, d_keys_in, d_unique_out, d_values_in, d_aggregates_out,
                      d_num_runs_out, op, num_items, stream=None) -> int:
        """For each run of consecutive equal keys (==: every NaN key is a run of
        its own) in d_keys_in[:num_items]: its first key to d_unique_out, the
        fold of its values with `op` (in order, never assumed commutative) to
        d_aggregates_out, and the number of runs to d_num_runs_out[0], as CUB's
        DeviceReduce::ReduceByKey (reduce_by_key.py)."""
        return _rbk.reduce_by_key(temp_storage, d_keys_in, d_unique_out, d_values_in,
                             d_aggregates_out, d_num_runs_out, op, num_items, stream)
