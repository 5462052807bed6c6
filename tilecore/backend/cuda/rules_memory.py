"""Rules for global memory: tile-space load/store (vectorized when the array
is known aligned and unit-stride), the L2 prefetch of a tile (addressed as a
load) and gather/scatter. Offsets are 64-bit.
A raw gather/scatter/atomic (attr raw, from Array.get_raw_memory()) has one
index, the element offset from the array's pointer: no stride, no bounds."""
from __future__ import annotations

import math

from ...ir.block_order import barrier_before
from ...ir.core import Op
from ...language import dtypes as D
from .arch import arch_number
from .cnames import padding_value
from .emit import ArrayArg, Ctx, unravel
from .layout import Layout

__all__ = ["RULES"]


class _TileAccess:
    """Addressing of a tile-space load/store: tile axis k reads array axis
    order[k] at coordinate index[k] * steps[k] + t_k."""

    def __init__(self, ctx: Ctx, op: Op, arr: ArrayArg):
        self.ctx, self.arr, self.shape = ctx, arr, tuple(op.attrs["shape"])
        ndim = len(self.shape)
        self.order = tuple(op.attrs.get("order") or range(ndim))
        self.steps = tuple(op.attrs.get("steps") or self.shape)
        self.check = op.attrs.get("check_bounds", True)
        self.layout = Layout(math.prod(self.shape), ctx.threads, ctx.vk)
        self.base = [f"o{k}" for k in range(ndim)]

    def emit_base(self, index_ops) -> None:
        """Declare o{k}, the tile's first array coordinate on each tile axis."""
        for k, v in enumerate(index_ops):
            index = self.ctx.scalar(v)
            if v.type.dtype.bits == 64:  # the product may overflow: clamped far outside
                self.ctx.line(f"const long long o{k} = tc::tile_origin<{self.steps[k]}>({index});")
            else:
                self.ctx.line(f"const long long o{k} = (long long){index} * {self.steps[k]};")

    def vector_width(self) -> int:
        """Elements per vector access (1: scalar accesses only): the largest
        part of a chunk (V elements, a power of two) that is a 4-, 8- or 16-byte
        access lying within one row. A chunk wider than 16 bytes (the kernel's
        vector width set by a narrower array, e.g. 8 floats beside int8 data)
        takes several 16-byte accesses."""
        lay, arr, ndim = self.layout, self.arr, len(self.shape)
        if ndim == 0 or not (arr.aligned16 and arr.unit_stride and self.order[-1] == ndim - 1):
            return 1
        v = lay.vec
        while v > 1:
            if self.shape[-1] % v == 0 and self.steps[-1] % v == 0 and \
                    v * arr.dtype.itemsize in (4, 8, 16):
                return v
            v //= 2
        return 1

    def coords(self, e: str, extra_last: str = "") -> list[str]:
        """Coordinate per tile axis of element e (plus `extra_last` on the last axis)."""
        m = unravel(e, self.shape)
        out = [f"{b} + {mi}" for b, mi in zip(self.base, m)]
        if extra_last:
            out[-1] += f" + {extra_last}"
        return out

    def emit_coords(self, e: str) -> None:
        for k, c in enumerate(self.coords(e)):
            self.ctx.line(f"const long long c{k} = {c};")

    def _names(self, last: str) -> list[str]:
        names = [f"c{k}" for k in range(len(self.order))]
        if last:
            names[-1] = last
        return names

    def in_bounds(self, extent: int = 1, *, valid: str = "", last: str = "") -> str:
        """Condition that coordinates c* (the last one named `last` if given,
        spanning `extent` elements) are inside the array."""
        conds = [valid] if valid else []
        if self.check:
            for k, c in enumerate(self._names(last)):
                conds.append(self.bound(k, c, extent if k == len(self.order) - 1 else 1))
        return " && ".join(conds)

    def bound(self, k: int, c: str, n: int = 1) -> str:
        """Condition that coordinate `c` on tile axis k, and the n - 1 after it,
        are inside the array."""
        dim = self.arr.dims[self.order[k]]
        return f"{c} >= 0 && " + (f"{c} < {dim}" if n == 1 else f"{c} + {n} <= {dim}")

    def tile_inside(self) -> str:
        """Condition, uniform over the block, that every element of the tile
        lies inside the array ("" when bounds are not checked)."""
        if not self.check:
            return ""
        return " && ".join(f"{b} >= 0 && {b} + {n} <= {self.arr.dims[ax]}"
                           for b, n, ax in zip(self.base, self.shape, self.order))

    def offset(self, last: str = "") -> str:
        """Element offset of coordinates c* in the array (64-bit)."""
        terms = []
        for c, ax in zip(self._names(last), self.order):
            s = self.arr.stride(ax)
            terms.append(c if s == "1" else f"{c} * {s}")
        return " + ".join(terms) or "0"   # a 0-d array: its one element


