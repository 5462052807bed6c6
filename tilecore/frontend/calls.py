"""Calls in tile code: tilecore functions, dtype constructors, the Python
builtins the subset allows, and tile functions (inlined)."""
from __future__ import annotations

import builtins
import inspect
import types
from typing import TYPE_CHECKING, Any, Callable

from ..errors import Loc, TileSyntaxError, TileTypeError, TileValueError
from ..ir.core import Value
from ..ir.types import TileType
from ..language import dtypes as D
from ..language import ops as L
from ..language.dtypes import DType
from ..language.enums import RoundingMode
from .builder import describe
from .folding import convert_const, py_conversion
from .values import Const, FrontVal, TupleVal
from . import shapes as S
from . import memory as M
from . import operators as OP
from . import scan as SC
from . import atomic as A

if TYPE_CHECKING:
    from .lower import Lowerer

__all__ = ["call_object", "HANDLERS", "bind"]

Handler = Callable[["Lowerer", dict, Loc], FrontVal]
HANDLERS: dict[Any, tuple[Any, Handler]] = {}


def _register(stub, handler: Handler) -> None:
    HANDLERS[stub] = (inspect.signature(stub.__wrapped__), handler)


def bind(sig: inspect.Signature, name: str, args: list, kwargs: dict, loc: Loc) -> dict:
    """Bind call arguments like Python would, defaults filled in (as constants)."""
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as e:
        raise TileTypeError(f"Invalid call to {name}(): {e}", loc) from None
    bound.apply_defaults()
    out = {}
    for k, v in bound.arguments.items():
        if sig.parameters[k].kind is inspect.Parameter.VAR_POSITIONAL:
            out[k] = TupleVal(tuple(v))   # *args: a tuple of front-end values
            continue
        out[k] = v if isinstance(v, (Value, Const, TupleVal)) or not _is_plain(v) else Const(v)
    return out


def _is_plain(v) -> bool:
    from .values import TiledView, RawMemory, BoundMethod, Undefined
    return not isinstance(v, (TiledView, RawMemory, BoundMethod, Undefined))


def call_object(lw: "Lowerer", obj: Any, args: list, kwargs: dict, loc: Loc) -> FrontVal:
    from ..kernel import Kernel, TileFunction
    entry = HANDLERS.get(obj) if _hashable(obj) else None
    if entry is not None:
        sig, handler = entry
        return handler(lw, bind(sig, obj.__name__, args, kwargs, loc), loc)
    if isinstance(obj, DType):
        return _dtype_call(lw, obj, args, kwargs, loc)
    if isinstance(obj, Kernel):
        raise TileTypeError(f"Kernel {obj.__name__}() cannot be called from tile code; kernels "
                            f"are launched from the host with tilecore.launch", loc)
    if isinstance(obj, TileFunction):
        if not obj.tile:
            raise TileTypeError(f"{obj.__name__}() is a host-only function "
                                f"(@function(tile=False)) and cannot be called from tile code", loc)
        return lw.inline(obj.pyfunc, args, kwargs, loc)
    if isinstance(obj, types.FunctionType):
        return lw.inline(obj, args, kwargs, loc)
    name = getattr(obj, "__name__", type(obj).__name__)
    raise TileTypeError(f"{name} cannot be called from tile code", loc)


def _hashable(obj) -> bool:
    try:
        hash(obj)
        return True
    except TypeError:
        return False


# --- dtype(value): strictly typed constants --------------------------------------------------
def _dtype_call(lw: "Lowerer", dtype: DType, args, kwargs, loc) -> FrontVal:
    if kwargs or len(args) != 1:
        raise TileTypeError(f"{dtype.name}() takes exactly one argument", loc)
    x = args[0]
    if isinstance(x, Const) and x.is_number:
        return Const(convert_const(x.value, dtype, loc), dtype)
    if isinstance(x, Value) and isinstance(x.type, TileType):
        return lw.b.cast(x, dtype, loc)
    raise TileTypeError(f'Invalid argument of {dtype.name}(): expected a number or a tile, got '
                        f"{describe(x)}", loc)


# --- cdiv -----------------------------------------------------------------------------------------
def _cdiv(lw, a, loc) -> FrontVal:
    a, b = a["a"], a["b"]
    num = lw.b.binary("add", a, lw.b.binary("sub", b, Const(1), loc), loc)
    return lw.b.binary("floordiv", num, b, loc)


HANDLERS[L.cdiv] = (inspect.signature(L.cdiv), _cdiv)


# --- element-wise --------------------------------------------------------------------------------
def _binary(fn: str) -> Handler:
    def handler(lw, a, loc):
        x, y = list(a.values())
        return lw.b.binary(fn, x, y, loc)
    return handler


def _unary(fn: str) -> Handler:
    def handler(lw, a, loc):
        return lw.b.unary(fn, a["x"], loc)
    return handler


def _compare(fn: str) -> Handler:
    def handler(lw, a, loc):
        return lw.b.compare(fn, a["x"], a["y"], loc)
    return handler


