"""Tiles wholly outside their array: a load reads only padding and a store
writes nothing, as on the GPU (grids that overshoot the data are common).

Launched through `tilecore.launch`, so each kernel is also compiled for
sm_80/sm_90 and, on a GPU machine, re-run there and compared (conftest); the
explicit GPU test at the end compares device results with the interpreter's.
"""
import warnings

import numpy as np
import pytest

import tilecore as ct
from tilecore import config
from tilecore.errors import TileRuntimeError
from tilecore.interpreter import OutOfBoundsTileWarning

T = 8  # tile size of the 1-D kernels


@ct.kernel
def copy_out(a, out, TILE: ct.Constant[int], PAD: ct.Constant[ct.PaddingMode]):
    """out[tile bid] = a[tile bid] (padded): out shows what every load of `a` read."""
    bid = ct.bid(0)
    ct.store(out, index=(bid,), tile=ct.load(a, index=(bid,), shape=(TILE,), padding_mode=PAD))


@ct.kernel
def shifted_copy(a, out, SHIFT: ct.Constant[int], TILE: ct.Constant[int]):
    """out[tile bid] = a[tile bid - SHIFT] (zero padding): negative tile indices."""
    bid = ct.bid(0)
    t = ct.load(a, index=(bid - SHIFT,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, index=(bid,), tile=t)


@ct.kernel
def add_one(a, out, TILE: ct.Constant[int]):
    """out[tile bid] = a[tile bid] + 1, each kernel line marked for the strict-mode test."""
    bid = ct.bid(0)
    t = ct.load(a, index=(bid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)  # LOAD
    ct.store(out, index=(bid,), tile=t + 1)  # STORE


def _padded(data: np.ndarray, size: int, pad) -> np.ndarray:
    """`data` followed by `pad` up to `size` elements (the hand-computed reference)."""
    want = np.full(size, pad, dtype=data.dtype)
    want[:data.size] = data
    return want


@pytest.mark.parametrize("dtype,mode,pad", [
    (np.float32, ct.PaddingMode.ZERO, 0.0),
    (np.float32, ct.PaddingMode.NEG_INF, -np.inf),
    (np.float32, ct.PaddingMode.NAN, np.nan),
    (np.float32, ct.PaddingMode.UNDETERMINED, np.nan),   # floats: NaN on both backends
    (np.float16, ct.PaddingMode.POS_INF, np.inf),
    (np.int32, ct.PaddingMode.ZERO, 0),
    (np.int32, ct.PaddingMode.UNDETERMINED, 2**31 - 1),  # integers: the dtype's max
    (np.uint8, ct.PaddingMode.UNDETERMINED, 255),
    (np.bool_, ct.PaddingMode.UNDETERMINED, True),
])
def test_overshooting_grid_loads_padding(dtype, mode, pad):
    a = (np.arange(1, 21) % 7).astype(dtype)        # 20 elements: tiles 0-1 full, 2 partial
    grid = 6                                        # tiles 3, 4, 5 lie wholly outside `a`
    out = np.zeros(grid * T, dtype)
    ct.launch(None, (grid,), copy_out, (a, out, T, mode))
    np.testing.assert_array_equal(out, _padded(a, grid * T, pad))


def test_overshooting_grid_drops_stores():
    a = np.arange(100, 140, dtype=np.int64)         # the source covers the whole grid
    out = np.full(13, -1, np.int64)                 # 1.6 tiles: blocks 2..4 store nowhere
    ct.launch(None, (5,), copy_out, (a, out, T, ct.PaddingMode.ZERO))
    np.testing.assert_array_equal(out, a[:13])


def test_negative_tile_indices_read_padding():
    a = np.arange(1.0, 17.0)                        # two tiles
    out = np.full(5 * T, 9.0)
    ct.launch(None, (5,), shifted_copy, (a, out, 2, T))  # reads tiles -2, -1, 0, 1, 2
    np.testing.assert_array_equal(out, np.concatenate([np.zeros(2 * T), a, np.zeros(T)]))


def test_empty_array_loads_padding_and_drops_stores():
    a, sink = np.zeros(0, np.float32), np.zeros(0, np.float32)
    out = np.full(2 * T, 5.0, np.float32)
    ct.launch(None, (2,), copy_out, (a, out, T, ct.PaddingMode.NEG_ZERO))
    assert np.all(out == 0) and np.all(np.signbit(out))       # -0.0 everywhere
    ct.launch(None, (2,), copy_out, (out.copy(), sink, T, ct.PaddingMode.ZERO))  # no error


@ct.kernel
def transpose_tiles(a, out, TM: ct.Constant[int], TN: ct.Constant[int]):
    """out tile (i, j) = transposed tile (j, i) of a (order=(1, 0) load)."""
    i, j = ct.bid(0), ct.bid(1)
    t = ct.load(a, index=(i, j), shape=(TM, TN), order=(1, 0), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, index=(i, j), tile=t)


def test_2d_overshooting_grid_with_transposed_loads():
    rng = np.random.default_rng(7)
    a = rng.integers(1, 100, size=(6, 10)).astype(np.int32)   # a.T is 10 x 6
    out = np.full((5 * 4, 3 * 8), -1, np.int32)               # grid (5, 3): tiles of 4 x 8
    ct.launch(None, (5, 3), transpose_tiles, (a, out, 4, 8))
    want = np.zeros_like(out)
    want[:10, :6] = a.T
    np.testing.assert_array_equal(out, want)


@ct.kernel
def view_copy(a, out, TILE: ct.Constant[int], STEP: ct.Constant[int]):
    """TiledView load/store with traversal steps that overshoot the array."""
    bid = ct.bid(0)
    src = a.tiled_view((TILE,), padding_mode=ct.PaddingMode.NEG_INF, traversal_steps=(STEP,))
    dst = out.tiled_view((TILE,), traversal_steps=(TILE,))
    dst.store((bid,), src.load((bid,)))


def test_tiled_view_overshooting_grid():
    a = np.arange(1.0, 11.0, dtype=np.float32)      # steps of 6: views 0, 1 inside; 2..3 out
    out = np.zeros(4 * T, np.float32)
    ct.launch(None, (4,), view_copy, (a, out, T, 6))
    want = np.full(4 * T, -np.inf, np.float32)
    for v in range(4):
        for k in range(T):
            if v * 6 + k < a.size:
                want[v * T + k] = a[v * 6 + k]
    np.testing.assert_array_equal(out, want)
    small = np.full(T, 3.0, np.float32)             # stores of views 1..3 drop
    ct.launch(None, (4,), view_copy, (a, small, T, 6))
    np.testing.assert_array_equal(small, a[:T])


@ct.kernel
def unchecked_copy(a, out, i, TILE: ct.Constant[int]):
    t = ct.load(a, index=(i,), shape=(TILE,), check_bounds=False)
    ct.store(out, index=(0,), tile=t)


@pytest.mark.interpreter_only
@pytest.mark.parametrize("index,what", [(2, "partly"), (3, "entirely"), (-1, "entirely")])
def test_check_bounds_false_outside_is_an_error(index, what):
    """check_bounds=False promises every tile inside (the GPU does not check):
    the interpreter reports a broken promise instead of padding."""
    a, out = np.arange(20, dtype=np.float32), np.zeros(T, np.float32)
    ct.launch(None, (1,), unchecked_copy, (a, out, 1, T))      # inside: fine
    np.testing.assert_array_equal(out, a[T:2 * T])
    with pytest.raises(TileRuntimeError) as info:
        ct.launch(None, (1,), unchecked_copy, (a, out, index, T))
    assert info.value.message == (
        f'load(): tile ({index},) of shape ({T},) is {what} out of bounds of array "a" '
        f"with shape (20,), but check_bounds=False promised it in bounds (block (0, 0, 0))")


def _kernel_line(marker: str) -> int:
    lines = open(__file__).read().splitlines()
    return next(i + 1 for i, text in enumerate(lines) if text.endswith(f"# {marker}"))


@pytest.mark.interpreter_only
def test_strict_bounds_warns_once_per_op_and_launch(monkeypatch):
    monkeypatch.setenv("TILECORE_STRICT_BOUNDS", "1")
    a, out = np.arange(12, dtype=np.int32), np.zeros(16, np.int32)
    for _ in range(2):                                # each launch reports again
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ct.launch(None, (7,), add_one, (a, out, T))  # tiles 2..6 of a, 2..6 of out: outside
        assert [w.category for w in caught] == [OutOfBoundsTileWarning] * 2
        load, store = caught
        assert (load.filename, load.lineno) == (__file__, _kernel_line("LOAD"))
        assert (store.filename, store.lineno) == (__file__, _kernel_line("STORE"))
        assert str(load.message).startswith(
            'load(): tile (2,) of shape (8,) is entirely out of bounds of array "a" with shape '
            "(12,) (block (2, 0, 0)): the load reads only padding; reported for the first such "
            f"tile of this load in the launch ({__file__}:{_kernel_line('LOAD')}:")
        assert str(store.message).startswith(
            'store(): tile (2,) of shape (8,) is entirely out of bounds of array "out" with shape '
            "(16,) (block (2, 0, 0)): the store writes nothing;")
    np.testing.assert_array_equal(out, np.concatenate([a + 1, np.ones(4, np.int32)]))


@pytest.mark.interpreter_only
def test_strict_bounds_off_by_default_and_silent_inside(monkeypatch):
    a, out = np.arange(12, dtype=np.int32), np.zeros(16, np.int32)
    monkeypatch.delenv("TILECORE_STRICT_BOUNDS", raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ct.launch(None, (7,), add_one, (a, out, T))    # outside tiles, strict mode off
        monkeypatch.setenv("TILECORE_STRICT_BOUNDS", "1")
        ct.launch(None, (2,), add_one, (a, out, T))    # strict, but no tile wholly outside


@pytest.mark.interpreter_only
def test_strict_bounds_warning_can_be_made_an_error(monkeypatch):
    monkeypatch.setenv("TILECORE_STRICT_BOUNDS", "yes")
    a, out = np.arange(12, dtype=np.int32), np.zeros(16, np.int32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", OutOfBoundsTileWarning)
        with pytest.raises(OutOfBoundsTileWarning, match=r'tile \(2,\) .* array "a"'):
            ct.launch(None, (3,), add_one, (a, out, T))


def test_strict_bounds_variable_is_validated(monkeypatch):
    monkeypatch.setenv("TILECORE_STRICT_BOUNDS", "maybe")
    with pytest.raises(ValueError, match="Invalid value of TILECORE_STRICT_BOUNDS: expected "
                                         "one of 1, 0, true, false, yes, no, on, off, got "
                                         "'maybe'"):
        config.strict_bounds()
    with pytest.raises(ValueError, match="TILECORE_STRICT_BOUNDS"):
        ct.launch(None, (1,), add_one, (np.zeros(8, np.int32), np.zeros(8, np.int32), T))


@pytest.mark.gpu
def test_gpu_and_interpreter_agree_on_an_overshooting_grid():
    cp = pytest.importorskip("cupy")
    rng = np.random.default_rng(3)
    a = rng.standard_normal(37).astype(np.float32)         # 4 full tiles and 5 elements
    for mode in (ct.PaddingMode.UNDETERMINED, ct.PaddingMode.NEG_INF, ct.PaddingMode.ZERO):
        host = np.zeros(11 * T, np.float32)
        ct.launch(None, (11,), copy_out, (a, host, T, mode))
        dev = cp.zeros(11 * T, cp.float32)
        ct.launch(None, (11,), copy_out, (cp.asarray(a), dev, T, mode))
        cp.cuda.Device().synchronize()
        np.testing.assert_array_equal(cp.asnumpy(dev), host)   # NaN == NaN here
    out = cp.full(13, -1, cp.int64)                             # stores past the end drop
    ct.launch(None, (5,), copy_out, (cp.arange(100, 140, dtype=cp.int64), out, T,
                                     ct.PaddingMode.ZERO))
    np.testing.assert_array_equal(cp.asnumpy(out), np.arange(100, 113))
