"""Single-pass inclusive scan of a whole array with decoupled look-back
(Merrill and Garland, 2016), the kernel the device-wide scan grows from.

Blocks take tile numbers from an atomic counter, in the order they ask: a
block only ever waits for tiles taken earlier, by blocks that are already
running, so the protocol cannot deadlock however the GPU schedules blocks.
A tile's block reduces it, publishes the tile's aggregate (status AGGREGATE),
then looks back over its predecessors' status words a window at a time (the
first look is issued before the tile's scan, so that its latency overlaps the
scan): it adds aggregates until it meets a tile whose inclusive prefix is
published (status PREFIX), adds that and stops; then it publishes its own
inclusive prefix, so later tiles rarely look back further than one window.

The grid is about the blocks the GPU holds at once (`Scanner(blocks=)`), and
a block takes tiles until the tickets run past the input, *loading its next
tile and publishing that tile's aggregate before it looks back for the one it
holds*. With one tile a block, every store waits for the slowest load among
the tiles before it and blocks move in lock-step waves while memory idles
between them (benchmarks/RESULTS.md, thirteenth session); a block that loads
ahead keeps memory busy while it waits, and by the time it looks back its
predecessors have long published their aggregates (H200, 2^24 int32: 61% of
the copy with one tile a block, 74% loading ahead; 2^27: 76% and 84%). The
ticket of the tile after next is drawn while the next tile loads (and the
second ticket while the first tile loads), so the atomic's round trip is not
on a tile's path either (+1-2%; the first: +0.3-0.5% at 2^24), and that tile
is prefetched into L2 at once (`ct.prefetch`, a tilecore extension): its load,
an iteration later, waits on L2 rather than memory, which keeps more of
memory's bandwidth in flight than the two tiles of registers a block holds
(H200, 2^27: 86% of the copy without the prefetch, 95% with it). No aggregate
waits for a look-back, and a look-back waits only for aggregates of smaller
tile numbers: still no deadlock.

A scan is one launch: the ticket word carries a launch number (epoch) beside
the ticket count, each block takes one ticket past the tiles (which ends it),
so the block taking ticket tiles + blocks - 1 is the last to take one and
starts the next epoch; status words carry the epoch of the scan that wrote
them, so the words of an earlier scan read as not yet published and nothing
needs clearing between scans (the scratch arrays are zeroed once, when
allocated). A status word holds the flag and the 32-bit value together, so
one relaxed 64-bit store publishes both and one relaxed load reads both: no
fence is needed, and none is paid for (values wider than 32 bits need a
separate value array, published by a release store of the flag and read after
an acquire load: see tests/host/test_gpu_atomics.py). Float sums fold in an
order that depends on timing (DeviceScan's float modes do not).

In the CPU interpreter blocks run one after another, so the first block takes
every tile and every look-back finds its predecessor's prefix at once: the
interpreter checks the arithmetic of the protocol, not its memory ordering
(that is what the GPU tests are for). A wait that nothing can end there is an
error, not a hang.

    python examples/lookback_scan.py
"""
from __future__ import annotations

import numpy as np

import tilecore as ct
from _device import backend

MO, MS = ct.MemoryOrder, ct.MemoryScope
INVALID, AGGREGATE, PREFIX = 0, 1, 2
EPOCH_MASK = (1 << 29) - 1    # status words and the ticket carry a 29-bit launch number


@ct.function
def status_word(epoch, flag, value):
    """A tile's status word: the launch's epoch in bits 34-62, the flag in bits 32-33,
    the value's bits in the low 32, so that one 64-bit access publishes or reads all
    three together. A word of another epoch (an earlier scan's) reads as INVALID, so
    the status array needs no clearing between scans."""
    return ((ct.full((1,), epoch, ct.int64) << 34) | (ct.full((1,), flag, ct.int64) << 32)
            | ct.bitcast(value, ct.uint32).astype(ct.int64))


@ct.function
def combine(ready_a, found_a, value_a, ready_b, found_b, value_b):
    """Fold (ready, prefix found, value) of consecutive tiles a and b: all ready,
    any prefix, and the sum of the values from the last prefix on. Associative,
    not commutative: the order of the tiles matters."""
    return (ct.minimum(ready_a, ready_b), ct.maximum(found_a, found_b),
            ct.where(found_b > 0, value_b, value_a + value_b))