for _stub, _fn in ((L.add, "add"), (L.sub, "sub"), (L.mul, "mul"),
                   (L.floordiv, "floordiv"), (L.mod, "mod"), (L.pow, "pow"),
                   (L.minimum, "minimum"), (L.maximum, "maximum"), (L.atan2, "atan2"),
                   (L.bitwise_and, "bitand"), (L.bitwise_or, "bitor"),
                   (L.bitwise_xor, "bitxor")):
    _register(_stub, _binary(_fn))
for _name in ("exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tan", "sinh", "cosh",
              "tanh", "floor", "ceil", "abs", "isnan"):
    _register(getattr(L, _name), _unary(_name))
_register(L.negative, _unary("neg"))

_DIV_MODES = (RoundingMode.RN, RoundingMode.RZ, RoundingMode.RM, RoundingMode.RP,
              RoundingMode.FULL, RoundingMode.APPROX)


def _mode(v: FrontVal, fn: str, allowed: tuple, loc: Loc):
    if isinstance(v, Const) and v.value in allowed:
        return v.value
    names = ", ".join(f"RoundingMode.{m.name}" for m in allowed if m is not None)
    raise TileValueError(f'Invalid argument "rounding_mode" of {fn}(): expected one of '
                         f"{names}, got {describe(v)}", loc)


def _truediv(lw, a, loc):
    mode = _mode(a["rounding_mode"], "truediv", _DIV_MODES, loc)
    ftz = a["flush_to_zero"]
    if not (isinstance(ftz, Const) and isinstance(ftz.value, bool)):
        raise TileTypeError(f'Invalid argument "flush_to_zero" of truediv(): expected a '
                            f"constant bool, got {describe(ftz)}", loc)
    attrs = {}
    if mode is not RoundingMode.RN or ftz.value:
        attrs = {"rounding": mode, "ftz": ftz.value}
    return lw.b.binary("truediv", a["x"], a["y"], loc, attrs)


def _exp(lw, a, loc):
    mode = _mode(a["rounding_mode"], "exp", (None, RoundingMode.FULL, RoundingMode.APPROX), loc)
    attrs = {"rounding": RoundingMode.APPROX} if mode is RoundingMode.APPROX else None
    return lw.b.unary("exp", a["x"], loc, attrs)


_register(L.truediv, _truediv)
_register(L.exp, _exp)
_register(L.bitwise_not, _unary("invert"))
for _stub, _fn in ((L.equal, "eq"), (L.not_equal, "ne"), (L.less, "lt"), (L.less_equal, "le"),
                   (L.greater, "gt"), (L.greater_equal, "ge")):
    _register(_stub, _compare(_fn))
_register(L.where, lambda lw, a, loc: lw.b.where(a["cond"], a["x"], a["y"], loc))


# --- blocks -----------------------------------------------------------------------------------------
def _axis_arg(a: FrontVal, name: str, fn: str, loc, upper: int = 3) -> int:
    if not (isinstance(a, Const) and isinstance(a.value, int) and not isinstance(a.value, bool)
            and 0 <= a.value < upper):
        raise TileValueError(f'Invalid argument "{name}" of {fn}(): expected a constant int in '
                             f"[0, {upper - 1}], got {describe(a)}", loc)
    return a.value


def _bid(lw, a, loc):
    axis = _axis_arg(a["axis"], "axis", "bid", loc)
    return lw.b.emit1("bid", (), TileType(D.int32, ()), {"axis": axis}, loc)


def _num_blocks(lw, a, loc):
    axis = _axis_arg(a["axis"], "axis", "num_blocks", loc)
    return lw.b.emit1("num_blocks", (), TileType(D.int32, ()), {"axis": axis}, loc)


_register(L.bid, _bid)
_register(L.num_blocks, _num_blocks)
_register(L.num_tiles, M.num_tiles)
_register(L.load, M.load)
_register(L.prefetch, M.prefetch)
_register(L.store, M.store)


def _grid_control(name: str):
    """Programmatic dependent launch's two statements: no operands, no result
    (the launch decides whether they act: language/ops.py)."""
    def handler(lw, a, loc):
        lw.b.emit(name, (), (), {}, (), loc)
        return Const(None)
    return handler


_register(L.grid_dependency_control_wait, _grid_control("grid_wait"))
_register(L.grid_dependency_control_launch_dependents, _grid_control("grid_launch_dependents"))
_register(L.gather, M.gather)
_register(L.scatter, M.scatter)
for _fn in ("add", "max", "min", "and", "or", "xor", "xchg"):
    _register(getattr(L, f"atomic_{_fn}"), A.atomic_rmw(_fn))
_register(L.atomic_cas, A.atomic_cas)

# --- factories, shapes, reductions ------------------------------------------------------------------
_register(L.arange, S.arange)
_register(L.zeros, lambda lw, a, loc: S.full(lw, a["shape"], Const(0), a["dtype"], loc, "zeros"))
_register(L.ones, lambda lw, a, loc: S.full(lw, a["shape"], Const(1), a["dtype"], loc, "ones"))
_register(L.full, lambda lw, a, loc: S.full(lw, a["shape"], a["fill_value"], a["dtype"], loc,
                                            "full"))
