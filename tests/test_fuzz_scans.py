"""The fuzzer's scans and folds (tilecore/testing/fuzz/scans.py) and their
NumPy model (reference.py): what the generator writes, the model's own
answers, its float bounds, and that it catches an interpreter that combines
in the wrong order. Interpreter only (fast): the CI runs of tests/test_fuzz.py
compile them."""
from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pytest

from tilecore.language import dtypes as D
from tilecore.testing.fuzz import generate, run_program
from tilecore.testing.fuzz.reference import (FUNCS, _compare_float, _compare_shifted,
                                             scan_reference)
from tilecore.testing.fuzz.reproducer import load, save

pytestmark = pytest.mark.interpreter_only


@pytest.fixture(scope="module")
def programs():
    return [generate(seed) for seed in range(300)]


def test_the_generator_writes_every_kind_of_scan_and_fold(programs):
    features = Counter(f for p in programs for f in p.features)
    kinds = Counter(f.split(".")[0] for f in features.elements())
    for kind in ("cumsum", "cumprod", "scan", "custom_fold", "allfold", "fold_loop",
                 "scan_func", "model_check"):
        assert kinds[kind], kind
    for kind in ("scan", "custom_fold"):
        funcs = {f.split(".")[1] for f in features if f.startswith(kind + ".")}
        assert {"affine", "argmax", "add", "max"} <= funcs, kind
    funcs = {f.split(".")[1] for f in features if f.split(".")[0] in ("scan", "custom_fold")}
    assert set(FUNCS) == funcs
    assert any(f.startswith("custom_fold.") and f.endswith(".sequential") for f in features)
    assert {f.split(".")[1] for f in features if f.startswith("scan_func.")} == {
        "lambda", "nested_def", "ct_function", "module_def", "by_name"}
    sizes = {int(f.split(".")[1]) for f in features if f.startswith("allfold.")}
    assert {2, 8192} <= sizes
    with_scans = sum(any(k in p.source() for k in ("ct.scan(", "ct.reduce(", "ct.cumsum(",
                                                     "ct.cumprod(")) for p in programs)
    assert with_scans >= len(programs) // 3
    checks = [c for p in programs for c in p.checks]
    assert {c.mode for c in checks} == {"exact", "zsign", "sum", "prod"}


def _affine(a, b):
    return [np.asarray(a, np.int32), np.asarray(b, np.int32)]


def test_model_composes_in_order():
    """x -> 2x + 1, then x -> 3x + 0, then x -> 1x + 5: the running maps; and
    reversed, the later maps applied first (element 0: x -> 5 -> 15 -> 31)."""
    a, b = _affine([2, 3, 1], [1, 0, 5])
    ra, rb = scan_reference(FUNCS["affine"], [a, b], 0)
    assert ra.tolist() == [2, 6, 6] and rb.tolist() == [1, 3, 8]
    ra, rb = scan_reference(FUNCS["affine"], [a, b], 0, reverse=True)
    assert ra.tolist() == [6, 3, 1] and rb.tolist() == [31, 15, 5]
    left = scan_reference(FUNCS["left"], [np.array([[1, 2], [3, 4]], np.int8)], 1, True)[0]
    assert left.tolist() == [[2, 2], [4, 4]]


def test_model_argmax_takes_the_first_of_ties_and_segsum_restarts():
    v = np.array([1.0, 3.0, 3.0, -0.0, 3.0], np.float16)
    i = np.arange(5, dtype=np.int32)
    rv, ri = scan_reference(FUNCS["argmax"], [v, i], 0)
    assert ri.tolist() == [0, 1, 1, 1, 1] and rv.tolist() == [1, 3, 3, 3, 3]
    flags = np.array([False, False, True, False, True])
    x = np.array([5, 6, 7, 8, 127], np.int8)
    rf, rs = scan_reference(FUNCS["segsum"], [flags, x], 0)
    assert rs.tolist() == [5, 11, 7, 15, 127] and rf.tolist() == [0, 0, 1, 1, 1]
    wrapped = scan_reference(FUNCS["add"], [np.array([100, 100], np.int8)], 0)[0]
    assert wrapped.tolist() == [100, -56]


