"""A 256-bin histogram of uint8 samples with `atomic_add`.

Each block strides over the input a tile at a time and adds 1 to the bin of
every sample. The kernel only says that; the privatisation is the
compiler's (tilecore/ir/privatize.py): the samples are uint8, so the indices
lie in [0, 255], the old values are unused and nothing else in the kernel
touches `bins`, so each block counts into its own copy of the 256 bins in
shared memory (each thread first adding up its runs of equal samples, each
warp whose samples all fall in one bin adding them up together) and adds its
copy into `bins` once, when it ends: 256 global atomics per block instead of
one per sample.

    python examples/histogram.py
"""
import numpy as np

import tilecore as ct
from _device import backend


@ct.kernel
def histogram256(samples, bins, TILE: ct.Constant[int]):
    n = samples.shape[0]
    for t in range(ct.bid(0), ct.cdiv(n, TILE), ct.num_blocks(0)):
        x = ct.load(samples, (t,), (TILE,), padding_mode=ct.PaddingMode.ZERO)
        inside = t * TILE + ct.arange(TILE, dtype=ct.int32) < n   # the last tile is partial
        ct.atomic_add(bins, x, ct.where(inside, 1, 0), memory_order=ct.MemoryOrder.RELAXED)


def histogram(samples, bins, stream=None, tile: int = 4096, blocks: int = 1056) -> None:
    """bins += the count of each value 0..255 in `samples` (uint8)."""
    if np.dtype(samples.dtype) != np.uint8:
        raise TypeError(f'Invalid argument "samples": expected uint8, got '
                        f"{np.dtype(samples.dtype).name}")
    if len(bins.shape) != 1 or bins.shape[0] < 256:   # counts past its end would be dropped
        raise ValueError(f'Invalid argument "bins": expected a 1-D array of at least 256 '
                         f"counts, got shape {tuple(bins.shape)}")
    grid = max(1, min(blocks, ct.cdiv(samples.shape[0], tile)))
    ct.launch(stream, (grid,), histogram256, (samples, bins, tile))


def main() -> None:
    where, dev, host, stream = backend()
    rng = np.random.default_rng(2)
    n = 200_003 if where != "GPU" else (1 << 27) + 5
    for name, samples in (("uniform", rng.integers(0, 256, n).astype(np.uint8)),
                          ("all equal", np.full(n, 200, np.uint8)),
                          ("runs", np.repeat(rng.integers(0, 256, n // 50 + 1), 50)[:n]
                           .astype(np.uint8))):
        bins = dev(np.zeros(256, np.int32))
        histogram(dev(samples), bins, stream, blocks=8 if where != "GPU" else 1056)
        np.testing.assert_array_equal(host(bins), np.bincount(samples, minlength=256))
        print(f"histogram on the {where}: {n} {name} uint8 samples into 256 bins, correct")


if __name__ == "__main__":
    main()
