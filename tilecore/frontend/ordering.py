"""The memory_order and memory_scope arguments of load, store and the atomics.

cuTile's rules: WEAK (the default of load/store) goes with MemoryScope.NONE,
every other order needs a scope (BLOCK, DEVICE or SYS); each operation takes
only the orders that mean something for it (a load cannot release, a store
cannot acquire).
"""
from __future__ import annotations

from ..errors import Loc, TileTypeError, TileValueError
from ..language.enums import MemoryOrder, MemoryScope
from .builder import describe
from .values import Const, FrontVal

__all__ = ["memory_ordering", "ordering_attrs", "LOAD_ORDERS", "STORE_ORDERS", "ATOMIC_ORDERS"]

LOAD_ORDERS = (MemoryOrder.WEAK, MemoryOrder.RELAXED, MemoryOrder.ACQUIRE)
STORE_ORDERS = (MemoryOrder.WEAK, MemoryOrder.RELAXED, MemoryOrder.RELEASE)
ATOMIC_ORDERS = (MemoryOrder.RELAXED, MemoryOrder.ACQUIRE, MemoryOrder.RELEASE,
                 MemoryOrder.ACQ_REL)


def _names(members) -> str:
    return ", ".join(f"{type(m).__name__}.{m.name}" for m in members)


def memory_ordering(order: FrontVal, scope: FrontVal, allowed: tuple, fn: str,
                    loc: Loc) -> tuple[MemoryOrder, MemoryScope]:
    """The validated (order, scope) of a call to `fn`; TileTypeError for a
    value that is not the enum, TileValueError for a combination cuTile refuses."""
    if not (isinstance(order, Const) and isinstance(order.value, MemoryOrder)):
        raise TileTypeError(f'Invalid argument "memory_order" of {fn}(): expected a '
                            f"tilecore.MemoryOrder, got {describe(order)}", loc)
    if not (isinstance(scope, Const) and isinstance(scope.value, MemoryScope)):
        raise TileTypeError(f'Invalid argument "memory_scope" of {fn}(): expected a '
                            f"tilecore.MemoryScope, got {describe(scope)}", loc)
    o, s = order.value, scope.value
    if o not in allowed:
        raise TileValueError(f'Invalid argument "memory_order" of {fn}(): expected one of '
                             f"{_names(allowed)}, got {_names((o,))}", loc)
    if o is MemoryOrder.WEAK and s is not MemoryScope.NONE:
        raise TileValueError(f'Invalid argument "memory_scope" of {fn}(): MemoryOrder.WEAK '
                             f"takes MemoryScope.NONE, got {_names((s,))}", loc)
    if o is not MemoryOrder.WEAK and s is MemoryScope.NONE:
        scopes = (MemoryScope.BLOCK, MemoryScope.DEVICE, MemoryScope.SYS)
        raise TileValueError(f'Invalid argument "memory_scope" of {fn}(): {_names((o,))} '
                             f"needs one of {_names(scopes)}, got MemoryScope.NONE", loc)
    return o, s


def ordering_attrs(order: MemoryOrder, scope: MemoryScope) -> dict:
    """The IR attrs of a load/store with this ordering: none for WEAK, so weak
    accesses keep the IR (and the code) they always had."""
    if order is MemoryOrder.WEAK:
        return {}
    return {"memory_order": order, "memory_scope": scope}
