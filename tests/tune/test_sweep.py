"""tilecore.tune.sweep on the CPU: the sweep's plumbing driven by an injected
measurement, `RunTimeModel`, a deterministic model of run time over the policy
parameters (not a measurement of anything), plus one run of the real
CaseBench on the interpreter with a model timer.

Covered: the study finds the model's known optimum (exhaustive and
tpe+polish); failed candidates (compile error, launch error, wrong result,
time-out) are recorded failures that never win; racing; --resume continues
the same study without re-measuring; the written YAML loads through the
tunings loader and the dispatch layer selects it at once; the merge keeps the
better entry; the older architecture's policy is enqueued."""
import contextlib
import math
import time

import optuna
import pytest

from tilecore.dispatch import policy_overrides
from tilecore.dispatch.hub import policy_fields
from tilecore.dispatch.reduce_policy import select_reduce_policy
from tilecore.tune import measure as M
from tilecore.tune import sweep as S
from tilecore.tune.strategies import ATTR_DETAIL, ATTR_STATUS
from tilecore.tune.space import space_for
from tilecore.tune.workloads import Workload, current_policy
from tilecore.tunings import lookup, parse_table

pytestmark = pytest.mark.interpreter_only

F32_ADD = Workload("reduce", "float32", "add")
SIZES = (1 << 16, 1 << 20)
# the model's optimum over (block_threads, items_per_thread, blocks_per_sm)
OPTIMUM = {"block_threads": 512, "items_per_thread": 16, "blocks_per_sm": 8}
PROV = {"gpu": "Model GPU", "cc": 90, "driver": "13.0", "nvrtc": "13.5", "tilecore": "0.1.0",
        "date": "2026-12-01"}


def model_ms(policy: dict, n: int, optimum: dict = OPTIMUM) -> float:
    """The model's run time: bandwidth-bound (8 bytes an item at 3 TB/s), slower
    by a factor growing with each field's distance (in powers of two) from the
    optimum; fields not in `optimum` do not matter."""
    slow = 1.0 + sum(0.05 * (k + 1) * abs(math.log2(policy[f] / v))
                     for k, (f, v) in enumerate(optimum.items()))
    return n * 8 / 3e12 * 1e3 * slow


class _ConstTimer:
    """A measure.Timer whose every sample takes `ms` per call (noise-free)."""

    def __init__(self, ms: float) -> None:
        self.ms = ms

    def sample_ms(self, calls, first, count):
        return self.ms * count

    def throttled(self):
        return ""


def _noop():
    return None


class RunTimeModel:
    """A sweep.Bench over `model_ms` (named a model: nothing is measured). It
    fails candidates as a GPU would: `compile_error(policy)` raises in run(),
    `launch_error` in time(), `wrong(policy)` returns a difference from
    check(). Every run() and interleaved() is logged."""

    def __init__(self, workload, sizes, *, optimum=OPTIMUM, compile_error=None,
                 launch_error=None, wrong=None, segments=(None,)):
        self.cases = tuple(S.CaseInfo(n, seg, 8 * n) for n in sizes for seg in segments)
        self.optimum = optimum
        self.compile_error = compile_error or (lambda p: False)
        self.launch_error = launch_error or (lambda p: False)
        self.wrong = wrong or (lambda p: False)
        self.runs: list[tuple] = []
        self.interleaved_sets: list[tuple] = []
        self.timed = 0

    def ms(self, policy, case):
        extra = 1.1 if self.cases[case].segments == "long" else 1.0
        return model_ms(policy, self.cases[case].n, self.optimum) * extra

    @contextlib.contextmanager
    def run(self, policy):
        self.runs.append(tuple(sorted(policy.items())))
        if self.compile_error(policy):
            raise RuntimeError("compile: TileCompileError: too many registers")
        yield _ModelRun(self, policy)

    def interleaved(self, policies, case, rounds):
        self.interleaved_sets.append(tuple(policies))
        calls = {name: [_noop] for name in policies}
        timers = {name: self.ms(p, case) for name, p in policies.items()}
        return M.interleaved(calls, rounds=rounds, timer=_ByName(timers, calls))

    def prefetch(self, policies, soon=False):
        pass

    def pick(self, policies):
        return 0

    def close(self):
        pass


