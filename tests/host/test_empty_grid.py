"""Empty grids: a grid with a zero extent (e.g. `cdiv(0, TILE)` for empty
inputs) runs no block on either backend, as CuPy and PyTorch do for empty
inputs, but the call is checked as any launch is. Negative extents stay
errors."""
import numpy as np
import pytest

import tilecore as ct
from tilecore.host.classify import normalize_grid


@ct.kernel
def scale(x, out, alpha, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, index=(bid,), tile=t * alpha)


@ct.kernel
def bad_store(x, out):
    ct.store(out, index=(0,), tile=ct.load(x, index=(0,), shape=(4,)))  # float into int


@pytest.mark.parametrize("grid,want", [
    ((0,), (0, 1, 1)), (0, (0, 1, 1)), ((3, 0), (3, 0, 1)), ((0, 0, 0), (0, 0, 0)),
    ([np.int64(0), 2], (0, 2, 1)), ((2**31 - 1, 65535, 0), (2**31 - 1, 65535, 0)),
])
def test_zero_extents_are_valid_grids(grid, want):
    assert normalize_grid(grid) == want
    assert normalize_grid(grid) == want  # memoized the same


@pytest.mark.parametrize("grid,shown", [((-1,), "(-1,)"), ((4, 0, -2), "(4, 0, -2)"),
                                        (-3, "(-3,)")])
def test_negative_extents_are_refused(grid, shown):
    with pytest.raises(ValueError) as info:
        normalize_grid(grid)
    assert str(info.value) == (f'Invalid argument "grid" of launch(): expected non-negative '
                               f"ints, got {shown}")


@pytest.mark.parametrize("grid", [(ct.cdiv(0, 256),), (4, 0), (2, 3, 0), 0])
@pytest.mark.parametrize("order", ["sequential", "random"])
def test_empty_grid_runs_no_block(monkeypatch, grid, order):
    monkeypatch.setenv("TILECORE_BLOCK_ORDER", order)
    x = np.arange(1.0, 9.0, dtype=np.float32)
    out = np.full(8, -1.0, np.float32)
    ct.launch(None, grid, scale, (x, out, 2.0, 8))
    np.testing.assert_array_equal(out, np.full(8, -1.0, np.float32))
    ct.launch(None, (1,), scale, (x, out, 2.0, 8))  # the same call with one block runs
    np.testing.assert_array_equal(out, 2 * x)


def test_empty_inputs_with_cdiv_grid():
    x, out = np.zeros(0, np.float32), np.zeros(0, np.float32)
    ct.launch(None, (ct.cdiv(x.size, 128),), scale, (x, out, 3.0, 128))


def test_empty_grid_still_checks_the_arguments():
    x, out = np.ones(8, np.float32), np.zeros(8, np.float32)
    with pytest.raises(TypeError, match=r"Kernel scale\(\) takes 4 argument\(s\) \(x, out, "
                                        r"alpha, TILE\), got 3"):
        ct.launch(None, (0,), scale, (x, out, 2.0))
    with pytest.raises(TypeError, match='Invalid kernel argument "x": NumPy dtype complex64 '
                                        "has no tilecore dtype"):
        ct.launch(None, (0,), scale, (x.astype(np.complex64), out, 2.0, 8))
    with pytest.raises(TypeError, match='Invalid kernel argument "alpha": expected an array'):
        ct.launch(None, (0,), scale, (x, out, "2", 8))
    with pytest.raises(ct.TileTypeError, match='Invalid argument "tile" of store'):
        ct.launch(None, (0,), bad_store, (x, np.zeros(8, np.int32)))
    with pytest.raises(ValueError, match='Invalid argument "grid"'):
        ct.launch(None, (0, -1), scale, (x, out, 2.0, 8))


@pytest.mark.gpu
def test_gpu_empty_grid_launches_nothing():
    cp = pytest.importorskip("cupy")
    x = cp.arange(1, 9, dtype=cp.float32)
    out = cp.full(8, -1, cp.float32)
    for _ in range(3):  # the general path, then the fast launcher it installs
        ct.launch(None, (0,), scale, (x, out, 2.0, 8))
        ct.launch(None, (1, 0), scale, (x, out, 2.0, 8))
    cp.cuda.Device().synchronize()
    np.testing.assert_array_equal(cp.asnumpy(out), np.full(8, -1, np.float32))
    for _ in range(3):  # with the fast launcher installed by a real launch
        ct.launch(None, (1,), scale, (x, out, 2.0, 8))
        out.fill(-1)
        ct.launch(None, (0,), scale, (x, out, 2.0, 8))
        cp.cuda.Device().synchronize()
        np.testing.assert_array_equal(cp.asnumpy(out), np.full(8, -1, np.float32))
    empty = cp.zeros(0, cp.float32)
    ct.launch(None, (ct.cdiv(0, 128),), scale, (empty, cp.zeros(0, cp.float32), 3.0, 128))
    cp.cuda.Device().synchronize()


@pytest.mark.gpu
def test_gpu_empty_grid_still_checks_the_arguments():
    cp = pytest.importorskip("cupy")
    x, out = cp.ones(8, cp.float32), cp.zeros(8, cp.float32)
    with pytest.raises(TypeError, match="got both host arrays"):
        ct.launch(None, (0,), scale, (x, np.zeros(8, np.float32), 2.0, 8))
    with pytest.raises(TypeError, match=r"takes 4 argument\(s\)"):
        ct.launch(None, (0,), scale, (x, out, 2.0))
    with pytest.raises(ct.TileTypeError, match='Invalid argument "tile" of store'):
        ct.launch(None, (0,), bad_store, (x, cp.zeros(8, cp.int32)))
    with pytest.raises(TypeError, match='Invalid argument "stream"'):
        ct.launch("stream", (0,), scale, (x, out, 2.0, 8))
