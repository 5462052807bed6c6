"""Builds typed IR: fresh values, op emission into the current block (with the
bound on tile sizes), and the typing rules of the language (promotion,
broadcasting; constant folding itself is in `folding`).

Every implicit conversion the language performs happens here, so IR ops
always see operands of one dtype and one shape, as `ir/ops.py` promises.
"""
from __future__ import annotations

import math
import operator
import reprlib
from contextlib import contextmanager
from typing import Any, Optional, Sequence

from ..errors import Loc, TileTypeError, TileValueError
from ..ir.core import Block, Op, Value
from ..ir.types import ArrayType, TileType
from ..language import dtypes as D
from ..language.dtypes import DType
from . import folding
from .folding import convert_const, fmt_number
from .values import Const, FrontVal, RawMemory, TupleVal

__all__ = ["Builder", "broadcast_shapes", "is_pow2", "MAX_TILE_ELEMENTS", "MAX_TILE_RANK"]

# The most elements a tile may have. Every element of a tile lives in the
# registers (or the stack) of one block's threads, each thread's share fully
# unrolled: NVRTC's time grows about 3x per doubling beyond 2**17 elements
# (a load/add/store kernel, sm_90, 2 cores: 2**16 0.4 s, 2**17 1.3 s, 2**18 3.4 s,
# 2**19 9.9 s, 2**20 37 s). 2**18 admits every tile real kernels use (256x256
# accumulators are 2**16) and keeps compiles of such kernels to seconds.
MAX_TILE_ELEMENTS = 2**18
# The most dimensions a tile may have (NumPy 1 arrays have at most 32).
MAX_TILE_RANK = 32

_BINARY_SYMBOL = {
    "add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
    "pow": "**", "bitand": "&", "bitor": "|", "bitxor": "^", "lshift": "<<", "rshift": ">>",
    "minimum": "minimum()", "maximum": "maximum()", "atan2": "atan2()",
}
_COMPARE_SYMBOL = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_PY_COMPARE = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
               "gt": operator.gt, "ge": operator.ge}
_BITWISE = ("bitand", "bitor", "bitxor", "lshift", "rshift")


def is_pow2(n: int) -> bool:
    return isinstance(n, int) and n > 0 and n & (n - 1) == 0


def broadcast_shapes(a: tuple[int, ...], b: tuple[int, ...], loc: Optional[Loc] = None,
                     what: str = "operands") -> tuple[int, ...]:
    """NumPy broadcasting of two shapes; TileValueError if incompatible."""
    n = max(len(a), len(b))
    pa = (1,) * (n - len(a)) + tuple(a)
    pb = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(pa, pb):
        if x != y and 1 not in (x, y):
            raise TileValueError(f"Shapes {tuple(a)} and {tuple(b)} of the {what} cannot be "
                                 f"broadcast together (dimension {x} vs {y})", loc)
        out.append(max(x, y))
    return tuple(out)


