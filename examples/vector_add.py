"""c = a + b over a 1-D array whose length is not a multiple of the tile:
the last tile is partial, padded with zeros on load and clipped on store.

    python examples/vector_add.py
"""
import numpy as np

import tilecore as ct
from _device import backend


@ct.kernel
def vector_add(a, b, c, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    ta = ct.load(a, index=(bid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    tb = ct.load(b, index=(bid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(c, index=(bid,), tile=ta + tb)


def main() -> None:
    where, dev, host, stream = backend()
    n, tile = 10_000, 1024
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    c = dev(np.zeros(n, np.float32))
    ct.launch(stream, (ct.cdiv(n, tile),), vector_add, (dev(a), dev(b), c, tile))
    np.testing.assert_array_equal(host(c), a + b)
    print(f"vector_add on the {where}: {n} elements, {ct.cdiv(n, tile)} blocks, correct")


if __name__ == "__main__":
    main()
