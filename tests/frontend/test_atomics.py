"""ct.atomic_add/max/min/and/or/xor/xchg/cas and TiledView.atomic_store_*,
against NumPy. Every launch also compiles for sm_80 and sm_90 and, with a
GPU, runs there and must give the same arrays: so the tests that are not
marked interpreter_only only write results that do not depend on the order
in which concurrent updates land (final values of commutative operations,
old values of distinct addresses, exactly representable float sums)."""
import ml_dtypes
import numpy as np
import pytest

import tilecore as ct
from frontend_helpers import RNG, expect_error, run

INTS = [np.int32, np.int64, np.uint32, np.uint64]
FLOATS = [np.float16, ml_dtypes.bfloat16, np.float32, np.float64]
FNS = {"add": ct.atomic_add, "max": ct.atomic_max, "min": ct.atomic_min,
       "and": ct.atomic_and, "or": ct.atomic_or, "xor": ct.atomic_xor, "xchg": ct.atomic_xchg}
NUMPY = {"add": np.add, "max": np.maximum, "min": np.minimum, "and": np.bitwise_and,
         "or": np.bitwise_or, "xor": np.bitwise_xor, "xchg": lambda old, new: new}
DTYPES = {"add": INTS + FLOATS, "max": INTS, "min": INTS, "and": INTS, "or": INTS, "xor": INTS,
          "xchg": INTS + [np.float32, np.float64]}


def _values(dtype, n, low=0, high=1000):
    return RNG.integers(low, high, n).astype(dtype)


# --- one update per address: old values and results are exact ------------------------------------
@ct.kernel
def rmw_permuted(x, perm, upd, old, FN: ct.Constant, N: ct.Constant[int]):
    i = ct.load(perm, (0,), (N,))
    u = ct.load(upd, (0,), (N,))
    ct.store(old, (0,), FN(x, i, u))


@pytest.mark.parametrize("fn,dtype", [(f, d) for f in FNS for d in DTYPES[f]])
def test_rmw_on_distinct_indices(fn, dtype):
    n = 64
    x = _values(dtype, n)
    x0 = x.copy()
    perm = RNG.permutation(n).astype(np.int32)
    upd = _values(dtype, n)
    old = np.zeros(n, dtype)
    run(rmw_permuted, [x, perm, upd, old, FNS[fn], n])
    np.testing.assert_array_equal(old, x0[perm])
    expect = x0.copy()
    expect[perm] = NUMPY[fn](x0[perm], upd)
    np.testing.assert_array_equal(x, expect)


@ct.kernel
def rmw_2d(x, out):
    rows = ct.arange(4, dtype=ct.int32)[:, None]          # (4, 1)
    cols = ct.arange(8, dtype=ct.int64)[None, :] * 2      # (1, 8): the even columns
    ct.store(out, (0, 0), ct.atomic_add(x, (rows, cols), 10))   # a scalar update, broadcast


def test_rmw_2d_broadcast_indices_and_scalar_update():
    x = np.arange(4 * 16, dtype=np.int32).reshape(4, 16)
    x0 = x.copy()
    out = np.zeros((4, 8), np.int32)
    run(rmw_2d, [x, out])
    np.testing.assert_array_equal(out, x0[:, ::2])
    expect = x0.copy()
    expect[:, ::2] += 10
    np.testing.assert_array_equal(x, expect)


@ct.kernel
def xchg_bits(x, new, old):
    i = ct.arange(4, dtype=ct.int32)
    ct.store(old, (0,), ct.atomic_xchg(x, i, ct.load(new, (0,), (4,))))


def test_xchg_moves_float_bits_unchanged():
    x = np.array([1.5, -0.0, np.nan, np.inf], np.float32)
    new = np.array([-0.0, np.float32(3e-45), -np.inf, 2.0], np.float32)  # 3e-45: a subnormal
    x0, old = x.copy(), np.zeros(4, np.float32)
    run(xchg_bits, [x, new, old])
    assert old.tobytes() == x0.tobytes() and x.tobytes() == new.tobytes()