class Builder:
    """Owns the value counter and the stack of blocks ops are appended to."""

    def __init__(self) -> None:
        self.next_id = 0
        self.blocks: list[Block] = []
        self.call_name: Optional[str] = None   # the tile-code call being lowered, for errors
        # Block arguments of loop-carried variables whose type a loop decides (they
        # entered it, or an enclosing loop, as loosely typed constants) -> (that
        # loop's frame, index): found by identity from inlined functions.
        self.loose_args: dict[Value, tuple] = {}

    # --- structure -------------------------------------------------------------------
    def new_value(self, type, hint: str = "") -> Value:
        v = Value(type, self.next_id, hint)
        self.next_id += 1
        return v

    @contextmanager
    def block(self, block: Block):
        self.blocks.append(block)
        try:
            yield block
        finally:
            self.blocks.pop()

    @property
    def current(self) -> Block:
        return self.blocks[-1]

    @contextmanager
    def calling(self, name: Optional[str]):
        """Name the ops emitted inside after the tile-code call `name` (None while
        an inlined function's body is lowered)."""
        saved, self.call_name = self.call_name, name
        try:
            yield
        finally:
            self.call_name = saved

    def check_tile_size(self, dtype: DType, shape: tuple[int, ...], what: str,
                        loc: Optional[Loc]) -> None:
        """TileValueError if a tile of `shape` would exceed `MAX_TILE_ELEMENTS` or
        `MAX_TILE_RANK`."""
        if len(shape) > MAX_TILE_RANK:
            raise TileValueError(f"{what} would make a tile of {dtype.name} with {len(shape)} "
                                 f"dimensions; a tile has at most {MAX_TILE_RANK}", loc)
        size = math.prod(shape)
        if size > MAX_TILE_ELEMENTS:
            dims = ", ".join(fmt_number(d) for d in shape) + ("," if len(shape) == 1 else "")
            raise TileValueError(f"{what} would make a tile of {dtype.name} with shape ({dims}), "
                                 f"{fmt_number(size)} elements; a tile holds at most "
                                 f"{MAX_TILE_ELEMENTS} (2**18) elements (use more blocks or loop "
                                 f"over smaller tiles)", loc)

    def emit(self, name: str, operands: Sequence[Value], result_types: Sequence,
             attrs: Optional[dict] = None, regions: Sequence[Block] = (),
             loc: Optional[Loc] = None) -> Op:
        for t in result_types:
            if isinstance(t, TileType):
                self.check_tile_size(t.dtype, t.shape, self._what(name, attrs), loc)
        results = tuple(self.new_value(t) for t in result_types)
        op = Op(name, tuple(operands), results, dict(attrs or {}), tuple(regions), loc)
        self.current.ops.append(op)
        return op

    def emit1(self, name: str, operands: Sequence[Value], result_type, attrs=None,
              loc: Optional[Loc] = None) -> Value:
        return self.emit(name, operands, (result_type,), attrs, (), loc).result

    def _named(self, default: str) -> str:
        """The tile-code call being lowered, else `default`, for error messages."""
        return f"{self.call_name}()" if self.call_name is not None else default

    def _what(self, name: str, attrs: Optional[dict]) -> str:
        """The user's name for an IR op in error messages."""
        fn = (attrs or {}).get("fn")
        if name == "binary" and fn in _BINARY_SYMBOL:
            return self._named(f"Operator '{_BINARY_SYMBOL[fn]}'")
        if name == "compare" and fn in _COMPARE_SYMBOL:
            return self._named(f"Comparison '{_COMPARE_SYMBOL[fn]}'")
        return self._named({"iota": "arange()", "unary": f"{fn}()"}.get(name, f"{name}()"))

    # --- constants -----------------------------------------------------------------------
    def constant(self, value: Any, dtype: DType, loc: Optional[Loc] = None) -> Value:
        return self.emit1("constant", (), TileType(dtype, ()),
                          {"value": convert_const(value, dtype, loc)}, loc)

    def materialize(self, fv: FrontVal, loc: Optional[Loc], what: str = "operand") -> Value:
        """A run-time value for `fv` (constants become `constant` ops)."""
        if isinstance(fv, Value):
            return fv
        if isinstance(fv, Const) and fv.is_number:
            dtype = fv.dtype or loose_dtype(fv.value, loc)
            return self.constant(fv.value, dtype, loc)
        raise TileTypeError(f"Invalid {what}: expected a tile or a number, got {describe(fv)}",
                            loc)

    # --- conversions -----------------------------------------------------------------------
    def cast(self, v: Value, dtype: DType, loc: Optional[Loc]) -> Value:
        if v.type.dtype is dtype:
            return v
        return self.emit1("astype", (v,), TileType(dtype, v.type.shape), {"dtype": dtype}, loc)

    def broadcast(self, v: Value, shape: tuple[int, ...], loc: Optional[Loc]) -> Value:
        if v.type.shape == tuple(shape):
            return v
        broadcast_shapes(v.type.shape, shape, loc)
        if len(v.type.shape) > len(shape) or any(
                s != 1 and s != t for s, t in zip(reversed(v.type.shape), reversed(shape))):
            raise TileValueError(f"Cannot broadcast a tile of shape {v.type.shape} to {tuple(shape)}",
                                 loc)
        if math.prod(shape) == v.type.size:  # only adds 1-sized axes: same elements, same order
            return self.emit1("reshape", (v,), TileType(v.type.dtype, tuple(shape)),
                              {"shape": tuple(shape)}, loc)
        return self.emit1("broadcast", (v,), TileType(v.type.dtype, tuple(shape)),
                          {"shape": tuple(shape)}, loc)

    def to_typed(self, fv: FrontVal, dtype: DType, shape: tuple[int, ...], loc) -> Value:
        """Materialize, convert and broadcast `fv` to `dtype` and `shape`."""
        if isinstance(fv, Const) and fv.is_number and fv.dtype is None:
            if dtype.is_integer and D.constant_category(fv.value) == D.INT:
                try:
                    D.check_int_fits(int(fv.value), dtype)
                except OverflowError as e:
                    raise TileValueError(f"Invalid constant: {e}", loc) from None
            v = self.constant(fv.value, dtype, loc)
        else:
            v = self.cast(self.materialize(fv, loc), dtype, loc)
        return self.broadcast(v, shape, loc)

    # --- typing rules ---------------------------------------------------------------------
    def common_dtype(self, a: FrontVal, b: FrontVal, symbol: str, loc) -> DType:
        da, db = dtype_of(a), dtype_of(b)
        try:
            if da is not None and db is not None:
                return D.promote_types(da, db)
            if da is not None:
                return D.promote_with_constant(da, b.value)
            return D.promote_with_constant(db, a.value)
        except (TypeError, OverflowError) as e:
            raise TileTypeError(f"Invalid operands of '{symbol}': {e}", loc) from None

    def binary(self, fn: str, a: FrontVal, b: FrontVal, loc: Optional[Loc],
               attrs: Optional[dict] = None) -> FrontVal:
        symbol = _BINARY_SYMBOL[fn]
        _check_numeric(a, symbol, loc)
        _check_numeric(b, symbol, loc)
        if isinstance(a, Const) and isinstance(b, Const) and not attrs:
            return self._fold_binary(fn, a, b, symbol, loc)
        dtype = self.common_dtype(a, b, symbol, loc)
        if fn in _BITWISE and dtype.is_float:
            raise TileTypeError(f"Operator '{symbol}' needs integer or bool operands, got "
                                f"{describe(a)} and {describe(b)}", loc)
        if fn == "truediv" and not dtype.is_float:
            dtype = D.float32
        if fn in ("atan2",) and not dtype.is_float:
            dtype = D.float32
        shape = broadcast_shapes(shape_of(a), shape_of(b), loc)
        self.check_tile_size(dtype, shape, self._named(f"Operator '{symbol}'"), loc)
        if attrs:
            _check_float32_mode(fn, dtype, loc)
        va = self.to_typed(a, dtype, shape, loc)
        vb = self.to_typed(b, dtype, shape, loc)
        return self.emit1("binary", (va, vb), TileType(dtype, shape), {"fn": fn, **(attrs or {})},
                          loc)

    def _fold_binary(self, fn: str, a: Const, b: Const, symbol: str, loc) -> Const:
        if fn in _BITWISE and D.FLOAT in (_category(a), _category(b)):
            raise TileTypeError(f"Operator '{symbol}' needs integer or bool operands, got "
                                f"{describe(a)} and {describe(b)}", loc)
        if a.dtype is None and b.dtype is None:
            return folding.loose_binary(fn, symbol, a.value, b.value, loc)
        dtype = self.common_dtype(a, b, symbol, loc)
        if fn in ("truediv", "atan2") and not dtype.is_float:
            dtype = D.float32
        return folding.typed_binary(fn, symbol, dtype, a.value, b.value, loc)

    def compare(self, fn: str, a: FrontVal, b: FrontVal, loc) -> FrontVal:
        symbol = _COMPARE_SYMBOL[fn]
        _check_numeric(a, symbol, loc)
        _check_numeric(b, symbol, loc)
        if isinstance(a, Const) and isinstance(b, Const):
            return Const(bool(_PY_COMPARE[fn](a.value, b.value)))
        dtype = self.common_dtype(a, b, symbol, loc)
        shape = broadcast_shapes(shape_of(a), shape_of(b), loc)
        self.check_tile_size(D.bool_, shape, self._named(f"Comparison '{symbol}'"), loc)
        va = self.to_typed(a, dtype, shape, loc)
        vb = self.to_typed(b, dtype, shape, loc)
        return self.emit1("compare", (va, vb), TileType(D.bool_, shape), {"fn": fn}, loc)

    def unary(self, fn: str, x: FrontVal, loc, attrs: Optional[dict] = None) -> FrontVal:
        _check_numeric(x, fn, loc)
        if isinstance(x, Const) and not attrs:
            return folding.unary(fn, x, loc)
        if isinstance(x, Const):
            x = self.materialize(x, loc)
        v = x
        if fn in _FLOAT_ONLY and not v.type.dtype.is_float:
            v = self.cast(v, D.float32, loc)
        if fn == "invert" and v.type.dtype.is_float:
            raise TileTypeError(f"Operator '~' needs an integer or bool operand, got {describe(x)}",
                                loc)
        if attrs:
            _check_float32_mode(fn, v.type.dtype, loc)
        dtype = D.bool_ if fn == "isnan" else v.type.dtype
        return self.emit1("unary", (v,), TileType(dtype, v.type.shape), {"fn": fn, **(attrs or {})},
                          loc)

    def where(self, cond: FrontVal, a: FrontVal, b: FrontVal, loc) -> FrontVal:
        if isinstance(cond, Const) and cond.is_number:
            if all(isinstance(v, Const) and v.dtype is None for v in (a, b)):
                return a if cond.value else b
            cond = Const(bool(cond.value))  # typed and shaped as with a run-time condition
        c = self.materialize(cond, loc, "condition of where()")
        if not c.type.dtype.is_bool:
            c = self.compare("ne", c, Const(0), loc)
        _check_numeric(a, "where()", loc)
        _check_numeric(b, "where()", loc)
        if isinstance(a, Const) and isinstance(b, Const) and a.dtype is None and b.dtype is None:
            dtype = D.promote_types(D.constant_dtype(a.value), D.constant_dtype(b.value)) \
                if D.constant_category(a.value) == D.constant_category(b.value) \
                else D.constant_dtype(a.value if D.constant_category(a.value) >
                                      D.constant_category(b.value) else b.value)
        else:
            dtype = self.common_dtype(a, b, "where()", loc)
        shape = broadcast_shapes(broadcast_shapes(shape_of(a), shape_of(b), loc),
                                 c.type.shape, loc)
        self.check_tile_size(dtype, shape, self._named("where()"), loc)
        va = self.to_typed(a, dtype, shape, loc)
        vb = self.to_typed(b, dtype, shape, loc)
        c = self.broadcast(c, shape, loc)
        return self.emit1("where", (c, va, vb), TileType(dtype, shape), None, loc)


