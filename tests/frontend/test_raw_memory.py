"""Array.get_raw_memory(): RawArrayMemory.load_offset / store_offset /
atomic_*_offset (cuTile's names, signatures and defaults), against NumPy.

An offset counts elements from the array's base pointer (the address of
element (0, ..., 0)), whatever the array's shape and strides: the expected
values below read the C-contiguous parent of each view at base + offset.
Every launch also compiles for sm_80 and sm_90 and, with a GPU, runs there
(tests/conftest.py), so tests not marked interpreter_only only write results
that do not depend on the order of concurrent updates."""
import ml_dtypes
import numpy as np
import pytest

import tilecore as ct
from frontend_helpers import expect_error, run
from tilecore.frontend.specialize import ArrayArg
from tilecore.ir.effects import written_params
from tilecore.language import dtypes as D

MO, MS = ct.MemoryOrder, ct.MemoryScope
INTS = [np.int32, np.int64, np.uint32, np.uint64]
FLOATS = [np.float16, ml_dtypes.bfloat16, np.float32, np.float64]
NUMPY = {"add": np.add, "max": np.maximum, "min": np.minimum, "and": np.bitwise_and,
         "or": np.bitwise_or, "xor": np.bitwise_xor, "xchg": lambda old, new: new}
DTYPES = {"add": INTS + FLOATS, "max": INTS, "min": INTS, "and": INTS, "or": INTS, "xor": INTS,
          "xchg": INTS + [np.float32, np.float64], "cas": INTS + [np.float32, np.float64]}


def _method(raw, fn):
    return getattr(raw, f"atomic_{fn}_offset")


def _base(view: np.ndarray, parent: np.ndarray) -> int:
    """Element position of view's base pointer in its C-contiguous parent."""
    return (view.ctypes.data - parent.ctypes.data) // parent.itemsize


# --- load_offset ----------------------------------------------------------------------------------
@ct.kernel
def load_at(x, off, out, N: ct.Constant[int]):
    o = ct.load(off, (0,), (N,))
    ct.store(out, (0,), x.get_raw_memory().load_offset(o))


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint16, np.int32, np.int64, np.float16,
                                   ml_dtypes.bfloat16, np.float32, np.float64,
                                   ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2])
def test_load_offset_reads_base_plus_offset(dtype):
    """Every storage dtype, the float8 ones too (the interpreter's span of the
    array's memory: NumPy 2.x on the H200 machine could not stride an ml_dtypes
    '<f1' array directly, found by the fuzzer)."""
    rng = np.random.default_rng(1)
    x = rng.integers(0, 100, 1000).astype(dtype)     # 1000: not a power of two
    off = rng.integers(0, 1000, 64).astype(np.int32)
    out = np.zeros(64, dtype)
    run(load_at, [x, off, out, 64])
    np.testing.assert_array_equal(out, x[off])


@ct.kernel
def load_ordered(x, off, out, n, ORDER: ct.Constant, N: ct.Constant[int]):
    o = ct.load(off, (0,), (N,))
    lane = ct.arange(N, dtype=ct.int32)
    ct.store(out, (0,), x.get_raw_memory().load_offset(
        o, mask=lane < n, padding_value=-7, memory_order=ORDER, memory_scope=MS.DEVICE))
    one = x.get_raw_memory().load_offset(ct.full((1,), 5, ct.int32), memory_order=ORDER,
                                         memory_scope=MS.BLOCK)
    ct.store(out, (N,), one)


@pytest.mark.parametrize("order", [MO.RELAXED, MO.ACQUIRE])
@pytest.mark.parametrize("n", [0, 1, 37, 64])
def test_load_offset_with_a_memory_order_reads_the_enabled_lanes(order, n):
    """tilecore's memory_order / memory_scope on load_offset (ct.load's): the
    same values as a weak load_offset, masked-off lanes the padding value, and a
    one-element tile (read by one thread, handed to all) too."""
    rng = np.random.default_rng(3)
    x = rng.integers(-1000, 1000, 300).astype(np.int64)
    off = rng.integers(0, 300, 64).astype(np.int32)
    out = np.zeros(128, np.int64)
    run(load_ordered, [x, off, out, n, order, 64])
    want = np.where(np.arange(64) < n, x[off], -7)
    np.testing.assert_array_equal(out[:64], want)
    assert out[64] == x[5]


