"""Control flow for generated programs: if/else on scalar conditions (block
ids, scalar parameters, reductions of data), for loops with constant and
run-time bounds (including a loop over the tiles of an array, the K loop of
a reduction), and while loops ended by break; with continue and break inside.

Names assigned in both branches of an if, and loop-carried names, keep one
dtype and shape (`exprs.same_type_update`); other names assigned inside a
construct are fresh and not used after it, as the language requires.
"""
from __future__ import annotations

from typing import Optional

from ...language import dtypes as D
from ...language.dtypes import DType
from .consts import literal, loose_const
from .exprs import readable, same_type_update
from .generate import Gen, random_op, tile_loop_bound
from .memops import store_now
from .model import Stmt, Var
from .tolerance import EXACT, ZSIGN, join
from .typerules import ARITH, INTS

__all__ = ["OPS"]


def _scalar_cond(g: Gen) -> Optional[str]:
    """A scalar bool condition that is exact on both sides."""
    r = g.rng.random()
    if r < 0.45:
        s = g.pick(lambda v: v.is_scalar and readable(v, "compare"))
        if s is not None:
            g.use(s)
            if s.dtype.is_bool:
                return s.name if g.chance(0.6) else f"not {s.name}"
            if s.dtype in INTS and g.chance(0.3):
                return f"({s.name} & 1) == 0"
            c = loose_const(g, s.dtype, small=True)
            op = g.rng.choice(("<", "<=", ">", ">=", "==", "!="))
            return f"{s.name} {op} {literal(c)}"
    if r < 0.8:
        x = g.pick(lambda v: bool(v.shape) and readable(v, "reduce")
                   and (v.dtype.is_integer or v.dtype.is_bool or g.chance(0.5)))
        if x is not None:
            g.use(x)
            fn = "sum" if x.dtype.is_integer and g.chance(0.3) else g.rng.choice(("max", "min"))
            c = loose_const(g, x.dtype if fn != "sum" else D.int32, small=True)
            g.feature("if", "data_condition")
            return f"ct.{fn}({x.name}) > {literal(c)}"
    k = g.rng.randint(0, max(g.grid[0] - 1, 0))
    cond = f"b0 == {k}" if g.chance(0.5) else f"bl >= {k}"
    if g.chance(0.3):
        cond = f"({cond}) or (b0 > {k})" if g.chance(0.5) else f"({cond}) and (bl < {k + 2})"
        g.feature("if", "bool_op")
    return cond


def _branch(g: Gen, templates: list[Var], names: list[str]) -> list:
    """Emit a branch body into a new block; returns (block, [(expr tol, product)])."""
    block: list[Stmt] = []
    g.bodies.append(block)
    g.scopes.append([])
    g.depth += 1
    results = []
    try:
        for _ in range(g.rng.randint(0, 2)):
            random_op_local(g)
        for t, name in zip(templates, names):
            upd = same_type_update(g, t)
            if upd is None:
                upd = (t.name, t.tol, t.product)
            expr, tol, product = upd
            g.emit(f"{name} = {expr}")
            results.append((tol, product))
        if g.chance(0.1):
            store_now(g)
    finally:
        g.depth -= 1
        g.scopes.pop()
        g.bodies.pop()
    return [block, results]


def random_op_local(g: Gen) -> None:
    from . import control, exprs
    random_op(g, exprs, control)


def if_else(g: Gen) -> bool:
    cond = _scalar_cond(g)
    if cond is None:
        return False
    templates = []
    for _ in range(g.rng.randint(1, 2)):
        t = g.pick(lambda v: readable(v, "where") and v not in templates)
        if t is not None:
            templates.append(t)
    if not templates:
        return False
    names = [g.name("m") for _ in templates]
    with_else = g.chance(0.7)
    if not with_else:
        for t, n in zip(templates, names):
            g.emit(f"{n} = {t.name}")
    then_block, then_res = _branch(g, templates, names)
    if with_else:
        else_block, else_res = _branch(g, templates, names)
    else:
        else_block, else_res = [], [(t.tol, t.product) for t in templates]
    g.use(*templates)
    g.emit(f"if {cond}:", then_block, else_block)
    for t, n, (t1, p1), (t2, p2) in zip(templates, names, then_res, else_res):
        tol = join(t1, t2)
        if tol is None:
            tol = t1
        g.scopes[-1].append(Var(n, t.dtype, t.shape, tol, p1 or p2))
    g.feature("if", "else" if with_else else "no_else")
    return True