@ct.kernel
def cas_kernel(x, expected, desired, old):
    i = ct.arange(4, dtype=ct.int32)
    e = ct.load(expected, (0,), (4,))
    ct.store(old, (0,), ct.atomic_cas(x, i, e, ct.load(desired, (0,), (4,))))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cas_compares_bits(dtype):
    """0.0 does not match -0.0, and a NaN matches a NaN of the same bits."""
    x = np.array([0.0, -0.0, np.nan, 1.0], dtype)
    expected = np.array([0.0, 0.0, np.nan, 2.0], dtype)
    desired = np.array([5.0, 6.0, 7.0, 8.0], dtype)
    x0, old = x.copy(), np.zeros(4, dtype)
    run(cas_kernel, [x, expected, desired, old])
    assert old.tobytes() == x0.tobytes()
    assert x.tobytes() == np.array([5.0, -0.0, 7.0, 1.0], dtype).tobytes()


@pytest.mark.parametrize("dtype", INTS)
def test_cas_integers(dtype):
    x = np.array([3, 4, 5, 6], dtype)
    expected = np.array([3, 0, 5, 0], dtype)
    desired = np.array([30, 40, 50, 60], dtype)
    old = np.zeros(4, dtype)
    run(cas_kernel, [x, expected, desired, old])
    np.testing.assert_array_equal(old, [3, 4, 5, 6])
    np.testing.assert_array_equal(x, [30, 4, 50, 6])


# --- out of bounds -------------------------------------------------------------------------------------
@ct.kernel
def rmw_outside(x, old, old_cas):
    i = ct.arange(8, dtype=ct.int32) - 2                  # -2 .. 5 on an array of 4
    ct.store(old, (0,), ct.atomic_add(x, i, 1))
    ct.store(old_cas, (0,), ct.atomic_cas(x, i, ct.arange(8, dtype=ct.int32) + 100, 7))


def test_out_of_bounds_elements_do_nothing():
    """atomic_cas returns `expected` there (cuTile); the others return 0 (tilecore's
    choice of cuTile's implementation-defined value, on the GPU and the interpreter)."""
    x = np.array([10, 11, 12, 13], np.int32)
    old, old_cas = np.full(8, -1, np.int32), np.full(8, -1, np.int32)
    run(rmw_outside, [x, old, old_cas])
    np.testing.assert_array_equal(old, [0, 0, 10, 11, 12, 13, 0, 0])
    np.testing.assert_array_equal(old_cas, [100, 101, 11, 12, 13, 14, 106, 107])
    np.testing.assert_array_equal(x, [11, 12, 13, 14])


@ct.kernel
def rmw_unchecked(x, FIRST: ct.Constant[int]):
    ct.atomic_add(x, ct.arange(4, dtype=ct.int32) + FIRST, 1, check_bounds=False)


def test_check_bounds_false_inside():
    x = np.zeros(6, np.int32)
    run(rmw_unchecked, [x, 2])
    np.testing.assert_array_equal(x, [0, 0, 1, 1, 1, 1])


@pytest.mark.interpreter_only
def test_check_bounds_false_outside_is_an_interpreter_error():
    x = np.zeros(4, np.int32)
    with pytest.raises(ct.TileRuntimeError, match=r'atomic_rmw\(\): index \(4,\) is out of bounds '
                                                   r'of array "x" with shape \(4,\), but '
                                                   r"check_bounds=False promised"):
        run(rmw_unchecked, [x, 1])


# --- many blocks, few addresses: exact integer results -----------------------------------------------
@ct.kernel
def contended(x, vals, BINS: ct.Constant[int], TILE: ct.Constant[int], FN: ct.Constant):
    v = ct.load(vals, (ct.bid(0),), (TILE,))
    FN(x, ct.arange(TILE, dtype=ct.int32) % BINS, v, memory_order=ct.MemoryOrder.RELAXED)