@ct.kernel
def load_ordered_any(x, out, ORDER: ct.Constant):
    o = ct.arange(32, dtype=ct.int64)
    ct.store(out, (0,), x.get_raw_memory().load_offset(
        o * 3 % 50, mask=o < 29, padding_value=1, memory_order=ORDER, memory_scope=MS.SYS))


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint16, np.float16, ml_dtypes.bfloat16,
                                   np.float32, np.uint32, np.float64])
def test_load_offset_with_a_memory_order_takes_every_dtype(dtype):
    """Ordered raw loads of 1-, 2-, 4- and 8-byte elements (the strong load
    helpers move the bits as they are), int64 offsets, SYS scope."""
    x = np.random.default_rng(4).integers(0, 100, 50).astype(dtype)
    for order in (MO.RELAXED, MO.ACQUIRE):
        out = np.zeros(32, dtype)
        run(load_ordered_any, [x, out, order])
        o = np.arange(32)
        np.testing.assert_array_equal(out, np.where(o < 29, x[o * 3 % 50], np.ones(1, dtype)))


@pytest.mark.parametrize("odt", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
                                 np.int64, np.uint64])
def test_every_integer_dtype_is_an_offset(odt):
    x = np.arange(100, dtype=np.float32) * 0.5
    off = np.array([0, 1, 99, 50, 7, 3, 64, 98], odt)
    out = np.zeros(8, np.float32)
    run(load_at, [x, off, out, 8])
    np.testing.assert_array_equal(out, x[off.astype(np.int64)])


def test_offsets_ignore_shape_and_strides():
    """A 2-d view of every other column from row 1: offsets step through the
    parent's memory, columns the view skips and the next rows included."""
    parent = np.arange(10 * 12, dtype=np.int32).reshape(10, 12)
    view = parent[1:, ::2]
    off = np.array([0, 1, 2, 11, 12, 13, 24, 12 * 8 + 10], np.int32)
    out = np.zeros(8, np.int32)
    run(load_at, [view, off, out, 8])
    np.testing.assert_array_equal(out, parent.ravel()[_base(view, parent) + off])


def test_negative_offsets_under_a_negative_stride():
    """x[::-1]: its base pointer is the parent's last element, the others lie below it."""
    parent = np.arange(37, dtype=np.int64) * 3
    view = parent[::-1]
    off = np.array([0, -1, -36, -5, 0, -2, -20, -35], np.int64)
    out = np.zeros(8, np.int64)
    run(load_at, [view, off, out, 8])
    np.testing.assert_array_equal(out, parent[36 + off])


@ct.kernel
def load_masked(x, off, out, PAD: ct.Constant, N: ct.Constant[int]):
    o = ct.load(off, (0,), (N,))
    ok = (o >= 0) & (o < x.shape[0])
    ct.store(out, (0,), x.get_raw_memory().load_offset(o, mask=ok, padding_value=PAD))


@pytest.mark.parametrize("pad,want", [(0, 0), (-7, -7), (None, 0), (ct.int16(3), 3)])
def test_masked_off_offsets_read_padding_and_touch_nothing(pad, want):
    rng = np.random.default_rng(2)
    x = rng.integers(1, 1000, 300).astype(np.int32)
    off = rng.integers(-2**31, 2**31 - 1, 64, dtype=np.int64).astype(np.int32)  # mostly outside
    off[:16] = rng.integers(0, 300, 16)
    off[16:20] = [-1, 300, 2**31 - 1, -2**31]
    out = np.zeros(64, np.int32)
    run(load_masked, [x, off, out, pad, 64])
    ok = (off >= 0) & (off < 300)
    np.testing.assert_array_equal(out, np.where(ok, x[np.where(ok, off, 0)], want))


def test_float_padding_and_int64_offsets_past_int32():
    x = np.linspace(-1, 1, 1000).astype(np.float32)
    off = np.array([5, 2**40, -2**40, 999, 2**63 - 1, -2**63, 0, 500], np.int64)
    out = np.zeros(8, np.float32)
    run(load_masked, [x, off, out, float("nan"), 8])
    ok = (off >= 0) & (off < 1000)
    np.testing.assert_array_equal(out, np.where(ok, x[np.where(ok, off, 0)], np.nan))