def _tile_access(ctx: Ctx, op: Op, arr: ArrayArg, index, chunk) -> None:
    """Emit the unrolled loop over this thread's chunks of V elements, with
    each chunk's array coordinates computed, calling chunk(acc, v, lay,
    checked) for its body.

    When bounds are checked, the loop is emitted twice behind one uniform
    branch: a tile wholly inside the array (the common case: every tile but
    the edges) takes the copy without per-element bounds checks."""
    ctx.open("")
    acc = _TileAccess(ctx, op, arr)
    acc.emit_base(index)
    v, lay = acc.vector_width(), acc.layout
    inside = acc.tile_inside()
    if inside:
        ctx.open(f"if ({inside})")
        _chunk_loop(ctx, acc, v, lay, chunk, False)
        ctx.close("} else {")
        ctx.depth += 1
    _chunk_loop(ctx, acc, v, lay, chunk, acc.check)
    if inside:
        ctx.close()
    ctx.close()


def _chunk_loop(ctx: Ctx, acc: _TileAccess, v: int, lay: Layout, chunk, checked: bool) -> None:
    ctx.line("#pragma unroll")
    ctx.open(f"for (int k0 = 0; k0 < {lay.per_thread}; k0 += {v})")
    ctx.line(f"const int e = {lay.elem('k0')};")
    acc.emit_coords("e")
    chunk(acc, v, lay, checked)
    ctx.close()


_WORDS = {4: "unsigned int", 8: "uint2", 16: "uint4"}  # raw types of 4-, 8- and 16-byte vectors


def _word_load(arr: ArrayArg, words: str, offset: str) -> str:
    """A raw-word load of `arr` at element `offset`, through __ldg (the read-only
    path) where `arr.ldg` says so."""
    ptr = f"reinterpret_cast<const {words}*>({arr.ptr} + ({offset}))"
    return f"__ldg({ptr})" if arr.ldg else f"*{ptr}"


def _keep_packed(ctx: Ctx, op: Op, arr: ArrayArg) -> bool:
    """Hold a 16-bit float load as packed words (tc::Packed16) when its only
    uses convert it to float32 and it moves whole vectors: the registers then
    hold two elements each until the conversions (half the registers a tile
    of separate 16-bit values takes)."""
    users = ctx.users(op.result)
    if not (arr.dtype.is_float and arr.dtype.itemsize == 2 and users and all(
            u.name == "astype" and u.result.type.dtype == D.float32 for u in users)):
        return False
    acc = _TileAccess(ctx, op, arr)
    return acc.vector_width() > 1 and acc.layout.per_thread % 2 == 0


