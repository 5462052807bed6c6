"""Rules for atomics (atomic_rmw, atomic_cas) and for load/store (and a raw
gather, load_offset) with a memory order other than WEAK, over the PTX helpers
of include/tilecore/atomic.cuh.

Each element is one strong access (relaxed or acquiring) at the op's scope, done by
the thread that holds it; a one-element tile, which every thread holds, is
accessed by thread 0 alone and its value handed to the others through shared
memory, so that all threads see one value (a flag read in a spin-wait must
send every thread the same way). The tile-level order is built around the
element accesses for the whole block (cuTile: a release orders the block's
earlier accesses, an acquire its later ones):

  release (store RELEASE, atomic RELEASE/ACQ_REL):
      __syncthreads(); fence.acq_rel.<scope>; the element accesses
  acquire (load ACQUIRE, atomic ACQUIRE/ACQ_REL):
      the element accesses, each ld/atom.acquire.<scope>; __syncthreads()
      (a thread holding more than OWN_ACQUIRE_ELEMENTS of them: relaxed
      accesses, then fence.acq_rel.<scope>)

The barrier before a release makes every thread's earlier accesses precede the
fence of each thread that then writes; the barrier after an acquire makes each
thread's acquiring accesses precede every thread's later accesses. A fence
waits for all of the thread's loads still in flight (a scan's tile loaded
ahead: 12% of a float64 DeviceScan's time at 2^27), an acquiring access only
for itself, but each for its own return: so a thread's few accesses acquire
each, its many are followed by one fence. An atomic whose old values are
unused and that need not acquire is a `red` instruction (no return trip).
Loads, stores and gathers without a memory order go to rules_memory.
"""
from __future__ import annotations

from ...ir.core import Op
from ...language.enums import MemoryOrder, MemoryScope
from . import rules_memory
from .cnames import literal, padding_value
from .emit import Ctx
from .layout import Layout
from .privatize import emit_private_atomic, private_window
from .rules_memory import _gather_scatter_terms, _TileAccess, ordered_in_block, split_mask

__all__ = ["RULES"]

HEADER = "tilecore/atomic.cuh"
# the most elements a thread holds for which an acquire is each access's own: an acquiring
# load of K int32 a thread, 8192 blocks of 128 threads on an H200 (.gpu/acq_k.py), us per
# launch, each access acquiring against relaxed ones and a fence, with no other load in flight:
# K=1 6.4 / 6.7, 2 6.8 / 7.2, 4 9.8 / 11.3, 8 17.4 / 18.2, 16 34.6 / 35.3; with a 16 KB tile
# load of the thread in flight: 32.9 / 34.1, 33.6 / 35.1, 36.2 / 37.5, 42.8 / 43.6, 58.8 / 57.1
OWN_ACQUIRE_ELEMENTS = 8
_SCOPE = {MemoryScope.BLOCK: 0, MemoryScope.DEVICE: 1, MemoryScope.SYS: 2}


def _release(order: MemoryOrder) -> bool:
    return order in (MemoryOrder.RELEASE, MemoryOrder.ACQ_REL)


def _acquire(order: MemoryOrder) -> bool:
    return order in (MemoryOrder.ACQUIRE, MemoryOrder.ACQ_REL)


def _instr(fn: str, dtype) -> str:
    """Suffix of the atom_/red_ helper for `fn` on `dtype`."""
    bits = dtype.itemsize * 8
    if fn == "add":
        if dtype.is_float:
            return {"float16": "add_f16", "bfloat16": "add_bf16"}.get(dtype.name, f"add_f{bits}")
        return f"add_u{bits}"
    if fn in ("max", "min"):
        return f"{fn}_{'s' if dtype.signed else 'u'}{bits}"
    if fn == "xchg":
        return f"exch_b{bits}"
    return f"{fn}_b{bits}"  # and, or, xor, cas


class _Ordering:
    """The barriers and fences around an op's element accesses (module docstring).
    With a one-element tile only thread 0 accesses memory, so only it fences."""

    def __init__(self, ctx: Ctx, op: Op, lay: Layout):
        ctx.headers.add(HEADER)
        self.ctx = ctx
        self.order = op.attrs["memory_order"]
        self.scope = _SCOPE[op.attrs["memory_scope"]]
        self.replicated = lay.replicated
        self.fence = f"tc::fence_acq_rel<{self.scope}>();"
        # each access acquires where a thread holds few elements (each waits for its
        # own return); else one fence after relaxed ones (they overlap)
        self.own_acquire = _acquire(self.order) and (
            lay.replicated or lay.per_thread <= OWN_ACQUIRE_ELEMENTS)

    def before(self) -> None:
        if _release(self.order):
            self.ctx.line("__syncthreads();")
            if not self.replicated:
                self.ctx.line(self.fence)

    def thread0_before(self) -> list[str]:
        return [self.fence] if self.replicated and _release(self.order) else []

    def load(self) -> str:
        """The element load's helper."""
        return "ld_acquire" if self.own_acquire else "ld_relaxed"

    def template(self) -> str:
        """The element atomics' template arguments: scope, and whether each acquires."""
        return f"{self.scope}, true" if self.own_acquire else f"{self.scope}"

    def after(self, broadcast: bool) -> None:
        """`broadcast`: a one-element result was handed out (a barrier already)."""
        if _acquire(self.order):
            if not self.own_acquire:
                self.ctx.line(self.fence)
            if not broadcast:
                self.ctx.line("__syncthreads();")