class _ByName:
    """interleaved()'s timer for the model: the time of whichever candidate's calls it gets."""

    def __init__(self, ms, calls):
        self._ms = {id(c): ms[name] for name, c in calls.items()}

    def sample_ms(self, calls, first, count):
        return self._ms[id(calls)] * count

    def throttled(self):
        return ""


class _ModelRun:
    def __init__(self, bench, policy):
        self.bench, self.policy = bench, policy

    def check(self):
        return "wrong result at 2^16: 3 of 1 outputs differ" if self.bench.wrong(self.policy) \
            else None

    def time(self, case, give_up_if_faster_than_ms):
        if self.bench.launch_error(self.policy):
            raise RuntimeError("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (too many resources)")
        self.bench.timed += 1
        return M.measure([_noop], timer=_ConstTimer(self.bench.ms(self.policy, case)),
                         give_up_if_faster_than_ms=give_up_if_faster_than_ms)


class Models:
    """A bench factory that keeps the benches it made."""

    def __init__(self, **options):
        self.options, self.made = options, []

    def __call__(self, workload, sizes):
        b = RunTimeModel(workload, sizes, **self.options)
        self.made.append(b)
        return b


def config(tmp_path, **kw):
    base = dict(algorithms=("reduce",), dtypes=("float32",), ops=("add",), sizes=SIZES,
                trials=30, out=tmp_path / "out", fields=tuple(OPTIMUM))
    base.update(kw)
    return S.SweepConfig(**base)


def sweep(cfg, bench, cc=90, **kw):
    lines = []
    result = S.run_sweep(cfg, cc=cc, bench=bench, provenance=PROV, log=lines.append, **kw)
    return result, lines


def sqlite(tmp_path):
    return f"sqlite:///{tmp_path / 'studies.db'}"


def trials_of(cfg, outcome):
    return optuna.load_study(study_name=outcome.study, storage=cfg.storage).get_trials()


def test_exhaustive_search_finds_the_models_optimum(tmp_path, user_dir):
    fields = ("block_threads", "items_per_thread")
    cfg = config(tmp_path, fields=fields, trials=100)
    models = Models(optimum={f: OPTIMUM[f] for f in fields})
    result, _ = sweep(cfg, models)
    (o,) = result.outcomes
    assert o.entry is not None and "exhaustive" in o.detail
    assert {f: o.entry.params[f] for f in fields} == {f: OPTIMUM[f] for f in fields}
    base = current_policy("reduce", 90, F32_ADD.key)
    space = space_for("reduce", F32_ADD.key, base, fields=fields)
    assert o.trials == space.size() <= 100     # every config once
    expected = model_ms(base, 1 << 20, models.options["optimum"]) / \
        model_ms({**base, **OPTIMUM}, 1 << 20, models.options["optimum"])
    assert o.entry.sizes[1 << 20]["speedup"] == pytest.approx(expected, rel=1e-3)
    assert o.entry.score == pytest.approx(expected, rel=1e-3)   # same factor at every size


def test_tpe_and_polish_find_the_models_optimum(tmp_path, user_dir):
    cfg = config(tmp_path, trials=60)
    result, _ = sweep(cfg, Models())
    (o,) = result.outcomes
    assert "tpe+polish" in o.detail
    assert {f: o.entry.params[f] for f in OPTIMUM} == OPTIMUM


def test_failed_candidates_are_recorded_and_never_win(tmp_path, user_dir):
    # the optimum's neighbourhood fails in every way a GPU run can; the sweep goes on
    models = Models(compile_error=lambda p: p["block_threads"] == 1024,
                    launch_error=lambda p: p["items_per_thread"] == 32,
                    wrong=lambda p: p["block_threads"] == 512 and p["items_per_thread"] == 16)
    cfg = config(tmp_path, fields=("block_threads", "items_per_thread"), trials=100,
                 storage=sqlite(tmp_path))
    result, _ = sweep(cfg, models)
    (o,) = result.outcomes
    trials = trials_of(cfg, o)
    failed = [t for t in trials if t.state == optuna.trial.TrialState.FAIL
              and t.user_attrs.get(ATTR_STATUS) == "failed"]
    details = " | ".join(t.user_attrs[ATTR_DETAIL] for t in failed)
    assert "compile: TileCompileError" in details
    assert "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES" in details
    assert "wrong result at 2^16" in details
    assert o.failed == len(failed) > 0
    p = o.entry.params
    assert p["block_threads"] != 1024 and p["items_per_thread"] != 32
    assert (p["block_threads"], p["items_per_thread"]) != (512, 16)
    # wrong results are caught before anything is timed
    assert all(t.user_attrs[ATTR_STATUS] != "raced" for t in failed)