def _load(ctx: Ctx, op: Op) -> None:
    arr = ctx.arrays[op.operands[0].id]
    ct = ctx.uses(arr.dtype)
    packed = _keep_packed(ctx, op, arr)
    if packed:
        ctx.packed.add(op.result.id)
        out = ctx.name(op.result)
        ctx.line(f"tc::Packed16<{ct}, {ctx.layout(op.result.type).per_thread}> {out};")
    else:
        out = ctx.declare(op.result)
    pad = padding_value(arr.dtype, op.attrs["padding"])

    def chunk(acc: _TileAccess, v: int, lay: Layout, checked: bool) -> None:
        if v == 1:
            cond = acc.in_bounds(valid=lay.valid("e")) if checked else lay.valid("e")
            load = f"{arr.ptr}[{acc.offset()}]"
            ctx.line(f"{out}.v[k0] = {f'({cond}) ? {load} : {pad}' if cond else load};")
            return
        # Both paths fill one vector: had the scalar path written the elements to
        # separate registers, 16- and 8-bit tiles would need a register per element.
        vec = f"tc::Vec<{ct}, {v}>"
        cond = acc.in_bounds(v) if checked else ""
        if packed and not cond:
            # Raw words straight into the packed registers: through a vector of
            # 16-bit values, the compiler re-packs them with moves that wait on
            # the load right after it is issued (so loads never overlap).
            words = _WORDS[v * arr.dtype.itemsize]
            ctx.line(f"const {words} q = {_word_load(arr, words, acc.offset())};")
            ctx.line(f"memcpy(&{out}.w[k0 / 2], &q, sizeof(q));")
            return
        if packed and arr.whole_vectors:
            # The checked path in words too: a vector is wholly inside or wholly
            # outside, so the padding is a whole word pattern. Through a vector of
            # 16-bit values, the compiler keeps each element in its own register
            # with PRMTs to merge them (a bfloat16 sum's loop: 72 registers instead
            # of 64, 3 blocks an SM instead of 4).
            words = _WORDS[v * arr.dtype.itemsize]
            ctx.open(f"if ({cond})")
            ctx.line(f"const {words} q = {_word_load(arr, words, acc.offset())};")
            ctx.line(f"memcpy(&{out}.w[k0 / 2], &q, sizeof(q));")
            ctx.close("} else {")
            ctx.depth += 1
            ctx.line(f"const tc::Vec<{ct}, 2> pp = {{{{{pad}, {pad}}}}};")
            ctx.line("unsigned int pw;")
            ctx.line("memcpy(&pw, &pp, sizeof(pw));")
            ctx.line("#pragma unroll")
            ctx.line(f"for (int j = 0; j < {v // 2}; ++j) {out}.w[k0 / 2 + j] = pw;")
            ctx.close()
            return
        ctx.line(f"{vec} w;")
        load = f"w = *reinterpret_cast<const {vec}*>({arr.ptr} + ({acc.offset()}));"
        if arr.ldg and v * arr.dtype.itemsize in _WORDS:
            words = _WORDS[v * arr.dtype.itemsize]
            load = (f"{{ const {words} q = {_word_load(arr, words, acc.offset())}; "
                    f"memcpy(&w, &q, sizeof(q)); }}")
        if not cond:
            ctx.line(load)
        else:
            ctx.open(f"if ({cond})")
            ctx.line(load)
            ctx.close("} else {")
            ctx.depth += 1
            ctx.line("#pragma unroll")
            if arr.whole_vectors:  # the vector is wholly outside the array
                ctx.line(f"for (int j = 0; j < {v}; ++j) w.v[j] = {pad};")
            else:
                ctx.open(f"for (int j = 0; j < {v}; ++j)")
                last = len(acc.shape) - 1
                ctx.line(f"const long long c{last}j = c{last} + j;")
                ctx.line(f"const bool ok = {acc.in_bounds(last=f'c{last}j') or 'true'};")
                ctx.line(f"w.v[j] = ok ? {arr.ptr}[{acc.offset(f'c{last}j')}] : {pad};")
                ctx.close()
            ctx.close()
        if packed:
            ctx.line(f"memcpy(&{out}.w[k0 / 2], &w, sizeof(w));")
        else:
            ctx.line("#pragma unroll")
            ctx.line(f"for (int j = 0; j < {v}; ++j) {out}.v[k0 + j] = w.v[j];")

    _tile_access(ctx, op, arr, op.operands[1:], chunk)


def _store(ctx: Ctx, op: Op) -> None:
    arr = ctx.arrays[op.operands[0].id]
    src = ctx.name(op.operands[1])
    ct = ctx.uses(arr.dtype)

    def chunk(acc: _TileAccess, v: int, lay: Layout, checked: bool) -> None:
        if v == 1:
            cond = acc.in_bounds(valid=lay.valid("e")) if checked else lay.valid("e")
            if lay.replicated:  # one element: thread 0 writes it
                cond = " && ".join(c for c in ("threadIdx.x == 0", cond) if c)
            st = f"{arr.ptr}[{acc.offset()}] = {src}.v[k0];"
            ctx.line(f"if ({cond}) {st}" if cond else st)
            return
        cond = acc.in_bounds(v) if checked else ""
        ctx.open(f"if ({cond})" if cond else "")
        ctx.line(f"tc::Vec<{ct}, {v}> w;")
        ctx.line("#pragma unroll")
        ctx.line(f"for (int j = 0; j < {v}; ++j) w.v[j] = {src}.v[k0 + j];")
        ctx.line(f"*reinterpret_cast<tc::Vec<{ct}, {v}>*>({arr.ptr} + ({acc.offset()})) = w;")
        if cond and not arr.whole_vectors:  # a vector may be partly inside the array
            ctx.close("} else {")
            ctx.depth += 1
            ctx.line("#pragma unroll")
            ctx.open(f"for (int j = 0; j < {v}; ++j)")
            last = len(acc.shape) - 1
            ctx.line(f"const long long c{last}j = c{last} + j;")
            cond = acc.in_bounds(last=f"c{last}j")
            st = f"{arr.ptr}[{acc.offset(f'c{last}j')}] = {src}.v[k0 + j];"
            ctx.line(f"if ({cond}) {st}" if cond else st)
            ctx.close()
        ctx.close()

    _tile_access(ctx, op, arr, op.operands[2:], chunk)


