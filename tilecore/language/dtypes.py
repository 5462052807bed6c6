"""Tile dtypes and the arithmetic promotion rules of the data model.

Every dtype of the reference is a `DType` object; `promote_types` implements
every cell of the promotion table (ERR cells raise TypeError), and
`promote_with_constant` the rules for loosely typed numeric constants. The
compiler uses these two functions and nothing else to decide result dtypes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import ml_dtypes
import numpy as np

__all__ = [
    "DType", "promote_types", "promote_with_constant", "constant_dtype",
    "from_numpy", "ALL_DTYPES", "BOOL", "INT", "FLOAT",
]

# Categories, ordered as the data model orders them.
BOOL, INT, FLOAT = 0, 1, 2


@dataclass(frozen=True, eq=False)
class DType:
    """A tile dtype. Usable in host code and tile code; `dtype(value)` makes a
    strictly typed constant (in host code, a NumPy scalar of that dtype)."""

    name: str
    short: str          # name used in the promotion table ("f32")
    bits: int           # value bits (tfloat32: 32-bit container, 19 significant)
    itemsize: int       # bytes one element occupies in memory
    category: int       # BOOL, INT or FLOAT
    signed: bool
    numpy_dtype: np.dtype  # storage dtype on the CPU
    ctype: str          # C++ type used by the CUDA backend
    arithmetic: bool    # supports general arithmetic (the numeric-only fp8/fp4/tf32 do not)

    def __repr__(self) -> str:
        return f"tilecore.{self.name}"

    def __str__(self) -> str:
        return self.name

    def __reduce__(self):
        return (_dtype_by_name, (self.name,))

    def __call__(self, value):
        """Strictly typed constant in host code: a NumPy scalar of this dtype.
        Integers wrap (two's complement) as they do in tile code."""
        if self.category == INT and isinstance(value, (int, np.integer)) \
                and not isinstance(value, (bool, np.bool_)):
            v = int(value) & ((1 << self.bits) - 1)
            if self.signed and v >= 1 << (self.bits - 1):
                v -= 1 << self.bits
            return self.numpy_dtype.type(v)
        return self.numpy_dtype.type(value)

    @property
    def is_integer(self) -> bool:
        return self.category == INT

    @property
    def is_float(self) -> bool:
        return self.category == FLOAT

    @property
    def is_bool(self) -> bool:
        return self.category == BOOL

    @property
    def min(self):
        """Smallest finite value (for floats: most negative finite)."""
        if self.category == BOOL:
            return False
        if self.category == INT:
            return int(np.iinfo(self.numpy_dtype).min)
        return float(_finfo(self).min)

    @property
    def max(self):
        if self.category == BOOL:
            return True
        if self.category == INT:
            return int(np.iinfo(self.numpy_dtype).max)
        return float(_finfo(self).max)


def _finfo(dt: DType):
    if dt.name == "tfloat32":
        return ml_dtypes.finfo(np.float32)
    return ml_dtypes.finfo(dt.numpy_dtype)


def _d(name, short, bits, itemsize, cat, signed, npd, ctype, arith=True) -> DType:
    return DType(name, short, bits, itemsize, cat, signed, np.dtype(npd), ctype, arith)


bool_ = _d("bool_", "b1", 8, 1, BOOL, False, np.bool_, "bool")
uint8 = _d("uint8", "u8", 8, 1, INT, False, np.uint8, "unsigned char")
uint16 = _d("uint16", "u16", 16, 2, INT, False, np.uint16, "unsigned short")
uint32 = _d("uint32", "u32", 32, 4, INT, False, np.uint32, "unsigned int")
uint64 = _d("uint64", "u64", 64, 8, INT, False, np.uint64, "unsigned long long")
int8 = _d("int8", "i8", 8, 1, INT, True, np.int8, "signed char")
int16 = _d("int16", "i16", 16, 2, INT, True, np.int16, "short")
int32 = _d("int32", "i32", 32, 4, INT, True, np.int32, "int")
int64 = _d("int64", "i64", 64, 8, INT, True, np.int64, "long long")
float16 = _d("float16", "f16", 16, 2, FLOAT, True, np.float16, "__half")
float32 = _d("float32", "f32", 32, 4, FLOAT, True, np.float32, "float")
float64 = _d("float64", "f64", 64, 8, FLOAT, True, np.float64, "double")
bfloat16 = _d("bfloat16", "bf", 16, 2, FLOAT, True, ml_dtypes.bfloat16, "__nv_bfloat16")
tfloat32 = _d("tfloat32", "tf32", 32, 4, FLOAT, True, np.float32, "tc::tf32", False)
float8_e4m3fn = _d("float8_e4m3fn", "f8e4m3fn", 8, 1, FLOAT, True,
                   ml_dtypes.float8_e4m3fn, "__nv_fp8_e4m3", False)
float8_e5m2 = _d("float8_e5m2", "f8e5m2", 8, 1, FLOAT, True,
                 ml_dtypes.float8_e5m2, "__nv_fp8_e5m2", False)
float8_e8m0fnu = _d("float8_e8m0fnu", "f8e8m0fnu", 8, 1, FLOAT, False,
                    ml_dtypes.float8_e8m0fnu, "tc::fp8_e8m0", False)
float4_e2m1fn = _d("float4_e2m1fn", "f4e2m1fn", 4, 1, FLOAT, True,
                   ml_dtypes.float4_e2m1fn, "tc::fp4_e2m1", False)

ALL_DTYPES: tuple[DType, ...] = (
    bool_, uint8, uint16, uint32, uint64, int8, int16, int32, int64,
    float16, float32, float64, bfloat16, tfloat32,
    float8_e4m3fn, float8_e5m2, float8_e8m0fnu, float4_e2m1fn,
)
_BY_NAME = {d.name: d for d in ALL_DTYPES}
_BY_SHORT = {d.short: d for d in ALL_DTYPES}


def _dtype_by_name(name: str) -> DType:
    return _BY_NAME[name]


# The promotion table of the data model, row operand x column operand, in the
# order of ALL_DTYPES. Every cell is normative.
_TABLE = """
b1  u8  u16 u32 u64 i8  i16 i32 i64 f16 f32 f64 bf  ERR ERR ERR ERR ERR
u8  u8  u16 u32 u64 ERR ERR ERR ERR f16 f32 f64 bf  ERR ERR ERR ERR ERR
u16 u16 u16 u32 u64 ERR ERR ERR ERR f16 f32 f64 bf  ERR ERR ERR ERR ERR
u32 u32 u32 u32 u64 ERR ERR ERR ERR f16 f32 f64 bf  ERR ERR ERR ERR ERR
u64 u64 u64 u64 u64 ERR ERR ERR ERR f16 f32 f64 bf  ERR ERR ERR ERR ERR
i8  ERR ERR ERR ERR i8  i16 i32 i64 f16 f32 f64 bf  ERR ERR ERR ERR ERR
i16 ERR ERR ERR ERR i16 i16 i32 i64 f16 f32 f64 bf  ERR ERR ERR ERR ERR
i32 ERR ERR ERR ERR i32 i32 i32 i64 f16 f32 f64 bf  ERR ERR ERR ERR ERR
i64 ERR ERR ERR ERR i64 i64 i64 i64 f16 f32 f64 bf  ERR ERR ERR ERR ERR
f16 f16 f16 f16 f16 f16 f16 f16 f16 f16 f32 f64 ERR ERR ERR ERR ERR ERR
f32 f32 f32 f32 f32 f32 f32 f32 f32 f32 f32 f64 f32 ERR ERR ERR ERR ERR
f64 f64 f64 f64 f64 f64 f64 f64 f64 f64 f64 f64 f64 ERR ERR ERR ERR ERR
bf  bf  bf  bf  bf  bf  bf  bf  bf  ERR f32 f64 bf  ERR ERR ERR ERR ERR
ERR ERR ERR ERR ERR ERR ERR ERR ERR ERR ERR ERR ERR tf32 ERR ERR ERR ERR
ERR ERR ERR ERR ERR ERR ERR ERR ERR ERR ERR ERR ERR ERR f8e4m3fn ERR ERR ERR
ERR ERR ERR ERR ERR ERR ERR ERR ERR ERR ERR ERR ERR ERR ERR f8e5m2 ERR ERR
ERR ERR ERR ERR ERR ERR ERR ERR ERR ERR ERR ERR ERR ERR ERR ERR f8e8m0fnu ERR
ERR ERR ERR ERR ERR ERR ERR ERR ERR ERR ERR ERR ERR ERR ERR ERR ERR f4e2m1fn
"""


def _parse_table() -> dict[tuple[DType, DType], DType | None]:
    rows = [r.split() for r in _TABLE.strip().splitlines()]
    assert len(rows) == len(ALL_DTYPES)
    table = {}
    for a, row in zip(ALL_DTYPES, rows):
        assert len(row) == len(ALL_DTYPES)
        for b, cell in zip(ALL_DTYPES, row):
            table[(a, b)] = None if cell == "ERR" else _BY_SHORT[cell]
    return table


_PROMOTION = _parse_table()


def promote_types(a: DType, b: DType) -> DType:
    """Common dtype of two typed operands, per the promotion table.

    Raises TypeError for the table's ERR cells."""
    for name, d in (("a", a), ("b", b)):
        if not isinstance(d, DType):
            raise TypeError(f'Invalid argument "{name}" of promote_types(): '
                            f"expected a tilecore DType, got {d!r}")
    out = _PROMOTION[(a, b)]
    if out is None:
        raise TypeError(f"Implicit promotion between {a.name} and {b.name} is not supported; "
                        f"convert one operand explicitly with astype()")
    return out


Number = Union[bool, int, float]


def constant_category(value: Number) -> int:
    if isinstance(value, (bool, np.bool_)):
        return BOOL
    if isinstance(value, (int, np.integer)):
        return INT
    return FLOAT


def constant_dtype(value: Number) -> DType:
    """The concrete dtype picked for a loosely typed constant: bool_, int32,
    int64 or uint64 by value for integers, float32 for floats."""
    cat = constant_category(value)
    if cat == BOOL:
        return bool_
    if cat == INT:
        v = int(value)
        if -2**31 <= v < 2**31:
            return int32
        if -2**63 <= v < 2**63:
            return int64
        if 0 <= v < 2**64:
            return uint64
        raise OverflowError(f"integer constant {v} does not fit in int64 or uint64")
    return float32


def promote_with_constant(dtype: DType, value: Number) -> DType:
    """Common dtype of a typed operand and a loosely typed numeric constant.

    An integer constant must fit the integer dtype it takes (as NumPy 2 rules):
    `int8_tile + 200` is an OverflowError, not a silent wrap."""
    cat = constant_category(value)
    if cat > dtype.category:
        return constant_dtype(value)
    if cat == INT and dtype.category == INT:
        check_int_fits(int(value), dtype)
    return dtype


def check_int_fits(value: int, dtype: DType) -> None:
    """OverflowError unless the integer `value` is representable in `dtype`."""
    if not dtype.min <= value <= dtype.max:
        raise OverflowError(f"the integer constant {value} is out of range for {dtype.name} "
                            f"([{dtype.min}, {dtype.max}]); use a wider dtype, e.g. "
                            f"tilecore.int64({value}) or astype()")


def from_numpy(dt) -> DType:
    """The tilecore dtype of a NumPy (or ml_dtypes) dtype; TypeError if none."""
    npd = np.dtype(dt)
    for d in ALL_DTYPES:
        if d.numpy_dtype == npd and d is not tfloat32:
            return d
    raise TypeError(f"NumPy dtype {npd} has no tilecore equivalent")


def lookup(name: str) -> DType:
    """The dtype called `name` (e.g. 'float32' or 'f32')."""
    if name in _BY_NAME:
        return _BY_NAME[name]
    if name in _BY_SHORT:
        return _BY_SHORT[name]
    raise TypeError(f"unknown dtype {name!r}")
