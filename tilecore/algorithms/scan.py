"""DeviceScan: CUB's device-wide prefix scans, two-phase temporary storage.

Every entry point takes `temp_storage` first and `stream` last; with
`temp_storage=None` it returns the bytes needed (at least 1) and launches
nothing, with a buffer of at least that many bytes it runs and returns the
same number. No call synchronizes, allocates or reads device memory back.

Layers, as in DeviceReduce: the public methods check their arguments and call
`_scan`; `_plan` (cached per dtypes, operator, flags, device and policy
source) selects the policy (dispatch.scan_policy) and the kernels; `_run`
checks the temporary storage and runs the plan's `_Launches` for the call's
shape (made once per (n, items, init, in place): the layout's aliases and
each launch's trailing arguments); the kernels are in scan_kernels.py (their
docstring has the algorithms and the determinism argument).

The cached path (hostpath.py, as DeviceReduce's): a call whose arrays' types
and dtypes, operator and init type were seen before (a *signature*, `_Sig`)
re-checks only the count against the arrays' sizes, that d_out is d_in or
shares no byte with d_in (and the keys), the device and the buffer, and
replays the launches; anything unusual takes the general path, which raises
the errors. Each launch keeps the kernel's fast launcher for its arguments
(`tilecore.host.launch.fast_launcher`): the scan's kernel objects are shared
by every method and operator, more argument kinds than a kernel's own two
fast-launch slots hold.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from operator import itemgetter
from typing import Any, Callable, Optional

import numpy as np

import tilecore as ct

from ..dispatch import overrides
from ..dispatch.scan_policy import (MODE_FENWICK, MODE_GROUPS, MODE_LOOKBACK, MODE_ORDERED,
                                    MODE_REDUCE_THEN_SCAN, ScanPolicy, select_scan_policy)
from ..dispatch.target import Target
from ..dispatch.temp_storage import Layout, check_size
from ..host.launch import fast_launcher
from ..language import dtypes as D
from ..language.dtypes import DType
from ..tunings import lookup as tuning_lookup
from . import scan_kernels as K
from .shared import check_dtype, kernel_for, target_of, temp_buffer
from .arrays import Arg, byte_span, check_1d, check_num_items, describe
from .hostpath import (NARROW, SHAPES_KEPT, VIEWS_KEPT, Signature, apart_across, epoch, find,
                       host_views, remember, views_at)
from .operators import (NUMERIC, as_scalar, check_operand_dtype, identity, op_accumulator,
                        op_name, same_function, scalar_dtype, sum_accumulator)

__all__ = ["DeviceScan"]

INIT_TILE = 512          # status words cleared per block of scan_init
INIT_THREADS = 128
_WIDE = 1 << 31
KEY_DTYPES = NUMERIC + (D.bool_,)


_EXACT_INT = ("add", "mul", "and", "or", "xor")


def exact_operator(kind: str, acc: DType) -> bool:
    """True when every association of the operator gives the same bits: integer
    add/mul/and/or/xor (wrapping), min/max of any dtype (fmin/fmax for floats:
    ties take the later operand, NaNs are ignored, so the result is the last
    item attaining the minimum whatever the association), and a user operator
    on an integer accumulator (associative by the API's contract, as in CUB,
    and integer results are never rounded)."""
    return kind in ("min", "max") or (kind in _EXACT_INT + ("user",) and not acc.is_float)


@dataclass(frozen=True)
class _Plan:
    in_dtype: DType         # d_in's dtype
    acc: DType
    kind: str               # well-known operator name, or "user"
    op: Any                 # the user function (None for a well-known operator)
    ident: Any              # the well-known operator's identity (0 for a user operator)
    eq: Any                 # the user equality function of a by-key scan, or None
    exclusive: bool
    by_key: bool
    policy: ScanPolicy
    target: Target
    packed: bool            # values fit beside the flags in one status word
    mode: int               # the policy's mode for this operator (exact_mode for exact ones)
    inv: bool               # exclusive as inclusive minus the item (integer add/xor)
    pairs: bool             # exclusive from unshifted tiles by an exclusive tile scan
                            # (see pairs_for)
    items: int              # items per thread (the policy's, capped: see _plan)
    init_k: Any
    single: dict            # threads -> the single-pass kernel of `mode`
    fitted: dict            # user operators on a GPU: (threads, ...) -> items that do not spill
    layouts: dict           # (n, items) -> (layout, facts): see layout()
    runs: dict              # (n, items, has_init, in_place) -> _Launches: see launches()
    partials: Any
    downsweep: Any
    recompute: Any          # scan_recompute (one launch: see ScanPolicy.one_launch)

    def kernel(self, threads: int):
        k = self.single.get(threads)
        if k is None:
            fn = {MODE_FENWICK: K.scan_fenwick, MODE_LOOKBACK: K.scan_lookback,
                  MODE_ORDERED: K.scan_ordered, MODE_GROUPS: K.scan_groups}[self.mode]
            k = self.single[threads] = kernel_for(fn, threads)
        return k

    def layout(self, n: int, items: Optional[int] = None) -> tuple[Layout, dict]:
        """The temporary-storage layout for n items (`items` per thread, default
        the plan's), its aliases at their offsets (a buffer of at least
        layout.size() bytes holds them), and the launch facts; built once per
        (n, items) and kept (at most LAYOUTS_KEPT), since a layout costs more
        host time than the rest of a cached call. facts["bytes"] is
        layout.size(). Read-only for callers."""
        key = (n, items or self.items)
        got = self.layouts.get(key)
        if got is None:
            if len(self.layouts) >= LAYOUTS_KEPT:
                self.layouts.clear()
            layout, facts = self._build_layout(n, key[1])
            facts["bytes"] = layout.size()
            layout.map_to_buffer(facts["bytes"])
            got = self.layouts[key] = (layout, facts)
        return got

    def launches(self, n: int, items: int, has_init: bool, in_place: bool) -> "_Launches":
        """The launches of a scan of n > 0 items at `items` per thread (made once
        per shape, at most LAYOUTS_KEPT kept)."""
        key = (n, items, has_init, in_place)
        got = self.runs.get(key)
        if got is None:
            if len(self.runs) >= LAYOUTS_KEPT:
                self.runs.clear()
            got = self.runs[key] = _make_launches(self, n, items, has_init, in_place)
        return got

    def _build_layout(self, n: int, items: int) -> tuple[Layout, dict]:
        p = self.policy
        threads = p.threads_for(n)
        tile = threads * items
        tiles = -(-n // tile)
        layout = Layout(4)
        facts = {"tiles": tiles, "tile": tile, "threads": threads}
        tickets = tiles
        grid_max = max(1, self.target.sm_count * p.blocks_per_sm)   # modes 1, load_ahead
        if self.mode == MODE_REDUCE_THEN_SCAN:
            per = max(1, -(-tiles // grid_max))
            grid = -(-tiles // per)
            gt = 1 << max(0, (grid - 1).bit_length())
            facts.update(per=per, grid=grid, gt=gt)
            layout.slot(0).alias(D.int64, gt)
            layout.slot(1).alias(self.acc, gt)
        else:
            padded = -(-tiles // INIT_TILE) * INIT_TILE
            facts["P"] = padded
            if self.mode == MODE_FENWICK:
                words, values = padded, tiles
            elif self.mode in _LOOKBACKS:           # aggregates, then inclusive prefixes
                words, values = padded, 2 * padded
            else:                                   # tile aggregates, then group aggregates
                group = p.group_tiles
                while -(-tiles // group) > K.GROUPS:    # every group word in one load
                    group *= 2
                facts["group"] = group
                words = values = padded + INIT_TILE
            layout.slot(0).alias(D.int64, words)
            layout.slot(1).alias(self.acc, 1 if self.packed else values)
            # load_ahead (modes 2 and 3, several tiles): about the resident blocks, each taking
            # tiles until its ticket runs past them (one ticket past them a block, so
            # the counter ends at tiles + grid)
            ahead = facts["ahead"] = self.loads_ahead(tiles)
            grid = facts["grid"] = min(tiles, grid_max) if ahead else tiles
            if ahead:
                tickets = tiles + grid
        layout.slot(2).alias(D.int64 if tickets >= _WIDE else D.int32, 1)   # ticket counter
        # a read-only stand-in for d_in in place, of its dtype: the kernel's vector
        # width (so its tile layout and its float association) is the out-of-place one's
        layout.slot(3).alias(self.in_dtype, max(1, 16 // self.in_dtype.itemsize))
        return layout, facts

    def loads_ahead(self, tiles: int) -> bool:
        """Whether a single-pass scan of `tiles` tiles runs blocks that load ahead
        (scan_kernels.scan_ahead): the policy's load_ahead 1, in mode 2 or 3, over
        more than one tile (one tile runs as one block)."""
        return self.policy.load_ahead == 1 and self.mode in _AHEAD_MODES and tiles > 1

    def pairs_for(self, n: int) -> bool:
        """Whether an exclusive scan of n items runs from unshifted tiles: a user
        operator's always, a well-known one's at every size with exclusive_pairs=1,
        with 2 only on the large tile (n > small_items)."""
        return self.pairs and (self.kind == "user" or self.policy.exclusive_pairs == 1
                               or n > self.policy.small_items)

    def recomputes(self, n: int, in_place: bool) -> bool:
        """Whether a scan of n items runs in one launch of scan_recompute (its own
        tile, whatever the items per thread: see ScanPolicy.one_launch)."""
        return self.policy.one_launch(n) and not in_place

    def fits(self, host: bool) -> tuple[int, ...]:
        """The items per thread a user operator's single-pass kernel may step down
        to when it spills (on a GPU: see _fit), largest first; else the plan's."""
        if host or self.kind != "user" or self.mode == MODE_REDUCE_THEN_SCAN:
            return (self.items,)
        out, items = [], self.items
        while items >= FIT_MIN_ITEMS or not out:
            out.append(items)
            items //= 2
        return tuple(out)