def _int_param(g: Gen, small: bool = True) -> Var:
    dt = g.rng.choice((D.int32, D.int32, D.int64, D.int16, D.uint8, D.uint32))
    return g.scalar_param(dt, small=small)


def _loop_index_dtype(bounds: list) -> DType:
    """The dtype the front end gives a for loop's index, from its bounds' dtypes."""
    idx = D.int32
    for b in bounds:
        if isinstance(b, Var):
            d = b.dtype
            if d.signed:
                idx = D.promote_types(idx, d)
            elif d.bits >= 32:
                idx = D.int64
    return idx


def _range(g: Gen) -> tuple[str, list, str]:
    """(range(...) source, bound Vars/ints, feature)."""
    r = g.rng.random()
    if r < 0.35:
        n = g.rng.randint(0, 4)
        form = g.rng.random()
        if form < 0.4:
            return f"range({n})", [n], "const"
        lo = g.rng.randint(0, 2)
        if form < 0.7:
            return f"range({lo}, {lo + n})", [lo], "const"
        return f"range({lo}, {lo + n + 2}, {g.rng.randint(1, 3)})", [lo], "const_step"
    if r < 0.7:
        ub = _int_param(g)
        if g.chance(0.3):
            step = g.scalar_param(D.int32, small=True)
            g.params[-1].value = g.rng.randint(1, 3)
            return f"range(0, {ub.name}, {step.name})", [ub, step], "runtime_step"
        if g.chance(0.4):
            return f"range(b0, {ub.name})", [ub], "runtime"
        return f"range({ub.name})", [ub], "runtime"
    if r < 0.85:
        arrays = [p for p in g.params if p.role == "in"]
        if arrays:
            p = g.rng.choice(arrays)
            k = g.rng.randrange(p.array().ndim)
            tile = tuple(g.rng.choice((4, 8, 16)) for _ in range(p.array().ndim))
            return f"range(ct.num_tiles({p.name}, {k}, {tile}))", [], "num_tiles"
    return f"range(bl + {g.rng.randint(0, 2)})", [], "block_id"


def _carried(g: Gen, body_scope: list[Var]) -> list[tuple[Var, Var, str]]:
    """Loop-carried accumulators: (value before the loop, carried Var, init source)."""
    out = []
    for _ in range(g.rng.randint(1, 2)):
        t = g.pick(lambda v: readable(v, "where") and v.dtype in ARITH)
        if t is None:
            break
        name = g.name("acc")
        r = g.rng.random()
        if r < 0.5:
            init = t.name
        elif r < 0.8:
            init = f"ct.zeros({t.shape}, ct.{t.dtype.name})"
        else:
            init = f"ct.full({t.shape}, {literal(loose_const(g, t.dtype))}, ct.{t.dtype.name})"
        acc = Var(name, t.dtype, t.shape, t.tol if init == t.name else EXACT,
                  t.product and init == t.name)
        out.append((t, acc, init))
    return out


def _loop_body(g: Gen, accs: list[Var], index: Optional[Var], allow_jump: bool) -> list[Stmt]:
    block: list[Stmt] = []
    g.bodies.append(block)
    g.scopes.append(([index] if index is not None else []) + accs)
    g.depth += 1
    try:
        updates = []
        for acc in accs:
            upd = same_type_update(g, acc)
            updates.append(upd or (acc.name, acc.tol, acc.product))
        for acc, (_, tol, product) in zip(accs, updates):
            acc.product = acc.product or product   # an FMA can join iterations once unrolled
            acc.tol = join(acc.tol, tol) or acc.tol
        for _ in range(g.rng.randint(0, 2)):
            random_op_local(g)
        if allow_jump and g.chance(0.35):
            cond = _jump_cond(g, index)
            jump = g.rng.choice(("break", "continue"))
            g.emit(f"if {cond}:", [Stmt(jump)])
            g.feature(g.loops[-1], jump)
        for acc, (expr, _, _) in zip(accs, updates):
            if expr != acc.name:
                g.emit(f"{acc.name} = {expr}")
    finally:
        g.depth -= 1
        g.scopes.pop()
        g.bodies.pop()
    return block