@pytest.mark.parametrize("fn", ["add", "max", "min", "and", "or", "xor"])
@pytest.mark.parametrize("dtype", [np.int32, np.uint64])
def test_many_blocks_few_addresses(fn, dtype):
    blocks, tile, bins = 48, 128, 4
    vals = RNG.integers(0, 2**31, blocks * tile).astype(dtype)
    if fn == "add":
        vals = (vals * 2**20).astype(dtype)   # sums wrap around
    x = RNG.integers(0, 2**31, bins).astype(dtype)
    expect = x.copy()
    with np.errstate(over="ignore"):
        for b in range(bins):
            expect[b] = NUMPY[fn].reduce(np.concatenate([[x[b]], vals[b::bins]]).astype(dtype),
                                         dtype=dtype)
    run(contended, [x, vals, bins, tile, FNS[fn]], grid=(blocks,))
    np.testing.assert_array_equal(x, expect)


@ct.kernel
def tickets(counter, seen, TILE: ct.Constant[int]):
    t = ct.atomic_add(counter, ct.zeros((TILE,), ct.int32), 1)   # every element: one address
    ct.scatter(seen, t, 1)


def test_every_element_gets_a_distinct_old_value():
    """A counter bumped by 4 x 256 elements (repeated indices inside a tile, and
    across blocks) hands out each of 0..1023 exactly once."""
    counter = np.zeros(1, np.int32)
    seen = np.zeros(1024, np.int32)
    run(tickets, [counter, seen, 256], grid=(4,))
    assert counter[0] == 1024
    np.testing.assert_array_equal(seen, 1)


@ct.kernel
def scalar_tickets(counter, out):
    t = ct.atomic_add(counter, 0, 1)            # 0-d indices: a scalar old value
    ct.store(out, (t,), ct.full((1,), 1, ct.int32))


def test_scalar_atomic_returns_a_scalar():
    counter = np.zeros(1, np.int64)
    out = np.zeros(40, np.int32)
    run(scalar_tickets, [counter, out], grid=(40,))
    assert counter[0] == 40
    np.testing.assert_array_equal(out, 1)


# --- compare-and-swap: exactly one winner ---------------------------------------------------------------
@ct.kernel
def cas_race(lock, wins, TILE: ct.Constant[int]):
    old = ct.atomic_cas(lock, ct.zeros((TILE,), ct.int32), 0, 1)
    ct.atomic_add(wins, 0, ct.sum(ct.where(old == 0, 1, 0)))


def test_cas_has_exactly_one_winner():
    lock = np.zeros(1, np.int32)
    wins = np.zeros(1, np.int32)
    run(cas_race, [lock, wins, 64], grid=(32,))
    assert lock[0] == 1 and wins[0] == 1


# --- floats --------------------------------------------------------------------------------------------
@ct.kernel
def float_add(x, vals, BINS: ct.Constant[int], TILE: ct.Constant[int]):
    v = ct.load(vals, (ct.bid(0),), (TILE,))
    ct.atomic_add(x, ct.arange(TILE, dtype=ct.int32) % BINS, v)


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_add_of_exact_values(dtype):
    """Integers: every partial sum (at most 2 + 128 in magnitude) is exact in
    every float dtype, bfloat16's 8 bits included, so any order of the updates
    gives the same result."""
    blocks, tile, bins = 8, 64, 4
    vals = RNG.integers(-1, 2, blocks * tile).astype(dtype)
    x = np.array([2.0, -1.0, 0.0, -2.0], dtype)
    expect = x.astype(np.float64) + np.array([vals[b::bins].astype(np.float64).sum()
                                              for b in range(bins)])
    run(float_add, [x, vals, bins, tile], grid=(blocks,))
    np.testing.assert_array_equal(x.astype(np.float64), expect)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_add_against_float64(dtype):
    """Random values: each sum has n = 257 terms (the initial value and 256
    updates) added in some order; the error of any order is at most
    (n - 1) * u * sum(|terms|) (u: the unit roundoff), the bound checked here."""
    blocks, tile, bins = 32, 32, 4
    vals = RNG.standard_normal(blocks * tile).astype(dtype)
    x = RNG.standard_normal(bins).astype(dtype)
    terms = [np.concatenate([[x[b]], vals[b::bins]]).astype(np.float64) for b in range(bins)]
    run(float_add, [x, vals, bins, tile], grid=(blocks,))
    u = np.finfo(dtype).eps / 2
    for b in range(bins):
        bound = (len(terms[b]) - 1) * u * np.abs(terms[b]).sum()
        assert abs(float(x[b]) - terms[b].sum()) <= bound