def _broadcast(ctx: Ctx, ct: str, value: str) -> str:
    """C++ expression: thread 0's `value` in every thread (a barrier included)."""
    return f"tc::broadcast0<{ct}, {ctx.new_slot()}, {str(ctx.in_loop()).lower()}>({value})"


def _thread0(ctx: Ctx, ordering: _Ordering, access: list[str], ct: str, init: str,
             out: str) -> None:
    """A one-element access: thread 0 runs `access` (which may set `r`,
    initialized to `init`); `out` (if any) gets r in every thread."""
    ctx.open("")
    ctx.line("const int k = 0;")
    ctx.line(f"{ct} r = {init};")
    ctx.open("if (threadIdx.x == 0)")
    for line in ordering.thread0_before() + access:
        ctx.line(line)
    ctx.close()
    if out:
        ctx.line(f"{out}.v[0] = {_broadcast(ctx, ct, 'r')};")
    ctx.close()


# --- atomics ---------------------------------------------------------------------------------------
def _atomic(ctx: Ctx, op: Op, values: list, first: int, outside: str) -> None:
    """atomic_rmw / atomic_cas with per-element operand `values` (tiles of the
    indices' shape) at the element indices (and mask) from operand `first` on;
    `outside` is the C++ old value of an out-of-bounds or masked-off element
    (with `k` the element's position in the thread)."""
    arr = ctx.arrays[op.operands[0].id]
    ct = ctx.uses(arr.dtype)
    fn = op.attrs.get("fn", "cas")
    used = bool(ctx.users(op.result))
    lay = ctx.layout(op.result.type)
    ordering = _Ordering(ctx, op, lay)
    indices, mask = split_mask(op, first)
    cond, off = _gather_scatter_terms(ctx, op, arr, indices, mask, lay)
    window = private_window(ctx, op)
    if window is not None:   # no memory order to build: see ir/privatize.py
        emit_private_atomic(ctx, op, window, cond, f"(long long){ctx.name(indices[0])}.v[k]",
                            f"{ctx.name(values[0])}.v[k]", lay.replicated)
        return
    red = not used and fn not in ("xchg", "cas") and not ordering.own_acquire
    args = ", ".join(f"{ctx.name(v)}.v[k]" for v in values)
    call = f"tc::{'red' if red else 'atom'}_{_instr(fn, arr.dtype)}<{ordering.template()}>(" \
           f"{arr.ptr} + ({off}), {args})"
    out = ctx.declare(op.result) if used else ""
    ordering.before()
    if lay.replicated:
        access = call + ";" if red else f"r = {call};"
        _thread0(ctx, ordering, [f"if ({cond}) {access}" if cond else access], ct, outside, out)
        ordering.after(broadcast=used)
        return
    if used:
        body = f"{out}.v[k] = ({cond}) ? {call} : {outside};" if cond else f"{out}.v[k] = {call};"
    else:
        body = f"if ({cond}) {call};" if cond else f"{call};"
    ctx.for_each(lay, [body], need_e=lay.partial)
    ordering.after(broadcast=False)


def global_update(op: Op, pointer: str, value: str) -> str:
    """C++ of one global update of atomic_rmw `op` (its old value unused)."""
    scope = _SCOPE[op.attrs["memory_scope"]]
    return f"tc::red_{_instr(op.attrs['fn'], op.operands[0].type.dtype)}<{scope}>({pointer}, {value})"


def _atomic_rmw(ctx: Ctx, op: Op) -> None:
    dtype = op.operands[0].type.dtype
    _atomic(ctx, op, [op.operands[1]], 2, literal(dtype, 0))


def _atomic_cas(ctx: Ctx, op: Op) -> None:
    expected = op.operands[1]
    _atomic(ctx, op, [expected, op.operands[2]], 3, f"{ctx.name(expected)}.v[k]")