def test_a_first_run_slower_than_the_limit_is_a_timed_out_failure():
    base = current_policy("reduce", 90, F32_ADD.key)
    space = space_for("reduce", F32_ADD.key, base, fields=tuple(OPTIMUM))
    bench = RunTimeModel(F32_ADD, SIZES)
    slow_check = bench.run

    @contextlib.contextmanager
    def run(policy):
        with slow_check(policy) as r:
            real = r.check
            r.check = lambda: (time.sleep(0.02), real())[1]
            yield r
    bench.run = run
    times = [M.measure([_noop], timer=_ConstTimer(bench.ms(base, i))) for i in range(2)]
    evaluate = S.Evaluator(space, bench, times, SIZES, timeout_s=0.01)
    ev = evaluate({**base, "block_threads": 128}, None)
    assert ev.status == "failed" and ev.detail.startswith("timed out: its checked first run")
    assert bench.timed == 0


def test_racing_stops_a_candidate_surely_below_the_score_to_beat():
    base = current_policy("reduce", 90, F32_ADD.key)
    space = space_for("reduce", F32_ADD.key, base, fields=tuple(OPTIMUM))
    bench = RunTimeModel(F32_ADD, SIZES)
    times = [M.measure([_noop], timer=_ConstTimer(bench.ms(base, i))) for i in range(2)]
    evaluate = S.Evaluator(space, bench, times, SIZES)
    good = evaluate(dict(OPTIMUM), None)
    assert good.status == "ok" and good.score > 1.0
    bad = {**OPTIMUM, "block_threads": 32, "items_per_thread": 1}
    raced = evaluate(bad, good.score)
    assert raced.status == "raced" and raced.score < good.score
    assert "stopped at 2^20" in raced.detail          # the largest size is timed first
    full = evaluate(bad, None)
    assert full.status == "ok" and full.score < good.score


def test_resume_continues_the_same_study_without_re_measuring(tmp_path, user_dir):
    first = Models()
    r1, _ = sweep(config(tmp_path, trials=12, storage=sqlite(tmp_path)), first)
    (o1,) = r1.outcomes
    assert o1.study.endswith("#1") and o1.trials == 12
    measured_before = set(first.made[0].runs)

    again = Models()
    cfg = config(tmp_path, trials=24, resume=True, storage=sqlite(tmp_path))
    r2, _ = sweep(cfg, again)
    (o2,) = r2.outcomes
    assert o2.study == o1.study and o2.trials == 24 and o2.measured == 12
    baseline = tuple(sorted(current_policy("reduce", 90, F32_ADD.key).items()))
    runs = again.made[0].runs
    assert runs[0] == baseline                   # the session's baseline measurement
    assert not (set(runs[1:]) & measured_before)  # nothing measured twice
    assert len(trials_of(cfg, o2)) >= 24

    # a finished study resumed with no larger budget measures nothing at all
    idle = Models()
    r3, lines = sweep(cfg, idle)
    (o3,) = r3.outcomes
    assert o3.reused and not idle.made and o3.entry.params == o2.entry.params

    # without --resume a new run of the study starts
    r4, _ = sweep(config(tmp_path, trials=5, storage=sqlite(tmp_path)), Models())
    assert r4.outcomes[0].study.endswith("#2")