@ct.kernel
def add_ones(x, N: ct.Constant[int]):
    ct.atomic_add(x, ct.zeros((N,), ct.int32), 1.0)


@pytest.mark.parametrize("dtype,start", [(ml_dtypes.bfloat16, 256.0), (np.float16, 2048.0)])
def test_each_element_rounds_on_its_own(dtype, start):
    """256 + 1 is a tie in bfloat16 and rounds back to 256 (2048 + 1 in float16),
    so 64 single adds leave it unchanged; one add of the exact sum would give 320."""
    x = np.array([start], dtype)
    run(add_ones, [x, 64])
    assert x[0] == start


# --- tiled views ----------------------------------------------------------------------------------------
@ct.kernel
def view_add(x, upd, TM: ct.Constant[int], TN: ct.Constant[int]):
    v = x.tiled_view((TM, TN), traversal_steps=(TM // 2, TN))    # overlapping row windows
    u = ct.load(upd, (0, 0), (TM, TN))
    v.atomic_store_add((ct.bid(0), ct.bid(1)), u)


def test_view_atomic_store_add_overlapping_and_partial_tiles():
    x = np.zeros((10, 12), np.int32)
    upd = RNG.integers(0, 100, (4, 8)).astype(np.int32)
    grid = (5, 2)
    run(view_add, [x, upd, 4, 8], grid=grid)
    expect = np.zeros((10, 12), np.int64)
    for i in range(grid[0]):
        for j in range(grid[1]):
            r0, c0 = i * 2, j * 8
            rows, cols = min(4, 10 - r0), min(8, 12 - c0)
            expect[r0:r0 + rows, c0:c0 + cols] += upd[:rows, :cols]
    np.testing.assert_array_equal(x, expect)


@ct.kernel
def view_ops(x, y, z, w, b):
    i = ct.bid(0)
    x.tiled_view(4).atomic_store_max(i, ct.full((4,), 7, ct.int64))
    y.tiled_view(4).atomic_store_min(i, ct.arange(4, dtype=ct.int32))
    z.tiled_view(4).atomic_store_and(i, ct.full((4,), 6, ct.uint32))
    w.tiled_view(4).atomic_store_or(i, ct.full((4,), 1, ct.uint32))
    w.tiled_view(4).atomic_store_xor(i, ct.full((4,), 3, ct.uint32))
    b.tiled_view(4).atomic_store_add(i, ct.full((4,), 0.25, ct.float16))


def test_view_atomic_store_ops():
    x = np.array([0, 9, 3, 8, 10, 1], np.int64)
    y = np.array([5, 0, 5, 0, -1, 9], np.int32)
    z = np.array([7, 7, 5, 5, 1, 1], np.uint32)
    w = np.array([0, 1, 2, 3, 4, 5], np.uint32)
    b = np.array([1, 2, 3, 4, 5, 6], np.float16)
    run(view_ops, [x, y, z, w, b], grid=(2,))
    np.testing.assert_array_equal(x, [7, 9, 7, 8, 10, 7])
    np.testing.assert_array_equal(y, [0, 0, 2, 0, -1, 1])
    np.testing.assert_array_equal(z, [6, 6, 4, 4, 0, 0])
    np.testing.assert_array_equal(w, (np.arange(6, dtype=np.uint32) | 1) ^ 3)
    np.testing.assert_array_equal(b, np.arange(1, 7, dtype=np.float16) + 0.25)


@ct.kernel
def view_wide_index(x, idx):
    x.tiled_view(4).atomic_store_add(idx, ct.full((4,), 1, ct.int32))


@pytest.mark.parametrize("index", [2**62, -2**63, 2**40 + 1])
def test_view_atomic_store_with_huge_tile_index_writes_nothing(index):
    """index * 4 overflows int64 (or lands far outside): no element is inside."""
    x = np.zeros(8, np.int32)
    run(view_wide_index, [x, np.int64(index)])
    np.testing.assert_array_equal(x, 0)


# --- memory order of plain loads and stores ----------------------------------------------------------
@ct.kernel
def ordered_copy(x, y, flag):
    b = ct.bid(0)
    t = ct.load(x, (b,), (16,), memory_order=ct.MemoryOrder.ACQUIRE,
                memory_scope=ct.MemoryScope.DEVICE)
    s = ct.load(x, (b,), (16,), memory_order=ct.MemoryOrder.RELAXED,
                memory_scope=ct.MemoryScope.BLOCK)
    ct.store(y, (b,), t + s, memory_order=ct.MemoryOrder.RELAXED,
             memory_scope=ct.MemoryScope.SYS)
    ct.store(flag, (b,), ct.full((1,), 1, ct.int32), memory_order=ct.MemoryOrder.RELEASE,
             memory_scope=ct.MemoryScope.DEVICE)


def test_ordered_loads_and_stores_move_the_same_data():
    x = RNG.standard_normal(40).astype(np.float32)
    y, flag = np.zeros(40, np.float32), np.zeros(3, np.int32)
    run(ordered_copy, [x, y, flag], grid=(3,))
    np.testing.assert_array_equal(y, x + x)
    np.testing.assert_array_equal(flag, 1)
    (fn,) = ordered_copy._ir.values()
    orders = [op.attrs.get("memory_order") for op in fn.walk() if op.name in ("load", "store")]
    assert orders == [ct.MemoryOrder.ACQUIRE, ct.MemoryOrder.RELAXED, ct.MemoryOrder.RELAXED,
                      ct.MemoryOrder.RELEASE]


# --- errors -------------------------------------------------------------------------------------------
@ct.kernel
def bad_max(x):
    ct.atomic_max(x, 0, 1.0)  # mark: bad_max


@ct.kernel
def bad_add(x):
    ct.atomic_add(x, 0, 1)


@ct.kernel
def bad_bitwise(x):
    ct.atomic_or(x, ct.arange(4, dtype=ct.int32), ct.ones((4,), ct.int32))


@ct.kernel
def bad_narrowing(x):
    ct.atomic_add(x, ct.arange(4, dtype=ct.int32), ct.ones((4,), ct.float64))


@ct.kernel
def bad_shape(x):
    ct.atomic_xchg(x, ct.arange(4, dtype=ct.int32), ct.ones((8,), ct.int32))


@ct.kernel
def bad_const(x, V: ct.Constant):
    ct.atomic_add(x, 0, V)


@ct.kernel
def bad_order(x, ORDER: ct.Constant, SCOPE: ct.Constant):
    ct.atomic_add(x, 0, 1, memory_order=ORDER, memory_scope=SCOPE)


@ct.kernel
def bad_load_order(x, ORDER: ct.Constant, SCOPE: ct.Constant):
    ct.load(x, (0,), (4,), memory_order=ORDER, memory_scope=SCOPE)


@ct.kernel
def bad_store_order(x, ORDER: ct.Constant):
    ct.store(x, (0,), ct.zeros((4,), ct.int32), memory_order=ORDER,
             memory_scope=ct.MemoryScope.DEVICE)


@ct.kernel
def bad_view(x):
    x.tiled_view(4).atomic_store_and(0, ct.ones((4,), ct.int32))


def test_error_unsupported_dtype_names_the_array():
    expect_error(bad_max, [np.zeros(4, np.float32)], ct.TileTypeError,
                 'Invalid argument "array" of atomic_max(): expected an array of int32, int64, '
                 "uint32, uint64, got an array of float32 with 1 dimension(s)",
                 marker="mark: bad_max")
    expect_error(bad_add, [np.zeros(4, np.int16)], ct.TileTypeError,
                 'Invalid argument "array" of atomic_add(): expected an array of int32, int64, '
                 "uint32, uint64, float16, bfloat16, float32, float64, got an array of int16 "
                 "with 1 dimension(s)")
    expect_error(bad_add, [np.zeros(4, np.bool_)], ct.TileTypeError,
                 'Invalid argument "array" of atomic_add(): expected an array of int32, int64, '
                 "uint32, uint64, float16, bfloat16, float32, float64, got an array of bool_ "
                 "with 1 dimension(s)")


def test_error_update_dtype_and_shape():
    expect_error(bad_bitwise, [np.zeros(4, np.int64)], ct.TileTypeError,
                 'Invalid argument "update" of atomic_or(): its dtype int32 differs from the '
                 "array's int64; bitwise atomics take the same dtype (convert it with astype())")
    expect_error(bad_narrowing, [np.zeros(4, np.float32)], ct.TileTypeError,
                 'Invalid argument "update" of atomic_add(): float64 does not convert '
                 "implicitly to the array's float32; convert it with astype()")
    expect_error(bad_shape, [np.zeros(4, np.int32)], ct.TileValueError,
                 "Shapes (8,) and (4,) of the update and indices cannot be broadcast together "
                 "(dimension 8 vs 4)")
    expect_error(bad_const, [np.zeros(4, np.int32), 1.5], ct.TileTypeError,
                 'Invalid argument "update" of atomic_add(): a loosely typed constant 1.5 '
                 "cannot become the array's int32")
    expect_error(bad_const, [np.zeros(4, np.uint32), -1], ct.TileValueError,
                 'Invalid argument "update" of atomic_add(): the integer constant -1 is out of '
                 "range for uint32 ([0, 4294967295]); use a wider dtype, e.g. "
                 "tilecore.int64(-1) or astype()")


def test_error_view_bitwise_update_dtype():
    expect_error(bad_view, [np.zeros(8, np.uint32)], ct.TileTypeError,
                 'Invalid argument "update" of TiledView.atomic_store_and(): its dtype int32 '
                 "differs from the array's uint32; bitwise atomics take the same dtype (convert "
                 "it with astype())")


MO, MS = ct.MemoryOrder, ct.MemoryScope


def test_error_memory_orders():
    x = np.zeros(4, np.int32)
    expect_error(bad_order, [x, MO.WEAK, MS.NONE], ct.TileValueError,
                 'Invalid argument "memory_order" of atomic_add(): expected one of '
                 "MemoryOrder.RELAXED, MemoryOrder.ACQUIRE, MemoryOrder.RELEASE, "
                 "MemoryOrder.ACQ_REL, got MemoryOrder.WEAK")
    expect_error(bad_order, [x, MO.RELAXED, MS.NONE], ct.TileValueError,
                 'Invalid argument "memory_scope" of atomic_add(): MemoryOrder.RELAXED needs '
                 "one of MemoryScope.BLOCK, MemoryScope.DEVICE, MemoryScope.SYS, got "
                 "MemoryScope.NONE")
    expect_error(bad_order, [x, "acq_rel", MS.DEVICE], ct.TileTypeError,
                 'Invalid argument "memory_order" of atomic_add(): expected a '
                 "tilecore.MemoryOrder, got str 'acq_rel'")
    expect_error(bad_order, [x, MO.ACQ_REL, 1], ct.TileTypeError,
                 'Invalid argument "memory_scope" of atomic_add(): expected a '
                 "tilecore.MemoryScope, got a loosely typed constant 1")
    expect_error(bad_load_order, [x, MO.RELEASE, MS.DEVICE], ct.TileValueError,
                 'Invalid argument "memory_order" of load(): expected one of MemoryOrder.WEAK, '
                 "MemoryOrder.RELAXED, MemoryOrder.ACQUIRE, got MemoryOrder.RELEASE")
    expect_error(bad_load_order, [x, MO.WEAK, MS.DEVICE], ct.TileValueError,
                 'Invalid argument "memory_scope" of load(): MemoryOrder.WEAK takes '
                 "MemoryScope.NONE, got MemoryScope.DEVICE")
    expect_error(bad_store_order, [x, MO.ACQUIRE], ct.TileValueError,
                 'Invalid argument "memory_order" of store(): expected one of MemoryOrder.WEAK, '
                 "MemoryOrder.RELAXED, MemoryOrder.RELEASE, got MemoryOrder.ACQUIRE")


def test_signatures_match_cutile():
    import inspect
    for name in ("atomic_add", "atomic_max", "atomic_min", "atomic_and", "atomic_or",
                 "atomic_xor", "atomic_xchg"):
        sig = inspect.signature(getattr(ct, name).__wrapped__)
        assert str(sig) == ("(array, indices, update, /, *, check_bounds=True, "
                            "memory_order=<MemoryOrder.ACQ_REL: 'acq_rel'>, "
                            "memory_scope=<MemoryScope.DEVICE: 'device'>)")
    assert str(inspect.signature(ct.atomic_cas.__wrapped__)) == (
        "(array, indices, expected, desired, /, *, check_bounds=True, "
        "memory_order=<MemoryOrder.ACQ_REL: 'acq_rel'>, "
        "memory_scope=<MemoryScope.DEVICE: 'device'>)")
    load = inspect.signature(ct.load.__wrapped__).parameters
    assert load["memory_order"].default is MO.WEAK and load["memory_scope"].default is MS.NONE
    store = inspect.signature(ct.store.__wrapped__).parameters
    assert store["memory_order"].default is MO.WEAK and store["memory_scope"].default is MS.NONE
    assert [m.name for m in MO] == ["WEAK", "RELAXED", "ACQUIRE", "RELEASE", "ACQ_REL"]
    assert [m.name for m in MS] == ["NONE", "BLOCK", "DEVICE", "SYS"]


# --- cross-block protocols (small grids: on the GPU every block is resident) ------------------------
@ct.kernel
def locked_increment(lock, total, ROUNDS: ct.Constant[int]):
    for _ in range(ROUNDS):
        while ct.atomic_cas(lock, 0, 0, 1) != 0:        # ACQ_REL: takes the lock
            pass
        ct.store(total, (0,), ct.load(total, (0,), (1,)) + 1)   # plain accesses inside
        ct.atomic_xchg(lock, 0, 0)                      # ACQ_REL: gives it back


def test_spin_lock():
    lock, total = np.zeros(1, np.int32), np.zeros(1, np.int32)
    run(locked_increment, [lock, total, 4], grid=(8,))
    assert total[0] == 32 and lock[0] == 0


@ct.kernel
def chained(counter, flags, data, TILE: ct.Constant[int]):
    t = ct.atomic_add(counter, 0, 1)          # tile number: blocks wait only for earlier ones
    prev = ct.zeros((TILE,), ct.int32)
    if t > 0:
        while ct.load(flags, (t - 1,), (1,), memory_order=ct.MemoryOrder.ACQUIRE,
                      memory_scope=ct.MemoryScope.DEVICE).item() == 0:
            pass
        prev = ct.load(data, (t - 1,), (TILE,))
    ct.store(data, (t,), prev + 1)
    ct.store(flags, (t,), ct.full((1,), 1, ct.int32), memory_order=ct.MemoryOrder.RELEASE,
             memory_scope=ct.MemoryScope.DEVICE)


def test_release_acquire_chain():
    counter, flags, data = np.zeros(1, np.int32), np.zeros(6, np.int32), np.zeros(48, np.int32)
    run(chained, [counter, flags, data, 8], grid=(6,))
    np.testing.assert_array_equal(data, np.repeat(np.arange(1, 7), 8))
    np.testing.assert_array_equal(flags, 1)


@ct.kernel
def count_while(counter):
    while ct.atomic_add(counter, 0, 1) < 5:
        pass


def test_a_while_condition_runs_once_per_test():
    counter = np.zeros(1, np.int32)
    run(count_while, [counter])
    assert counter[0] == 6    # five true tests and the false one


@ct.kernel
def bad_view_dtype(x):
    x.tiled_view(4).atomic_store_max(0, ct.ones((4,), ct.float32))


def test_error_view_dtype():
    expect_error(bad_view_dtype, [np.zeros(8, np.float32)], ct.TileTypeError,
                 "Invalid tiled view of TiledView.atomic_store_max(): expected a view of an array "
                 "of int32, int64, uint32, uint64, got a view of an array of float32 with 1 "
                 "dimension(s)")