def _jump_cond(g: Gen, index: Optional[Var]) -> str:
    if index is not None and g.chance(0.6):
        return f"{index.name} {g.rng.choice(('==', '>=', '>'))} {g.rng.randint(0, 3)}"
    return _scalar_cond(g) or "b0 == 0"


def for_loop(g: Gen) -> bool:
    src, bounds, kind = _range(g)
    accs = _carried(g, [])
    if not accs:
        return False
    for t, acc, init in accs:
        g.emit(f"{acc.name} = {init}")
        g.use(t)
    idx = Var(g.name("i"), _loop_index_dtype(bounds), ())
    g.loops.append("for")
    try:
        body = _loop_body(g, [a for _, a, _ in accs], idx, allow_jump=True)
    finally:
        g.loops.pop()
    g.emit(f"for {idx.name} in {src}:", body)
    for _, acc, _ in accs:
        g.scopes[-1].append(acc)
    g.feature("for", kind)
    return True


def k_loop(g: Gen) -> bool:
    """acc += load(A, (row, k)) over the tiles of A's second axis (a reduction's K loop)."""
    dtype = g.rng.choice((D.float32, D.float16, D.int32, D.bfloat16, D.float64, D.int8))
    shape = g.shape(rank=2)
    tiles = g.rng.randint(1, 4)
    blocks = g.nblocks
    rows = g.extent(blocks, shape[0], shape[0])
    cols = max(1, tiles * shape[1] - g.rng.randint(0, shape[1] - 1))
    a = g.input_array(dtype, (rows, cols))
    acc = Var(g.name("acc"), dtype, shape)
    g.emit(f"{acc.name} = ct.zeros({shape}, dtype=ct.{dtype.name})")
    k = g.name("k")
    bound = tile_loop_bound(g, a, shape, tiles)
    t = g.name("t")
    pad = "ZERO" if dtype.is_integer else g.rng.choice(("ZERO", "NEG_ZERO"))
    fn = g.rng.choice(("add", "maximum", "minimum")) if dtype.is_float else \
        g.rng.choice(("add", "bitxor", "maximum"))
    upd = {"add": f"{acc.name} + {t}", "maximum": f"ct.maximum({acc.name}, {t})",
           "minimum": f"ct.minimum({acc.name}, {t})", "bitxor": f"{acc.name} ^ {t}"}[fn]
    if fn in ("maximum", "minimum"):
        pad = "ZERO"
        acc.tol = ZSIGN if dtype.is_float else acc.tol
    body = [Stmt(f"{t} = ct.load({a}, index=(bl, {k}), shape={shape}, "
                 f"padding_mode=ct.PaddingMode.{pad})"),
            Stmt(f"{acc.name} = {upd}")]
    g.emit(f"for {k} in range({bound}):", body)
    g.scopes[-1].append(acc)
    g.feature("for", "k_loop")
    return True


def while_loop(g: Gen) -> bool:
    accs = _carried(g, [])
    if not accs:
        return False
    for t, acc, init in accs:
        g.emit(f"{acc.name} = {init}")
        g.use(t)
    w = g.name("w")
    g.emit(f"{w} = 0" if g.chance(0.6) else f"{w} = ct.int32(0)")
    if g.chance(0.5):
        limit = str(g.rng.randint(1, 3))
    else:
        limit = g.scalar_param(D.int32, small=True).name
    g.loops.append("while")
    try:
        body = _loop_body(g, [a for _, a, _ in accs], Var(w, D.int32, ()), allow_jump=False)
    finally:
        g.loops.pop()
    if g.chance(0.5):
        head = [Stmt(f"{w} += 1" if g.chance(0.5) else f"{w} = {w} + 1"),
                Stmt(f"if {w} > {limit}:", [Stmt("break")])]
        if g.chance(0.3):
            head.append(Stmt(f"if ({w} & 1) == 0:", [Stmt("continue")]))
            g.feature("while", "continue")
        g.emit("while True:", head + body)
        g.feature("while", "true_break")
    else:
        head = [Stmt(f"{w} += 1")]
        g.emit(f"while {w} < {limit}:", head + body)
        g.feature("while", "condition")
    for _, acc, _ in accs:
        g.scopes[-1].append(acc)
    return True


OPS = {"if": (5, if_else), "for": (5, for_loop), "k_loop": (2, k_loop),
       "while": (3, while_loop)}
