"""A kernel whose arrays differ in width: the kernel's vector width comes from
the narrowest (16 int8 items a chunk), and a wider array's chunk (16 float32
items, 64 bytes) is moved as several 16-byte vectors, not item by item."""
import numpy as np
import pytest

import tilecore as ct

TILE = 4096


@ct.kernel
def scale_by_codes(codes, x, y, T: ct.Constant[int]):
    """y = x * codes, a tile at a time (codes int8, x and y float32; the last
    tile may be partial)."""
    c = ct.load(codes, (ct.bid(0),), (T,), padding_mode=ct.PaddingMode.ZERO)
    v = ct.load(x, (ct.bid(0),), (T,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, (ct.bid(0),), v * ct.astype(c, ct.float32))


def _inputs(n):
    rng = np.random.default_rng(5)
    return (rng.integers(-100, 100, n).astype(np.int8),
            rng.standard_normal(n).astype(np.float32))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_wide_arrays_keep_16_byte_vectors_beside_int8(arch):
    codes, x = _inputs(4 * TILE)
    src = ct.compile(scale_by_codes, (codes, x, np.empty_like(x), TILE), arch=arch).source
    assert "tc::Vec<signed char, 16>" in src
    assert src.count("tc::Vec<float, 4>") >= 2          # the float load and store
    assert "arg1[c0]" not in src.split("else")[0]       # no item-by-item float load up front


@pytest.mark.parametrize("n", [3 * TILE, 3 * TILE - 5, 2 * TILE + 1])
def test_result_in_the_interpreter(n):
    codes, x = _inputs(n)
    y = np.zeros_like(x)
    ct.launch(None, (ct.cdiv(n, TILE),), scale_by_codes, (codes, x, y, TILE))
    np.testing.assert_array_equal(y, x * codes.astype(np.float32))


@pytest.mark.gpu
@pytest.mark.parametrize("n", [3 * TILE, 3 * TILE - 5, 2 * TILE + 1])
def test_result_on_the_gpu(n):
    """Whole tiles take the 16-byte vectors; a partial last tile, vectors while
    they are inside the arrays, then items."""
    cp = pytest.importorskip("cupy")
    codes, x = _inputs(n)
    y = cp.full(n + 7, -1, cp.float32)[:n]
    ct.launch(None, (ct.cdiv(n, TILE),), scale_by_codes, (cp.asarray(codes), cp.asarray(x), y,
                                                          TILE))
    np.testing.assert_array_equal(cp.asnumpy(y), x * codes.astype(np.float32))
    assert bool((y.base[n:] == -1).all())              # nothing written past the end
