"""DeviceScan's plans (scan.py has the API and the cached path): what a call's
dtypes, operator and flags run on a device -- the policy (dispatch.scan_policy,
the tuning tables), the mode, the kernels (scan_kernels.py) -- cached per
(dtypes, operator, flags, device, policy source) by `_plan`; per input size the
temporary storage's layout; and per call shape (n, items, init, in place) the
launches (`_Launches`: the layout's aliases and each launch's trailing
arguments), made once and replayed.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from operator import itemgetter
from typing import Any, Callable, Optional

import tilecore as ct

from .. import config
from ..dispatch import overrides
from ..dispatch.scan_policy import (MODE_FENWICK, MODE_GROUPS, MODE_LOOKBACK, MODE_ORDERED,
                                    MODE_REDUCE_THEN_SCAN, ScanPolicy, select_scan_policy)
from ..dispatch.target import Target
from ..dispatch.temp_storage import Layout
from ..host.launch import fast_launcher
from ..language import dtypes as D
from ..language.dtypes import DType
from ..tunings import lookup as tuning_lookup
from . import scan_kernels as K
from .hostpath import VIEWS_KEPT, host_views, views_at
from .operators import identity
from .shared import kernel_for

__all__ = ["exact_operator", "FIT_MIN_ITEMS", "EXCL_USER_ITEMS", "EXCL_USER_THREADS",
           "ORDERED_WINDOW_MAX", "LAYOUTS_KEPT", "INIT_TILE", "INIT_THREADS"]

INIT_TILE = 512          # status words cleared per block of scan_init
INIT_THREADS = 128
_WIDE = 1 << 31


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
    packed: int             # 1: values fit beside the flags in one status word; 2: 8-byte
                            # values split over two (split_status); 0: in vals (see
                            # scan_status)
    mode: int               # the policy's mode for this operator (exact_mode for exact ones)
    inv: bool               # exclusive as inclusive minus the item (integer add/xor)
    pairs: bool             # exclusive from unshifted tiles by an exclusive tile scan
                            # (see pairs_for)
    items: int              # items per thread (the policy's, capped: see _plan)
    init_k: Any             # scan_init (scan_init_split where packed == 2)
    single: dict            # threads -> the single-pass kernel of `mode`
    fitted: dict            # user operators on a GPU: (threads, ...) -> items that do not spill
    layouts: dict           # (n, items) -> (layout, facts): see layout()
    runs: dict              # (n, items, has_init, in_place) -> _Launches: see launches()
    partials: Any
    downsweep: Any
    recompute: Any          # scan_recompute (one launch: see ScanPolicy.one_launch)

    def kernel(self, threads: int):
        """The single-pass kernel of `mode` for blocks of `threads`, launched for
        early start behind scan_init (which lets it start at once): a load-ahead
        scan prefetches its first tile into L2 before it waits for scan_init (H200
        float32 2^24: 86.8 -> 88.5% of the same-bytes copy), the others, which do
        not call grid_dependency_control_wait, wait at their first statement."""
        k = self.single.get(threads)
        if k is None:
            fn = {MODE_FENWICK: K.scan_fenwick, MODE_LOOKBACK: K.scan_lookback,
                  MODE_ORDERED: K.scan_ordered, MODE_GROUPS: K.scan_groups}[self.mode]
            k = self.single[threads] = kernel_for(fn, threads,
                                                  self.policy.vector_width).for_early_start()
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
                group, lanes = groups_for(tiles, p)
                facts.update(group=group, lanes=lanes)
                # the groups' words end with the last group's: a tile's load of LANES of
                # them pads the lanes past it instead of reading words no group publishes
                # (every tile reads those lines: H200 8-byte sums 2^26/2^27 +3-30%)
                words = values = padded + -(-tiles // group)
            layout.slot(0).alias(D.int64, words)
            if self.packed == 1:
                layout.slot(1).alias(self.acc, 1)
            else:           # split: the second words (int32); else the values themselves
                layout.slot(1).alias(D.int32 if self.packed == 2 else self.acc, values)
            # load_ahead (modes 2 and 3, several tiles): about the resident blocks, each taking
            # tiles until its ticket runs past them (one ticket past them a block, so
            # the counter ends at tiles + grid); a block for every tile takes no ticket
            # (block b holds tile b: scan_ahead), except where the interpreter runs blocks
            # in random order (TILECORE_BLOCK_ORDER=random, read as a size is first
            # planned): block b may run before b - 1 there, so one block fewer, and tickets
            shuffled = self.target.device_id < 0 and config.block_order() == "random"
            ahead = facts["ahead"] = self.loads_ahead(tiles)
            grid = facts["grid"] = min(tiles - shuffled, grid_max) if ahead else tiles
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


def groups_for(tiles: int, policy: ScanPolicy) -> tuple[int, int]:
    """Mode 3's (tiles a group, groups' words a tile loads) for `tiles` tiles:
    group_tiles doubled until the groups fit in GROUPS words, which every tile
    loads; with group_sqrt, the smallest group from group_tiles up whose square
    covers the tiles, each tile loading as many groups' words (their readiness
    and the group's checked at once: groups_prefix_fused), while that group is
    at most GROUPS tiles."""
    if policy.group_sqrt:
        square = policy.group_tiles
        while square * square < tiles:
            square *= 2
        if square <= K.GROUPS:
            return square, square
    group = policy.group_tiles
    while -(-tiles // group) > K.GROUPS:    # every group word in one load
        group *= 2
    return group, K.GROUPS


_plans: dict[tuple, _Plan] = {}
# the look-backs that keep aggregates and inclusive prefixes (status words per tile)
_LOOKBACKS = (MODE_LOOKBACK, MODE_ORDERED)
_AHEAD_MODES = (MODE_LOOKBACK, MODE_GROUPS)     # the kernels with a PIPE (load_ahead)
_SPLIT_MODES = (MODE_LOOKBACK, MODE_GROUPS, MODE_ORDERED)   # split_status 1 applies
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
               "offset_size": 8 if wide else 4, "by_key": by_key, "exclusive": exclusive}
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
        # row is set for (unless the row names `exclusive`), so at
        # most EXCL_USER_ITEMS items a thread, on the row's tile where EXCL_USER_THREADS
        # allow (sm_90's int32 128 x 64 row: 256 x 32)
        if (kind == "user" and exclusive and not by_key and not pairs
                and policy.items_per_thread > EXCL_USER_ITEMS):
            tile = policy.block_threads * policy.items_per_thread
            policy = replace(policy, items_per_thread=EXCL_USER_ITEMS, block_threads=max(
                policy.block_threads, min(EXCL_USER_THREADS, tile // EXCL_USER_ITEMS)))
        threads = policy.block_threads
        items = policy.items_per_thread
        ident = identity(kind, acc) if kind != "user" else 0
        packed = 1 if acc.itemsize <= 4 else (
            2 if policy.split_status == 1 and mode in _SPLIT_MODES else 0)
        init_k = kernel_for(K.scan_init_split if packed == 2 else K.scan_init, INIT_THREADS)
        plan = _plans[cache_key] = _Plan(
            in_dtype, acc, kind, op, ident, eq, exclusive, by_key, policy, target,
            packed, mode, inv, pairs, items, init_k, {},
            {}, {}, {}, kernel_for(K.scan_partials, threads), kernel_for(K.scan_downsweep, threads),
            kernel_for(K.scan_recompute, policy.one_launch_block_threads))
        if mode != MODE_REDUCE_THEN_SCAN:
            plan.kernel(threads)
    return plan


# Each kernel's arguments: the first `head` of a call's values (src, keys, y, n, init), then
# its views of the temporary storage (picked from status, vals, counter, stand-in, no keys),
# then its trailing arguments, fixed per shape (_Step.tail)
_VALUES = 5                                       # every value
_ALL = (_VALUES, itemgetter(2, 0, 1))             # the single-pass kernels: counter, status, vals
_STATUS = (0, itemgetter(2, 0))                   # scan_init: counter, status
_STATUS_SPLIT = (0, itemgetter(2, 0, 1))          # scan_init_split: counter, status, vals
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
    if single:
        steps = ()
    elif plan.packed == 2:      # both arrays cleared (the grid covers the longer)
        steps = (_Step((-(-max(status.count, vals.count) // INIT_TILE),), plan.init_k,
                       _STATUS_SPLIT, (INIT_TILE,)),)
    else:
        steps = (_Step((-(-status.count // INIT_TILE),), plan.init_k, _STATUS, (INIT_TILE,)),)
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
        lanes = (facts["lanes"],) if mode == MODE_GROUPS else ()
        tail = (facts["P"], tile, size, *lanes, *common,
                exclusive and not plan.inv and not plan.pairs_for(n), exclusive, plan.inv,
                has_init, by_key, in_place, plan.packed, wide, single)
        if mode in _AHEAD_MODES:
            tail += (facts["ahead"],)               # PIPE: load ahead
    steps += (_Step((facts["grid"],), plan.kernel(facts["threads"]), _ALL, tail),)
    return _Launches(n, in_place, by_key, aliases, steps)
