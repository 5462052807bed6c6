"""Memory ops of the generator beyond the prologue's loads: more loads, gathers
(masks, padding values, out-of-bounds indices), raw-memory loads (offsets in
the array or masked off, weak or with a memory order), scatters to indices unique
per block, read-after-write of a block's own tile, mid-program stores, L2
prefetches, and scalars read from arrays (shapes, strides, tile counts, the
grid size). Each function takes the generator and returns whether it emitted
anything.
"""
from __future__ import annotations

import math
from typing import Optional

from ...language import dtypes as D
from .consts import literal, loose_const
from .generate import Gen, carrier_ok
from .model import Var
from .typerules import ARITH, INTS, STORAGE_ONLY, broadcast

__all__ = ["OPS"]


def array_scalar(g: Gen) -> bool:
    """An int32 scalar read from an array parameter: a dimension, a stride, a
    tile count, or the grid size."""
    arrays = [p for p in g.params if p.role == "in"]
    r = g.rng.random()
    if r < 0.2 or not arrays:
        expr = f"ct.num_blocks({g.rng.randrange(2)})"
        g.feature("scalar", "num_blocks")
    else:
        p = g.rng.choice(arrays)
        nd = p.array().ndim
        k = g.rng.randrange(nd)
        if r < 0.55:
            expr, what = f"{p.name}.shape[{k}]", "shape"
        elif r < 0.7:
            expr, what = f"{p.name}.strides[{k}]", "strides"
        else:
            shape = tuple(g.rng.choice((1, 2, 4, 8)) for _ in range(nd))
            expr, what = f"ct.num_tiles({p.name}, {k}, {shape})", "num_tiles"
        g.feature("scalar", what)
    g.define(Var(g.name("n"), D.int32, ()), expr)
    return True


def _padding_value(g: Gen, dtype) -> str:
    """A `padding_value=` keyword of a masked or out-of-bounds read of dtype."""
    pad = loose_const(g, dtype if dtype.arithmetic else D.float32)
    if dtype.is_integer and isinstance(pad, float):
        pad = 0
    return f", padding_value={literal(pad)}"


def gather(g: Gen) -> bool:
    dtype = g.dtype(storage=0.1)
    rank = 1 if g.chance(0.7) else 2
    shape = tuple(g.rng.randint(1, 40 if rank == 1 else 9) for _ in range(rank))
    arr = g.input_array(dtype, shape)
    idx = []
    for axis in range(rank):
        n = shape[axis]
        v = g.pick(lambda v: carrier_ok(v) and v.dtype in INTS and v.shape and
                   math.prod(v.shape) <= g.max_elems)
        if v is not None and g.chance(0.4):
            src = v.name if g.chance(0.3) or not v.dtype.signed else f"{v.name} % {n + 3} - 1"
            idx.append((src, v.shape))
            g.use(v)
            continue
        t = g.rng.choice((1, 2, 4, 8, 16, 32))
        ar = f"ct.arange({t})"
        if rank == 2:
            ar += "[:, None]" if axis == 0 else "[None, :]"
        off = g.rng.randint(-2, 2)
        src = f"{ar} + bl * {t} + {off}" if g.chance(0.5) else f"{ar} * 2 + {off}"
        idx.append((src, (t, 1) if rank == 2 and axis == 0 else (1, t) if rank == 2 else (t,)))
    out_shape: Optional[tuple] = ()
    for _, s in idx:
        out_shape = broadcast(out_shape, s) if out_shape is not None else None
    if out_shape is None or math.prod(out_shape) > g.max_elems:
        return False
    kw = ""
    mask = g.pick(lambda v: v.dtype.is_bool and v.tol.kind == "exact"
                  and broadcast(v.shape, out_shape) == out_shape)
    if mask is not None and g.chance(0.4):
        kw += f", mask={mask.name}"
        g.use(mask)
        g.feature("gather", "mask")
    if g.chance(0.4):
        kw += _padding_value(g, dtype)
        g.feature("gather", "padding_value")
    indices = idx[0][0] if rank == 1 else f"({idx[0][0]}, {idx[1][0]})"
    g.define(Var(g.name("t"), dtype, out_shape), f"ct.gather({arr}, {indices}{kw})")
    g.feature("gather", dtype.name, f"rank{rank}")
    return True


