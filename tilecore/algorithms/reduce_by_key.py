"""DeviceReduce.reduce_by_key: CUB's DeviceReduce::ReduceByKey.

For the runs of consecutive equal keys in d_keys_in[:num_items] (equality is
`==`, as CUB's: a NaN key never equals anything, so every NaN is a run of its
own; -0.0 == 0.0), d_unique_out[r] is the first key of run r,
d_aggregates_out[r] the fold of its values with `op` in item order (never
assumed commutative), and d_num_runs_out[0] the number of runs. Nothing
beyond the first num_runs elements of d_unique_out and d_aggregates_out is
written; num_items == 0 writes d_num_runs_out[0] = 0 and nothing else.

Small inputs (1 .. the policy's small_max_items, 2^16: dispatch/
reduce_by_key_policy.py): one launch of `rbk_small`
(reduce_by_key_kernels.py), no temporary storage (1 byte asked for). Block t
of cdiv(n, TILE) handles tile t: it recomputes from the tiles before it the
runs started before its first item and the open run's aggregate (re-reads
from L2, as DeviceScan's scan_recompute), scans its tile as a segmented
inclusive scan of (head, value) pairs in item order, and scatters the first
keys, the aggregates at run ends and the count. Deterministic (a function of
n and TILE); float sums may round differently from the multi-launch path.
Device us per call on an H200 (float32, int32 keys, runs of 7), one launch
against the multi-launch path: 2^10 3.5 / 10.1, 2^14 6.7 / 14.8, 2^16 11.8 /
16.7, 2^17 18.5 / 17.5 (hence the threshold). Worst case: a user operator
with one run over the whole input, whose blocks fold the open run tile by
tile (2^16: 36.7 / 16.6).

Cached host path (hostpath.py, as DeviceReduce's and DeviceScan's): a call
whose five arrays' types and dtypes and operator were seen before (`_Sig`,
one dict probe) re-checks the count (an int in 1 .. small_max_items), the
epoch, each array 1-d with enough elements, that no output shares a byte with
an input or another output (the library's `apart`, whole arrays; skipped when
the five array objects are those of the last call that passed and, for
PyTorch tensors, whose memory can move in place, still where they were), the device and the
temporary storage (temp_at), then launches with the kept fast launcher.
Counts above small_max_items (under 2^31) take the same checks and replay
the launches below, kept per count (`_Large`: layout, launches, views of the
buffer). Anything else (0 items, 2^31 or more, a 0-d count output, mixed
libraries) takes the general path, which raises the errors before any launch. Host
Python per cached call: about 2.3 us with NumPy and tilecore.launch stubbed
(about 100 us on the general path), about 2.6 us above the bare launch with
CuPy.

Larger inputs (three kernels around two DeviceScan calls, all on `stream`, no host
synchronization, no allocation, no device-to-host read; the DeviceScan calls take
their own cached paths):

    rbk_heads                 flags[i] = item i starts a run        (read keys, write n flags)
    DeviceScan.inclusive_sum  flags -> run number of every item     (exact: the look-back)
    DeviceScan.inclusive_scan_by_key(keys, values, op) -> scanned   (deterministic modes)
    rbk_scatter               heads write keys, run ends write scanned[i], the last item
                              writes num_runs

Cost: about 4 reads of the keys, 1 of the values, 2 reads and 2 writes of the
(int32) flags and 1 write + 1 read of the scanned values (accumulator type),
on top of the outputs, plus 2 x (init + scan) launches; CUB's single pass
reads keys and values once. Temporary storage: n flags (int32; int64 from
2**31 items), n accumulators and the larger of the two scans' storage.
Deterministic: the by-key scan's association depends only on tile numbers
(scan_kernels.py), and every output element is written by exactly one item.

Types, as CUB: the accumulator is the C++ type of op(value, value) (integers
narrower than int accumulate in int32 for add/mul/and/or/xor; float16 and
bfloat16 sums in float32; min/max in the value type), converted to
d_aggregates_out's dtype; keys are converted to d_unique_out's dtype;
d_num_runs_out has a 32- or 64-bit integer dtype that holds num_items.
d_unique_out and d_aggregates_out must hold num_items elements (the most runs
there can be; CUB's contract, checked here since the count is only known on
the device).
"""
from __future__ import annotations