def test_the_written_table_loads_and_the_dispatch_layer_uses_it(tmp_path, user_dir):
    key = F32_ADD.key
    before = policy_fields(select_reduce_policy(90, key))
    assert {f: before[f] for f in OPTIMUM} != OPTIMUM
    result, lines = sweep(config(tmp_path, out=None, trials=60), Models())
    (path,) = result.tables
    assert path == user_dir / "reduce" / "sm_90.yaml"
    table = parse_table(path.read_text(), str(path), "reduce", 90)
    (row,) = [r for r in table.rows if r.match == key]
    assert {f: row.params[f] for f in OPTIMUM} == OPTIMUM
    prov = row.provenance
    assert prov["gpu"] == "Model GPU" and prov["score"] == result.outcomes[0].entry.score
    assert set(prov["sizes"]) == set(SIZES) and prov["trials"] == 60
    chosen = select_reduce_policy(90, key)       # no clear_cache needed: the sweep cleared it
    assert {f: getattr(chosen, f) for f in OPTIMUM} == OPTIMUM
    assert str(path) in chosen.source
    assert any("added" in line for line in lines)


def test_a_scan_row_applies_to_inclusive_and_exclusive_scans(tmp_path, user_dir):
    """The scan workload times exclusive sums (its key says so, and its current
    policy is the exclusive scan's); the row written leaves `exclusive` out, so
    inclusive sums take the tuned policy too, as CUB's one tuning for both."""
    from tilecore.dispatch.scan_policy import select_scan_policy
    w = Workload("scan", "float32", "add")
    assert w.key["exclusive"] is True
    result, _ = sweep(config(tmp_path, algorithms=("scan",), out=None, trials=60), Models())
    (path,) = result.tables
    table = parse_table(path.read_text(), str(path), "scan", 90)
    rows = [r for r in table.rows if r.provenance.get("trials") == 60]
    assert [r.match for r in rows] == [{k: v for k, v in w.key.items() if k != "exclusive"}]
    for exclusive in (False, True):
        chosen = select_scan_policy(90, {**w.key, "exclusive": exclusive})
        assert {f: getattr(chosen, f) for f in OPTIMUM} == OPTIMUM
        assert str(path) in chosen.source


def test_the_merge_keeps_the_better_entry(tmp_path, user_dir):
    cfg = config(tmp_path, out=None, trials=60)
    r1, _ = sweep(cfg, Models())
    path = r1.tables[0]
    written = path.read_text()
    # a second sweep measures against the tuned row and finds nothing better: kept
    r2, lines = sweep(cfg, Models())
    assert r2.outcomes[0].entry.score == 1.0
    assert any(": kept " in line for line in lines) and path.read_text() == written
    # a sweep under another model finds a better policy than the row: it replaces it
    other = {"block_threads": 128, "items_per_thread": 4, "blocks_per_sm": 2}
    r3, lines = sweep(cfg, Models(optimum=other))
    assert any(": replaced " in line for line in lines)
    chosen = select_reduce_policy(90, F32_ADD.key)
    assert {f: getattr(chosen, f) for f in other} == other


def test_an_architecture_without_a_table_starts_from_the_older_tuned_policy(tmp_path, user_dir):
    assert lookup.find_table("reduce", 100) is None and lookup.find_table("reduce", 90)
    older = policy_fields(select_reduce_policy(90, F32_ADD.key))
    models = Models()
    result, _ = sweep(config(tmp_path, trials=5), models, cc=100)
    runs = models.made[0].runs
    assert tuple(sorted(older.items())) in runs
    assert result.tables == [tmp_path / "out" / "reduce" / "sm_100.yaml"]


def test_segmented_sizes_score_the_geometric_mean_of_their_distributions(tmp_path, user_dir):
    w = Workload("segmented_reduce", "float32", "add")
    fields = ("block_threads", "rows_items_per_thread")
    optimum = {"block_threads": 256, "rows_items_per_thread": 8}
    cfg = config(tmp_path, algorithms=("segmented_reduce",), fields=fields, trials=100)
    result, _ = sweep(cfg, Models(optimum=optimum, segments=tuple(w.segments)))
    (o,) = result.outcomes
    assert {f: o.entry.params[f] for f in fields} == optimum
    base = current_policy("segmented_reduce", 90, w.key)
    gain = model_ms(base, 1 << 16, optimum) / model_ms({**base, **optimum}, 1 << 16, optimum)
    assert o.entry.sizes[1 << 16]["speedup"] == pytest.approx(gain, rel=1e-3)