@ct.kernel
def load_broadcast(x, out, pad):
    rows = ct.arange(4, dtype=ct.int32)[:, None]              # (4, 1)
    cols = ct.arange(8, dtype=ct.int32)[None, :]              # (1, 8)
    off = rows * 10 + cols                                    # (4, 8): row starts 10 apart
    mask = cols < 6                                           # (1, 8): broadcast to the offsets
    p = ct.load(pad, (0, 0), (4, 1))                          # (4, 1) padding tile
    ct.store(out, (0, 0), x.get_raw_memory().load_offset(off, mask=mask, padding_value=p))


def test_broadcast_mask_and_padding_tile():
    x = np.arange(40, dtype=np.float64).reshape(4, 10)
    pad = np.array([[-1.0], [-2.0], [-3.0], [-4.0]])
    out = np.zeros((4, 8))
    run(load_broadcast, [x, out, pad])
    want = np.where(np.arange(8) < 6, x[:, :8], pad)
    np.testing.assert_array_equal(out, want)


@ct.kernel
def load_one(x, out, i):
    t = x.get_raw_memory().load_offset(i)            # a scalar offset: a 0-d result
    c = x.get_raw_memory().load_offset(3)            # a constant offset
    ct.store(out, (0,), t)
    ct.store(out, (1,), c + ct.zeros((1,), x.dtype))


def test_scalar_offsets_give_scalars():
    x = np.arange(7, dtype=np.int16) * 11
    out = np.zeros(2, np.int16)
    run(load_one, [x, out, 5])
    np.testing.assert_array_equal(out, [55, 33])


@ct.kernel
def load_all_masked(x, out):
    o = ct.arange(8, dtype=ct.int32) - 4
    ct.store(out, (0,), x.get_raw_memory().load_offset(o, mask=False, padding_value=9))


def test_everything_masked_off_even_on_an_empty_array():
    out = np.zeros(8, np.int32)
    run(load_all_masked, [np.zeros(0, np.int32), out])
    np.testing.assert_array_equal(out, np.full(8, 9))


@ct.kernel
def raw_dtype(x, out):
    raw = x.get_raw_memory()
    ct.store(out, (0,), ct.full((4,), 2, raw.dtype) + raw.load_offset(ct.arange(4, dtype=ct.int32)))


def test_dtype_attribute():
    x = np.arange(4, dtype=np.uint8)
    out = np.zeros(4, np.uint8)
    run(raw_dtype, [x, out])
    np.testing.assert_array_equal(out, x + 2)


# --- store_offset ---------------------------------------------------------------------------------
@ct.kernel
def store_at(x, off, val, N: ct.Constant[int]):
    o = ct.load(off, (0,), (N,))
    v = ct.load(val, (0,), (N,))
    x.get_raw_memory().store_offset(o, v, mask=(o >= 0) & (o < x.shape[0] * x.shape[1]))


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint64, np.float16, ml_dtypes.bfloat16,
                                   np.float64])
def test_store_offset_writes_distinct_offsets_and_skips_masked(dtype):
    rng = np.random.default_rng(3)
    x = rng.integers(0, 50, (5, 9)).astype(dtype)    # 45 elements
    x0 = x.copy()
    off = rng.permutation(45)[:32].astype(np.int64)
    off[::5] = [-1, 45, -2**40, 2**40, 2**62, -7, 100]
    val = rng.integers(50, 100, 32).astype(dtype)
    run(store_at, [x, off, val, 32])
    ok = (off >= 0) & (off < 45)
    want = x0.ravel().copy()
    want[off[ok]] = val[ok]
    np.testing.assert_array_equal(x.ravel(), want)


@ct.kernel
def store_scalar_and_cast(x):
    raw = x.get_raw_memory()
    o = ct.arange(8, dtype=ct.int32) * 3
    raw.store_offset(o, 7)                                       # a number, broadcast
    raw.store_offset(o + 1, ct.arange(8, dtype=ct.int16))        # int16 -> int32 implicitly
    raw.store_offset(2, ct.int32(-5))                            # one element (thread 0)


def test_store_number_cast_tile_and_one_element():
    x = np.zeros(24, np.int32)
    run(store_scalar_and_cast, [x])
    want = np.zeros(24, np.int32)
    want[::3] = 7
    want[1::3] = np.arange(8)
    want[2] = -5
    np.testing.assert_array_equal(x, want)