def test_model_float_sums_within_the_bound_of_any_association():
    x = np.array([[1e8, 3.0, 3.0, -1e8]], np.float32)
    exact = np.cumsum(x.astype(np.float64), axis=1)
    assert not _compare_float("sum", exact.astype(np.float32), x, np.float32)[0].any()
    # left to right in float32: the 3s vanish below half an ulp of 1e8 (within the bound)
    seq = np.array([[1e8, 1e8, 1e8, 0.0]], np.float32)
    assert not _compare_float("sum", seq, x, np.float32)[0].any()
    wrong = exact.astype(np.float32).copy()
    wrong[0, 3] = 64.0                     # beyond (k-1) u sum|x| = 3 * 2^-24 * 2e8 ~ 36
    assert _compare_float("sum", wrong, x, np.float32)[0].tolist() == [[False] * 3 + [True]]
    nan = np.array([[1.0, np.inf, -np.inf]], np.float32)
    assert _compare_float("sum", np.array([[1.0, np.inf, 0.0]], np.float32), nan,
                          np.float32)[0].tolist() == [[False, False, True]]
    # products: relative bound, NaN factors give NaN, out of range elements unchecked
    p = np.array([[3.0, 0.5, np.nan, 1e30]], np.float32)
    got = np.array([[3.0, 1.5, 1.0, 7.0]], np.float32)
    assert _compare_float("prod", got, p, np.float32)[0].tolist() == [[False, False, True,
                                                                        True]]
    big = np.array([[1e30, 1e30]], np.float32)
    assert not _compare_float("prod", np.array([[1e30, 5.0]], np.float32), big,
                              np.float32)[0].any()


def _order_sensitive(prog) -> bool:
    return any(c.func in ("affine", "left", "right") and c.shape[c.axis] >= 4
               for c in prog.checks)


def test_the_model_catches_operands_combined_in_the_wrong_order(programs, tmp_path,
                                                                 monkeypatch):
    from tilecore.interpreter import scan as interp_scan
    combine = interp_scan.combine
    caught = None
    for prog in [p for p in programs if _order_sensitive(p)][:6]:
        assert run_program(prog, tmp_path, archs=()).status == "ok"
        with monkeypatch.context() as m:
            m.setattr(interp_scan, "combine",
                      lambda ctx, region, lhs, rhs: combine(ctx, region, rhs, lhs))
            out = run_program(prog, tmp_path, archs=())
            if out.status != "ok":
                caught = prog, out
                assert out.status == "model_mismatch" and out.stage == "model"
                assert out.error in {n for c in prog.checks for n in c.outs}
                assert "differ (exact)" in out.detail
                # the reproducer keeps the checks: replayed, it fails the same way
                again = load(save(prog, out, tmp_path / "repro"))
                assert again.checks == prog.checks
                assert run_program(again, tmp_path, archs=()).key() == out.key()
                break
    assert caught is not None


def test_checks_read_only_blocks_that_set_their_flag(programs, tmp_path):
    """A probe row a block never wrote (a branch not taken, a loop run no
    time) is not compared: the flag says which rows hold a scan's values."""
    import tilecore as ct
    from tilecore.testing.fuzz import execute
    from tilecore.testing.fuzz.reference import check
    prog, c = next((p, c) for p in programs for c in p.checks
                   if c.mode == "exact" and c.dtypes[0].startswith("int") and c.outs[0]
                   and p.grid[0] * p.grid[1] * p.grid[2] > 1)
    kernel, path = execute.load_kernel(prog, tmp_path)
    bases, args = execute._host_args(prog)
    ct.launch(None, prog.grid, kernel, tuple(args))
    assert check(prog, bases) is None
    rows = prog.param(c.outs[0]).array(bases[c.outs[0]])
    flags = prog.param(c.flag).array(bases[c.flag])
    block = int(np.flatnonzero(flags)[0])
    rows[block] = ~rows[block]
    assert check(prog, bases)[0] == c.outs[0]
    flags[block] = False
    assert check(prog, bases) is None


# --- exclusive scans --------------------------------------------------------------------------
def _exclusive(programs) -> list:
    return [p for p in programs if any(c.exclusive for c in p.checks)]


def _moves(c) -> bool:
    """Whether an exclusive scan's seed is no identity of its function: combined
    with some value (the seed the earlier operand), it changes it."""
    dts = [np.dtype(D.lookup(d).numpy_dtype) for d in c.dtypes]
    xs = [np.array([-3, -1, 0, 1, 2, 3, 100, 127]).astype(dt) for dt in dts]
    seeds = [np.full(x.shape, np.asarray(v).astype(dt)) for v, x, dt in
             zip(c.identity, xs, dts)]
    return any((np.asarray(r) != x).any() for r, x in zip(FUNCS[c.func].ref(seeds, xs), xs))