_plans: dict[tuple, _Plan] = {}
# the look-backs that keep aggregates and inclusive prefixes (status words per tile)
_LOOKBACKS = (MODE_LOOKBACK, MODE_ORDERED)
_AHEAD_MODES = (MODE_LOOKBACK, MODE_GROUPS)     # the kernels with a PIPE (load_ahead)
# the single-pass modes whose tiles finish through local_scan/finish_known (the
# exclusive_inverse and exclusive_pairs loads apply)
_SINGLE_PASS_FINISHED = (MODE_LOOKBACK, MODE_ORDERED, MODE_GROUPS)
# mode 4's window: its lanes are bits of one half of an int64 (window_masks)
ORDERED_WINDOW_MAX = 32
# items per thread of an exclusive user scan at most: float32 `a + b` at 512 x 64 spills
# 552 bytes under NVRTC 13.0 for sm_90 (inclusive: none), at 512 x 32 none
EXCL_USER_ITEMS = 32
EXCL_USER_THREADS = 512     # ... and threads at most, to keep the row's tile (512 x 32 as above)
# a user operator's tile steps down to no fewer items per thread than this when it spills
FIT_MIN_ITEMS = 8
# temporary-storage layouts a plan keeps (distinct input sizes called with)
LAYOUTS_KEPT = 64


