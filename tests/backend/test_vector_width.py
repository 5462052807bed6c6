"""The `vector_width` kernel option (tilecore's own): the consecutive tile
elements a thread holds together. By default 16 bytes of the narrowest array
element, so 8-byte data beside int32 codes sit in 4-item (32-byte) chunks;
vector_width=2 gives them 16-byte chunks (the int32 codes 8-byte ones). The
results are the same (the tile's scan here sums small integers: exact in any
association)."""
import numpy as np
import pytest

import tilecore as ct

TILE = 4096


def _scaled_cumsum(codes, x, y, T: ct.Constant[int]):
    """y = the running sum of x * codes within each tile (codes int32, x and y
    float64; the last tile may be partial)."""
    c = ct.load(codes, (ct.bid(0),), (T,), padding_mode=ct.PaddingMode.ZERO)
    v = ct.load(x, (ct.bid(0),), (T,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, (ct.bid(0),), ct.cumsum(v * ct.astype(c, ct.float64), 0))


default_chunks = ct.kernel(_scaled_cumsum, num_threads=128)
chunks_of_two = ct.kernel(_scaled_cumsum, num_threads=128, vector_width=2)
by_target = ct.kernel(_scaled_cumsum, num_threads=128,
                      vector_width=ct.ByTarget(sm_90=2, default=8))


def _inputs(n):
    rng = np.random.default_rng(7)
    return rng.integers(-3, 4, n).astype(np.int32), rng.integers(-50, 50, n).astype(np.float64)


def _want(codes, x):
    prod = x * codes
    out = np.empty_like(prod)
    for s in range(0, prod.size, TILE):
        out[s:s + TILE] = np.cumsum(prod[s:s + TILE])
    return out


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_chunks_follow_the_option(arch):
    codes, x = _inputs(2 * TILE)
    args = (codes, x, np.empty_like(x), TILE)
    default = ct.compile(default_chunks, args, arch=arch).source
    two = ct.compile(chunks_of_two, args, arch=arch).source
    assert f"tc::elem<{TILE}, 128, 4>" in default and f"tc::elem<{TILE}, 128, 2>" not in default
    assert f"tc::elem<{TILE}, 128, 2>" in two and f"tc::elem<{TILE}, 128, 4>" not in two
    assert "tc::Vec<double, 2>" in two and "tc::Vec<int, 2>" in two
    assert "tc::Vec<int, 4>" in default
    per_arch = ct.compile(by_target, args, arch=arch).source
    assert f"tc::elem<{TILE}, 128, {2 if arch == 'sm_90' else 8}>" in per_arch


@pytest.mark.parametrize("kernel", [default_chunks, chunks_of_two, by_target],
                         ids=["default", "two", "by_target"])
@pytest.mark.parametrize("n", [3 * TILE, 3 * TILE - 5, 1])
def test_result_in_the_interpreter(kernel, n):
    codes, x = _inputs(n)
    y = np.zeros_like(x)
    ct.launch(None, (ct.cdiv(n, TILE),), kernel, (codes, x, y, TILE))
    np.testing.assert_array_equal(y, _want(codes, x))


@pytest.mark.parametrize("value, cls, msg", [
    (3, ValueError, 'Invalid kernel option "vector_width": expected a power of two in [1, 16], '
                    "got 3"),
    (32, ValueError, 'Invalid kernel option "vector_width": expected a power of two in '
                     "[1, 16], got 32"),
    ("2", TypeError, 'Invalid kernel option "vector_width": expected an int or ByTarget, '
                     "got str '2'"),
])
def test_bad_values(value, cls, msg):
    with pytest.raises(cls) as info:
        ct.kernel(_scaled_cumsum, vector_width=value)
    assert str(info.value) == msg


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", [default_chunks, chunks_of_two], ids=["default", "two"])
@pytest.mark.parametrize("n", [3 * TILE, 3 * TILE - 5, 1])
def test_result_on_the_gpu(kernel, n):
    cp = pytest.importorskip("cupy")
    codes, x = _inputs(n)
    y = cp.full(n + 3, -1, cp.float64)[:n]
    ct.launch(None, (ct.cdiv(n, TILE),), kernel, (cp.asarray(codes), cp.asarray(x), y, TILE))
    np.testing.assert_array_equal(cp.asnumpy(y), _want(codes, x))
    assert bool((y.base[n:] == -1).all())              # nothing written past the end
