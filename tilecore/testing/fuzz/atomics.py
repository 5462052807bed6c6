"""Atomics whose results are deterministic: `ct.atomic_add/max/min/and/or/xor/
xchg/cas`, `TiledView.atomic_store_*` and the raw-memory `atomic_*_offset`
methods, each on an output array of its own that nothing else of the kernel
reads or writes.

The GPU applies the elements of an atomic, and the blocks, in any order, so:
- add (integers wrapping; floats only of small integers, whose every partial
  sum is exact), max, min, and, or, xor may hit repeated indices within a tile
  and across blocks (many blocks updating few addresses, indices taken from the
  data too): the final array is the same in every order. One array takes one
  operator (add and max do not commute with each other); several statements,
  loops included, may update it. Their returned old values are discarded.
- Old values are kept (and feed later ops) only where each address is hit once
  in the whole grid: indices unique within the tile and to the block (a
  permutation of a window at `bl * t`), one statement outside any loop, on a
  fresh array no other atomic touches. xchg and cas run only at such unique
  indices (in loops too: the block's own program order, old values discarded).
- memory_order takes every value atomics accept (RELAXED, ACQUIRE, RELEASE,
  ACQ_REL: none changes one thread's result); memory_scope DEVICE or SYS, and
  BLOCK only where no two blocks share an address. check_bounds=True with
  out-of-bounds indices (negative or past the end: no effect, old value 0),
  check_bounds=False only where every index is in bounds. Raw-memory offsets
  stay inside the (contiguous) array or are masked off.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ...language import dtypes as D
from ...language.dtypes import DType
from .generate import Gen, carrier_ok
from .model import OutputSpec, Var
from .tolerance import EXACT
from .typerules import INTS, is_pow2

__all__ = ["OPS"]

_INTS = (D.int32, D.int64, D.uint32, D.uint64)
_FNS = {"add": 4, "max": 2, "min": 2, "and": 1.5, "or": 1.5, "xor": 1.5, "xchg": 1.5, "cas": 1.5}
_FLOAT_OK = {"add": (D.float32, D.float64, D.float16, D.bfloat16),
             "xchg": (D.float32, D.float64), "cas": (D.float32, D.float64)}
_ORDERS = ("RELAXED", "ACQUIRE", "RELEASE", "ACQ_REL")
_EXACT_INTS = {D.float16: 2048, D.bfloat16: 256}   # integers every partial sum stays within


def _dtype(g: Gen, fn: str) -> DType:
    floats = _FLOAT_OK.get(fn, ())
    table = [(D.int32, 4), (D.int64, 2), (D.uint32, 2), (D.uint64, 1.5)]
    table += [(d, 2 if d in (D.float32, D.float64) else 0.7) for d in floats]
    dts, ws = zip(*table)
    return g.rng.choices(dts, ws)[0]


def _array(g: Gen, dtype: DType, shape: tuple, small: bool, contiguous: bool = False) -> str:
    """A new output array only atomics touch; `small`: small integer contents
    (exact float sums, compare-and-swap matches), zeros for 16-bit floats."""
    p = g._array("o", "out", dtype, shape, special=0.0, contiguous=contiguous)
    if small or dtype.is_float:
        p.base[...] = 0 if dtype in _EXACT_INTS else g.np.integers(-4, 5, p.base.shape)
        if not dtype.signed:
            p.base[...] = np.abs(p.base.astype(np.int64)).astype(p.base.dtype)
    g.outputs[p.name] = OutputSpec(EXACT)
    return p.name


def _ints(g: Gen, shape: tuple) -> Optional[Var]:
    """An integer (or bool) value broadcasting to `shape`."""
    return g.pick(lambda v: v.dtype in INTS + (D.bool_,) and carrier_ok(v)
                  and len(v.shape) <= len(shape) and v.shape == shape[len(shape) - len(v.shape):])


def _update(g: Gen, dtype: DType, shape: tuple, hits: int, any_value: bool = False) -> str:
    """An update (or desired value) of `dtype` broadcasting to `shape`; at most
    `hits` of them land on one address (float sums stay exact); `any_value`:
    any float value (xchg, cas: no arithmetic)."""
    t = shape[-1]
    if dtype in _EXACT_INTS:     # non-negative and small: every partial sum exact
        v = _ints(g, shape)
        src = f"({v.name} & 1)" if v is not None and v.dtype is not D.bool_ else \
            (v.name if v is not None else f"(ct.arange({t}) & 1)")
        if v is not None:
            g.use(v)
        if hits > _EXACT_INTS[dtype]:
            return "0"
        return f"{src}.astype(ct.{dtype.name})"
    if dtype.is_float:
        same = g.pick(lambda v: v.dtype is dtype and v.tol.kind == "exact" and not v.product
                      and v.shape == shape[len(shape) - len(v.shape):])
        v = _ints(g, shape)
        if same is not None and any_value and g.chance(0.5):
            g.use(same)
            return same.name
        src = f"(ct.arange({t}) % 7 - 3)" if v is None else f"({v.name} % 4)" \
            if v.dtype is not D.bool_ else v.name
        if v is not None:
            g.use(v)
        return f"{src}.astype(ct.{dtype.name})"
    r = g.rng.random()
    if r < 0.15:
        return str(g.rng.choice((0, 1, 3, 255, -1, -7)) if dtype.signed
                   else g.rng.choice((0, 1, 6, 255, 65535)))
    v = _ints(g, shape)
    if v is None or r < 0.3:
        return f"(ct.arange({t}) * {g.rng.choice((1, 3, 37))} + bl).astype(ct.{dtype.name})"
    g.use(v)
    return v.name if v.dtype is dtype else f"{v.name}.astype(ct.{dtype.name})"


def _kwargs(g: Gen, unique: bool, in_bounds: bool, bounds: bool = True) -> str:
    kw = ""
    if g.chance(0.5):
        order = g.rng.choice(_ORDERS)
        kw += f", memory_order=ct.MemoryOrder.{order}"
        g.feature("atomic", "order", order)
    if g.chance(0.4):
        scope = g.rng.choice(("DEVICE", "SYS") + (("BLOCK", "BLOCK") if unique else ()))
        kw += f", memory_scope=ct.MemoryScope.{scope}"
        g.feature("atomic", "scope", scope)
    if not bounds:
        return kw
    if in_bounds and g.chance(0.4):
        kw += ", check_bounds=False"
        g.feature("atomic", "check_bounds_false")
    elif g.chance(0.2):
        kw += ", check_bounds=True"
    return kw


def _shared(g: Gen) -> dict:
    """name -> (fn, dtype, shape) of the rank-1 or rank-2 arrays several atomics
    may update (not 16-bit floats: their sums stay exact per statement only)."""
    return g.atomic_arrays


def atomic(g: Gen) -> bool:
    """ct.atomic_<fn> on unique indices (old values kept) or repeated ones."""
    fn = g.rng.choices(list(_FNS), list(_FNS.values()))[0]
    shared = _shared(g)
    reuse = [n for n, (f, _, _) in shared.items() if f == fn]
    unique = fn in ("xchg", "cas") or (not reuse and g.chance(0.35))
    v = g.pick(lambda v: len(v.shape) == 1 and carrier_ok(v) and is_pow2(v.shape[0])
               and v.shape[0] <= 64)
    t = v.shape[0] if v is not None and g.chance(0.7) else g.rng.choice((1, 2, 4, 8, 16, 32))
    blocks = g.nblocks
    rank2 = g.chance(0.3)
    if unique:
        k = g.rng.choice((1, 3, 5, 7))
        perm = f"ct.arange({t}) * {k} % {t}"
        off = g.rng.randint(-2, 2) if g.chance(0.6) else 0
        idx = g.name("t")
        if rank2:
            cols = max(1, t + g.rng.randint(-2, 1) if off else t)
            shape = (blocks + g.rng.randint(0, 1), cols)
            g.emit(f"{idx} = {perm}{f' + {off}' if off else ''}")
            target = f"(bl, {idx})"
            in_bounds = off == 0 and cols >= t
        else:
            length = max(1, blocks * t + (g.rng.randint(-2, 2) if off else g.rng.randint(0, 2)))
            shape = (length,)
            g.emit(f"{idx} = {perm} + bl * {t}{f' + {off}' if off else ''}")
            target = idx
            in_bounds = off == 0 and length >= blocks * t
        dtype = _dtype(g, fn)
        arr = _array(g, dtype, shape, small=fn == "cas" or dtype.is_float)
        hits = 1 if not g.loops else 64
        g.feature("atomic", "unique")
    else:
        m = g.rng.choice((1, 2, 3, 5, 8))
        if reuse and g.chance(0.6):
            arr = g.rng.choice(reuse)
            _, dtype, shape = shared[arr]
            g.feature("atomic", "reused_array")
        else:
            dtype = _dtype(g, fn)
            shape = (max(1, m + g.rng.randint(-1, 1)),)
            if rank2:
                shape = (g.rng.randint(1, 3), shape[0])
            arr = _array(g, dtype, shape, small=dtype.is_float)
            if dtype not in _EXACT_INTS:
                shared[arr] = (fn, dtype, shape)
        n = shape[-1]
        src = g.pick(lambda v: v.dtype in INTS and carrier_ok(v) and v.shape == (t,))
        r = g.rng.random()
        if src is not None and r < 0.35:
            g.use(src)
            col = f"{src.name} % {n + 1}"
            g.feature("atomic", "data_indices")
        elif r < 0.5:
            col = f"ct.zeros(({t},), ct.int32) + bl % {n}"
        else:
            col = f"(ct.arange({t}) * {g.rng.choice((1, 3, 5))} + bl) % {m}"
        target = f"(bl % {g.rng.randint(1, 3)}, {col})" if len(shape) == 2 else col
        in_bounds = False
        hits = blocks * t * (1 if not g.loops else 64) * 2
        g.feature("atomic", "repeated")
    upd = _update(g, dtype, (t,), hits, any_value=fn in ("xchg", "cas"))
    if fn == "cas":
        expected = f"(ct.arange({t}) % 4).astype(ct.{dtype.name})" if g.chance(0.7) \
            else _update(g, dtype, (t,), 1, any_value=True)
        call = f"ct.atomic_cas({arr}, {target}, {expected}, {upd}{_kwargs(g, unique, in_bounds)})"
    else:
        call = f"ct.atomic_{fn}({arr}, {target}, {upd}{_kwargs(g, unique, in_bounds)})"
    if unique and not g.loops:
        g.define(Var(g.name("t"), dtype, (t,)), call)
        g.feature("atomic", "old_used")
    else:
        g.emit(call)
    g.feature("atomic", fn, dtype.name)
    if len(shape) == 2:
        g.feature("atomic", "rank2")
    return True


def view_atomic(g: Gen) -> bool:
    """TiledView.atomic_store_<fn> of a tile at a tile index several blocks share."""
    fn = g.rng.choices(("add", "max", "min", "and", "or", "xor"), (3, 1, 1, 1, 1, 1))[0]
    dtype = _dtype(g, fn)
    rank = 1 if g.chance(0.7) else 2
    tile = g.shape(rank=rank, max_elems=64)
    tiles = g.rng.randint(1, 3)
    shape = tuple(s * (tiles if k == 0 else 1) + g.rng.randint(-1, 0) for k, s in enumerate(tile))
    shape = tuple(max(1, s) for s in shape)
    arr = _array(g, dtype, shape, small=dtype.is_float)
    if rank == 1 and dtype not in _EXACT_INTS:
        _shared(g)[arr] = (fn, dtype, shape)   # ct.atomic_<fn> may update it too
    index = [f"bl % {tiles + g.rng.randint(0, 1)}"] + ["0"] * (rank - 1)
    index_src = "(" + ", ".join(index) + ("," if rank == 1 else "") + ")"
    size = int(np.prod(tile))
    if rank == 1:
        upd = _update(g, dtype, tile, g.nblocks * (1 if not g.loops else 64))
    else:
        flat = _update(g, dtype, (size,), g.nblocks * (1 if not g.loops else 64))
        upd = flat if flat.lstrip("-").isdigit() else \
            f"ct.reshape(ct.broadcast_to({flat}, ({size},)), {tile})"
    view = g.name("v")
    g.emit(f"{view} = {arr}.tiled_view({tile})")
    g.emit(f"{view}.atomic_store_{fn}({index_src}, {upd})")
    g.feature("atomic", "view", fn, dtype.name)
    return True


def raw_atomic(g: Gen) -> bool:
    """Array.get_raw_memory().atomic_<fn>_offset at offsets inside a contiguous
    array, the rest masked off."""
    fn = g.rng.choices(("add", "max", "min", "and", "or", "xor"), (3, 1, 1, 1, 1, 1))[0]
    dtype = _dtype(g, fn)
    n = g.rng.randint(1, 9)
    t = g.rng.choice((1, 2, 4, 8, 16))
    arr = _array(g, dtype, (n,), small=dtype.is_float, contiguous=True)
    off = g.name("t")
    if g.chance(0.5):
        g.emit(f"{off} = (ct.arange({t}) * {g.rng.choice((1, 3))} + bl) % {n}")
        mask = ""
    else:
        g.emit(f"{off} = ct.arange({t}) + bl - 1")
        mask = f", mask=({off} >= 0) & ({off} < {n})"
        g.feature("atomic", "raw", "mask")
    upd = _update(g, dtype, (t,), g.nblocks * t * (1 if not g.loops else 64))
    raw = g.name("r")
    g.emit(f"{raw} = {arr}.get_raw_memory()")
    kw = _kwargs(g, False, False, bounds=False)
    g.emit(f"{raw}.atomic_{fn}_offset({off}, {upd}{mask}{kw})")
    g.feature("atomic", "raw", fn, dtype.name)
    return True


OPS = {"atomic": (6, atomic), "view_atomic": (1.5, view_atomic), "raw_atomic": (1.5, raw_atomic)}