@ct.function
def take_ticket(ticket, last):
    """(tile number, epoch) from the ticket word: this launch's epoch in its high
    32 bits, tickets taken in the low 32. The block taking ticket `last` (every
    block has taken all it ever will) starts the next launch's epoch (stream
    order makes the store visible to the next launch)."""
    taken = ct.atomic_add(ticket, 0, 1, memory_order=MO.RELAXED)
    t = (taken & 0xFFFFFFFF).astype(ct.int32)
    epoch = taken >> 32
    if t == last:
        ct.atomic_xchg(ticket, 0, ((epoch + 1) & EPOCH_MASK) << 32, memory_order=MO.RELAXED)
    return t, epoch


@ct.function
def exclusive_prefix(status, t, epoch, words, WINDOW, dtype):
    """Tile t's exclusive prefix from its predecessors' status words, a window at
    a time from the one holding tile t-1 (`words`, already in flight)."""
    end = t   # tiles [0, end) are still to be accounted for
    w = (end - 1) // WINDOW
    exclusive = ct.zeros((1,), dtype)
    while end > 0:
        live = w * WINDOW + ct.arange(WINDOW, dtype=ct.int32) < end
        flags = ct.where((words >> 34) == epoch, ((words >> 32) & 3).astype(ct.int32), INVALID)
        values = ct.bitcast((words & 0xFFFFFFFF).astype(ct.uint32), dtype)
        ready, found, part = ct.reduce(
            (ct.where(live, flags != INVALID, True).astype(ct.int32),
             ct.where(live & (flags == PREFIX), 1, 0), ct.where(live, values, 0)),
            0, combine, (1, 0, 0), keepdims=True)
        if ready.item() == 1:
            exclusive = exclusive + part
            end = ct.where(found.item() == 1, 0, w * WINDOW)
        if end > 0:   # a window not yet ready, or no prefix in it: look (further) again
            w = (end - 1) // WINDOW
            words = ct.load(status, (w,), (WINDOW,), memory_order=MO.RELAXED,
                            memory_scope=MS.DEVICE)
    return exclusive