_FLOAT_ONLY = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tan", "sinh",
               "cosh", "tanh", "floor", "ceil", "isnan")


def _check_float32_mode(fn: str, dtype: DType, loc) -> None:
    """Rounding modes other than the default and flush-to-zero exist for float32 only."""
    if dtype is not D.float32:
        raise TileTypeError(f"{fn}() with a rounding_mode other than the default or with "
                            f"flush_to_zero needs float32 operands, got {dtype.name}", loc)


def _category(c: Const) -> int:
    return c.dtype.category if c.dtype is not None else D.constant_category(c.value)


def loose_dtype(value: Any, loc: Optional[Loc]) -> DType:
    """The dtype a loosely typed numeric constant takes on its own (int32, int64,
    uint64, float32 or bool_); TileTypeError for integers beyond uint64."""
    try:
        return D.constant_dtype(value)
    except OverflowError as e:
        raise TileTypeError(f"Invalid constant: {e}", loc) from None


def dtype_of(fv: FrontVal) -> Optional[DType]:
    if isinstance(fv, Value):
        return fv.type.dtype
    if isinstance(fv, Const):
        return fv.dtype
    return None


def shape_of(fv: FrontVal) -> tuple[int, ...]:
    if isinstance(fv, Value):
        return fv.type.shape
    return ()


