"""A third oracle, on the host: the NumPy model of scans and folds.

Every `ct.cumsum`/`ct.cumprod`/`ct.scan`/`ct.reduce` with a combining function
that scans.py generates comes with "probes": the kernel stores its operands and
results (flattened, one row per block) and sets a per-block flag next to them
(`model.Check` records where). After the interpreter has run, `check` folds the
stored operands again here, in NumPy only, strictly one element after the other
(left to right; from the end for reverse=True, the running value always the
left operand), and compares. An exclusive scan's element i is compared with
the fold of the elements before it (after it, reversed), and its first element
(last, reversed), bit for bit, with the identity constant the Check records,
which is never combined:

  exact   integer and bool functions (wrapping in the dtype), select-like
          functions (take the left or right operand, first non-zero, arg-max
          pairs), left folds of floats (`sequential=True`: IEEE operations in
          their order, 16-bit floats computed wider and rounded once): bit for
          bit, any NaN equal to any NaN;
  zsign   float max/min: equal values (IEEE leaves max(+0, -0) open);
  sum     float additions in any association (scans, folds without
          `sequential`): the model sums in float64; any association of k terms
          is within gamma(k - 1) = (k-1)u / (1 - (k-1)u) times the sum of their
          magnitudes (u: unit roundoff of the dtype, in which every step rounds,
          16-bit floats too) of the exact sum; elements whose finite partial sums
          may overflow, or where (k-1)u >= 1/2, are not checked; non-finite
          results must be the model's (NaN, or the infinity);
  prod    float products (cumprod): relative error gamma(k - 1) while no partial
          product can overflow or underflow (every factor's max(|x|, 1/|x|)
          raised to k stays inside the exponent range), a NaN where the model
          has one, exact zeros; other elements are not checked.

The functions are listed once, in FUNCS, with the tile-code source the
generator writes and the NumPy function this model applies.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import ml_dtypes
import numpy as np

from ...language import dtypes as D

__all__ = ["Func", "FUNCS", "check", "scan_reference"]


def _num(a: np.ndarray) -> np.ndarray:
    """Values for comparisons (order-preserving and exact: floats to float64)."""
    a = np.asarray(a)
    return a.astype(np.float64) if _is_float(a.dtype) else a


def _is_float(dt) -> bool:
    dt = np.dtype(dt)
    return dt.kind == "f" or dt in (np.dtype(ml_dtypes.bfloat16),)


def _arith(op: Callable, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`op` in a's dtype: integers wrap; floats are computed in float64 and
    rounded once (correct rounding of +, - for float32 and narrower: float64 has
    more than 2p + 2 bits)."""
    a, b = np.asarray(a), np.asarray(b)
    if _is_float(a.dtype) and a.dtype != np.float64:
        return op(a.astype(np.float64), b.astype(np.float64)).astype(a.dtype)
    return op(a, b).astype(a.dtype, copy=False)


@dataclass(frozen=True)
class Func:
    """A combining function of `arity` tiles (2 * arity scalars in: the earlier
    values e0, e1, then the later ones l0, l1). `exprs`: source templates of its
    results (`{k}` is `let`, inlined or a local); `refs`: direct references to
    a tile function that computes it (`ct.maximum`, `max`); `ref`: the NumPy
    function on the arrays (earlier, later); `assoc`: False for functions only
    a sequential fold may take."""

    name: str
    arity: int
    exprs: tuple[str, ...]
    ref: Callable
    let: str = ""
    refs: tuple[str, ...] = ()
    assoc: bool = True
    variants: tuple[tuple[str, ...], ...] = ()   # other spellings of `exprs`


def _affine(e, l):
    """x -> a1 x + b1, then x -> a2 x + b2: (a1 a2, a2 b1 + b2), wrapping."""
    (a1, b1), (a2, b2) = e, l
    return _arith(np.multiply, a1, a2), _arith(np.add, _arith(np.multiply, a2, b1), b2)


def _pick(greater: bool):
    def ref(e, l):
        (va, ia), (vb, ib) = e, l
        x, y = _num(va), _num(vb)
        first = (x > y) if greater else (x < y)
        left = first | ((x == y) & (_num(ia) < _num(ib)))
        return np.where(left, va, vb).astype(va.dtype), np.where(left, ia, ib).astype(ia.dtype)
    return ref


def _segsum(e, l):
    (f1, v1), (f2, v2) = e, l
    return f1 | f2, np.where(f2, v2, _arith(np.add, v1, v2)).astype(v1.dtype)


_one = lambda f: (lambda e, l: (f(e[0], l[0]),))  # noqa: E731

