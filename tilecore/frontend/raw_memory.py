"""`Array.get_raw_memory()` in tile code: cuTile's RawArrayMemory, the array's
memory addressed by element offsets from its base pointer (the address of
element (0, ..., 0)), with no shape, strides or bounds.

    raw = x.get_raw_memory()
    t = raw.load_offset(offsets, mask=m, padding_value=0)
    w = raw.load_offset(offsets, mask=m, memory_order=ct.MemoryOrder.RELAXED,
                        memory_scope=ct.MemoryScope.DEVICE)     # tilecore: strong reads
    raw.store_offset(offsets, t + 1, mask=m)
    old = raw.atomic_add_offset(offsets, 1)

`offset` is an integer scalar or tile; the result (and every other operand:
mask, padding_value, value, update, expected, desired) has its shape, the
others broadcast to it. Masked-off elements touch no memory: a load gives
`padding_value`, an atomic gives 0 (atomic_cas_offset: `expected`). An enabled
offset outside the array's memory is undefined behaviour (the interpreter
raises TileRuntimeError). load_offset also takes ct.load's memory_order and
memory_scope (WEAK by default, as cuTile's; RELAXED or ACQUIRE make each
enabled element a strong read): a tilecore extension, so that a masked read of
flags another block publishes can poll only the lanes it needs. Typing of
values, updates and atomics' dtypes as gather/scatter and the ct.atomic_*
functions (frontend/atomic.py).

Each method is the IR op of its gather/scatter/atomic counterpart with attr
raw=True and one index operand, the offset (int32, or int64 when its dtype
needs it: exact for arrays past 2**31 elements), so both backends share
those ops' rules and the effect analyses see the array written.
"""
from __future__ import annotations

import inspect
from typing import TYPE_CHECKING

from ..errors import Loc, TileTypeError
from ..ir.core import Value
from ..language.enums import MemoryOrder, MemoryScope
from . import atomic as A
from . import memory as M
from .builder import describe
from .calls import bind
from .memory import _hints, _mask
from .ordering import LOAD_ORDERS, memory_ordering, ordering_attrs
from .values import Const, FrontVal, RawMemory, TupleVal

if TYPE_CHECKING:
    from .lower import Lowerer

__all__ = ["get_raw_memory", "call", "METHODS"]

_RAW = {"check_bounds": False, "raw": True}
_ACQ_REL, _DEVICE = MemoryOrder.ACQ_REL, MemoryScope.DEVICE


def _get_raw_memory_sig():
    """Signature of Array.get_raw_memory."""


def _load_offset_sig(offset, /, *, mask=None, padding_value=0, latency=None,
                     memory_order=MemoryOrder.WEAK, memory_scope=MemoryScope.NONE):
    """Signature of RawArrayMemory.load_offset (memory_order and memory_scope:
    tilecore's, as ct.load has them; cuTile's load_offset is always WEAK)."""


def _store_offset_sig(offset, value, /, *, mask=None, latency=None):
    """Signature of RawArrayMemory.store_offset."""


def _rmw_offset_sig(offset, update, /, *, mask=None, memory_order=_ACQ_REL,
                    memory_scope=_DEVICE):
    """Signature of RawArrayMemory.atomic_<fn>_offset (xchg, add, max, min, and, or, xor)."""


def _cas_offset_sig(offset, expected, desired, /, *, mask=None, memory_order=_ACQ_REL,
                    memory_scope=_DEVICE):
    """Signature of RawArrayMemory.atomic_cas_offset."""


def get_raw_memory(lw: "Lowerer", arr: Value, args: list, kwargs: dict, loc: Loc) -> RawMemory:
    bind(inspect.signature(_get_raw_memory_sig), "Array.get_raw_memory", args, kwargs, loc)
    return RawMemory(arr)