import weakref
from typing import Any, Optional

import tilecore as ct

from ..dispatch.buffers import device_buffer, host_buffer
from ..dispatch.reduce_by_key_policy import ReduceByKeyPolicy, select_reduce_by_key_policy
from ..dispatch.target import Target, device_target, interpreter_target
from ..dispatch.temp_storage import Layout, check_size
from ..host.launch import fast_launcher
from ..language import dtypes as D
from ..language.dtypes import DType
from . import reduce_by_key_kernels as K
from .arrays import Arg, as_1d_output, byte_span, check_1d, check_count_output, check_num_items, \
    describe, same_side
from .hostpath import NARROW, SHAPES_KEPT, Signature, device_views, epoch, host_views, kept, \
    remember, views_at
from .operators import NUMERIC, check_operand_dtype, identity, op_accumulator, op_name, \
    same_function
from .scan import KEY_DTYPES, DeviceScan, inclusive_temp_bytes
from .shared import Step, check_dtype, kernel_for, temp_buffer

__all__ = ["reduce_by_key"]

_WIDE = 1 << 31

class _Small:
    """The one launch of a small reduce_by_key for one (key dtype, value dtype,
    operator): rbk_small's kernel object, tile and trailing Constants, and
    the launch's kept fast launcher (the cached path calls it first)."""

    __slots__ = ("kernel", "tile", "tail", "host", "fast")

    def __init__(self, policy: ReduceByKeyPolicy, values: DType, name: Optional[str], op: Any,
                 host: bool) -> None:
        acc = op_accumulator(values, name)
        self.kernel = kernel_for(K.rbk_small, policy.small_block_threads)
        self.tile = policy.small_tile
        self.tail = (self.tile, acc, name or "user", None if name else op,
                     identity(name, acc) if name else 0)
        self.host = host
        self.fast: Any = None

    def launch(self, stream, keys, values, unique, aggregates, runs, n: int) -> None:
        grid = ((n + self.tile - 1) // self.tile,)
        args = (keys, values, unique, aggregates, runs, n) + self.tail
        fast = self.fast
        if fast is None or not fast(stream, grid, args):
            ct.launch(stream, grid, self.kernel, args)      # (tests replace ct.launch)
            if not self.host:
                self.fast = fast_launcher(self.kernel)


class _Large:
    """The launches of a reduce_by_key of n items above the one-launch threshold
    (module docstring: rbk_heads, two DeviceScan calls, rbk_scatter), made once
    per (signature, n): the temporary-storage layout as aliases (byte offset,
    dtype, count of the scans' storage, the flags and the scanned values), the
    two kernels' launches and, per device buffer, the views into it."""

    __slots__ = ("n", "needed", "aliases", "heads", "scatter", "op", "views")

    def __init__(self, policy: ReduceByKeyPolicy, target: Target, values: DType, op: Any,
                 n: int) -> None:
        wide = n >= _WIDE
        flag_dtype = D.int64 if wide else D.int32
        scan_bytes, acc = inclusive_temp_bytes(target, values, op, n, by_key=True)
        flag_bytes, _ = inclusive_temp_bytes(target, flag_dtype, "add", n)
        layout = Layout(3)
        parts = (layout.slot(0).alias(D.uint8, max(scan_bytes, flag_bytes)),
                 layout.slot(1).alias(flag_dtype, n), layout.slot(2).alias(acc, n))
        self.needed = layout.size()
        layout.map_to_buffer(self.needed)
        self.aliases = tuple((a.offset, a.dtype, a.count) for a in parts)
        threads = policy.block_threads
        tile = threads * policy.items_per_thread
        grid = (-(-n // tile),)
        self.n, self.op = n, op
        self.heads = Step(grid, kernel_for(K.rbk_heads, threads), (n, tile, wide))
        self.scatter = Step(grid, kernel_for(K.rbk_scatter, threads), (n, tile, wide))
        self.views: dict = {}      # device pointer -> the aliases' DeviceArrays there

    def go(self, stream, views: tuple, keys, vals, uniq, aggs, runs) -> None:
        """Launch everything for the call's arrays, the temporaries at `views`."""
        tmp, flags, scanned = views
        n = self.n
        self.heads.go(stream, (keys, flags))
        DeviceScan.inclusive_sum(tmp, flags, flags, n, stream=stream)
        DeviceScan.inclusive_scan_by_key(tmp, keys, vals, scanned, self.op, n, stream=stream)
        self.scatter.go(stream, (keys, scanned, flags, uniq, aggs, runs))


def _ref(obj: Any) -> Any:
    """A weak reference to obj, or (for objects that take none: tilecore's
    DeviceArray, an immutable description) a function returning it."""
    try:
        return weakref.ref(obj)
    except TypeError:
        return lambda: obj


class _Sig(Signature):
    """A cached call signature (hostpath.py) of reduce_by_key: the one launch
    of small counts, the launches of larger ones, and the last five arrays
    (weakly) that passed the overlap checks.
    `call` re-checks what may differ between calls and returns 0 when
    anything is unusual (the caller then takes the general path, which raises
    the errors): the count (an int in 1 .. 2^31 - 1; up to the policy's
    small_max_items one launch, above it the launches of a `_Large` kept per
    count), the epoch (it changes with the policy), each array 1-d with enough elements,
    the outputs sharing no byte with the inputs or each other (whole arrays,
    by the library's `apart`; skipped for the same five array objects as the
    last call that passed, whose memory cannot have moved: a NumPy array,
    CuPy array or DeviceArray keeps its buffer; a PyTorch tensor can move
    (`set_`, `resize_`), so for tensors their pointers, shapes and strides
    must be those of that call too, and then their sizes are known: `fits`,
    the most items those tensors take), the device and the temporary storage (at
    least 1 byte, or the large launches' bytes)."""

    __slots__ = ("small", "max_items", "make_large", "large", "device_id", "apart", "last",
                 "place", "places", "fits")

    def __init__(self, small: _Small, max_items: int, make_large, libs: tuple,
                 device_id: int) -> None:
        super().__init__(libs, device_id)
        self.small = small
        self.max_items = max_items
        self.make_large = make_large        # n -> _Large (counts above max_items)
        self.large: dict = {}               # n -> _Large, kept for SHAPES_KEPT counts
        self.device_id = device_id
        lib = libs[0]
        self.apart = lib.apart if all(x is lib for x in libs) else None
        self.last: Optional[tuple] = None       # the last arrays that passed (weakly)
        # where a tensor's memory is (PyTorch only) and where the last ones' was
        self.place = _tensor_place if lib.name == "torch" else None
        self.places: tuple = ()
        self.fits = 0

    def call(self, temp, keys, uniq, vals, aggs, runs, n, stream) -> int:
        if type(n) is not int or not 0 < n < NARROW or self.epoch != epoch():
            return 0
        last, place = self.last, self.place
        same = last is not None and last[0]() is keys and last[1]() is uniq and \
            last[2]() is vals and last[3]() is aggs and last[4]() is runs
        if place is None or not same or n > self.fits or \
                self.places != (place(keys), place(uniq), place(vals), place(aggs), place(runs)):
            lk, lu, lv, la, lr = self.libs
            sizes = (lk.vec(keys), lu.vec(uniq), lv.vec(vals), la.vec(aggs))
            if min(sizes) < n or lr.vec(runs) < 1:
                return 0
            if not same or place is not None:
                if not self._apart(keys, uniq, vals, aggs, runs):
                    return 0
                self.fits = min(sizes)
        if self.device >= 0 and not self.on_device((keys, uniq, vals, aggs, runs)):
            return 0
        if n <= self.max_items:
            if temp is None:
                return 1
            if self.temp_at(temp, 1) < 0:
                return 0
            self.small.launch(None if self.host else stream, keys, vals, uniq, aggs, runs, n)
            return 1
        large = kept(self.large, n, SHAPES_KEPT, self.make_large, n)
        needed = large.needed
        if temp is None:
            return needed
        ptr = self.temp_at(temp, needed)
        if ptr < 0:
            return 0
        if self.host:
            large.go(None, host_views(temp, large.aliases), keys, vals, uniq, aggs, runs)
        else:
            large.go(stream, device_views(large.views, ptr, ptr, large.aliases, self.device_id),
                     keys, vals, uniq, aggs, runs)
        return needed

    def _apart(self, keys, uniq, vals, aggs, runs) -> bool:
        """Whether no output shares a byte with an input or another output (whole
        arrays); remembers the arrays (and tensors' places) when they pass."""
        apart = self.apart
        if apart is None:
            return False
        for out in (uniq, aggs, runs):
            if not apart(out, keys, 0) or not apart(out, vals, 0):
                return False
        if not apart(uniq, aggs, 0) or not apart(uniq, runs, 0) or not apart(aggs, runs, 0):
            return False
        arrays = (keys, uniq, vals, aggs, runs)
        self.last = tuple(map(_ref, arrays))
        if self.place is not None:
            self.places = tuple(map(self.place, arrays))
        return True


def _tensor_place(t: Any) -> tuple:
    """Where a PyTorch tensor's elements are: (pointer, shape, strides)."""
    return t.data_ptr(), t.shape, t.stride()


_sigs: dict[tuple, _Sig] = {}


def reduce_by_key(temp_storage, d_keys_in, d_unique_out, d_values_in, d_aggregates_out,
                  d_num_runs_out, op, num_items, stream=None) -> int:
    """DeviceReduce.reduce_by_key (module docstring)."""
    op = same_function(op)
    try:
        key = (type(d_keys_in), d_keys_in.dtype, type(d_unique_out), d_unique_out.dtype,
               type(d_values_in), d_values_in.dtype, type(d_aggregates_out),
               d_aggregates_out.dtype, type(d_num_runs_out), d_num_runs_out.dtype, op)
        sig = _sigs.get(key)
    except (AttributeError, TypeError):     # not arrays, an unhashable operator
        key = sig = None
    if sig is not None:
        got = sig.call(temp_storage, d_keys_in, d_unique_out, d_values_in, d_aggregates_out,
                       d_num_runs_out, num_items, stream)
        if got:
            return got
    return _general(temp_storage, d_keys_in, d_unique_out, d_values_in, d_aggregates_out,
                    d_num_runs_out, op, num_items, stream, key)


def _check_overlap(outs, ins) -> None:
    """ValueError when an output's elements overlap an input's or another output's."""
    spans = [(name, a, c, byte_span(a, c)[:2]) for name, a, c in ins + outs if c > 0]
    n_in = len([1 for _, _, c in ins if c > 0])
    for i in range(n_in, len(spans)):
        name, _, _, (lo, hi) = spans[i]
        for j in range(i):
            other, _, _, (lo2, hi2) = spans[j]
            if lo < hi2 and lo2 < hi:
                raise ValueError(f'Invalid argument "{name}": it overlaps "{other}" (expected '
                                 f"separate arrays: reduce_by_key is not in place)")


def _general(temp_storage, d_keys_in, d_unique_out, d_values_in, d_aggregates_out,
             d_num_runs_out, op, num_items, stream, key: Optional[tuple]) -> int:
    """The general path: every argument checked (the errors raised before any
    launch, so nothing is written); the call's signature cached under `key`
    once they passed (counts under 2^31, a 1-d count output)."""
    a_keys = describe(d_keys_in, "d_keys_in")
    a_uniq = describe(d_unique_out, "d_unique_out")
    a_vals = describe(d_values_in, "d_values_in")
    a_aggs = describe(d_aggregates_out, "d_aggregates_out")
    a_runs = as_1d_output(describe(d_num_runs_out, "d_num_runs_out"), "d_num_runs_out")
    named = [("d_keys_in", a_keys), ("d_unique_out", a_uniq), ("d_values_in", a_vals),
             ("d_aggregates_out", a_aggs), ("d_num_runs_out", a_runs)]
    host = same_side(named)
    for name, a in named[:4]:
        check_1d(a, name)
    check_dtype(a_keys, "d_keys_in", KEY_DTYPES)
    check_dtype(a_uniq, "d_unique_out", KEY_DTYPES)
    check_dtype(a_vals, "d_values_in", NUMERIC)
    check_dtype(a_aggs, "d_aggregates_out", NUMERIC)
    n = check_num_items(num_items, a_keys, array="d_keys_in")
    check_count_output(a_runs, "d_num_runs_out", n, "num_items runs")
    check_num_items(num_items, a_vals, array="d_values_in")
    for name, a in (("d_unique_out", a_uniq), ("d_aggregates_out", a_aggs)):
        if a.size < n:
            raise ValueError(f'Invalid argument "{name}": expected room for num_items = {n} '
                             f"runs (the most there can be), got {a.size} elements")
    name = op_name(op)
    check_operand_dtype(name, a_vals.dtype, "d_values_in") if name is not None else None
    # whole arrays, as every launch checks them (tilecore.launch: an array a kernel writes
    # shares no memory with another argument), so that the error names the API's arguments
    _check_overlap([(nm, a, a.size) for nm, a in (("d_unique_out", a_uniq),
                                                  ("d_aggregates_out", a_aggs),
                                                  ("d_num_runs_out", a_runs))],
                   [("d_keys_in", a_keys, a_keys.size), ("d_values_in", a_vals, a_vals.size)])
    target = interpreter_target() if host else \
        device_target(next(a.device_id for _, a in named if a.device_id >= 0))
    acc = op_accumulator(a_vals.dtype, name)
    policy = select_reduce_by_key_policy(target.cc, {
        "key_size": a_keys.dtype.itemsize, "value_size": a_vals.dtype.itemsize,
        "accum": acc.name, "op": name or "user"})
    small = _Small(policy, a_vals.dtype, name, op, host)

    def make_large(count: int) -> _Large:
        return _Large(policy, target, a_vals.dtype, op, count)

    if a_runs.obj is d_num_runs_out and n < NARROW:   # (a 0-d count is viewed as 1-d: not cached)
        objs = (d_keys_in, d_unique_out, d_values_in, d_aggregates_out, d_num_runs_out)
        remember(_sigs, key, objs, lambda libs: _Sig(small, policy.small_max_items, make_large,
                                                     libs, target.device_id))
    if n <= policy.small_max_items:     # one launch, no temporary storage
        needed = Layout(0).size()
        if temp_storage is not None:
            check_size(needed, temp_buffer(temp_storage, host, target.device_id).nbytes)
            if n:
                small.launch(None if host else stream, a_keys.obj, a_vals.obj, a_uniq.obj,
                             a_aggs.obj, a_runs.obj, n)
            else:                         # only the count, 0
                ct.launch(None if host else stream, (1,), kernel_for(K.rbk_zero, 32),
                          (a_runs.obj,))
        return needed
    large = make_large(n)
    if temp_storage is None:
        return large.needed
    buf = temp_buffer(temp_storage, host, target.device_id)
    check_size(large.needed, buf.nbytes)
    views = host_views(buf.host, large.aliases) if host else \
        views_at(buf.ptr, large.aliases, buf.device_id)
    large.go(None if host else stream, views, a_keys.obj, a_vals.obj, a_uniq.obj, a_aggs.obj,
             a_runs.obj)
    return large.needed