_register(L.astype, lambda lw, a, loc: S.astype(lw, a["x"], a["dtype"], loc))
_register(L.bitcast, lambda lw, a, loc: S.bitcast(lw, a["x"], a["dtype"], loc))
_register(L.reshape, lambda lw, a, loc: S.reshape(lw, a["x"], a["shape"], loc))
_register(L.permute, lambda lw, a, loc: S.permute(lw, a["x"], a["axes"], loc))
_register(L.transpose, lambda lw, a, loc: S.transpose(lw, a["x"], a["axis0"], a["axis1"], loc))
_register(L.broadcast_to, lambda lw, a, loc: S.broadcast_to(lw, a["x"], a["shape"], loc))
_register(L.expand_dims, lambda lw, a, loc: S.expand_dims(lw, a["x"], a["axis"], loc))
for _name in ("sum", "prod", "max", "min"):
    _register(getattr(L, _name), (lambda n: lambda lw, a, loc: S.reduce(
        lw, n, a["x"], a["axis"], a["keepdims"], loc))(_name))
for _name in ("argmax", "argmin"):
    _register(getattr(L, _name), (lambda n: lambda lw, a, loc: S.argreduce(
        lw, n, a["x"], a["axis"], a["keepdims"], loc))(_name))
for _stub, _handler in SC.HANDLERS.items():   # cumsum, cumprod, scan, reduce
    _register(_stub, _handler)
HANDLERS.update(OP.HANDLERS)   # operator.add etc.


# --- Python builtins allowed in tile code ------------------------------------------------------------
def _py_builtin(name: str, sig: str):
    def decorator(fn):
        params = [inspect.Parameter(p, inspect.Parameter.POSITIONAL_ONLY)
                  for p in sig.split(",") if p and not p.startswith("*")]
        if "*" in sig:
            params = [inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL)]
        HANDLERS[getattr(builtins, name)] = (inspect.Signature(params), fn)
        return fn
    return decorator


@_py_builtin("len", "obj")
def _len(lw, a, loc):
    obj = a["obj"]
    if isinstance(obj, TupleVal):
        return Const(len(obj.items))
    if isinstance(obj, Value) and isinstance(obj.type, TileType) and obj.type.shape:
        return Const(obj.type.shape[0])
    raise TileTypeError(f"len() needs a tuple or a tile with at least one dimension, got "
                        f"{describe(obj)}", loc)


def _min_max(fn: str):
    def handler(lw, a, loc):
        items = list(a["args"].items)
        if len(items) == 1 and isinstance(items[0], TupleVal):
            items = list(items[0].items)
        if len(items) < 2:
            raise TileTypeError(f"{'min' if fn == 'minimum' else 'max'}() in tile code needs at "
                                f"least two values", loc)
        acc = items[0]
        for x in items[1:]:
            acc = lw.b.binary(fn, acc, x, loc)
        return acc
    return handler


HANDLERS[builtins.min] = (inspect.Signature([inspect.Parameter(
    "args", inspect.Parameter.VAR_POSITIONAL)]), _min_max("minimum"))
HANDLERS[builtins.max] = (inspect.Signature([inspect.Parameter(
    "args", inspect.Parameter.VAR_POSITIONAL)]), _min_max("maximum"))


@_py_builtin("abs", "x")
def _abs(lw, a, loc):
    return lw.b.unary("abs", a["x"], loc)


def _convert(dtype_for_value: Callable[[FrontVal], DType], pyconv):
    def handler(lw, a, loc):
        x = a["x"]
        if isinstance(x, Const) and (x.is_number or isinstance(x.value, str)):
            return py_conversion(pyconv, x.value, loc)   # float('inf') included
        if isinstance(x, Value) and isinstance(x.type, TileType) and x.type.shape == ():
            return lw.b.cast(x, dtype_for_value(x), loc)
        raise TileTypeError(f"{pyconv.__name__}() in tile code needs a number or a scalar, got "
                            f"{describe(x)}", loc)
    return handler


_one = inspect.Signature([inspect.Parameter("x", inspect.Parameter.POSITIONAL_ONLY)])
HANDLERS[builtins.int] = (_one, _convert(
    lambda x: x.type.dtype if x.type.dtype.is_integer else D.int32, int))
HANDLERS[builtins.float] = (_one, _convert(
    lambda x: x.type.dtype if x.type.dtype.is_float else D.float32, float))
HANDLERS[builtins.bool] = (_one, _convert(lambda x: D.bool_, bool))


def _range_outside_for(lw, a, loc):
    raise TileSyntaxError("range() can only be used as the iterable of a for loop", loc)


HANDLERS[builtins.range] = (inspect.Signature([inspect.Parameter(
    "args", inspect.Parameter.VAR_POSITIONAL)]), _range_outside_for)


def _print(lw, a, loc):
    raise TileSyntaxError("print() is not supported in tile code", loc)


HANDLERS[builtins.print] = (inspect.Signature([inspect.Parameter(
    "args", inspect.Parameter.VAR_POSITIONAL)]), _print)
