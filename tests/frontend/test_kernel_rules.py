"""Host-side rules of kernels and launches: argument count and kinds, grid,
overlapping arrays, direct calls, kernel options and ByTarget, run-time
errors; the worked examples of seed 004; random block order."""
import numpy as np
import pytest

import tilecore as ct
from frontend_helpers import RNG, run


@ct.kernel
def copy_k(x, y):
    ct.store(y, (ct.bid(0),), ct.load(x, (ct.bid(0),), (4,)))


def test_wrong_number_of_arguments():
    with pytest.raises(TypeError) as info:
        ct.launch(None, (1,), copy_k, (np.zeros(4),))
    assert str(info.value) == "Kernel copy_k() takes 2 argument(s) (x, y), got 1"


def test_kernel_args_must_be_a_tuple():
    with pytest.raises(TypeError, match='Invalid argument "kernel_args" of launch\\(\\): expected '
                                        "a tuple, got dict"):
        ct.launch(None, (1,), copy_k, {"x": 1})


def test_wrong_kind_of_argument():
    with pytest.raises(TypeError) as info:
        ct.launch(None, (1,), copy_k, (np.zeros(4), "y"))
    assert str(info.value) == (
        'Invalid kernel argument "y": expected an array (NumPy for the interpreter, or a device '
        "array with DLPack / __cuda_array_interface__), a number or a dtype, got str")
    with pytest.raises(TypeError, match='Invalid kernel argument "y": tuples cannot be kernel '
                                        "parameters unless the parameter is annotated Constant"):
        ct.launch(None, (1,), copy_k, (np.zeros(4), (1, 2)))
    with pytest.raises(TypeError, match='Invalid kernel argument "y": NumPy dtype complex64 has '
                                        "no tilecore dtype"):
        ct.launch(None, (1,), copy_k, (np.zeros(4), np.zeros(4, np.complex64)))


def test_array_used_as_scalar_is_a_compile_error():
    with pytest.raises(ct.TileTypeError, match='Invalid argument "array" of store\\(\\): expected '
                                               "an array \\(a kernel parameter\\), got an int32 "
                                               "scalar"):
        ct.launch(None, (1,), copy_k, (np.zeros(4), 3))


@pytest.mark.parametrize("grid,cls,msg", [
    ((4, -1), ValueError, 'Invalid argument "grid" of launch(): expected non-negative ints, '
                          "got (4, -1)"),
    ((1, 2, 3, 4), TypeError, 'Invalid argument "grid" of launch(): expected a tuple of 1 to 3 '
                              "non-negative ints, got (1, 2, 3, 4)"),
    ((1.0,), TypeError, 'Invalid argument "grid" of launch(): expected a tuple of 1 to 3 '
                        "non-negative ints, got (1.0,)"),
    ((True,), TypeError, 'Invalid argument "grid" of launch(): expected a tuple of 1 to 3 '
                         "non-negative ints, got (True,)"),
    ((1, 70000), ValueError, 'Invalid argument "grid" of launch(): (1, 70000) exceeds the grid '
                             "limits (x < 2**31, y and z < 65536)"),
])
def test_bad_grid(grid, cls, msg):
    with pytest.raises(cls) as info:
        ct.launch(None, grid, copy_k, (np.zeros(4), np.zeros(4)))
    assert str(info.value) == msg


def test_int_grid():
    y = np.zeros(8)
    ct.launch(None, 2, copy_k, (np.arange(8.0), y))
    np.testing.assert_array_equal(y, np.arange(8.0))


def test_overlapping_arrays():
    a = np.zeros(16)
    with pytest.raises(ValueError) as info:
        ct.launch(None, (1,), copy_k, (a[:8], a[4:12]))
    assert str(info.value) == ('Kernel arguments "x" and "y" overlap in memory, and the kernel '
                               'writes "y"; an array the kernel writes must share no memory with '
                               "another argument")
    run(copy_k, [a[:8], a[8:]])  # adjacent views do not overlap


def test_calling_a_kernel_directly():
    with pytest.raises(TypeError) as info:
        copy_k(np.zeros(4), np.zeros(4))
    assert str(info.value) == ("Kernel copy_k() cannot be called directly; launch it with "
                               "tilecore.launch(stream, grid, copy_k, args)")


def test_launch_needs_a_kernel():
    with pytest.raises(TypeError, match='Invalid argument "kernel" of launch\\(\\): expected a '
                                        "@tilecore.kernel, got function"):
        ct.launch(None, (1,), lambda: None, ())