FUNCS: dict[str, Func] = {f.name: f for f in (
    Func("add", 1, ("{e0} + {l0}",), _one(lambda a, b: _arith(np.add, a, b)),
         refs=("ct.add",), variants=(("ct.add({e0}, {l0})",),)),
    Func("mul", 1, ("{e0} * {l0}",), _one(lambda a, b: _arith(np.multiply, a, b)),
         refs=("ct.mul",)),
    Func("max", 1, ("ct.maximum({e0}, {l0})",), _one(lambda a, b: _arith(np.maximum, a, b)),
         refs=("ct.maximum", "max"), variants=(("max({e0}, {l0})",),)),
    Func("min", 1, ("ct.minimum({e0}, {l0})",), _one(lambda a, b: _arith(np.minimum, a, b)),
         refs=("ct.minimum", "min"), variants=(("min({e0}, {l0})",),)),
    Func("and", 1, ("{e0} & {l0}",), _one(np.bitwise_and), refs=("ct.bitwise_and",)),
    Func("or", 1, ("{e0} | {l0}",), _one(np.bitwise_or), refs=("ct.bitwise_or",)),
    Func("xor", 1, ("{e0} ^ {l0}",), _one(np.bitwise_xor), refs=("ct.bitwise_xor",),
         variants=(("ct.bitwise_xor({e0}, {l0})",),)),
    # associative, not commutative, and with no identity: tilecore never combines one
    Func("left", 1, ("{e0}",), _one(lambda a, b: a)),
    Func("right", 1, ("{l0}",), _one(lambda a, b: b)),
    Func("first_nonzero", 1, ("ct.where({e0} != 0, {e0}, {l0})",),
         _one(lambda a, b: np.where(_num(a) != 0, a, b).astype(a.dtype))),
    Func("last_nonzero", 1, ("ct.where({l0} != 0, {l0}, {e0})",),
         _one(lambda a, b: np.where(_num(b) != 0, b, a).astype(a.dtype))),
    # not associative: only for sequential folds (left to right)
    Func("sub", 1, ("{e0} - {l0}",), _one(lambda a, b: _arith(np.subtract, a, b)),
         assoc=False, refs=("ct.sub",)),
    # pairs
    Func("affine", 2, ("{e0} * {l0}", "{l0} * {e1} + {l1}"), _affine),
    Func("argmax", 2, ("ct.where({k}, {e0}, {l0})", "ct.where({k}, {e1}, {l1})"),
         _pick(True), let="({e0} > {l0}) | (({e0} == {l0}) & ({e1} < {l1}))"),
    Func("argmin", 2, ("ct.where({k}, {e0}, {l0})", "ct.where({k}, {e1}, {l1})"),
         _pick(False), let="({e0} < {l0}) | (({e0} == {l0}) & ({e1} < {l1}))"),
    Func("segsum", 2, ("{e0} | {l0}", "ct.where({l0}, {l1}, {e1} + {l1})"), _segsum),
)}


# --- the model --------------------------------------------------------------------------------
# NumPy's own running accumulations where they compute what the function does
# (integers and bools: exact, wrapping; native floats: max/min propagate NaN)
_UFUNCS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum,
           "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}


def _lanes(x: np.ndarray, axis: int, reverse: bool) -> np.ndarray:
    """x with `axis` last (reversed for reverse), as (lanes, n)."""
    y = np.moveaxis(np.asarray(x), axis, -1)
    if reverse:
        y = y[..., ::-1]
    return np.ascontiguousarray(y).reshape(-1, y.shape[-1])


def _unlanes(y: np.ndarray, shape: tuple, axis: int, reverse: bool) -> np.ndarray:
    moved = tuple(s for i, s in enumerate(shape) if i != axis) + (shape[axis],)
    y = y.reshape(moved)
    if reverse:
        y = y[..., ::-1]
    return np.moveaxis(y, -1, axis)


def _running(func: Func, lanes: list[np.ndarray]) -> list[np.ndarray]:
    """The running values of `func` folded one element after the other along
    each lane (the running value the left operand)."""
    x = lanes[0]
    with np.errstate(all="ignore"):
        if func.arity == 1:
            uf = _UFUNCS.get(func.name)
            if uf is not None and (x.dtype.kind in "biu" or (
                    x.dtype.kind == "f" and func.name in ("max", "min"))):
                return [uf.accumulate(x, axis=-1, dtype=x.dtype)]
            if func.name == "left":
                return [np.repeat(x[:, :1], x.shape[1], axis=1)]
            if func.name == "right":
                return [x.copy()]
        out = [np.empty_like(v) for v in lanes]
        acc = [v[:, 0] for v in lanes]
        for i in range(x.shape[1]):
            if i:
                acc = [np.asarray(a) for a in func.ref(acc, [v[:, i] for v in lanes])]
            for o, a in zip(out, acc):
                o[:, i] = a
    return out