class ModelTimer:
    """A measure.Timer for the interpreter: runs the calls (so the policy
    switches of interleaved samples happen) and answers the model's time of
    the reduce policy in force, read from the active overrides."""

    def __init__(self):
        self.seen = []

    def sample_ms(self, calls, first, count):
        for i in range(count):
            calls[(first + i) % len(calls)]()
        policy = {**current_policy("reduce", 90, F32_ADD.key), **policy_overrides("reduce")}
        self.seen.append(tuple(policy[f] for f in OPTIMUM))
        return count * model_ms(policy, 1 << 30)   # over 1 ms: one call per sample

    def throttled(self):
        return ""


def test_case_bench_runs_checks_and_times_candidates_in_the_interpreter(tmp_path, user_dir):
    timer = ModelTimer()
    cfg = config(tmp_path, sizes=(1 << 10, 1 << 12), fields=("block_threads",), trials=6)
    result, _ = sweep(cfg, lambda w, sizes: S.CaseBench(w, sizes, timer=timer))
    (o,) = result.outcomes
    assert o.entry is not None and o.failed == 0 and "exhaustive" in o.detail
    # every sample ran under its candidate's override (the model saw each block_threads), and
    # the interleaved re-measure switched policies sample by sample: the paired speedup is the
    # model's ratio of the baseline's time to the winner's
    assert {s[0] for s in timer.seen} == {32, 64, 128, 256, 512, 1024}
    base = current_policy("reduce", 90, F32_ADD.key)
    assert o.entry.params == {"block_threads": 512} and base["block_threads"] != 512
    ratio = model_ms(base, 1) / model_ms({**base, "block_threads": 512}, 1)
    assert o.entry.sizes[1 << 12]["speedup"] == pytest.approx(ratio, abs=1e-4)   # rounded
    assert o.entry.score == pytest.approx(ratio, rel=1e-4)


def test_case_bench_fails_a_wrong_result_before_timing_it(monkeypatch):
    bench = S.CaseBench(F32_ADD, (1 << 10,), timer=ModelTimer())
    policy = current_policy("reduce", 90, F32_ADD.key)
    with bench.run(policy) as run:
        assert run.check() is None
    bench._cases[0].expected[...] += 1          # the reference no longer matches
    with bench.run(policy) as run:
        assert run.check().startswith("wrong result at 2^10")


@pytest.mark.parametrize("dtype", ["float64", "int64"])
def test_case_bench_fails_a_policy_over_its_temp_storage_budget(dtype):
    """An 8-byte scan on 1024-item tiles asks for more temporary storage at 2^27 items
    than CUB's 799999 bytes: the candidate fails before it compiles or runs; the
    shipped 2048-item tiles stay within it."""
    w = Workload("scan", dtype, "add")
    bench = S.CaseBench(w, (1 << 10,), timer=ModelTimer())
    policy = current_policy("scan", 90, w.key)
    with bench.run(policy) as run:
        assert run.check() is None
    small = {**policy, "block_threads": 64, "items_per_thread": 16}
    with pytest.raises(ValueError, match=r"temporary storage: \d+ bytes at 2\^27 items, more "
                                         r"than CUB's 799999"):
        with bench.run(small):
            pass


class SlowPool:
    """A compile pool whose every wait takes `seconds` (and compiles nothing)."""

    def __init__(self, seconds):
        self.seconds, self.waits = seconds, 0

    def wait(self, jobs, timeout):
        self.waits += 1
        time.sleep(self.seconds)
        return []

    def prefetch(self, jobs, soon=False):
        pass

    def first_done(self, groups, timeout):
        self.waits += 1
        time.sleep(self.seconds)
        return 0