def test_tile_functions_are_host_errors():
    with pytest.raises(TypeError, match=r"tilecore.load\(\) can only be called from tile code"):
        ct.load(np.zeros(4), (0,), (4,))
    assert ct.cdiv(10, 4) == 3


def test_kernel_signature_rules():
    with pytest.raises(TypeError, match="parameter 'rest' must be a plain positional parameter"):
        ct.kernel(_varargs)


def _varargs(x, *rest):
    pass


# --- kernel options ---------------------------------------------------------------------------
@pytest.mark.parametrize("options,cls,msg", [
    ({"num_ctas": 3}, ValueError, 'Invalid kernel option "num_ctas": expected a power of two in '
                                  "[1, 16], got 3"),
    ({"num_ctas": 32}, ValueError, 'Invalid kernel option "num_ctas": expected a power of two in '
                                   "[1, 16], got 32"),
    ({"num_ctas": 0}, ValueError, 'Invalid kernel option "num_ctas": expected a power of two in '
                                  "[1, 16], got 0"),
    ({"occupancy": 0}, ValueError, 'Invalid kernel option "occupancy": expected an int in '
                                   "[1, 32], got 0"),
    ({"occupancy": 33}, ValueError, 'Invalid kernel option "occupancy": expected an int in '
                                    "[1, 32], got 33"),
    ({"opt_level": 4}, ValueError, 'Invalid kernel option "opt_level": expected an int in '
                                   "[0, 3], got 4"),
    ({"opt_level": -1}, ValueError, 'Invalid kernel option "opt_level": expected an int in '
                                    "[0, 3], got -1"),
    ({"num_ctas": 2.0}, TypeError, 'Invalid kernel option "num_ctas": expected an int or '
                                   "ByTarget, got float 2.0"),
    ({"occupancy": True}, TypeError, 'Invalid kernel option "occupancy": expected an int or '
                                     "ByTarget, got bool True"),
    ({"num_ctas": ct.ByTarget(sm_90=3, default=2)}, ValueError,
     'Invalid kernel option "num_ctas": expected a power of two in [1, 16], got 3'),
    ({"occupancy": ct.ByTarget(default=64)}, ValueError,
     'Invalid kernel option "occupancy": expected an int in [1, 32], got 64'),
    ({"fast": 1}, TypeError, 'Unknown kernel option "fast"; expected one of num_ctas, '
                             "num_threads, num_worker_warps, occupancy, opt_level, "
                             "vector_width"),
])
def test_kernel_option_validation(options, cls, msg):
    with pytest.raises(cls) as info:
        ct.kernel(**options)
    assert str(info.value) == msg


def test_valid_kernel_options():
    for n in (1, 2, 4, 8, 16):
        ct.kernel(num_ctas=n)(_plain)
    k = ct.kernel(_plain, occupancy=ct.ByTarget(sm_90=2, sm_100=32, default=1), opt_level=0)
    assert k.options.occupancy.get("sm_90") == 2
    assert k.options.occupancy.get("sm_90a") == 2
    assert k.options.occupancy.get("sm_80") == 1
    assert k.options.opt_level == 0
    assert ct.kernel(_plain).options.opt_level == 3
    with pytest.raises(ValueError, match='Invalid argument "gpu90" of ByTarget\\(\\): expected an '
                                         "architecture name like sm_90, got 'gpu90'"):
        ct.ByTarget(gpu90=1)


def _plain(x):
    pass


# --- seed 004: worked examples ------------------------------------------------------------------
@ct.kernel
def vec_add_view(a, b, c, TILE: ct.Constant[int]):
    a_view = a.tiled_view((TILE,))
    b_view = b.tiled_view((TILE,))
    c_view = c.tiled_view((TILE,))
    bid = ct.bid(0)
    a_tile = a_view.load((bid,))
    b_tile = b_view.load((bid,))
    c_view.store((bid,), a_tile + b_tile)


