"""Single-pass inclusive scan of a whole array with decoupled look-back
(Merrill and Garland, 2016), the kernel the device-wide scan grows from.

Each block takes its tile number from an atomic counter, in the order blocks
start: a block only ever waits for tiles taken earlier, by blocks that are
already running, so the protocol cannot deadlock however the GPU schedules
blocks. The block reduces its tile, publishes the tile's aggregate (status
AGGREGATE), then looks back over its predecessors' status words a window at a
time (the first look is issued before the tile's scan, so that its latency
overlaps the scan): it adds aggregates until it meets a tile whose inclusive prefix is
published (status PREFIX), adds that and stops; then it publishes its own
inclusive prefix, so later tiles rarely look back further than one window.
A scan is one launch: the ticket word carries a launch number (epoch) beside
the ticket count, the block taking the last ticket starts the next epoch, and
status words carry the epoch of the scan that wrote them, so the words of an
earlier scan read as not yet published and nothing needs clearing between
scans (the scratch arrays are zeroed once, when allocated).
A status word holds the flag and the 32-bit value together, so one relaxed
64-bit store publishes both and one relaxed load reads both: no fence is
needed, and none is paid for (values wider than 32 bits need a separate value
array, published by a release store of the flag and read after an acquire
load: see tests/host/test_gpu_atomics.py).

In the CPU interpreter blocks run one after another in tile-number order, so
every look-back finds its predecessor's prefix at once: the interpreter checks
the arithmetic of the protocol, not its memory ordering (that is what the GPU
tests are for). A wait that nothing can end there is an error, not a hang.

    python examples/lookback_scan.py
"""
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


@ct.kernel
def lookback_scan(x, y, ticket, status, TILE: ct.Constant[int], WINDOW: ct.Constant[int]):
    # The ticket word: this launch's epoch in the high 32 bits, tickets taken in the low 32.
    taken = ct.atomic_add(ticket, 0, 1, memory_order=MO.RELAXED)
    t = (taken & 0xFFFFFFFF).astype(ct.int32)
    epoch = taken >> 32
    if t == ct.num_blocks(0) - 1:
        # the last ticket: every block has taken its own, so the word can start the next
        # launch's epoch (stream order makes the store visible to the next launch)
        ct.atomic_xchg(ticket, 0, ((epoch + 1) & EPOCH_MASK) << 32, memory_order=MO.RELAXED)
    data = ct.load(x, (t,), (TILE,), padding_mode=ct.PaddingMode.ZERO)
    total = ct.sum(data, 0, keepdims=True)   # the tile's aggregate, published at once
    if t > 0:
        ct.store(status, (t,), status_word(epoch, AGGREGATE, total), memory_order=MO.RELAXED,
                 memory_scope=MS.DEVICE)
    end = t   # tiles [0, end) are still to be accounted for
    w = (end - 1) // WINDOW
    words = ct.load(status, (w,), (WINDOW,), memory_order=MO.RELAXED,
                    memory_scope=MS.DEVICE)   # the first look at the predecessors, in flight
    scanned = ct.cumsum(data, 0)              # while the tile is scanned
    exclusive = ct.zeros((1,), y.dtype)
    while end > 0:
        live = w * WINDOW + ct.arange(WINDOW, dtype=ct.int32) < end
        flags = ct.where((words >> 34) == epoch, ((words >> 32) & 3).astype(ct.int32), INVALID)
        values = ct.bitcast((words & 0xFFFFFFFF).astype(ct.uint32), y.dtype)
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
    ct.store(status, (t,), status_word(epoch, PREFIX, exclusive + total),
             memory_order=MO.RELAXED, memory_scope=MS.DEVICE)
    ct.store(y, (t,), scanned + exclusive)


_KERNELS: dict = {}


def scan_kernel(tile: int, items_per_thread: int = 32):
    """The scan kernel for `tile` items, `items_per_thread` items per thread (at
    most 1024 threads; 32 a thread ran fastest on the H100, benchmarks/RESULTS.md)."""
    threads = min(1024, max(32, tile // items_per_thread))
    if threads not in _KERNELS:
        _KERNELS[threads] = ct.kernel(lookback_scan.pyfunc, num_threads=threads)
    return _KERNELS[threads]


class Scanner:
    """Inclusive scans of up to `max_items` 32-bit numbers with one set of scratch
    arrays, zeroed once by `alloc`, in tiles of `tile` items, `items_per_thread` a
    thread (32768 and 32, 1024 threads: the fastest at every size from 2^24 to 2^28
    on the H100, benchmarks/RESULTS.md): one launch per scan (the epoch in the
    ticket word retires the previous scan's status words), safe to capture in a
    CUDA graph and replay (the epoch lives in device memory and advances on every
    launch)."""

    def __init__(self, max_items: int, tile: int = 32768, window: int = 16,
                 alloc=np.zeros, items_per_thread: int = 32):
        self.tile = tile
        self.window = window
        self.kernel = scan_kernel(tile, items_per_thread)
        tiles = max(1, ct.cdiv(max_items, self.tile))
        self.ticket = alloc(1, np.int64)
        self.status = alloc(ct.cdiv(tiles, window) * window, np.int64)
        self.max_items = max_items

    def __call__(self, x, y, stream=None) -> None:
        n = x.shape[0]
        if n > self.max_items:
            raise ValueError(f'Invalid argument "x": expected at most {self.max_items} items '
                             f"(the scanner's max_items), got {n}")
        if n:
            ct.launch(stream, (ct.cdiv(n, self.tile),), self.kernel,
                      (x, y, self.ticket, self.status, self.tile, self.window))


def inclusive_scan(x, y, stream=None, tile: int = 32768, window: int = 16,
                   alloc=np.zeros):
    """y = cumsum(x) over a 1-D array of 32-bit numbers, with scratch arrays from `alloc`."""
    Scanner(x.shape[0], tile, window, alloc)(x, y, stream)


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