@ct.kernel
def lookback_scan(x, y, ticket, status, TILE: ct.Constant[int], WINDOW: ct.Constant[int]):
    tiles = ct.cdiv(x.shape[0], TILE)
    last = tiles + ct.num_blocks(0) - 1      # each block takes one ticket past the tiles
    t, epoch = take_ticket(ticket, last)
    data = ct.load(x, (t,), (TILE,), padding_mode=ct.PaddingMode.ZERO)  # in flight first
    u = t
    if t < tiles:
        u, _ = take_ticket(ticket, last)      # the next tile's ticket, drawn a tile early
    total = ct.sum(data, 0, keepdims=True)   # the tile's aggregate, published at once
    if (t > 0) & (t < tiles):
        ct.store(status, (t,), status_word(epoch, AGGREGATE, total), memory_order=MO.RELAXED,
                 memory_scope=MS.DEVICE)
    while t < tiles:
        # the next tile first: loaded, and its aggregate published, before this one's
        # look-back; the ticket after it is drawn while that load is in flight
        ahead = ct.load(x, (u,), (TILE,), padding_mode=ct.PaddingMode.ZERO)
        v = u
        if u < tiles:
            v, _ = take_ticket(ticket, last)
            if v < tiles:                     # into L2 now, the next iteration loads it
                ct.prefetch(x, (v,), (TILE,))
        ahead_total = ct.sum(ahead, 0, keepdims=True)
        if u < tiles:
            ct.store(status, (u,), status_word(epoch, AGGREGATE, ahead_total),
                     memory_order=MO.RELAXED, memory_scope=MS.DEVICE)
        words = ct.load(status, (ct.maximum(t - 1, 0) // WINDOW,), (WINDOW,),
                        memory_order=MO.RELAXED, memory_scope=MS.DEVICE)  # in flight while
        scanned = ct.cumsum(data, 0)                                       # the tile is scanned
        exclusive = exclusive_prefix(status, t, epoch, words, WINDOW, y.dtype)
        ct.store(status, (t,), status_word(epoch, PREFIX, exclusive + total),
                 memory_order=MO.RELAXED, memory_scope=MS.DEVICE)
        ct.store(y, (t,), scanned + exclusive)
        t = u
        u = v
        data = ahead
        total = ahead_total


_KERNELS: dict = {}


def scan_kernel(tile: int, items_per_thread: int = 64):
    """The scan kernel for `tile` items, `items_per_thread` items per thread (at
    most 1024 threads)."""
    threads = min(1024, max(32, tile // items_per_thread))
    if threads not in _KERNELS:
        _KERNELS[threads] = ct.kernel(lookback_scan.pyfunc, num_threads=threads)
    return _KERNELS[threads]


def resident_blocks(per_sm: int = 2) -> int:
    """`per_sm` blocks for each SM of the current GPU (the default tile's kernel,
    which holds two tiles in registers, fits 2 an SM), or 4 without a GPU."""
    from tilecore.runtime.driver import has_gpu
    if not has_gpu():
        return 4
    from tilecore.runtime import current_device_ordinal, get_device
    return per_sm * get_device(current_device_ordinal()).sm_count


class Scanner:
    """Inclusive scans of up to `max_items` 32-bit numbers with one set of scratch
    arrays, zeroed once by `alloc`, in tiles of `tile` items, `items_per_thread` a
    thread, by a grid of at most `blocks` blocks (default: resident_blocks()).
    8192 and 64 (128 threads), 2 blocks an SM and windows of 32 status words ran
    fastest on the H200 from 2^24 to 2^28 (benchmarks/RESULTS.md, eighteenth and
    nineteenth sessions). One launch per scan (the epoch in the ticket word retires the
    previous scan's status words), safe to capture in a CUDA graph and replay (the
    epoch lives in device memory and advances on every launch)."""

    def __init__(self, max_items: int, tile: int = 8192, window: int = 32,
                 alloc=np.zeros, items_per_thread: int = 64, blocks: int | None = None):
        for name, value in (("tile", tile), ("window", window),
                            ("items_per_thread", items_per_thread)):
            if not isinstance(value, int) or value < 1 or value & (value - 1):
                raise ValueError(f'Invalid argument "{name}": expected a power of two, '
                                 f"got {value!r}")
        if blocks is not None and (not isinstance(blocks, int) or blocks < 1):
            raise ValueError(f'Invalid argument "blocks": expected an integer of at least 1, '
                             f"got {blocks!r}")
        self.tile = tile
        self.window = window
        self.kernel = scan_kernel(tile, items_per_thread)
        self.blocks = resident_blocks() if blocks is None else blocks
        tiles = max(1, ct.cdiv(max_items, self.tile))
        self.ticket = alloc(1, np.int64)
        self.status = alloc(ct.cdiv(tiles, window) * window, np.int64)
        self.max_items = max_items

    def __call__(self, x, y, stream=None) -> None:
        n = x.shape[0]
        if n > self.max_items:
            raise ValueError(f'Invalid argument "x": expected at most {self.max_items} items '
                             f"(the scanner's max_items), got {n}")
        if y.shape != x.shape:      # the last tile's store would run on into a longer y
            raise ValueError(f'Invalid argument "y": expected the shape of x, {x.shape}, '
                             f"got {y.shape}")
        if y.dtype != x.dtype or np.dtype(x.dtype).itemsize != 4:
            raise TypeError(f'Invalid argument "y": expected the dtype of x, a 32-bit type '
                            f"({np.dtype(x.dtype).name}), got {np.dtype(y.dtype).name}")
        if n:
            ct.launch(stream, (min(self.blocks, ct.cdiv(n, self.tile)),), self.kernel,
                      (x, y, self.ticket, self.status, self.tile, self.window))


def inclusive_scan(x, y, stream=None, tile: int = 8192, window: int = 32,
                   alloc=np.zeros, blocks: int | None = None):
    """y = cumsum(x) over a 1-D array of 32-bit numbers, with scratch arrays from `alloc`."""
    Scanner(x.shape[0], tile, window, alloc, blocks=blocks)(x, y, stream)


def main() -> None:
    where, dev, host, stream = backend()
    alloc = np.zeros
    if where == "GPU":
        import cupy as cp
        alloc = cp.zeros
    rng = np.random.default_rng(3)
    sizes = (1, 1025, 100_003) if where != "GPU" else (1, 1025, (1 << 20) + 7, 1 << 24)
    for n in sizes:
        for dtype in (np.int32, np.float32):
            x = rng.integers(-100, 100, n).astype(dtype) if dtype == np.int32 else \
                rng.standard_normal(n).astype(dtype)
            y = dev(np.zeros(n, dtype))
            inclusive_scan(dev(x), y, stream, alloc=alloc)
            got = host(y)
            if dtype == np.int32:
                np.testing.assert_array_equal(got, np.cumsum(x, dtype=np.int64).astype(np.int32))
            else:   # a chain of at most n / 1024 + 64 roundings per prefix (u = 2^-24)
                bound = (n / 1024 + 64) * 2.0 ** -24 * np.cumsum(np.abs(x.astype(np.float64)))
                assert (np.abs(got - np.cumsum(x.astype(np.float64))) <= bound).all()
            print(f"lookback_scan on the {where}: {n} {np.dtype(dtype).name}, correct")


if __name__ == "__main__":
    main()