def _check_numeric(fv: FrontVal, symbol: str, loc) -> None:
    if isinstance(fv, Value) and isinstance(fv.type, TileType):
        return
    if isinstance(fv, Const) and fv.is_number:
        return
    raise TileTypeError(f"Invalid operand of '{symbol}': expected a tile or a number, "
                        f"got {describe(fv)}", loc)


def describe(fv: Any, depth: int = 0) -> str:
    """Short human description of a front-end value, for error messages (long
    tuples, deep tuples, huge integers and long reprs abbreviated)."""
    if isinstance(fv, Value):
        t = fv.type
        if isinstance(t, ArrayType):
            return f"an array of {t.dtype.name} with {t.ndim} dimension(s)"
        if t.is_scalar:
            article = "an" if t.dtype.name[0] in "aeiou" else "a"
            return f"{article} {t.dtype.name} scalar"
        return f"a tile of {t.dtype.name} with shape {t.shape}"
    if isinstance(fv, Const):
        if fv.is_number:
            kind = f"strictly typed {fv.dtype.name}" if fv.dtype else "loosely typed"
            return f"a {kind} constant {fmt_number(fv.value)}"
        return f"{type(fv.value).__name__} {_REPR.repr(fv.value)}"
    if isinstance(fv, TupleVal):
        if depth >= _TUPLE_DEPTH:
            return "a tuple (...)"
        items = [_short(i, depth + 1) for i in fv.items[:_TUPLE_ITEMS]]
        if len(fv.items) > _TUPLE_ITEMS:
            items.append(f"... {len(fv.items)} items")
        return "a tuple (" + ", ".join(items) + ("," if len(fv.items) == 1 else "") + ")"
    if isinstance(fv, RawMemory):
        return f"the raw memory of {describe(fv.array)}"
    return type(fv).__name__


_TUPLE_DEPTH, _TUPLE_ITEMS = 4, 8
_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 80


def _short(fv: Any, depth: int = 0) -> str:
    """A tuple item in error messages: constants by value, the rest described."""
    if isinstance(fv, Const) and (fv.is_number or fv.value is None) and fv.dtype is None:
        return fmt_number(fv.value)
    return describe(fv, depth)