@ct.kernel
def vec_add(a, b, c, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    a_tile = ct.load(a, index=(bid,), shape=(TILE,))
    b_tile = ct.load(b, index=(bid,), shape=(TILE,))
    ct.store(c, index=(bid,), tile=a_tile + b_tile)


@ct.kernel
def edge_safe(arr_in, arr_out, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    tile = ct.load(arr_in, index=(bid,), shape=(TILE,),
                   padding_mode=ct.PaddingMode.ZERO)
    ct.store(arr_out, index=(bid,), tile=tile)


@ct.kernel
def vec_add_gather(a, b, c, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    indices = bid * TILE + ct.arange(TILE, dtype=ct.int32)
    a_tile = ct.gather(a, indices)
    b_tile = ct.gather(b, indices)
    ct.scatter(c, indices, a_tile + b_tile)


@ct.kernel
def tile_sum(arr, out, TILE: ct.Constant[int], N_TILES: ct.Constant[int]):
    acc = ct.zeros((TILE,), dtype=ct.float32)
    for k in range(N_TILES):
        tile = ct.load(arr, index=(k,), shape=(TILE,))
        acc = acc + tile
    ct.store(out, index=(0,), tile=acc)


@ct.kernel
def conditional_load(arr, out, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    if bid < ct.num_blocks(0) - 1:
        tile = ct.load(arr, index=(bid,), shape=(TILE,))
    else:
        tile = ct.zeros((TILE,), dtype=ct.float32)
    ct.store(out, index=(bid,), tile=tile)


def test_seed_vec_add_tiled_view():
    a, b = RNG.random(128).astype(np.float32), RNG.random(128).astype(np.float32)
    c = np.zeros(128, np.float32)
    run(vec_add_view, [a, b, c, 8], grid=(16,))
    np.testing.assert_array_equal(c, a + b)


def test_seed_vec_add_one_call():
    n = 1000
    a, b = RNG.random(n).astype(np.float32), RNG.random(n).astype(np.float32)
    c = np.zeros(n, np.float32)
    run(vec_add, [a, b, c, 128], grid=(ct.cdiv(n, 128),))
    np.testing.assert_array_equal(c, a + b)


def test_seed_edge_safe():
    x = RNG.random(300).astype(np.float32)
    y = np.zeros(300, np.float32)
    run(edge_safe, [x, y, 128], grid=(3,))
    np.testing.assert_array_equal(y, x)


def test_seed_vec_add_gather():
    a, b = RNG.integers(-9, 9, 20).astype(np.int32), RNG.integers(-9, 9, 20).astype(np.int32)
    c = np.zeros(20, np.int32)
    run(vec_add_gather, [a, b, c, 8], grid=(3,))     # last block partly out of bounds
    np.testing.assert_array_equal(c, a + b)


def test_seed_tile_sum():
    x = RNG.random(64).astype(np.float32)
    out = np.zeros(8, np.float32)
    run(tile_sum, [x, out, 8, 8])
    np.testing.assert_allclose(out, x.reshape(8, 8).astype(np.float64).sum(0), rtol=1e-6)


def test_seed_conditional_load():
    x = RNG.random(40).astype(np.float32)
    out = np.full(40, 7, np.float32)
    run(conditional_load, [x, out, 8], grid=(5,))
    np.testing.assert_array_equal(out[:32], x[:32])
    np.testing.assert_array_equal(out[32:], 0)


# --- random block order ------------------------------------------------------------------------
@ct.kernel
def rowwise(x, y, N: ct.Constant[int]):
    r = ct.bid(0)
    t = ct.load(x, (r, 0), (1, N), padding_mode=ct.PaddingMode.NEG_INF)
    m = ct.max(t, axis=1, keepdims=True)
    e = ct.exp(t - m)
    ct.store(y, (r, 0), e / ct.sum(e, axis=1, keepdims=True))


def test_random_block_order_same_result(monkeypatch):
    x = RNG.standard_normal((9, 100)).astype(np.float32)
    y1, y2 = np.zeros_like(x), np.zeros_like(x)
    monkeypatch.setenv("TILECORE_BLOCK_ORDER", "sequential")
    run(rowwise, [x, y1, 128], grid=(9,))
    monkeypatch.setenv("TILECORE_BLOCK_ORDER", "random")
    run(rowwise, [x, y2, 128], grid=(9,))
    np.testing.assert_array_equal(y1, y2)
    ref = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(y1, ref / ref.sum(1, keepdims=True), rtol=1e-5)
    a, b = RNG.random(1000).astype(np.float32), RNG.random(1000).astype(np.float32)
    c = np.zeros(1000, np.float32)
    run(vec_add_gather, [a, b, c, 16], grid=(63,))
    np.testing.assert_array_equal(c, a + b)