def _offset(lw: "Lowerer", v: FrontVal, fn: str, loc: Loc) -> tuple[Value, tuple]:
    if isinstance(v, TupleVal):
        raise TileTypeError(f'Invalid argument "offset" of {fn}(): expected an integer scalar or '
                            f"tile, got {describe(v)}", loc)
    [off], shape = M.integer_tiles(lw, [v], fn, "offset", "an integer scalar or tile", loc)
    return off, shape


def _load_offset(lw: "Lowerer", arr: Value, fn: str, a: dict, loc: Loc) -> FrontVal:
    off, shape = _offset(lw, a["offset"], fn, loc)
    mask = _mask(lw, a["mask"], shape, fn, loc, against="offset")
    _hints(a, fn, loc)
    dtype, pad = arr.type.dtype, a["padding_value"]
    if isinstance(pad, Const) and (pad.value is None or (  # None: cuTile leaves it unspecified
            dtype.is_bool and type(pad.value) is int and pad.value in (0, 1))):
        pads = (lw.b.to_typed(Const(bool(pad.value)), dtype, (), loc), None)  # 0 or 1: a bool
    elif isinstance(pad, Value) and pad.type.shape != ():
        pads = (lw.b.to_typed(Const(0), dtype, (), loc),
                A.operand(lw, pad, dtype, shape, False, fn, "padding_value", loc, "offset"))
    else:
        pads = (A.operand(lw, pad, dtype, (), False, fn, "padding_value", loc, "offset"), None)
    ordering = ordering_attrs(*memory_ordering(a["memory_order"], a["memory_scope"],
                                               LOAD_ORDERS, fn, loc))
    return M.emit_gather(lw, arr, [off], shape, mask, pads, {**_RAW, **ordering}, loc)


def _store_offset(lw: "Lowerer", arr: Value, fn: str, a: dict, loc: Loc) -> FrontVal:
    off, shape = _offset(lw, a["offset"], fn, loc)
    mask = _mask(lw, a["mask"], shape, fn, loc, against="offset")
    _hints(a, fn, loc)
    value = A.operand(lw, a["value"], arr.type.dtype, shape, False, fn, "value", loc, "offset")
    return M.emit_scatter(lw, arr, value, [off], mask, _RAW, loc)


def _atomic(key: str):
    """The handler of atomic_<key>_offset."""
    def handler(lw: "Lowerer", arr: Value, fn: str, a: dict, loc: Loc) -> FrontVal:
        A.check_dtype(arr, key, fn, loc, kind="raw")
        off, shape = _offset(lw, a["offset"], fn, loc)
        mask = _mask(lw, a["mask"], shape, fn, loc, against="offset")
        attrs = {**A.ordering(a, fn, loc), **_RAW}
        dtype = arr.type.dtype
        if key == "cas":
            values = [A.operand(lw, a[name], dtype, shape, False, fn, name, loc, "offset")
                      for name in ("expected", "desired")]
        else:
            attrs["fn"] = key
            values = [A.operand(lw, a["update"], dtype, shape, key in A.BITWISE, fn, "update",
                                loc, "offset")]
        return A.emit_atomic(lw, arr, values, [off], shape, mask, attrs, loc)
    return handler


# method name -> (signature, handler(lw, array, qualified name, bound args, loc))
METHODS = {
    "load_offset": (_load_offset_sig, _load_offset),
    "store_offset": (_store_offset_sig, _store_offset),
    "atomic_cas_offset": (_cas_offset_sig, _atomic("cas")),
    **{f"atomic_{fn}_offset": (_rmw_offset_sig, _atomic(fn))
       for fn in ("xchg", "add", "max", "min", "and", "or", "xor")},
}


def call(lw: "Lowerer", raw: RawMemory, method: str, args: list, kwargs: dict,
         loc: Loc) -> FrontVal:
    """raw.<method>(*args, **kwargs) for a method of METHODS."""
    sig, handler = METHODS[method]
    fn = f"RawArrayMemory.{method}"
    return handler(lw, raw.array, fn, bind(inspect.signature(sig), fn, args, kwargs, loc), loc)
