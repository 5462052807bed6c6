"""Every cell of the arithmetic promotion table (seed 001), transcribed here
independently of tilecore's own copy: row operand x column operand -> common
dtype, ERR -> TypeError. Also checked end to end on tiles in a kernel."""
import numpy as np
import pytest

import tilecore as ct

# Row label first, then one cell per column, columns in the order of COLUMNS.
COLUMNS = ("b1 u8 u16 u32 u64 i8 i16 i32 i64 f16 f32 f64 bf tf32 "
           "f8e4m3fn f8e5m2 f8e8m0fnu f4e2m1fn").split()
TABLE = """
    b1        b1        u8        u16       u32       u64       i8        i16       i32       i64       f16       f32       f64       bf        ERR       ERR       ERR       ERR       ERR
    u8        u8        u8        u16       u32       u64       ERR       ERR       ERR       ERR       f16       f32       f64       bf        ERR       ERR       ERR       ERR       ERR
    u16       u16       u16       u16       u32       u64       ERR       ERR       ERR       ERR       f16       f32       f64       bf        ERR       ERR       ERR       ERR       ERR
    u32       u32       u32       u32       u32       u64       ERR       ERR       ERR       ERR       f16       f32       f64       bf        ERR       ERR       ERR       ERR       ERR
    u64       u64       u64       u64       u64       u64       ERR       ERR       ERR       ERR       f16       f32       f64       bf        ERR       ERR       ERR       ERR       ERR
    i8        i8        ERR       ERR       ERR       ERR       i8        i16       i32       i64       f16       f32       f64       bf        ERR       ERR       ERR       ERR       ERR
    i16       i16       ERR       ERR       ERR       ERR       i16       i16       i32       i64       f16       f32       f64       bf        ERR       ERR       ERR       ERR       ERR
    i32       i32       ERR       ERR       ERR       ERR       i32       i32       i32       i64       f16       f32       f64       bf        ERR       ERR       ERR       ERR       ERR
    i64       i64       ERR       ERR       ERR       ERR       i64       i64       i64       i64       f16       f32       f64       bf        ERR       ERR       ERR       ERR       ERR
    f16       f16       f16       f16       f16       f16       f16       f16       f16       f16       f16       f32       f64       ERR       ERR       ERR       ERR       ERR       ERR
    f32       f32       f32       f32       f32       f32       f32       f32       f32       f32       f32       f32       f64       f32       ERR       ERR       ERR       ERR       ERR
    f64       f64       f64       f64       f64       f64       f64       f64       f64       f64       f64       f64       f64       f64       ERR       ERR       ERR       ERR       ERR
    bf        bf        bf        bf        bf        bf        bf        bf        bf        bf        ERR       f32       f64       bf        ERR       ERR       ERR       ERR       ERR
    tf32      ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       tf32      ERR       ERR       ERR       ERR
    f8e4m3fn  ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       f8e4m3fn  ERR       ERR       ERR
    f8e5m2    ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       f8e5m2    ERR       ERR
    f8e8m0fnu ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       f8e8m0fnu ERR
    f4e2m1fn  ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       ERR       f4e2m1fn
"""

SHORT = {
    "b1": ct.bool_, "u8": ct.uint8, "u16": ct.uint16, "u32": ct.uint32, "u64": ct.uint64,
    "i8": ct.int8, "i16": ct.int16, "i32": ct.int32, "i64": ct.int64, "f16": ct.float16,
    "f32": ct.float32, "f64": ct.float64, "bf": ct.bfloat16, "tf32": ct.tfloat32,
    "f8e4m3fn": ct.float8_e4m3fn, "f8e5m2": ct.float8_e5m2, "f8e8m0fnu": ct.float8_e8m0fnu,
    "f4e2m1fn": ct.float4_e2m1fn,
}


def _expected() -> dict:
    out = {}
    rows = [r.split() for r in TABLE.strip().splitlines()]
    assert [r[0] for r in rows] == COLUMNS
    for row in rows:
        assert len(row) == len(COLUMNS) + 1
        for col, cell in zip(COLUMNS, row[1:]):
            out[(row[0], col)] = None if cell == "ERR" else cell
    return out


EXPECTED = _expected()
CELLS = sorted(EXPECTED, key=lambda k: (COLUMNS.index(k[0]), COLUMNS.index(k[1])))


def test_table_has_every_cell():
    assert len(EXPECTED) == 18 * 18
    assert set(SHORT) == set(COLUMNS)


@pytest.mark.parametrize("row,col", CELLS, ids=[f"{r}-{c}" for r, c in CELLS])
def test_cell(row, col):
    a, b = SHORT[row], SHORT[col]
    want = EXPECTED[(row, col)]
    if want is None:
        with pytest.raises(TypeError, match=f"Implicit promotion between {a.name} and {b.name} "
                                            f"is not supported"):
            ct.promote_types(a, b)
    else:
        assert ct.promote_types(a, b) is SHORT[want]


def test_symmetry():
    for (row, col), want in EXPECTED.items():
        if EXPECTED[(col, row)] != want:
            continue  # only where the table itself is symmetric
        a, b = SHORT[row], SHORT[col]
        if want is None:
            with pytest.raises(TypeError):
                ct.promote_types(b, a)
        else:
            assert ct.promote_types(a, b) is ct.promote_types(b, a)


def test_table_is_symmetric():
    assert all(EXPECTED[(r, c)] == EXPECTED[(c, r)] for r, c in EXPECTED)


def test_non_dtype_argument():
    with pytest.raises(TypeError, match='Invalid argument "b" of promote_types\\(\\): expected a '
                                        "tilecore DType, got 'f32'"):
        ct.promote_types(ct.float32, "f32")


# --- the same rules applied by the compiler to tiles ------------------------------------------
ARITH = ["b1", "u8", "u16", "u32", "u64", "i8", "i16", "i32", "i64", "f16", "f32", "f64", "bf"]


@ct.kernel
def _dtype_of_sum(x, y, out, WANT: ct.Constant):
    a = ct.load(x, (0,), (4,))
    b = ct.load(y, (0,), (4,))
    c = a + b
    assert c.dtype == WANT
    ct.store(out, (0,), c.astype(out.dtype))


@pytest.mark.parametrize("row", ARITH)
def test_tiles_follow_table(row):
    for col in ARITH:
        a, b = SHORT[row], SHORT[col]
        x = np.ones(4, a.numpy_dtype)
        y = np.ones(4, b.numpy_dtype)
        out = np.zeros(4, np.float64)
        want = EXPECTED[(row, col)]
        if want is None:
            with pytest.raises(ct.TileTypeError) as ei:
                ct.launch(None, (1,), _dtype_of_sum, (x, y, out, ct.float32))
            assert ei.value.message == (f"Invalid operands of '+': Implicit promotion between "
                                        f"{a.name} and {b.name} is not supported; convert one "
                                        f"operand explicitly with astype()")
        else:
            ct.launch(None, (1,), _dtype_of_sum, (x, y, out, SHORT[want]))
            expect = 1.0 if row == col == "b1" else 2.0
            np.testing.assert_array_equal(out, expect)