@ct.kernel
def store_then_raw_load(x, out):
    ct.store(x, (0,), ct.arange(64, dtype=ct.int32) * 2)
    rev = 63 - ct.arange(64, dtype=ct.int32)
    ct.store(out, (0,), x.get_raw_memory().load_offset(rev))    # other threads' elements


def test_a_raw_load_sees_the_blocks_earlier_store():
    x, out = np.zeros(64, np.int32), np.zeros(64, np.int32)
    run(store_then_raw_load, [x, out])
    np.testing.assert_array_equal(out, (63 - np.arange(64)) * 2)


# --- atomics --------------------------------------------------------------------------------------
@ct.function
def rmw(raw, o, u, FN, order, scope):
    """raw.atomic_<FN>_offset(o, u, ...)."""
    if FN == "add":
        r = raw.atomic_add_offset(o, u, memory_order=order, memory_scope=scope)
    elif FN == "max":
        r = raw.atomic_max_offset(o, u, memory_order=order, memory_scope=scope)
    elif FN == "min":
        r = raw.atomic_min_offset(o, u, memory_order=order, memory_scope=scope)
    elif FN == "and":
        r = raw.atomic_and_offset(o, u, memory_order=order, memory_scope=scope)
    elif FN == "or":
        r = raw.atomic_or_offset(o, u, memory_order=order, memory_scope=scope)
    elif FN == "xor":
        r = raw.atomic_xor_offset(o, u, memory_order=order, memory_scope=scope)
    else:
        r = raw.atomic_xchg_offset(o, u, memory_order=order, memory_scope=scope)
    return r


@ct.kernel
def rmw_distinct(x, off, upd, old, FN: ct.Constant[str], N: ct.Constant[int]):
    o = ct.load(off, (0,), (N,))
    u = ct.load(upd, (0,), (N,))
    ct.store(old, (0,), rmw(x.get_raw_memory(), o, u, FN, MO.ACQ_REL, MS.DEVICE))


@pytest.mark.parametrize("fn,dtype", [(f, d) for f in NUMPY for d in DTYPES[f]])
def test_rmw_on_distinct_offsets(fn, dtype):
    rng = np.random.default_rng(4)
    parent = rng.integers(0, 1000, (6, 20)).astype(dtype)
    x = parent[:, 3:]                       # offsets run across the rows' gaps
    p0 = parent.copy()
    base = _base(x, parent)
    off = rng.permutation(120 - base)[:64].astype(np.int32)
    upd = rng.integers(0, 1000, 64).astype(dtype)
    old = np.zeros(64, dtype)
    run(rmw_distinct, [x, off, upd, old, fn, 64])
    np.testing.assert_array_equal(old, p0.ravel()[base + off])
    want = p0.ravel().copy()
    want[base + off] = NUMPY[fn](p0.ravel()[base + off], upd)
    np.testing.assert_array_equal(parent.ravel(), want)


@ct.kernel
def rmw_repeated(x, off, upd, FN: ct.Constant[str], N: ct.Constant[int], ORDER: ct.Constant,
                 SCOPE: ct.Constant):
    o = ct.load(off, (0,), (N,))
    u = ct.load(upd, (0,), (N,))
    rmw(x.get_raw_memory(), o, u, FN, ORDER, SCOPE)     # old values unused: reductions


# Every dtype with the default order; the other orders with one int and one float dtype.
_ORDERS = [(MO.ACQ_REL, MS.DEVICE), (MO.RELAXED, MS.BLOCK), (MO.RELEASE, MS.SYS),
           (MO.ACQUIRE, MS.DEVICE)]


@pytest.mark.parametrize("fn,dtype,order,scope", [
    (f, d, o, sc) for f in ("add", "max", "min", "and", "or", "xor") for d in DTYPES[f]
    for o, sc in _ORDERS if o is MO.ACQ_REL or d in (np.int32, np.float32)])