# --- ordered loads and stores ------------------------------------------------------------------------
def _element_lines(acc: _TileAccess, lay: Layout, e: str) -> tuple[list[str], str, str]:
    """(coordinate declarations, bounds condition, offset) of tile element `e`."""
    coords = [f"const long long c{k} = {c};" for k, c in enumerate(acc.coords(e))]
    return coords, acc.in_bounds(valid=lay.valid(e)), acc.offset()


def _ordered_load(ctx: Ctx, op: Op) -> None:
    arr = ctx.arrays[op.operands[0].id]
    ct = ctx.uses(arr.dtype)
    pad = padding_value(arr.dtype, op.attrs["padding"])
    out = ctx.declare(op.result)
    acc = _TileAccess(ctx, op, arr)
    lay = acc.layout
    ordering = _Ordering(ctx, op, lay)
    ctx.open("")
    acc.emit_base(op.operands[1:])
    if lay.replicated:
        coords, cond, off = _element_lines(acc, lay, "0")
        load = f"r = tc::{ordering.load()}<{ordering.scope}>({arr.ptr} + ({off}));"
        _thread0(ctx, ordering, coords + [f"if ({cond}) {load}" if cond else load], ct, pad, out)
        ctx.close()
        return
    coords, cond, off = _element_lines(acc, lay, "e")
    load = f"tc::{ordering.load()}<{ordering.scope}>({arr.ptr} + ({off}))"
    ctx.for_each(lay, coords + [f"{out}.v[k] = ({cond}) ? {load} : {pad};" if cond else
                                f"{out}.v[k] = {load};"])
    ctx.close()
    ordering.after(broadcast=False)


def _ordered_store(ctx: Ctx, op: Op) -> None:
    arr = ctx.arrays[op.operands[0].id]
    src = ctx.name(op.operands[1])
    acc = _TileAccess(ctx, op, arr)
    lay = acc.layout
    ordering = _Ordering(ctx, op, lay)
    ordering.before()
    ctx.open("")
    acc.emit_base(op.operands[2:])
    if lay.replicated:
        coords, cond, off = _element_lines(acc, lay, "0")
        store = f"tc::st_relaxed<{ordering.scope}>({arr.ptr} + ({off}), {src}.v[0]);"
        ctx.open("if (threadIdx.x == 0)")
        for line in ordering.thread0_before() + coords + [f"if ({cond}) {store}" if cond
                                                           else store]:
            ctx.line(line)
        ctx.close()
    else:
        coords, cond, off = _element_lines(acc, lay, "e")
        store = f"tc::st_relaxed<{ordering.scope}>({arr.ptr} + ({off}), {src}.v[k]);"
        ctx.for_each(lay, coords + [f"if ({cond}) {store}" if cond else store])
    ctx.close()


def _ordered_gather(ctx: Ctx, op: Op) -> None:
    """A raw gather (load_offset) with a memory order: each enabled element one
    strong read, as _ordered_load's."""
    arr = ctx.arrays[op.operands[0].id]
    ct = ctx.uses(arr.dtype)
    pad = ctx.scalar(op.operands[1])
    indices, mask = split_mask(op, 2)
    out = ctx.declare(op.result)
    lay = ctx.layout(op.result.type)
    ordering = _Ordering(ctx, op, lay)
    cond, off = _gather_scatter_terms(ctx, op, arr, indices, mask, lay)
    load = f"tc::{ordering.load()}<{ordering.scope}>({arr.ptr} + ({off}))"
    if lay.replicated:
        access = [f"if ({cond}) r = {load};" if cond else f"r = {load};"]
        _thread0(ctx, ordering, access, ct, pad, out)
        return
    ctx.for_each(lay, [f"{out}.v[k] = ({cond}) ? {load} : {pad};" if cond else
                       f"{out}.v[k] = {load};"], need_e=lay.partial)
    ordering.after(broadcast=False)


def _by_order(weak, ordered):
    """The rule of a load/store: `ordered` when it has a memory order, else the
    weak (vectorized) rule of rules_memory."""
    def rule(ctx: Ctx, op: Op) -> None:
        (ordered if "memory_order" in op.attrs else weak)(ctx, op)
    rule.__name__ = ordered.__name__.replace("_ordered", "")
    return rule


# "load", "store" and "gather" replace rules_memory's entries (codegen merges this table
# after it).
RULES = {"atomic_rmw": ordered_in_block(_atomic_rmw), "atomic_cas": ordered_in_block(_atomic_cas),
         "load": _by_order(rules_memory.RULES["load"], ordered_in_block(_ordered_load)),
         "store": _by_order(rules_memory.RULES["store"], ordered_in_block(_ordered_store)),
         "gather": _by_order(rules_memory.RULES["gather"], ordered_in_block(_ordered_gather))}