def _plan(in_dtype: DType, acc: DType, kind: str, op: Any, eq: Any, by_key: bool, wide: bool,
          exclusive: bool, target: Target) -> _Plan:
    cache_key = (in_dtype, acc, kind, op, eq, by_key, wide, exclusive, target,
                 overrides.generation(), tuning_lookup.state())
    plan = _plans.get(cache_key)
    if plan is None:
        key = {"value_size": in_dtype.itemsize, "accum": acc.name, "op": kind,
               "offset_size": 8 if wide else 4, "by_key": by_key}
        policy = select_scan_policy(target.cc, key)
        exact = exact_operator(kind, acc)
        mode = policy.exact_mode if exact else policy.mode
        inv = (policy.exclusive_inverse == 1 and exclusive and not by_key
               and mode in _SINGLE_PASS_FINISHED and kind in ("add", "xor")
               and not acc.is_float)
        # exclusive from unshifted tiles: a user operator's always (the shifted tile's
        # free lane 0 has no identity to hold, so its fold carries (ok, value) pairs)
        pairs = (exclusive and not by_key and mode in _SINGLE_PASS_FINISHED and not inv
                 and (kind == "user" or policy.exclusive_pairs >= 1))
        # a shifted exclusive user tile (reduce-then-scan) carries (ok, value) pairs
        # through its fold: about twice the live values of the inclusive tile a user
        # row is set for (the tuning key does not tell inclusive from exclusive), so at
        # most EXCL_USER_ITEMS items a thread, on the row's tile where EXCL_USER_THREADS
        # allow (sm_90's float32 128 x 64 row: 256 x 32)
        if (kind == "user" and exclusive and not by_key and not pairs
                and policy.items_per_thread > EXCL_USER_ITEMS):
            tile = policy.block_threads * policy.items_per_thread
            policy = replace(policy, items_per_thread=EXCL_USER_ITEMS, block_threads=max(
                policy.block_threads, min(EXCL_USER_THREADS, tile // EXCL_USER_ITEMS)))
        threads = policy.block_threads
        items = policy.items_per_thread
        ident = identity(kind, acc) if kind != "user" else 0
        plan = _plans[cache_key] = _Plan(
            in_dtype, acc, kind, op, ident, eq, exclusive, by_key, policy, target,
            acc.itemsize <= 4, mode, inv, pairs, items, kernel_for(K.scan_init, INIT_THREADS), {},
            {}, {}, {}, kernel_for(K.scan_partials, threads), kernel_for(K.scan_downsweep, threads),
            kernel_for(K.scan_recompute, policy.one_launch_block_threads))
        if mode != MODE_REDUCE_THEN_SCAN:
            plan.kernel(threads)
    return plan


def _in_place(a_in: Arg, a_out: Arg, n: int, out_name: str = "d_out",
              in_name: str = "d_in") -> bool:
    """True when d_out is d_in (the same first element and stride); ValueError
    when their first n elements overlap otherwise."""
    if n == 0:
        return False
    lo_i, hi_i, s_i = byte_span(a_in, n)
    lo_o, hi_o, s_o = byte_span(a_out, n)
    if lo_i >= hi_o or lo_o >= hi_i:
        return False
    if lo_i == lo_o and s_i == s_o and a_in.dtype == a_out.dtype:
        return True
    raise ValueError(f'Invalid argument "{out_name}": it overlaps "{in_name}" without being the '
                     f"same array (an in-place scan passes the same array, of the same dtype, "
                     f"as both)")




def _accumulator(rule: str, name: Optional[str], a_in: Arg, a_out: Arg, init: Any) -> DType:
    """CUB's accumulator types (docs/algorithms.md, DeviceScan)."""
    if rule == "sum":
        return sum_accumulator(a_in.dtype, a_in.dtype)
    if rule == "out":   # the convenience layer: NumPy's cumsum accumulates in the result's type
        return sum_accumulator(a_in.dtype, a_out.dtype)
    if rule == "op":
        return op_accumulator(a_in.dtype, name)
    acc = scalar_dtype(init) or a_out.dtype
    if acc not in NUMERIC:
        raise TypeError(f'Invalid argument "init": dtype {acc.name} is not supported')
    return acc


def _check_eq(eq: Any) -> Any:
    if eq is None:
        return None
    if isinstance(eq, str) or not callable(eq):
        raise TypeError('Invalid argument "equality_op": expected a function of two tiles '
                        f"returning a bool tile, or None, got {type(eq).__name__}")
    return eq


def _scan(temp_storage, d_keys, d_in, d_out, op, init, num_items, stream, *, rule: str,
          exclusive: bool, has_init: bool, eq: Any = None, key: Optional[tuple] = None) -> int:
    """The general path: every argument checked; the call's signature cached
    under `key` (see _cached) once it succeeded."""
    by_key = d_keys is not None
    a_in = describe(d_in, "d_values_in" if by_key else "d_in")
    a_out = describe(d_out, "d_values_out" if by_key else "d_out")
    in_name, out_name = ("d_values_in", "d_values_out") if by_key else ("d_in", "d_out")
    arrays = [(in_name, a_in), (out_name, a_out)]
    check_1d(a_in, in_name)
    check_1d(a_out, out_name)
    check_dtype(a_in, in_name)
    check_dtype(a_out, out_name)
    a_keys = None
    if by_key:
        a_keys = describe(d_keys, "d_keys_in")
        check_1d(a_keys, "d_keys_in")
        check_dtype(a_keys, "d_keys_in", KEY_DTYPES)
        arrays.insert(0, ("d_keys_in", a_keys))
    target = target_of(arrays)
    n = check_num_items(num_items, a_in, array=in_name)
    check_num_items(num_items, a_out, array=out_name)
    if by_key:
        check_num_items(num_items, a_keys, array="d_keys_in")
    op, eq = same_function(op), same_function(eq)
    name = op_name(op)
    acc = _accumulator(rule, name, a_in, a_out, init)
    if name is not None:
        check_operand_dtype(name, acc, "init" if rule == "init" else in_name)
    init_value = as_scalar(init, acc, "init") if has_init else acc.numpy_dtype.type(0)
    eq = _check_eq(eq)
    in_place = _in_place(a_in, a_out, n, out_name, in_name)
    if by_key and _in_place(a_keys, a_out, n, out_name, "d_keys_in"):
        raise ValueError('Invalid argument "d_values_out": it is "d_keys_in" (a by-key scan '
                         "reads the keys while it writes the values: pass another array)")
    plan = _plan(a_in.dtype, acc, name if name is not None else "user",
                 None if name is not None else op, eq, by_key, n >= _WIDE, exclusive, target)
    needed = _run(plan, temp_storage, a_in.host, stream, n, a_in.obj,
                  a_keys.obj if by_key else None, a_out.obj, init_value, has_init, in_place)
    if n < _WIDE:
        fixed = None if rule == "init" else init_value
        remember(_sigs, key, (d_in, d_out) if not by_key else (d_in, d_out, d_keys),
                 lambda libs: _Sig(plan, libs, has_init, fixed))
    return needed


def _run(plan: _Plan, temp_storage: Any, host: bool, stream: Any, n: int, x: Any, keys: Any,
         y: Any, init: Any, has_init: bool, in_place: bool) -> int:
    fits = plan.fits(host)
    # sized for the smallest tile a spilling user operator may step down to (the most
    # tiles: the largest layout); with one candidate, the layout the launch uses
    needed = plan.layout(n, fits[-1])[1]["bytes"]
    if temp_storage is None:
        return needed
    buf = temp_buffer(temp_storage, host)
    check_size(needed, buf.nbytes)
    if n == 0:
        return needed
    items = fits[0] if len(fits) == 1 or plan.recomputes(n, in_place) else \
        _fit(plan, fits, buf, n, x, keys, y, init, has_init, in_place)
    run = plan.launches(n, items, has_init, in_place)
    run.go(stream if not host else None, run.buffer_bound(buf), x, keys, y, init)
    return needed


def _fit(plan: _Plan, fits: tuple[int, ...], buf: Any, n: int, x: Any, keys: Any, y: Any,
         init: Any, has_init: bool, in_place: bool) -> int:
    """The most items per thread (of `fits`) whose single-pass kernel does not
    spill on this GPU, for a user operator: the tuning key says "user"
    whatever the function costs, so its row is set for a light one. The
    kernel is compiled once to find out (the launch then finds it in the
    cache); the choice is kept per plan."""
    threads = plan.policy.threads_for(n)
    key = (threads, n >= _WIDE, in_place)
    items = plan.fitted.get(key)
    if items is None:
        from ..runtime import get_device
        from .. import config
        arch = config.arch() or get_device(plan.target.device_id).arch
        for items in fits:
            run = plan.launches(n, items, has_init, in_place)
            step = run.steps[-1]                    # the single-pass kernel (modes 0, 2, 3)
            args = run.args(-1, run.buffer_bound(buf), x, keys, y, init)
            if ct.compile(step.kernel, args, arch=arch).stack_bytes == 0:
                break
        plan.fitted[key] = items
    return items


# Each kernel's arguments: the first `head` of a call's values (src, keys, y, n, init), then
# its views of the temporary storage (picked from status, vals, counter, stand-in, no keys),
# then its trailing arguments, fixed per shape (_Step.tail)
_VALUES = 5                                       # every value
_ALL = (_VALUES, itemgetter(2, 0, 1))             # the single-pass kernels: counter, status, vals
_STATUS = (0, itemgetter(2, 0))                   # scan_init: counter, status
_PARTIALS = (4, itemgetter(0, 1))                 # scan_partials: no init, no counter
_DOWNSWEEP = (_VALUES, itemgetter(0, 1))          # scan_downsweep: no counter
_RECOMPUTE = (_VALUES, lambda views: ())          # scan_recompute: no temporary storage


class _Step:
    """One launch of a scan: grid, kernel, how its arguments are formed
    (`head`, `pick`: see _ALL) and the kernel's fast launcher for them, once a
    launch has made one."""

    __slots__ = ("grid", "kernel", "head", "pick", "tail", "fast")

    def __init__(self, grid: tuple, kernel: Any, form: tuple, tail: tuple) -> None:
        self.grid, self.kernel, self.tail = grid, kernel, tail
        self.head, self.pick = form
        self.fast: Optional[Callable] = None


class _Launches:
    """What one scan of n > 0 items at one shape launches: the temporaries'
    aliases (byte offset, dtype, count) of status, vals, counter, the in-place
    stand-in for d_in and an empty array at the stand-in (the keys of a scan
    without keys: unread, and disjoint from every argument, so the fast
    launcher's overlap check passes for new arrays), and the steps.

    A buffer's views are *bound* once (`bind`): (the stand-in, the empty keys,
    per step the arguments after the call's values), so that a call builds
    one tuple of its values and one argument tuple a launch. Bindings are
    kept: per device pointer (`bound`) and for the last host buffer."""

    __slots__ = ("n", "in_place", "by_key", "aliases", "steps", "bound", "host_temp",
                 "host_bound")

    def __init__(self, n: int, in_place: bool, by_key: bool, aliases: tuple,
                 steps: tuple) -> None:
        self.n, self.in_place, self.by_key, self.aliases, self.steps = \
            n, in_place, by_key, aliases, steps
        self.bound: dict = {}
        self.host_temp: Any = None
        self.host_bound: tuple = ()

    def bind(self, views: tuple) -> tuple:
        """(stand-in, empty keys, per step (the step, its arguments after the
        call's values)) for the views (status, vals, counter, stand-in, no
        keys)."""
        return views[3], views[4], tuple((step, step.pick(views) + step.tail)
                                         for step in self.steps)

    def host_bound_of(self, temp: Any) -> tuple:
        """The binding of host buffer `temp` (kept for the last one: it stays
        alive, so an identical object is the same buffer)."""
        if temp is not self.host_temp:
            self.host_bound = self.bind(host_views(temp, self.aliases))
            self.host_temp = temp
        return self.host_bound

    def bound_at(self, ptr: int, device: int) -> tuple:
        """The binding of the device buffer at `ptr` (kept by pointer: a cached
        call looks it up in `bound` first)."""
        got = self.bound.get(ptr)
        if got is None:
            if len(self.bound) >= VIEWS_KEPT:
                self.bound.clear()
            got = self.bound[ptr] = self.bind(views_at(ptr, self.aliases, device))
        return got

    def buffer_bound(self, buf: Any) -> tuple:
        """The binding of a dispatch.buffers.ByteBuffer (the general path)."""
        if buf.host is not None:
            return self.bind(host_views(buf.host, self.aliases))
        return self.bound_at(buf.ptr, buf.device_id)

    def args(self, i: int, bound: tuple, x: Any, keys: Any, y: Any, init: Any) -> tuple:
        """The arguments of step i for a call's arrays and init into the buffer
        `bound` was bound to (what `go` forms inline)."""
        values = (bound[0] if self.in_place else x, keys if self.by_key else bound[1], y,
                  self.n, init)
        step, rest = bound[2][i]
        return values[:step.head] + rest

    def go(self, stream: Any, bound: tuple, x: Any, keys: Any, y: Any, init: Any) -> None:
        """Launch the steps for a call's arrays and init into the buffer `bound`
        was bound to."""
        values = (bound[0] if self.in_place else x, keys if self.by_key else bound[1], y,
                  self.n, init)
        for step, rest in bound[2]:
            head = step.head
            args = values + rest if head == _VALUES else values[:head] + rest
            fast = step.fast
            if fast is None or not fast(stream, step.grid, args):
                ct.launch(stream, step.grid, step.kernel, args)  # (tests replace ct.launch)
                step.fast = fast_launcher(step.kernel)


def _make_launches(plan: _Plan, n: int, items: int, has_init: bool,
                   in_place: bool) -> _Launches:
    layout, facts = plan.layout(n, items)
    status, vals, counter, stand_in = (slot.aliases[0] for slot in layout.slots)
    aliases = tuple((a.offset, a.dtype, a.count) for a in (status, vals, counter, stand_in)) + \
        ((stand_in.offset, plan.in_dtype, 0),)
    tile, tiles = facts["tile"], facts["tiles"]
    wide = n >= _WIDE
    by_key, exclusive = plan.by_key, plan.exclusive
    common = (plan.acc, plan.kind, plan.op, plan.ident, plan.eq, plan.eq is not None)
    mode = plan.mode
    policy = plan.policy
    if plan.recomputes(n, in_place):
        tile = policy.one_launch_block_threads * policy.one_launch_items_per_thread
        shift = exclusive and not plan.inv and not plan.pairs_for(n)
        steps = (_Step((-(-n // tile),), plan.recompute, _RECOMPUTE,
                       (tile, *common, shift, exclusive, plan.inv, has_init, by_key, wide)),)
        return _Launches(n, in_place, by_key, aliases, steps)
    if mode == MODE_REDUCE_THEN_SCAN:
        per, grid, gt = facts["per"], facts["grid"], facts["gt"]
        steps = (_Step((grid,), plan.partials, _PARTIALS,
                       (tile, per, *common, by_key, in_place, wide)),
                 _Step((grid,), plan.downsweep, _DOWNSWEEP,
                       (tile, per, gt, *common, exclusive, has_init, by_key, in_place, wide)))
        return _Launches(n, in_place, by_key, aliases, steps)
    single = tiles == 1
    steps = () if single else (_Step((status.count // INIT_TILE,), plan.init_k, _STATUS,
                                     (INIT_TILE,)),)
    if mode == MODE_FENWICK:
        bits = 32 if tiles < _WIDE else 64
        tail = (tile, *common, exclusive, has_init, by_key, in_place, plan.packed, bits, wide,
                single)
    else:
        if mode == MODE_LOOKBACK:
            size = plan.policy.lookback_window
        elif mode == MODE_ORDERED:      # a window's lanes are bits of one int64 half
            size = min(plan.policy.lookback_window, ORDERED_WINDOW_MAX)
        else:
            size = facts["group"]
        tail = (facts["P"], tile, size, *common,
                exclusive and not plan.inv and not plan.pairs_for(n), exclusive, plan.inv,
                has_init, by_key, in_place, plan.packed, wide, single)
        if mode in _AHEAD_MODES:
            tail += (facts["ahead"],)               # PIPE: load ahead
    steps += (_Step((facts["grid"],), plan.kernel(facts["threads"]), _ALL, tail),)
    return _Launches(n, in_place, by_key, aliases, steps)


# -- the cached path -----------------------------------------------------------------------------

_NO_INIT = object()


class _Sig(Signature):
    """A DeviceScan call signature's cached host work (hostpath.Signature): the
    plan, whether the method has an init and, for the sums, its launch value
    (else each call's init is checked and converted as the general path
    does), d_out's overlap checks (`apart`: d_out's library's, None when d_in
    or the keys are of another library: then only in place is cached) and per
    count the bytes needed and the launches. `call` re-checks what may differ
    between calls of the signature and returns 0 when anything is unusual (the
    caller then takes the general path); `shape` is its count's part, for
    callers that made d_out themselves (cumsum)."""

    __slots__ = ("plan", "has_init", "init", "shapes", "last_init", "last_value", "apart",
                 "keys_apart")

    def __init__(self, plan: _Plan, libs: tuple, has_init: bool, init: Any) -> None:
        super().__init__(libs, plan.target.device_id)
        self.plan, self.has_init, self.init = plan, has_init, init
        ly = libs[1]
        # (a DeviceArray beside CuPy or PyTorch arrays: reduce_by_key's temporaries)
        self.apart = apart_across(libs[0], ly)
        self.keys_apart = apart_across(libs[2], ly) if len(libs) > 2 else None
        # n -> (bytes, _Launches or None for n = 0); in place under ~n (an int key: no tuple)
        self.shapes: dict = {}
        # the last run-time init (a scalar: immutable, so the same object is the same value)
        # and its launch value
        self.last_init: Any = _NO_INIT
        self.last_value: Any = None

    def call(self, temp: Any, keys: Any, x: Any, y: Any, n: Any, stream: Any, init: Any) -> int:
        if type(n) is not int or not 0 <= n < NARROW or self.epoch != epoch():
            return 0
        if y is x:                              # in place
            if self.libs[0].vec(x) < n:
                return 0
            shape = self.shapes.get(~n)
        else:                                   # (overlap, views of one array: the general path)
            apart = self.apart
            if apart is None or not apart(x, y, n):
                return 0
            shape = self.shapes.get(n)
        if keys is not None:
            apart = self.keys_apart
            if apart is None or not apart(keys, y, n):
                return 0
        if self.device >= 0 and not self.on_device((x, y) if keys is None else (x, y, keys)):
            return 0
        if self.init is not None:
            init = self.init
        elif init is self.last_init:
            init = self.last_value
        else:                   # a run-time init, checked and converted as the general path does
            try:
                value = as_scalar(init, self.plan.acc, "init")
            except (TypeError, ValueError):
                return 0
            if not isinstance(init, np.ndarray):    # (a 1-element array may change)
                self.last_init, self.last_value = init, value
            init = value
        if shape is None:
            shape = self.shape(n, y is x)
            if shape is None:
                return 0
        needed, run = shape
        if temp is None:
            return needed
        ptr = self.temp_at(temp, needed)
        if ptr < 0:
            return 0
        if run is not None:
            if self.host:
                run.go(None, run.host_bound_of(temp), x, keys, y, init)
            else:
                run.go(stream, run.bound.get(ptr) or run.bound_at(ptr, self.plan.target.device_id),
                       x, keys, y, init)
        return needed

    def shape(self, n: int, in_place: bool) -> Optional[tuple[int, Optional[_Launches]]]:
        """(bytes needed, the launches: None for n = 0) of n items, made once
        and kept in `shapes`; None when a user operator is not fitted yet at
        this size (the general path fits it: see _fit)."""
        plan = self.plan
        fits = plan.fits(self.host)
        needed = plan.layout(n, fits[-1])[1]["bytes"]
        run = None
        if n:
            items = fits[0] if len(fits) == 1 or plan.recomputes(n, in_place) else \
                plan.fitted.get((plan.policy.threads_for(n), False, in_place))
            if items is None:
                return None
            run = plan.launches(n, items, self.has_init, in_place)
        if len(self.shapes) >= SHAPES_KEPT:
            self.shapes.clear()
        got = self.shapes[~n if in_place else n] = (needed, run)
        return got


_sigs: dict[tuple, _Sig] = {}
# signature tags (the first element of a cached signature's key)
(_INCLUSIVE_SUM, _EXCLUSIVE_SUM, _INCLUSIVE_SCAN, _INCLUSIVE_SCAN_INIT, _EXCLUSIVE_SCAN,
 _INCLUSIVE_SUM_BY_KEY, _EXCLUSIVE_SUM_BY_KEY, _INCLUSIVE_SCAN_BY_KEY, _EXCLUSIVE_SCAN_BY_KEY,
 _RUNNING_SUM, _RUNNING_SUM_EXCLUSIVE) = range(11)


def _cached(tag: int, temp_storage, d_keys, d_in, d_out, num_items, stream, extra: tuple = (),
            init: Any = None) -> tuple[int, Optional[tuple]]:
    """(bytes, key): the cached signature's result for this call (bytes > 0), or
    0 and the key under which the general path will cache it (None when the
    arguments cannot key a signature: not arrays, an unhashable operator).
    The key is hostpath.find's, built inline (every call builds it)."""
    try:
        key = (tag, type(d_in), d_in.dtype, type(d_out), d_out.dtype)
        if d_keys is not None:
            key += (type(d_keys), d_keys.dtype)
        if extra:
            key += extra
        sig = _sigs.get(key)
    except (AttributeError, TypeError):
        return 0, None
    if sig is None:
        return 0, key
    return sig.call(temp_storage, d_keys, d_in, d_out, num_items, stream, init), key


def _init_key(init: Any) -> tuple:
    """What an init contributes to a signature: its type and dtype (they give the
    accumulator)."""
    return type(init), getattr(init, "dtype", None)


class DeviceScan:
    """Device-wide prefix scans with CUB's signatures (see docs/algorithms.md).
    Results are bit-identical run to run for every operator (float sums
    included); `d_out` may be `d_in` (in place)."""

    @staticmethod
    def inclusive_sum(temp_storage, d_in, d_out, num_items, stream=None) -> int:
        """d_out[i] = d_in[0] + ... + d_in[i], accumulated in CUB's type (the C++
        type of in + in: integers narrower than int in int32; float16/bfloat16
        in float32) and converted to d_out's dtype."""
        got, key = _cached(_INCLUSIVE_SUM, temp_storage, None, d_in, d_out, num_items, stream)
        return got or _scan(temp_storage, None, d_in, d_out, "add", None, num_items, stream,
                            rule="sum", exclusive=False, has_init=False, key=key)

    @staticmethod
    def exclusive_sum(temp_storage, d_in, d_out, num_items, stream=None) -> int:
        """d_out[i] = 0 + d_in[0] + ... + d_in[i-1] (d_out[0] = 0)."""
        got, key = _cached(_EXCLUSIVE_SUM, temp_storage, None, d_in, d_out, num_items, stream)
        return got or _scan(temp_storage, None, d_in, d_out, "add", 0, num_items, stream,
                            rule="sum", exclusive=True, has_init=True, key=key)

    @staticmethod
    def inclusive_scan(temp_storage, d_in, d_out, op, num_items, stream=None) -> int:
        """d_out[i] = d_in[0] op ... op d_in[i]. `op`: "add", "mul", "min", "max",
        "and", "or", "xor", the matching Python functions, or a function of two
        tiles (associative; never assumed commutative)."""
        op = same_function(op)
        got, key = _cached(_INCLUSIVE_SCAN, temp_storage, None, d_in, d_out, num_items, stream,
                           (op,))
        return got or _scan(temp_storage, None, d_in, d_out, op, None, num_items, stream,
                            rule="op", exclusive=False, has_init=False, key=key)

    @staticmethod
    def inclusive_scan_init(temp_storage, d_in, d_out, op, init, num_items, stream=None) -> int:
        """d_out[i] = init op d_in[0] op ... op d_in[i]; the accumulator has
        init's dtype (a NumPy scalar), or d_out's for a Python number."""
        op = same_function(op)
        got, key = _cached(_INCLUSIVE_SCAN_INIT, temp_storage, None, d_in, d_out, num_items,
                           stream, (op, *_init_key(init)), init)
        return got or _scan(temp_storage, None, d_in, d_out, op, init, num_items, stream,
                            rule="init", exclusive=False, has_init=True, key=key)

    @staticmethod
    def exclusive_scan(temp_storage, d_in, d_out, op, init, num_items, stream=None) -> int:
        """d_out[0] = init, d_out[i] = init op d_in[0] op ... op d_in[i-1]."""
        op = same_function(op)
        got, key = _cached(_EXCLUSIVE_SCAN, temp_storage, None, d_in, d_out, num_items, stream,
                           (op, *_init_key(init)), init)
        return got or _scan(temp_storage, None, d_in, d_out, op, init, num_items, stream,
                            rule="init", exclusive=True, has_init=True, key=key)

    # --- by key: runs of equal consecutive keys are scanned separately ---------------------
    @staticmethod
    def inclusive_sum_by_key(temp_storage, d_keys_in, d_values_in, d_values_out, num_items,
                             equality_op=None, stream=None) -> int:
        """inclusive_sum within each run of consecutive equal keys (equality_op: a
        function of two key tiles returning a bool tile; None: ==)."""
        eq = same_function(equality_op)
        got, key = _cached(_INCLUSIVE_SUM_BY_KEY, temp_storage, d_keys_in, d_values_in,
                           d_values_out, num_items, stream, (eq,))
        return got or _scan(temp_storage, d_keys_in, d_values_in, d_values_out, "add", None,
                            num_items, stream, rule="sum", exclusive=False, has_init=False, eq=eq,
                            key=key)

    @staticmethod
    def exclusive_sum_by_key(temp_storage, d_keys_in, d_values_in, d_values_out, num_items,
                             equality_op=None, stream=None) -> int:
        """exclusive_sum within each run (the first item of a run gets 0)."""
        eq = same_function(equality_op)
        got, key = _cached(_EXCLUSIVE_SUM_BY_KEY, temp_storage, d_keys_in, d_values_in,
                           d_values_out, num_items, stream, (eq,))
        return got or _scan(temp_storage, d_keys_in, d_values_in, d_values_out, "add", 0,
                            num_items, stream, rule="sum", exclusive=True, has_init=True, eq=eq,
                            key=key)

    @staticmethod
    def inclusive_scan_by_key(temp_storage, d_keys_in, d_values_in, d_values_out, op, num_items,
                              equality_op=None, stream=None) -> int:
        """inclusive_scan within each run of consecutive equal keys."""
        op, eq = same_function(op), same_function(equality_op)
        got, key = _cached(_INCLUSIVE_SCAN_BY_KEY, temp_storage, d_keys_in, d_values_in,
                           d_values_out, num_items, stream, (op, eq))
        return got or _scan(temp_storage, d_keys_in, d_values_in, d_values_out, op, None,
                            num_items, stream, rule="op", exclusive=False, has_init=False, eq=eq,
                            key=key)

    @staticmethod
    def exclusive_scan_by_key(temp_storage, d_keys_in, d_values_in, d_values_out, op, init,
                              num_items, equality_op=None, stream=None) -> int:
        """exclusive_scan within each run (the first item of a run gets init)."""
        op, eq = same_function(op), same_function(equality_op)
        got, key = _cached(_EXCLUSIVE_SCAN_BY_KEY, temp_storage, d_keys_in, d_values_in,
                           d_values_out, num_items, stream, (op, eq, *_init_key(init)), init)
        return got or _scan(temp_storage, d_keys_in, d_values_in, d_values_out, op, init,
                            num_items, stream, rule="init", exclusive=True, has_init=True, eq=eq,
                            key=key)


def running_sum(temp_storage, d_in, d_out, num_items, stream, exclusive: bool) -> int:
    """The convenience layer's two-phase sum (`cumsum`): as inclusive_sum /
    exclusive_sum, but accumulated in d_out's type, as NumPy's cumsum does."""
    tag = _RUNNING_SUM_EXCLUSIVE if exclusive else _RUNNING_SUM
    got, key = _cached(tag, temp_storage, None, d_in, d_out, num_items, stream)
    return got or _scan(temp_storage, None, d_in, d_out, "add", 0 if exclusive else None,
                        num_items, stream, rule="out", exclusive=exclusive, has_init=exclusive,
                        key=key)


def running_sum_signature(d_in, d_out, exclusive: bool) -> Optional[_Sig]:
    """The cached signature of running_sum for arrays like these, or None (the
    convenience layer's cached path runs on it: `_Sig.shape` and the launches'
    `go`)."""
    return find(_sigs, _RUNNING_SUM_EXCLUSIVE if exclusive else _RUNNING_SUM, (d_in, d_out))[0]


def inclusive_temp_bytes(target: Target, in_dtype: DType, op: Any, num_items: int,
                         by_key: bool = False) -> tuple[int, DType]:
    """(bytes, accumulator) that DeviceScan.inclusive_scan (by_key: the
    inclusive_scan_by_key with the default equality) asks for on `target` for
    `num_items` items of `in_dtype` with `op` ("add" is also inclusive_sum's):
    what its temp_storage=None query returns, without arrays (for algorithms
    built on DeviceScan, such as DeviceReduce.reduce_by_key)."""
    name = op_name(op)
    acc = _accumulator("op", name, Arg(None, True, in_dtype, 0, 1, -1, ()), None, None)
    plan = _plan(in_dtype, acc, name if name is not None else "user",
                 None if name is not None else op, None, by_key, num_items >= _WIDE, False, target)
    return plan.layout(num_items)[0].size(), acc