def test_the_generator_writes_exclusive_scans(programs):
    checks = [c for p in programs for c in p.checks if c.exclusive]
    assert all(c.kind == "scan" and len(c.identity) == len(c.dtypes) for c in checks)
    assert {c.reverse for c in checks} == {False, True}
    assert {c.mode for c in checks} >= {"exact", "zsign", "sum"}
    assert any(FUNCS[c.func].arity == 2 for c in checks)
    # seeded with a constant that is no identity of a function that has one (0.5 for max)
    assert any(_moves(c) for c in checks if c.func not in ("left", "right", "first_nonzero",
                                                            "last_nonzero"))
    features = {f for p in programs for f in p.features}
    assert any(f.startswith("scan.") and f.endswith(".exclusive") for f in features)
    sources = [p.source() for p in _exclusive(programs)]
    assert all("exclusive=True" in src for src in sources)
    assert len(sources) >= len(programs) // 20


def test_model_shifts_exclusive_scans():
    """Element i gets the fold of the elements before it (after it, reversed), the
    first one the seed, never combined: 7 is no identity of add; an axis of length 1
    is the seed everywhere."""
    x = np.array([1, 2, 3, 4], np.int8)
    assert scan_reference(FUNCS["add"], [x], 0, identity=(7,))[0].tolist() == [7, 1, 3, 6]
    assert scan_reference(FUNCS["add"], [x], 0, True, (7,))[0].tolist() == [9, 7, 4, 7]
    a, b = _affine([2, 3, 1], [1, 0, 5])
    ra, rb = scan_reference(FUNCS["affine"], [a, b], 0, True, (9, -4))
    assert ra.tolist() == [3, 1, 9] and rb.tolist() == [15, 5, -4]
    col = np.array([[1.5], [2.5]], np.float16)
    assert scan_reference(FUNCS["max"], [col], 1, identity=(0.1,))[0].tolist() == [
        [np.float16(0.1)]] * 2
    # float sums: element j against the first j terms, element 0 bit for bit
    f = np.array([[1e8, 3.0, 3.0, -1e8]], np.float32)
    want = np.array([[-0.0, 1e8, 1e8 + 3, 1e8 + 6]], np.float32)
    assert not _compare_shifted("sum", want, f, np.float32, -0.0)[0].any()
    assert _compare_shifted("sum", want, f, np.float32, 0.0)[0].tolist() == [
        [True, False, False, False]]
    inclusive = np.cumsum(f.astype(np.float64), axis=1).astype(np.float32)
    assert _compare_shifted("sum", inclusive, f, np.float32, 1e8)[0].tolist() == [
        [False, False, False, True]]


def test_the_model_catches_an_exclusive_scan_off_by_one(programs, tmp_path, monkeypatch):
    """An interpreter that forgets the shift (its exclusive scans inclusive) fails the
    model wherever the two differ; the reproducer keeps the seeds."""
    from tilecore.interpreter import rules
    scan_rule = rules.RULES["scan"]

    def inclusive(ctx, op, args):
        attrs = {k: v for k, v in op.attrs.items() if k != "exclusive"}
        return scan_rule(ctx, dataclasses.replace(op, attrs=attrs), args)

    monkeypatch.setitem(rules.RULES, "scan", inclusive)
    caught = []
    for prog in _exclusive(programs)[:12]:
        out = run_program(prog, tmp_path, archs=())
        if out.status != "ok":
            assert out.status == "model_mismatch" and out.stage == "model", out.detail
            assert out.error in {n for c in prog.checks if c.exclusive for n in c.outs}
            assert " exclusive (" in out.detail
            caught.append((prog, out))
    assert len(caught) >= 6
    prog, out = caught[0]
    again = load(save(prog, out, tmp_path / "repro"))
    assert again.checks == prog.checks
    assert run_program(again, tmp_path, archs=()).key() == out.key()


def test_generated_exclusive_scans_pass(programs, tmp_path):
    for prog in _exclusive(programs):
        out = run_program(prog, tmp_path, archs=())
        assert out.status == "ok", (prog.seed, out.detail)