def test_rmw_repeated_offsets_all_apply(fn, dtype, order, scope):
    """Final values of commutative updates do not depend on the order (float
    sums of small integers are exact in every order)."""
    rng = np.random.default_rng(5)
    x = rng.integers(0, 64, 50).astype(dtype)
    x0 = x.copy()
    off = rng.integers(0, 6, 128).astype(np.int32)          # 128 updates on 6 elements
    upd = rng.integers(0, 8, 128).astype(dtype)
    run(rmw_repeated, [x, off, upd, fn, 128, order, scope])
    want = x0.copy()
    getattr(NUMPY[fn], "at")(want, off, upd)
    np.testing.assert_array_equal(x, want)


@pytest.mark.interpreter_only
@pytest.mark.parametrize("fn", ["add", "xchg", "max"])
def test_repeated_offsets_apply_in_row_major_order_in_the_interpreter(fn):
    x = np.array([10, 20, 30, 40], np.int64)
    off = np.array([1, 1, 3, 1, 3, 1, 0, 0], np.int32)
    upd = np.array([1, 2, 3, 4, 5, 6, 7, 8], np.int64)
    old = np.zeros(8, np.int64)
    run(rmw_distinct, [x, off, upd, old, fn, 8])
    want, olds = np.array([10, 20, 30, 40]), []
    for o, u in zip(off, upd):
        olds.append(want[o])
        want[o] = NUMPY[fn](want[o], u)
    np.testing.assert_array_equal(old, olds)
    np.testing.assert_array_equal(x, want)


@ct.kernel
def cas_at(x, off, exp, des, old, N: ct.Constant[int]):
    o = ct.load(off, (0,), (N,))
    r = x.get_raw_memory().atomic_cas_offset(o, ct.load(exp, (0,), (N,)),
                                             ct.load(des, (0,), (N,)), mask=o < 40)
    ct.store(old, (0,), r)


@pytest.mark.parametrize("dtype", DTYPES["cas"])
def test_cas_swaps_where_equal_and_masked_off_returns_expected(dtype):
    rng = np.random.default_rng(6)
    x = rng.integers(0, 4, 40).astype(dtype)
    x0 = x.copy()
    off = rng.permutation(64).astype(np.int32)[:32]     # distinct; those >= 40 masked off
    exp = rng.integers(0, 4, 32).astype(dtype)
    des = rng.integers(10, 20, 32).astype(dtype)
    old = np.zeros(32, dtype)
    run(cas_at, [x, off, exp, des, old, 32])
    ok = off < 40
    np.testing.assert_array_equal(old, np.where(ok, x0[np.where(ok, off, 0)], exp))
    want = x0.copy()
    hit = ok & (x0[np.where(ok, off, 0)] == exp)
    want[off[hit]] = des[hit]
    np.testing.assert_array_equal(x, want)


@ct.kernel
def rmw_masked(x, old):
    o = ct.arange(16, dtype=ct.int32) * 4 - 8          # -8 .. 52: some outside
    ok = (o >= 0) & (o < x.shape[0])
    ct.store(old, (0,), x.get_raw_memory().atomic_add_offset(o, 100, mask=ok))


def test_masked_off_atomics_return_zero_and_touch_nothing():
    x = np.arange(1, 42, dtype=np.uint32)          # 41 elements
    x0 = x.copy()
    old = np.full(16, 7, np.uint32)
    run(rmw_masked, [x, old])
    o = np.arange(16) * 4 - 8
    ok = (o >= 0) & (o < 41)
    np.testing.assert_array_equal(old, np.where(ok, x0[np.where(ok, o, 0)], 0))
    want = x0.copy()
    want[o[ok]] += 100
    np.testing.assert_array_equal(x, want)


@ct.kernel
def one_element_atomics(x, out):
    raw = x.get_raw_memory()
    a = raw.atomic_add_offset(3, 5)                           # scalar offset and update
    b = raw.atomic_cas_offset(ct.full((1,), 0, ct.int32), 0, 9, memory_order=MO.RELAXED)
    c = raw.atomic_xchg_offset(1, 4, mask=ct.full((), False, ct.bool_))
    ct.store(out, (0,), a)
    ct.store(out, (1,), b)
    ct.store(out, (2,), c)


def test_one_element_atomics():
    x = np.array([0, 1, 2, 3], np.int64)
    out = np.full(3, -1, np.int64)
    run(one_element_atomics, [x, out])
    np.testing.assert_array_equal(out, [3, 0, 0])
    np.testing.assert_array_equal(x, [9, 1, 2, 8])


