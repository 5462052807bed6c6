"""Programmatic dependent launch (cuTile's spelling): a two-kernel pipeline in
which the second kernel starts before the first has finished.

`scale` lets the stream's next kernel start early
(`grid_dependency_control_launch_dependents`). `add_bias` is launched with
`programmatic_dependent_launch=True`: it loads `bias`, which no earlier kernel
writes, while `scale` still runs, and waits (`grid_dependency_control_wait`)
before it reads `scaled`, which `scale` writes. On sm_90 and newer the two
overlap; elsewhere, and in the CPU interpreter, they run one after the other
with the same results.

    python examples/dependent_launch.py
"""
import numpy as np

import tilecore as ct
from _device import backend


@ct.kernel
def scale(x, scaled, factor, TILE: ct.Constant[int]):
    ct.grid_dependency_control_launch_dependents()     # the next kernel may start now
    bid = ct.bid(0)
    t = ct.load(x, index=(bid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(scaled, index=(bid,), tile=t * factor)


@ct.kernel
def add_bias(scaled, bias, out, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    b = ct.load(bias, index=(bid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.grid_dependency_control_wait()                  # scale's writes are visible after this
    s = ct.load(scaled, index=(bid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, index=(bid,), tile=s + b)


def main() -> None:
    where, dev, host, stream = backend()
    n, tile, steps = 100_000, 1024, 8
    rng = np.random.default_rng(0)
    x0 = rng.integers(-100, 100, n).astype(np.float32)
    bias = rng.integers(-3, 4, n).astype(np.float32)
    x, scaled, d_bias = dev(x0.copy()), dev(np.zeros(n, np.float32)), dev(bias)
    grid = (ct.cdiv(n, tile),)
    for _ in range(steps):                  # x <- x * 1 + bias, eight times over
        ct.launch(stream, grid, scale, (x, scaled, np.float32(1.0), tile))
        ct.launch(stream, grid, add_bias, (scaled, d_bias, x, tile),
                  programmatic_dependent_launch=True)
    np.testing.assert_array_equal(host(x), x0 + steps * bias)
    print(f"dependent_launch on the {where}: {steps} scale + add_bias pairs over {n} "
          f"elements, each add_bias launched for early start, correct")


if __name__ == "__main__":
    main()