def _seed(first, lanes: int, dtype) -> np.ndarray:
    """The identity constant `first` converted to `dtype` (floats rounded once,
    from float64, as the front end converts it), one per lane: (lanes, 1)."""
    return np.full((lanes, 1), np.asarray(first).astype(dtype), dtype)


def _shifted(y: np.ndarray, first) -> np.ndarray:
    """An exclusive scan's lanes from the inclusive ones `y` (lanes, n): each
    element the running value before it, the first the constant `first`."""
    return np.concatenate((_seed(first, y.shape[0], y.dtype), y[:, :-1]), axis=1)


def scan_reference(func: Func, xs: list[np.ndarray], axis: int, reverse: bool = False,
                   identity: Optional[tuple] = None) -> list[np.ndarray]:
    """The inclusive scan of `xs` along `axis`, one element after the other;
    with `identity` (one constant per x), the exclusive scan it seeds."""
    out = _running(func, [_lanes(x, axis, reverse) for x in xs])
    if identity is not None:
        out = [_shifted(o, v) for o, v in zip(out, identity)]
    return [_unlanes(o, x.shape, axis, reverse) for o, x in zip(out, xs)]


def _float_model(mode: str, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """(float64 running sums or products, their terms' scale, the running count
    of NaNs, the running count of zeros) along the last axis of (lanes, n)."""
    v = x.astype(np.float64)
    with np.errstate(all="ignore"):
        if mode == "sum":
            model = np.cumsum(v, axis=-1)   # float64: far below the bound's resolution
            scale = np.cumsum(np.where(np.isfinite(v), np.abs(v), 0.0), axis=-1)
        else:
            model = np.cumprod(v, axis=-1)
            a = np.abs(v)
            spread = np.where((a > 0) & np.isfinite(a), np.maximum(a, 1.0 / a), 1.0)
            scale = np.maximum.accumulate(np.where(np.isfinite(a), spread, np.inf), axis=-1)
    nans = np.cumsum(np.isnan(v), axis=-1)
    zeros = np.cumsum(v == 0, axis=-1)
    return model, scale, nans, zeros


def _compare_float(mode: str, got: np.ndarray, x: np.ndarray, dtype
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bad elements of `got` (lanes, n or 1) against the float model of x
    (lanes, n), the model, the bound)."""
    model, scale, nans, zeros = _float_model(mode, x)
    if got.shape[-1] != x.shape[-1]:          # a fold: the last element of each lane
        model, scale, nans, zeros = (a[:, -1:] for a in (model, scale, nans, zeros))
        k = np.full(got.shape, x.shape[-1], np.float64)
    else:
        k = np.broadcast_to(np.arange(1, x.shape[-1] + 1, dtype=np.float64), got.shape)
    fi = ml_dtypes.finfo(dtype)
    u = float(fi.eps) / 2
    g = got.astype(np.float64)
    with np.errstate(all="ignore"):
        ku = (k - 1) * u
        gamma = np.where(ku < 0.5, ku / (1 - ku), np.inf) * 1.0001 + 2.0 ** -50 * k
        if mode == "sum":
            checked = (ku < 0.5) & (scale * (1 + 2 * gamma) < float(fi.max) / 2)
            bound = gamma * scale + float(fi.smallest_subnormal)
        else:
            room = min(int(fi.maxexp), -int(fi.minexp)) - 2
            checked = (ku < 0.5) & (k * np.log2(scale) < room)
            bound = gamma * np.abs(model)
        same = (g == model) | (np.isnan(g) & np.isnan(model))
        finite = np.isfinite(model)
        near = np.isfinite(g) & (np.abs(g - model) <= bound)
        bad = checked & ~same & (~finite | ~near)
        if mode == "prod":
            # a NaN factor makes the product NaN in any order; a zero (no inf or
            # NaN, nothing overflowing) a zero
            bad |= (nans > 0) & ~np.isnan(g)
            bad |= checked & (zeros > 0) & (nans == 0) & (g != 0)
    return bad, model, bound


def _compare_shifted(mode: str, got: np.ndarray, x: np.ndarray, dtype, first
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """_compare_float for an exclusive scan: element j of `got` against the
    first j terms of x, element 0 bit for bit against the constant `first`."""
    bad, model, bound = _compare_float(mode, got[:, 1:], x[:, :-1], dtype)
    want = _seed(first, got.shape[0], got.dtype)
    head = _compare_exact("exact", got[:, :1], want)
    return (np.concatenate((head, bad), axis=1),
            np.concatenate((want.astype(np.float64), model), axis=1),
            np.concatenate((np.zeros(head.shape), bound), axis=1))


def _compare_exact(mode: str, got: np.ndarray, want: np.ndarray) -> np.ndarray:
    if not _is_float(got.dtype):
        return got != want
    g, w = got.astype(np.float64), want.astype(np.float64)
    nan = np.isnan(g) & np.isnan(w)
    if mode == "zsign":
        return ~nan & (g != w)
    ui = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[got.dtype.itemsize]
    return ~nan & (got.view(ui) != want.view(ui))


def _rows(prog, arrays: dict, name: str) -> np.ndarray:
    return prog.param(name).array(arrays[name])


def check(prog, arrays: dict) -> Optional[tuple[str, str]]:
    """(the first result probe that disagrees with the model, a description),
    or None. `arrays`: the bases after the interpreter's run. The rows of all
    blocks that set their flag are checked together (the block one more axis)."""
    for c in getattr(prog, "checks", ()):
        blocks = np.flatnonzero(_rows(prog, arrays, c.flag))
        if not blocks.size:
            continue
        shape = (blocks.size,) + tuple(c.shape)
        dtypes = [np.dtype(D.lookup(d).numpy_dtype) for d in c.dtypes]
        xs = [np.asarray(_rows(prog, arrays, n)[blocks]).reshape(shape).astype(dt)
              for n, dt in zip(c.ins, dtypes)]
        got = [np.asarray(_rows(prog, arrays, n)[blocks]) if n else None for n in c.outs]
        msg = _check_blocks(c, FUNCS[c.func], xs, got)
        if msg:
            name, k, text = msg
            block = int(blocks[k])
            return name, (f"{name}: {c.kind} of {c.func} along axis {c.axis} of {c.shape} "
                          f"{'/'.join(c.dtypes)}{' reverse' if c.reverse else ''}"
                          f"{f' exclusive {c.identity}' if c.exclusive else ''}"
                          f"{' sequential' if c.sequential else ''}, block {block}: {text}")
    return None


def _check_blocks(c, func: Func, xs: list, got: list) -> Optional[tuple[str, int, str]]:
    """(result probe, position of the block among xs', description) of the
    first disagreement, or None; xs: the operands of every flagged block,
    stacked on a first axis."""
    axis = c.axis + 1
    n = c.shape[c.axis]
    reverse = c.reverse if c.kind == "scan" else False
    lanes = [_lanes(x, axis, reverse) for x in xs]
    if c.kind == "scan":
        got_l = [None if gv is None else _lanes(gv.reshape(xs[0].shape), axis, reverse)
                 for gv in got]
    else:
        got_l = [None if gv is None else gv.reshape(-1, 1) for gv in got]
    if c.mode in ("sum", "prod"):
        if c.exclusive:
            bad, model, bound = _compare_shifted(c.mode, got_l[0], lanes[0], xs[0].dtype,
                                                 c.identity[0])
        else:
            bad, model, bound = _compare_float(c.mode, got_l[0], lanes[0], xs[0].dtype)
        bads, wants = [bad], [None]
    else:
        wants = _running(func, lanes)
        if c.kind == "fold":
            wants = [w[:, -1:] for w in wants]
        elif c.exclusive:
            wants = [_shifted(w, v) for w, v in zip(wants, c.identity)]
        bads = [None if gv is None else _compare_exact(c.mode, gv, w.astype(gv.dtype))
                for gv, w in zip(got_l, wants)]
    for name, gv, w, bad in zip(c.outs, got_l, wants, bads):
        if bad is not None and bad.any():
            lane, j = (int(v[0]) for v in np.nonzero(bad))   # j: position in the lane
            want = repr(w[lane, j].item()) if w is not None else \
                f"{float(model[lane, j])!r} (float64) +- {float(bound[lane, j]):.3g}"
            per_block = lanes[0].shape[0] // xs[0].shape[0]
            where = f"lane {lane % per_block}"
            if c.kind == "scan":
                where += f", element {n - 1 - j if reverse else j} along the axis"
            text = (f"{int(bad.sum())} element(s) differ ({c.mode}); {where}: interp "
                    f"{gv[lane, j].item()!r}, model {want}")
            return name, lane // per_block, text
    return None