@ct.kernel
def float_add_2d(x, val):
    off = ct.arange(4, dtype=ct.int64)[:, None] * 3 + ct.arange(2, dtype=ct.int64)[None, :]
    x.get_raw_memory().atomic_add_offset(off, ct.load(val, (0,), (2,)))   # (2,) broadcast


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_add_broadcast_update(dtype):
    x = np.zeros((4, 3), dtype)
    run(float_add_2d, [x, np.array([1.5, -2.0], dtype)])
    want = np.zeros((4, 3), dtype)
    want[:, 0], want[:, 1] = 1.5, -2.0
    np.testing.assert_array_equal(x, want)


# --- what the rest of the compiler sees ----------------------------------------------------------
def _written(kernel, n=2):
    return written_params(kernel.ir_for([ArrayArg(D.int32, 1)] * n))


@ct.kernel
def reads_only(x, y):
    ct.store(y, (0,), x.get_raw_memory().load_offset(ct.arange(4, dtype=ct.int32)))


@ct.kernel
def stores_raw(x, y):
    x.get_raw_memory().store_offset(ct.arange(4, dtype=ct.int32), ct.load(y, (0,), (4,)))


@ct.kernel
def atomics_raw(x, y):
    o = ct.arange(4, dtype=ct.int32)
    y.get_raw_memory().atomic_or_offset(o, ct.load(x, (0,), (4,)))
    x.get_raw_memory().atomic_cas_offset(o, 1, 2)


def test_store_and_atomics_through_raw_memory_write_the_array():
    assert _written(reads_only) == {1}
    assert _written(stores_raw) == {0}
    assert _written(atomics_raw) == {0, 1}
    src = ct.compile(reads_only, (np.zeros(4, np.int32),) * 2, arch="sm_90").source
    assert "const int* __restrict__ arg0" in src
    src = ct.compile(stores_raw, (np.zeros(4, np.int32),) * 2, arch="sm_90").source
    assert "const int* __restrict__ arg1" in src and "int* __restrict__ arg0" in src


@pytest.mark.interpreter_only
def test_a_written_raw_array_must_not_alias_another_argument():
    x = np.zeros(4, np.int32)
    with pytest.raises(ValueError, match='arguments "x" and "y" overlap in memory, and the '
                                         'kernel writes "x"'):
        ct.launch(None, (1,), stores_raw, (x, x))


# --- undefined behaviour in the interpreter -------------------------------------------------------
@pytest.mark.interpreter_only
@pytest.mark.parametrize("off,reach", [
    (-1, "offsets 0 to 9 reach its elements"), (10, "offsets 0 to 9 reach its elements"),
    (2**40, "offsets 0 to 9 reach its elements")])
def test_an_enabled_offset_outside_the_array_raises(off, reach):
    x, offs, out = np.zeros(10, np.float32), np.zeros(4, np.int64), np.zeros(4, np.float32)
    offs[2] = off
    expect_error(load_at, [x, offs, out, 4], ct.TileRuntimeError,
                 f'RawArrayMemory.load_offset(): offset {off} is outside the memory of array '
                 f'"x" with shape (10,) ({reach}): undefined behaviour on the GPU '
                 f'(block (0, 0, 0))')


@ct.kernel
def store_plain(x, off, val, N: ct.Constant[int]):
    x.get_raw_memory().store_offset(ct.load(off, (0,), (N,)), ct.load(val, (0,), (N,)))


@pytest.mark.interpreter_only
def test_outside_raises_for_stores_and_atomics_and_empty_arrays():
    view = np.arange(40, dtype=np.int32).reshape(4, 10)[1:3, 2:5]
    offs, vals = np.array([0, 1, 12, 13], np.int32), np.zeros(4, np.int32)
    expect_error(store_plain, [view, offs, vals, 4], ct.TileRuntimeError,
                 'RawArrayMemory.store_offset(): offset 13 is outside the memory of array "x" '
                 'with shape (2, 3) (offsets 0 to 12 reach its elements): undefined behaviour '
                 'on the GPU (block (0, 0, 0))')
    expect_error(rmw_distinct, [np.zeros(0, np.int32), offs, vals, vals.copy(), "xor", 4],
                 ct.TileRuntimeError,
                 'RawArrayMemory.atomic_xor_offset(): offset 0 is outside the memory of array '
                 '"x" with shape (0,) (it has no elements): undefined behaviour on the GPU '
                 '(block (0, 0, 0))')