def raw_load(g: Gen) -> bool:
    """Array.get_raw_memory().load_offset of a contiguous input array at offsets
    inside it, or masked off (padding_value), weak or with tilecore's memory
    order (RELAXED / ACQUIRE at BLOCK, DEVICE or SYS scope: reads of data no
    block writes give the same values either way)."""
    dtype = g.dtype(storage=0.1)
    n = g.rng.randint(1, 40)
    arr = g.input_array(dtype, (n,), contiguous=True)
    t = g.rng.choice((1, 2, 4, 8, 16, 32))
    off = g.name("t")
    kw = ""
    if g.chance(0.5):
        g.emit(f"{off} = (ct.arange({t}) * {g.rng.choice((1, 3, 7))} + bl) % {n}")
    else:
        g.emit(f"{off} = ct.arange({t}) + bl * {t} - {g.rng.randint(0, 2)}")
        kw += f", mask=({off} >= 0) & ({off} < {n})"
        g.feature("raw_load", "mask")
        if g.chance(0.5):
            kw += _padding_value(g, dtype)
    if g.chance(0.6):
        order = g.rng.choice(("RELAXED", "ACQUIRE"))
        scope = g.rng.choice(("BLOCK", "DEVICE", "SYS"))
        kw += f", memory_order=ct.MemoryOrder.{order}, memory_scope=ct.MemoryScope.{scope}"
        g.feature("raw_load", order)
    raw = g.name("r")
    g.emit(f"{raw} = {arr}.get_raw_memory()")
    g.define(Var(g.name("t"), dtype, (t,)), f"{raw}.load_offset({off}{kw})")
    g.feature("raw_load", dtype.name)
    return True


def scatter(g: Gen) -> bool:
    """Scatter a value to indices unique per block (a permutation of a window
    of its own), some of them out of bounds."""
    v = g.pick(lambda v: len(v.shape) <= 1 and v.dtype in ARITH + STORAGE_ONLY)
    if v is None:
        return False
    t = v.shape[0] if v.shape else g.rng.choice((1, 2, 4, 8, 16))
    blocks = g.nblocks
    k = g.rng.choice((1, 3, 5, 7))
    perm = f"ct.arange({t}) * {k} % {t}" if t > 1 else "ct.arange(1)"
    idx = g.name("t")
    kw = ""
    mask = g.pick(lambda m: m.dtype.is_bool and m.tol.kind == "exact"
                  and broadcast(m.shape, (t,)) == (t,))
    if mask is not None and g.chance(0.4):
        kw = f", mask={mask.name}"
        g.use(mask)
        g.feature("scatter", "mask")
    if g.chance(0.7):
        off = g.rng.randint(-2, 2)
        g.emit(f"{idx} = {perm} + bl * {t} + {off}")
        length = max(1, blocks * t + g.rng.randint(-2, 2))
        out, sh = g.output_array(v.dtype, (length,), v.tol, v.shadow is not None)
        target = idx
        g.feature("scatter", "rank1")
    else:
        g.emit(f"{idx} = {perm}")
        cols = max(1, t + g.rng.randint(-2, 1))
        out, sh = g.output_array(v.dtype, (blocks + g.rng.randint(0, 1), cols), v.tol,
                                 v.shadow is not None)
        target = f"(bl, {idx})"
        g.feature("scatter", "rank2")
    g.use(v)
    g.emit(f"ct.scatter({out}, {target}, {v.name}{kw})")
    if sh is not None:
        g.emit(f"ct.scatter({sh}, {target}, {v.shadow}{kw})")
    g.feature("scatter", v.dtype.name)
    return True


