"""Matrix transpose with tile-space loads: the input tile is read with
order=(1, 0), so it arrives already transposed, over a 2-D grid of blocks.

    python examples/transpose.py
"""
import numpy as np

import tilecore as ct
from _device import backend


@ct.kernel
def transpose(a, out, TM: ct.Constant[int], TN: ct.Constant[int]):
    i, j = ct.bid(0), ct.bid(1)
    # tile (TN, TM) of a's transpose: tile axis 0 walks a's axis 1, tile axis 1 a's axis 0
    t = ct.load(a, index=(j, i), shape=(TN, TM), order=(1, 0), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, index=(j, i), tile=t)


def main() -> None:
    where, dev, host, stream = backend()
    m, n, tm, tn = 100, 70, 32, 16
    a = np.arange(m * n, dtype=np.int32).reshape(m, n)
    out = dev(np.zeros((n, m), np.int32))
    ct.launch(stream, (ct.cdiv(m, tm), ct.cdiv(n, tn)), transpose, (dev(a), out, tm, tn))
    np.testing.assert_array_equal(host(out), a.T)
    print(f"transpose on the {where}: {m} x {n} int32, correct")


if __name__ == "__main__":
    main()