# --- prefetch (an L2 hint: tilecore's extension) -------------------------------------------------
PREFETCH_HEADER = "tilecore/prefetch.cuh"
# Rows of fewer bytes take line prefetches on sm_90 too: a bulk prefetch keeps
# only a row's 16-byte aligned interior, which in a short row may be nothing.
_BULK_MIN_BYTES = 128


def _prefetch(ctx: Ctx, op: Op) -> None:
    """Bring the elements a load with the same operands would read into L2:
    - rows (the tile's last axis) contiguous in the array, on sm_90 and newer:
      one bulk prefetch per row's in-bounds part, rows spread over the threads;
    - contiguous rows below sm_90: the 128-byte lines of each row's in-bounds
      part, the (row, line) pairs spread over the threads;
    - strided rows: each in-bounds element whose line the element before it
      along the array's last axis (in the tile) is not in, one per thread.
    Bounds are always checked: no address outside the array is formed."""
    arr = ctx.arrays[op.operands[0].id]
    ctx.headers.add(PREFETCH_HEADER)
    acc = _TileAccess(ctx, op, arr)
    ctx.open("")
    acc.emit_base(op.operands[1:])
    if acc.shape and arr.stride(acc.order[-1]) == "1":
        row = acc.shape[-1] * arr.dtype.itemsize
        if arch_number(ctx.arch) >= 90 and row >= _BULK_MIN_BYTES:
            _prefetch_rows(ctx, acc, 1, "tc::prefetch_l2_bulk({b}, {e});")
        else:  # the most lines a row of element-aligned elements touches
            lines = (127 + row - arr.dtype.itemsize) // 128 + 1
            _prefetch_rows(ctx, acc, lines, "tc::prefetch_l2_line({b}, {e}, {j});")
    else:
        _prefetch_elements(ctx, acc)
    ctx.close()