# --- errors ---------------------------------------------------------------------------------------
F32 = "an array of float32 with 1 dimension(s)"


@ct.kernel
def bad_offset_dtype(x):
    x.get_raw_memory().load_offset(ct.arange(4, dtype=ct.float32))  # bad_offset_dtype


@ct.kernel
def bad_offset_tuple(x):
    x.get_raw_memory().load_offset((1, 2))  # bad_offset_tuple


@ct.kernel
def bad_mask_dtype(x):
    o = ct.arange(4, dtype=ct.int32)
    x.get_raw_memory().store_offset(o, 1.0, mask=o)  # bad_mask_dtype


@ct.kernel
def bad_mask_shape(x):
    o = ct.arange(4, dtype=ct.int32)
    x.get_raw_memory().load_offset(o, mask=ct.full((2, 4), True, ct.bool_))  # bad_mask_shape


@ct.kernel
def bad_value_dtype(x):
    o = ct.arange(4, dtype=ct.int32)
    x.get_raw_memory().store_offset(o, ct.zeros((4,), ct.float64))  # bad_value_dtype


@ct.kernel
def bad_value_shape(x):
    o = ct.arange(4, dtype=ct.int32)
    x.get_raw_memory().store_offset(o, ct.zeros((8,), ct.float32))  # bad_value_shape


@ct.kernel
def bad_padding(x):
    pad = ct.zeros((2, 4), ct.float32)
    x.get_raw_memory().load_offset(ct.arange(4, dtype=ct.int32), padding_value=pad)  # bad_padding


@ct.kernel
def bad_atomic_dtype(x):
    x.get_raw_memory().atomic_max_offset(0, 1.0)  # bad_atomic_dtype


@ct.kernel
def bad_bitwise_update(x):
    x.get_raw_memory().atomic_and_offset(0, ct.int64(1))  # bad_bitwise_update


@ct.kernel
def bad_order(x):
    x.get_raw_memory().atomic_add_offset(0, 1, memory_order=ct.MemoryOrder.WEAK)  # bad_order


@ct.kernel
def bad_scope(x):
    x.get_raw_memory().atomic_cas_offset(0, 1, 2, memory_scope=ct.MemoryScope.NONE)  # bad_scope


@ct.kernel
def bad_load_order(x):
    x.get_raw_memory().load_offset(0, memory_order=ct.MemoryOrder.RELEASE,  # bad_load_order
                                   memory_scope=ct.MemoryScope.DEVICE)


@ct.kernel
def bad_load_scope(x):
    x.get_raw_memory().load_offset(0, memory_scope=ct.MemoryScope.DEVICE)  # bad_load_scope


@ct.kernel
def bad_latency(x):
    x.get_raw_memory().load_offset(0, latency=11)  # bad_latency


@ct.kernel
def bad_check_bounds(x):
    x.get_raw_memory().load_offset(0, check_bounds=False)  # bad_check_bounds


@ct.kernel
def bad_positional_mask(x):
    x.get_raw_memory().store_offset(0, 1.0, None)  # bad_positional_mask


@ct.kernel
def bad_raw_args(x):
    x.get_raw_memory(0)  # bad_raw_args


@ct.kernel
def bad_method(x):
    x.get_raw_memory().load((0,))  # bad_method


@ct.kernel
def bad_as_array(x):
    ct.load(x.get_raw_memory(), (0,), (4,))  # bad_as_array


@ct.kernel
def bad_constant(x):
    x.get_raw_memory().atomic_add_offset(0, 2**40)  # bad_constant


I32 = "an array of int32 with 1 dimension(s)"