def test_time_waiting_for_compiles_is_not_counted_as_measuring(tmp_path, user_dir):
    """The sweep's "measuring" share excludes the time a candidate waited for its
    compile; that time is reported on its own (compile_wait_s)."""
    pool = SlowPool(0.05)
    cfg = config(tmp_path, sizes=(1 << 10,), fields=("block_threads",), trials=6)
    result, _ = sweep(cfg, lambda w, sizes: S.CaseBench(w, sizes, timer=ModelTimer(), pool=pool))
    assert pool.waits >= 6
    assert result.compile_wait_s == pytest.approx(pool.waits * 0.05, rel=0.5)
    assert result.compile_wait_s >= pool.waits * 0.05
    assert result.bench_s + result.compile_wait_s <= result.wall_s


class ThrottlingTimer(ModelTimer):
    """ModelTimer that has counted some throttled samples, as GpuTimer does."""
    throttled_samples = 7


def test_throttled_samples_are_counted_over_the_studies(tmp_path, user_dir):
    cfg = config(tmp_path, sizes=(1 << 10,), fields=("block_threads",), trials=3)
    result, _ = sweep(cfg, lambda w, sizes: S.CaseBench(w, sizes, timer=ThrottlingTimer()))
    assert result.throttled_samples == 7 * len(result.outcomes)


class LoggingPool:
    """A compile pool that compiles nothing and logs what it is asked, in order;
    first_done answers with the first candidate whose block_threads is not
    32 (a model of a slow compile)."""

    def __init__(self):
        self.log = []

    def prefetch(self, jobs, soon=False):
        self.log.append(("soon" if soon else "prefetch", {j.policy for j in jobs}))

    def wait(self, jobs, timeout):
        self.log.append(("wait", {j.policy for j in jobs}))
        return []

    def first_done(self, groups, timeout):
        policies = [dict(g[0].policy) for g in groups]
        i = next((i for i, p in enumerate(policies) if p["block_threads"] != 32), 0)
        self.log.append(("first_done", [g[0].policy for g in groups], i))
        return i


def test_compiles_are_queued_before_the_gpu_needs_them(tmp_path, user_dir):
    """With a compile pool: every study's baseline is queued when the sweep
    starts (`ahead`), each study's first candidates before its baseline is
    waited for, and the search measures the candidate the pool compiled first
    (a slow compile is measured later, not waited for)."""
    from tilecore.tune.compile_pool import candidate_jobs
    pool = LoggingPool()
    cfg = config(tmp_path, dtypes=("float32", "int32"), sizes=(1 << 10,),
                 fields=("block_threads",), trials=6)
    result, _ = sweep(cfg, lambda w, sizes: S.CaseBench(w, sizes, timer=ModelTimer(), pool=pool),
                      ahead=lambda w, sizes, ps: pool.prefetch(
                          [j for p in ps for j in candidate_jobs(w, sizes, p)]))
    assert [o.entry is not None for o in result.outcomes] == [True, True]
    baselines = [tuple(sorted(current_policy("reduce", 90, w.key).items()))
                 for w in (F32_ADD, Workload("reduce", "int32", "add"))]
    log = pool.log
    assert log[:2] == [("prefetch", {b}) for b in baselines]
    waits = [i for i, e in enumerate(log) if e[0] == "wait"]
    for b in baselines:                  # the baseline's wait comes after the first candidates
        first_wait = next(i for i in waits if log[i][1] == {b})
        assert log[first_wait - 1][0] == "soon" and log[first_wait - 1][1] - {b}
    picks = [e for e in log if e[0] == "first_done" and e[2] > 0]
    assert picks, "a slow compile was never passed over"
    for e in picks:                                  # the candidate picked is the one waited for
        after = next(f for f in log[log.index(e):] if f[0] == "wait")
        assert after == ("wait", {e[1][e[2]]})
    assert result.compile_wait_s > 0


def test_a_failing_baseline_ends_its_study_without_trials_left_running(tmp_path, user_dir):
    base = current_policy("reduce", 90, F32_ADD.key)
    cfg = config(tmp_path, trials=6, storage=sqlite(tmp_path))
    result, _ = sweep(cfg, Models(compile_error=lambda p: p == base))
    (o,) = result.outcomes
    assert o.entry is None and o.measured == 0
    assert o.detail.startswith("the current policy failed: RuntimeError: compile")
    assert not [t for t in trials_of(cfg, o) if t.state == optuna.trial.TrialState.RUNNING]