def _spread(ctx: Ctx, items: int, body) -> None:
    """Items 0..items-1 spread over the block's threads (thread t takes t,
    t + T, ...), each named p in the C++ statements body() emits."""
    trip = -(-items // ctx.threads)
    if trip > 1:
        ctx.line(ctx.unroll(trip))
        ctx.open(f"for (int k = 0; k < {trip}; ++k)")
        ctx.line(f"const int p = k * {ctx.threads} + (int)threadIdx.x;")
    else:
        ctx.line("const int p = (int)threadIdx.x;")
    guard = items % ctx.threads != 0
    if guard:
        ctx.open(f"if (p < {items})")
    body()
    if guard:
        ctx.close()
    if trip > 1:
        ctx.close()


def _prefetch_rows(ctx: Ctx, acc: _TileAccess, per_row: int, call: str) -> None:
    """`call` per item of each row: item j < per_row of row r is p = r * per_row
    + j; in `call`, {b} and {e} point at the row's in-bounds part [b, e)
    (skipped when empty) and {j} is j."""
    last = len(acc.shape) - 1
    length, dim = acc.shape[last], acc.arr.dims[acc.order[last]]

    def body() -> None:
        row, j = "p", "0"
        if per_row > 1:
            ctx.line(f"const int j = p % {per_row};")
            row, j = f"(p / {per_row})", "j"
        for k, m in enumerate(unravel(row, acc.shape[:-1])):
            ctx.line(f"const long long c{k} = {acc.base[k]} + {m};")
        ctx.line(f"const long long lo = o{last} > 0 ? o{last} : 0;")
        ctx.line(f"const long long hi = o{last} + {length} < {dim} ? o{last} + {length} : "
                 f"(long long){dim};")
        conds = [acc.bound(k, f"c{k}") for k in range(last)] + ["lo < hi"]
        b, e = (f"{acc.arr.ptr} + ({acc.offset(x)})" for x in ("lo", "hi"))
        ctx.line(f"if ({' && '.join(conds)}) {call.format(b=b, e=e, j=j)}")

    _spread(ctx, math.prod(acc.shape[:-1]) * per_row, body)


def _prefetch_elements(ctx: Ctx, acc: _TileAccess) -> None:
    """Each in-bounds element, one per thread, unless the element before it
    along the array's last axis (in the tile and the array) is in its line."""
    ptr = acc.arr.ptr

    def body() -> None:
        if not acc.shape:  # a 0-d array: its one element, by thread 0 (p < 1)
            ctx.line(f"tc::prefetch_l2({ptr});")
            return
        acc.emit_coords("p")
        last = len(acc.shape) - 1
        d = acc.order.index(last)  # the tile axis along the array's last axis
        ctx.open(f"if ({acc.in_bounds()})")
        ctx.line(f"const auto* q = {ptr} + ({acc.offset()});")
        ctx.line(f"if (c{d} == o{d} || c{d} == 0 || "
                 f"!tc::same_line(q, {acc.arr.stride(last)})) tc::prefetch_l2(q);")
        ctx.close()

    _spread(ctx, math.prod(acc.shape), body)


def _gather_scatter_terms(ctx: Ctx, op: Op, arr: ArrayArg, indices, mask, layout: Layout):
    """(condition, offset) C++ expressions for this thread's element k."""
    conds = [layout.valid("e")] if layout.partial else []
    terms = []
    for d, iv in enumerate(indices):
        i = f"(long long){ctx.name(iv)}.v[k]"
        if op.attrs.get("check_bounds", True):
            conds.append(f"{i} >= 0 && {i} < {arr.dims[d]}")
        s = "1" if op.attrs.get("raw") else arr.stride(d)
        terms.append(i if s == "1" else f"{i} * {s}")
    if mask is not None:
        conds.append(f"{ctx.name(mask)}.v[k]")
    return " && ".join(c for c in conds if c), " + ".join(terms)


def split_mask(op: Op, first: int):
    """(indices, mask or None): the operands from `first` on."""
    rest = op.operands[first:]
    if op.attrs.get("has_mask"):
        return rest[:-1], rest[-1]
    return rest, None


def _gather(ctx: Ctx, op: Op) -> None:
    arr = ctx.arrays[op.operands[0].id]
    pad = ctx.scalar(op.operands[1])
    indices, mask = split_mask(op, 2)
    out = ctx.declare(op.result)
    lay = ctx.layout(op.result.type)
    cond, off = _gather_scatter_terms(ctx, op, arr, indices, mask, lay)
    load = f"{arr.ptr}[{off}]"
    ctx.for_each(lay, [f"{out}.v[k] = {f'({cond}) ? {load} : {pad}' if cond else load};"],
                 need_e=lay.partial)


def _scatter(ctx: Ctx, op: Op) -> None:
    arr = ctx.arrays[op.operands[0].id]
    vals = ctx.name(op.operands[1])
    indices, mask = split_mask(op, 2)
    lay = ctx.layout(op.operands[1].type)
    cond, off = _gather_scatter_terms(ctx, op, arr, indices, mask, lay)
    if lay.replicated:
        cond = " && ".join(c for c in ("threadIdx.x == 0", cond) if c)
    st = f"{arr.ptr}[{off}] = {vals}.v[k];"
    ctx.for_each(lay, [f"if ({cond}) {st}" if cond else st], need_e=lay.partial)


def ordered_in_block(rule):
    """`rule` preceded by a block barrier where the access may touch an element
    another thread of the block accessed before it (ir/block_order.py)."""
    def ordered(ctx: Ctx, op: Op) -> None:
        if ctx.barriers is None:
            ctx.barriers = barrier_before(ctx.fn)
        if id(op) in ctx.barriers:
            ctx.line("__syncthreads();  // the block's earlier accesses of this array first")
        rule(ctx, op)
    ordered.__name__ = rule.__name__
    return ordered


RULES = {name: ordered_in_block(rule) for name, rule in
         {"load": _load, "store": _store, "gather": _gather, "scatter": _scatter}.items()}
# A prefetch orders nothing: no block barrier before it (ir/block_order.py leaves it out).
RULES["prefetch"] = _prefetch