def inplace(g: Gen) -> bool:
    """Read-modify-write of a block's own tile of an array, then read it back
    in another tile shape or by gather: in program order, the reads after the
    store see the stored values (threads of the block exchange data through
    memory)."""
    v = g.pick(lambda v: len(v.shape) <= 1 and carrier_ok(v) and v.dtype in ARITH
               and (not v.shape or v.shape[0] >= 2))
    if v is None:
        return False
    t = v.shape[0] if v.shape else g.rng.choice((2, 4, 8, 16, 32))
    half = t // 2
    length = g.nblocks * t - g.rng.randint(0, half - 1 if half > 1 else 0)
    arr, _ = g.output_array(v.dtype, (length,), v.tol, shadow=False)
    before = Var(g.name("t"), v.dtype, (t,))
    g.define(before, f"ct.load({arr}, index=(bl,), shape=({t},))")
    g.use(v)
    tile = v.name if v.shape else f"ct.broadcast_to({v.name}, ({t},))"  # not a 1-element tile
    g.emit(f"ct.store({arr}, index=(bl,), tile={tile})")
    after = Var(g.name("t"), v.dtype, (half,), v.tol)
    r = g.rng.random()
    if r < 0.4:
        g.define(after, f"ct.load({arr}, index=(2 * bl + {g.rng.randint(0, 1)},), "
                        f"shape=({half},))")
    elif r < 0.7:
        k = g.rng.choice((1, 3, 5))
        g.define(after, f"ct.gather({arr}, bl * {t} + (ct.arange({half}) * {k} % {t}))")
    else:
        after.shape = (t,)
        g.define(after, f"ct.load({arr}, index=(bl,), shape=({t},), order=(0,))")
    g.feature("inplace", "read_after_write")
    return True


def prefetch(g: Gen) -> bool:
    """An L2 prefetch (a hint: it changes no value) of a tile of an array the
    kernel reads or writes, sometimes through a tiled view or in another
    order, at a block index plus 0..2: partly or wholly past the end too."""
    arrays = [p for p in g.params if p.role in ("in", "out")]
    if not arrays:
        return False
    p = g.rng.choice(arrays)
    nd = p.array().ndim
    shape = g.shape(rank=nd)
    idx = [f"bl + {g.rng.randint(0, 2)}" if k == 0 else str(g.rng.randint(0, 1))
           for k in range(nd)]
    index = "(" + ", ".join(idx) + ("," if nd == 1 else "") + ")"
    if g.chance(0.3):
        g.emit(f"{p.name}.tiled_view({shape}).prefetch({index})")
        g.feature("prefetch", "view")
    else:
        order = ""
        if nd > 1 and g.chance(0.3):
            order = f", order={tuple(g.rng.sample(range(nd), nd))}"
            g.feature("prefetch", "order")
        g.emit(f"ct.prefetch({p.name}, {index}, {shape}{order})")
    g.feature("prefetch", f"rank{nd}")
    return True


def grid_control(g: Gen) -> bool:
    """Programmatic dependent launch's statements, anywhere: the fuzzer's launches
    are plain ones, where neither changes a value (the wait then returns at once)."""
    if g.chance(0.5):
        g.emit("ct.grid_dependency_control_wait()")
        g.feature("grid_control", "wait")
    else:
        g.emit("ct.grid_dependency_control_launch_dependents()")
        g.feature("grid_control", "launch_dependents")
    return True


def store_now(g: Gen) -> bool:
    v = g.pick(lambda v: v.dtype in ARITH + STORAGE_ONLY and v.name not in ("b0", "b1", "b2", "bl"))
    if v is None:
        return False
    g.store(v)
    return True


def load(g: Gen) -> bool:
    g.load()
    return True


OPS = {
    "array_scalar": (3, array_scalar), "load": (5, load), "gather": (4, gather),
    "raw_load": (1.5, raw_load),
    "scatter": (2.5, scatter), "store": (2.5, store_now), "inplace": (2, inplace),
    "prefetch": (1, prefetch), "grid_control": (0.5, grid_control),
}