@pytest.mark.parametrize("kernel,dtype,cls,message", [
    (bad_offset_dtype, np.float32, ct.TileTypeError,
     'Invalid argument "offset" of RawArrayMemory.load_offset(): expected an integer scalar or '
     'tile, got a tile of float32 with shape (4,)'),
    (bad_offset_tuple, np.float32, ct.TileTypeError,
     'Invalid argument "offset" of RawArrayMemory.load_offset(): expected an integer scalar or '
     'tile, got a tuple (1, 2)'),
    (bad_mask_dtype, np.float32, ct.TileTypeError,
     'Invalid argument "mask" of RawArrayMemory.store_offset(): expected a bool tile, got a '
     'tile of int32 with shape (4,)'),
    (bad_mask_shape, np.float32, ct.TileValueError,
     'Invalid argument "mask" of RawArrayMemory.load_offset(): its shape (2, 4) does not '
     "broadcast to the offset's shape (4,)"),
    (bad_value_dtype, np.float32, ct.TileTypeError,
     'Invalid argument "value" of RawArrayMemory.store_offset(): float64 does not convert '
     "implicitly to the array's float32; convert it with astype()"),
    (bad_value_shape, np.float32, ct.TileValueError,
     "Shapes (8,) and (4,) of the value and offset cannot be broadcast together "
     "(dimension 8 vs 4)"),
    (bad_padding, np.float32, ct.TileValueError,
     'Invalid argument "padding_value" of RawArrayMemory.load_offset(): its shape (2, 4) does '
     "not broadcast to the offset's shape (4,)"),
    (bad_atomic_dtype, np.float32, ct.TileTypeError,
     "Invalid raw memory of RawArrayMemory.atomic_max_offset(): expected the raw memory of an "
     f"array of int32, int64, uint32, uint64, got the raw memory of {F32}"),
    (bad_bitwise_update, np.int32, ct.TileTypeError,
     'Invalid argument "update" of RawArrayMemory.atomic_and_offset(): its dtype int64 differs '
     "from the array's int32; bitwise atomics take the same dtype (convert it with astype())"),
    (bad_order, np.int32, ct.TileValueError,
     'Invalid argument "memory_order" of RawArrayMemory.atomic_add_offset(): expected one of '
     "MemoryOrder.RELAXED, MemoryOrder.ACQUIRE, MemoryOrder.RELEASE, MemoryOrder.ACQ_REL, got "
     "MemoryOrder.WEAK"),
    (bad_scope, np.int32, ct.TileValueError,
     'Invalid argument "memory_scope" of RawArrayMemory.atomic_cas_offset(): '
     "MemoryOrder.ACQ_REL needs one of MemoryScope.BLOCK, MemoryScope.DEVICE, MemoryScope.SYS, "
     "got MemoryScope.NONE"),
    (bad_load_order, np.int32, ct.TileValueError,
     'Invalid argument "memory_order" of RawArrayMemory.load_offset(): expected one of '
     "MemoryOrder.WEAK, MemoryOrder.RELAXED, MemoryOrder.ACQUIRE, got MemoryOrder.RELEASE"),
    (bad_load_scope, np.int32, ct.TileValueError,
     'Invalid argument "memory_scope" of RawArrayMemory.load_offset(): MemoryOrder.WEAK takes '
     "MemoryScope.NONE, got MemoryScope.DEVICE"),
    (bad_latency, np.float32, ct.TileValueError,
     'Invalid argument "latency" of RawArrayMemory.load_offset(): expected an int in [1, 10], '
     "got 11"),
    (bad_check_bounds, np.float32, ct.TileTypeError,
     "Invalid call to RawArrayMemory.load_offset(): got an unexpected keyword argument "
     "'check_bounds'"),
    (bad_positional_mask, np.float32, ct.TileTypeError,
     "Invalid call to RawArrayMemory.store_offset(): too many positional arguments"),
    (bad_raw_args, np.float32, ct.TileTypeError,
     "Invalid call to Array.get_raw_memory(): too many positional arguments"),
    (bad_method, np.float32, ct.TileTypeError,
     f"the raw memory of {F32} has no attribute 'load' in tile code"),
    (bad_as_array, np.float32, ct.TileTypeError,
     'Invalid argument "array" of load(): expected an array (a kernel parameter), got the raw '
     f"memory of {F32}"),
    (bad_constant, np.int32, ct.TileValueError,
     'Invalid argument "update" of RawArrayMemory.atomic_add_offset(): the integer constant '
     "1099511627776 is out of range for int32 ([-2147483648, 2147483647]); use a wider dtype, "
     "e.g. tilecore.int64(1099511627776) or astype()"),
], ids=lambda v: v.__name__ if hasattr(v, "pyfunc") else "")
def test_error_messages(kernel, dtype, cls, message):
    expect_error(kernel, [np.zeros(8, dtype)], cls, message, marker=kernel.__name__)
