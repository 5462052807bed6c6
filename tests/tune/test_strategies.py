"""strategies.py's run_search with an injected measurement: MODEL_SCORE, a
deterministic model of a policy's speed over its parameters (not a GPU
measurement), whose optimum is found here by brute force over the space."""
import math

import optuna
import pytest

from tilecore.tune.strategies import ATTR_STATUS, INFEASIBLE, LOOKAHEAD, Evaluation, run_search
from tilecore.tune.space import space_for

from tune_helpers import SCAN_KEY, SCAN_BASE

optuna.logging.set_verbosity(optuna.logging.WARNING)

FIELDS = ("block_threads", "items_per_thread", "mode", "group_tiles", "blocks_per_sm")


def space(fields=FIELDS):
    return space_for("scan", SCAN_KEY, SCAN_BASE, fields=fields)


def model_score(c: dict) -> float:
    """MODEL (not a measurement): a smooth log-quadratic optimum per field over
    log2 of its value, best at 256 threads, 8 items, mode 1 (in the middle of
    the modes 0, 1, 3), 8 group tiles, 2 blocks per SM. Fields a config
    lacks take the base policy's value."""
    bt = c.get("block_threads", SCAN_BASE["block_threads"])
    it = c.get("items_per_thread", SCAN_BASE["items_per_thread"])
    s = -0.10 * (math.log2(bt) - 8) ** 2
    s -= 0.05 * (math.log2(it) - 3) ** 2
    s += {0: -0.1, 1: 0.1, 3: 0.0}[c.get("mode", SCAN_BASE["mode"])]
    if "group_tiles" in c:
        s -= 0.03 * (math.log2(c["group_tiles"]) - 3) ** 2
    if "blocks_per_sm" in c:
        s -= 0.02 * abs(c["blocks_per_sm"] - 2)
    return math.exp(s)


class Recorder:
    """evaluate() that answers MODEL_SCORE and records every call."""

    def __init__(self, score=model_score, fail=lambda c: False, raced=lambda c: False):
        self.calls, self.must_beat = [], []
        self.score, self.fail, self.raced = score, fail, raced

    def __call__(self, config, must_beat):
        self.calls.append(dict(config))
        self.must_beat.append(must_beat)
        if self.fail(config):
            return Evaluation(config, None, "failed", "model: fails")
        status = "raced" if self.raced(config) else "ok"
        return Evaluation(config, self.score(config), status)

    def idents(self):
        return [tuple(c.items()) for c in self.calls]


def study():
    return optuna.create_study(direction="maximize")


def optimum(sp, score=model_score, ok=lambda c: True):
    return max((c for c in sp.configs() if ok(c)), key=score)


def test_exhaustive_measures_every_config_once_and_finds_the_optimum():
    sp = space(("block_threads", "items_per_thread", "mode", "group_tiles"))
    rec = Recorder()
    r = run_search(sp, rec, budget=1000, study=study())
    assert r.strategy == "exhaustive"                   # auto: the space fits the budget
    assert r.stopped == "exhausted"
    assert sorted(rec.idents()) == sorted(tuple(c.items()) for c in sp.configs())
    assert r.trials == len(rec.calls) == sp.size()
    best = optimum(sp)
    assert r.best.config == best == {"block_threads": 256, "items_per_thread": 8, "mode": 1}
    assert r.best.score == pytest.approx(model_score(best))


def test_exhaustive_stops_at_the_budget_in_space_order():
    sp = space(("block_threads", "items_per_thread"))
    rec = Recorder()
    r = run_search(sp, rec, budget=10, study=study(), strategy="exhaustive")
    assert r.stopped == "budget" and r.trials == 10
    assert rec.calls == list(sp.configs())[:10]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tpe_polish_finds_the_optimum_within_budget(seed):
    sp = space()
    assert sp.size() == 779
    best = optimum(sp)
    rec = Recorder()
    r = run_search(sp, rec, budget=80, study=study(), seed=seed, enqueue=[SCAN_BASE])
    assert r.strategy == "tpe+polish"
    assert r.best.config == best
    assert len(set(rec.idents())) == len(rec.calls) == r.trials <= 80
    assert rec.calls[0] == sp.project(SCAN_BASE)


@pytest.mark.parametrize("strategy", ["tpe+polish", "tpe", "random", "tpe-ordinal"])
def test_no_config_is_measured_twice(strategy):
    sp = space(("block_threads", "items_per_thread", "mode"))     # 123 configs
    rec = Recorder()
    r = run_search(sp, rec, budget=60, study=study(), strategy=strategy, seed=3)
    assert len(rec.calls) == r.trials == 60
    assert len(set(rec.idents())) == 60
    assert all(sp.valid(c) for c in rec.calls)
    assert [e.config for e in r.evaluations] == rec.calls


def test_a_search_over_a_space_smaller_than_the_budget_ends_exhausted():
    sp = space(("mode", "group_tiles"))                 # 1 + 1 + 8 configs
    rec = Recorder()
    r = run_search(sp, rec, budget=50, study=study(), strategy="random", seed=0)
    assert r.stopped == "exhausted" and r.trials == sp.size() == 10
    assert r.best.config == optimum(sp)


@pytest.mark.parametrize("strategy", ["exhaustive", "tpe+polish", "random"])
def test_enqueued_configs_come_first(strategy):
    sp = space()
    first = {"block_threads": 64, "items_per_thread": 2, "mode": 0}
    second = {**SCAN_BASE, "block_threads": 512}          # a complete policy
    rec = Recorder()
    run_search(sp, rec, budget=30, study=study(), strategy=strategy,
               enqueue=[first, second, first])             # the repeat is not re-measured
    assert rec.calls[0] == sp.project(first)
    assert rec.calls[1] == sp.project(second)
    assert len(set(rec.idents())) == len(rec.calls) == 30


def test_failed_and_raced_evaluations_never_win():
    sp = space(("block_threads", "items_per_thread", "mode"))
    top = sorted(sp.configs(), key=model_score, reverse=True)
    failing, racing = top[0], top[1]
    rec = Recorder(fail=lambda c: c == failing, raced=lambda c: c == racing)
    r = run_search(sp, rec, budget=1000, study=study())
    assert failing in rec.calls and racing in rec.calls
    assert r.best.config == top[2] and r.best.status == "ok"
    by_config = {tuple(e.config.items()): e for e in r.evaluations}
    assert by_config[tuple(failing.items())].status == "failed"
    assert by_config[tuple(failing.items())].score is None
    assert by_config[tuple(racing.items())].status == "raced"


def test_exceptions_and_malformed_results_are_failures():
    sp = space(("block_threads",))
    answers = {32: RuntimeError("model: compile error"), 64: "not an evaluation",
               128: float("nan"), 256: 2.0, 512: 1.0, 1024: 3.0}

    def evaluate(config, must_beat):
        a = answers[config["block_threads"]]
        if isinstance(a, Exception):
            raise a
        if isinstance(a, str):
            return a
        return Evaluation(config, a, "ok" if config["block_threads"] != 1024 else "bogus")
    r = run_search(sp, evaluate, budget=10, study=study())
    status = {e.config["block_threads"]: (e.status, e.score) for e in r.evaluations}
    assert status == {32: ("failed", None), 64: ("failed", None), 128: ("failed", None),
                      256: ("ok", 2.0), 512: ("ok", 1.0), 1024: ("failed", None)}
    assert "compile error" in r.evaluations[0].detail
    assert r.best.config == {"block_threads": 256}
    assert r.trials == 6


def test_nothing_succeeds_best_is_none():
    sp = space(("block_threads",))
    r = run_search(sp, Recorder(fail=lambda c: True), budget=10, study=study())
    assert r.best is None and r.trials == 6


def test_must_beat_is_the_third_best_ok_score_so_far():
    sp = space(("block_threads", "items_per_thread"))
    rec = Recorder(fail=lambda c: c["items_per_thread"] == 4)
    run_search(sp, rec, budget=1000, study=study(), strategy="exhaustive")
    ok_scores = []
    for config, beat in zip(rec.calls, rec.must_beat):
        expect = sorted(ok_scores, reverse=True)[2] if len(ok_scores) >= 3 else None
        assert beat == expect
        if config["items_per_thread"] != 4:
            ok_scores.append(model_score(config))
    rec2 = Recorder()
    run_search(sp, rec2, budget=10, study=study(), race_top=0)
    assert rec2.must_beat == [None] * 10


def test_infeasible_proposals_do_not_count():
    """TPE proposes configs freely in each field; those over the tile-size
    constraint (1024 x 64) are told FAIL without evaluation."""
    sp = space(("block_threads", "items_per_thread"))
    rec = Recorder()
    st = study()
    r = run_search(sp, rec, budget=41, study=st, strategy="tpe", seed=0)
    assert {"block_threads": 1024, "items_per_thread": 64} not in rec.calls
    assert len(rec.calls) == r.trials == 41                      # 6 x 7, less 1024 x 64
    assert len(set(rec.idents())) == 41


def test_resume_from_the_same_in_memory_study():
    sp = space()
    st = study()
    rec1 = Recorder()
    r1 = run_search(sp, rec1, budget=20, study=st, seed=0, enqueue=[SCAN_BASE])
    rec2 = Recorder()
    r2 = run_search(sp, rec2, budget=45, study=st, seed=0, enqueue=[SCAN_BASE])
    assert r1.trials == 20 and r2.trials == 45
    assert len(rec2.calls) == 25                         # only the rest of the budget
    assert not set(rec1.idents()) & set(rec2.idents())   # nothing measured again
    assert [e.config for e in r2.evaluations[:20]] == rec1.calls
    assert r2.best.score == max(model_score(c) for c in rec1.calls + rec2.calls)
    rec3 = Recorder()
    r3 = run_search(sp, rec3, budget=45, study=st, seed=0)
    assert rec3.calls == [] and r3.trials == 45 and r3.stopped == "budget"


def test_resume_from_sqlite_continues_without_remeasuring(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    sp = space(("block_threads", "items_per_thread", "mode"))
    failing = {"block_threads": 32, "items_per_thread": 1, "mode": 0}
    rec1 = Recorder(fail=lambda c: c == failing)
    st = optuna.create_study(direction="maximize", storage=url, study_name="scan")
    r1 = run_search(sp, rec1, budget=30, study=st, strategy="exhaustive")
    assert failing in rec1.calls
    del st
    again = optuna.load_study(study_name="scan", storage=url)
    rec2 = Recorder(fail=lambda c: c == failing)
    r2 = run_search(sp, rec2, budget=1000, study=again, strategy="exhaustive")
    assert len(rec2.calls) == sp.size() - 30
    assert not set(rec1.idents()) & set(rec2.idents())
    assert r2.trials == sp.size()
    statuses = {tuple(e.config.items()): e.status for e in r2.evaluations}
    assert statuses[tuple(failing.items())] == "failed"
    assert r2.best.config == optimum(sp) and r1.best.score <= r2.best.score


def test_a_study_of_another_space_is_refused():
    st = study()
    run_search(space(("block_threads",)), Recorder(), budget=3, study=st)
    other = space_for("scan", SCAN_KEY, {**SCAN_BASE, "block_threads": 96}, fields=("block_threads",))
    with pytest.raises(ValueError, match="another search space"):
        run_search(other, Recorder(), budget=3, study=st)


def test_argument_checks():
    sp = space(("block_threads",))
    with pytest.raises(ValueError, match="strategy"):
        run_search(sp, Recorder(), budget=3, study=study(), strategy="grid")
    with pytest.raises(ValueError, match="budget"):
        run_search(sp, Recorder(), budget=0, study=study())
    with pytest.raises(ValueError, match="maximizes"):
        run_search(sp, Recorder(), budget=3, study=optuna.create_study())


def test_resume_after_a_crash_while_measuring_the_enqueued_policy(tmp_path):
    """Ctrl-C while a config is measured leaves nothing measured for it (a
    trial asked from the study stays RUNNING): the resumed search must still
    measure the enqueued current policy first."""
    sp = space()
    base = sp.project(SCAN_BASE)

    def interrupted(config, must_beat):
        raise KeyboardInterrupt
    for strategy in ("exhaustive", "tpe+polish"):
        url = f"sqlite:///{tmp_path / strategy}.db"
        st = optuna.create_study(direction="maximize", storage=url, study_name="s")
        with pytest.raises(KeyboardInterrupt):
            run_search(sp, interrupted, budget=10, study=st, strategy=strategy,
                       enqueue=[SCAN_BASE])
        # as a trial that TPE proposed and that was interrupted would leave it
        st.enqueue_trial(base)
        running = st.ask()
        sp.build(lambda d: running.suggest_categorical(d.name, d.values))
        left = st.get_trials(states=(optuna.trial.TrialState.RUNNING,))
        assert [t.params for t in left] == [base]
        again = optuna.load_study(study_name="s", storage=url)
        rec = Recorder()
        r = run_search(sp, rec, budget=5, study=again, strategy=strategy, enqueue=[SCAN_BASE])
        assert rec.calls[0] == base, strategy
        assert r.trials == len(rec.calls) == 5
        # the cut-off trials are closed (failed), not left running for the dashboard
        assert again.get_trials(states=(optuna.trial.TrialState.RUNNING,)) == []


@pytest.mark.parametrize("strategy", ["tpe+polish", "exhaustive"])
def test_lookahead_prefetches_the_next_candidates_without_changing_the_search(strategy):
    """prefetch gets the configs asked (TPE) or listed (exhaustive) ahead, each
    before it is measured; the search measures the same configs in the same
    order with or without it; no trial is left running."""
    sp = space() if strategy == "tpe+polish" else space(("mode", "group_tiles"))
    plain, fed = Recorder(), Recorder()
    prefetched = []

    def prefetch(configs):
        assert configs and all(tuple(c.items()) not in fed.idents() for c in configs)
        prefetched.append([tuple(c.items()) for c in configs])

    studies = study(), study()
    a = run_search(sp, plain, budget=30, study=studies[0], strategy=strategy, seed=3)
    b = run_search(sp, fed, budget=30, study=studies[1], strategy=strategy, seed=3,
                   prefetch=prefetch)
    assert plain.idents() == fed.idents() and a.trials == b.trials
    ahead = {c for batch in prefetched for c in batch}
    measured = fed.idents()
    assert len(prefetched) >= 5 and len(ahead & set(measured[1:])) >= len(measured) // 2
    for s in studies:
        assert not s.get_trials(states=(optuna.trial.TrialState.RUNNING,))
    if strategy == "exhaustive":
        order = [tuple(c.items()) for c in sp.configs()]
        assert prefetched[0] == order[:1 + LOOKAHEAD]     # before anything is measured
        assert prefetched[1] == order[1:1 + LOOKAHEAD]    # then the next LOOKAHEAD
    else:  # TPE's first 1 + LOOKAHEAD trials, asked first, less the infeasible ones
        first = sorted(studies[1].trials, key=lambda t: t.number)[:1 + LOOKAHEAD]
        feasible = [tuple(sp.project(t.params).items()) for t in first
                    if t.user_attrs.get(ATTR_STATUS) != INFEASIBLE]
        assert prefetched[0] == feasible and feasible[0] == measured[0]


def test_lookahead_zero_asks_one_trial_at_a_time():
    """Nothing is ahead: prefetch gets only the first candidate, before anything is measured."""
    rec = Recorder()
    prefetched = []
    got = run_search(space(), rec, budget=12, study=study(), strategy="tpe", seed=1,
                     lookahead=0, prefetch=lambda cs: prefetched.append((len(rec.calls), cs)))
    assert got.trials == 12
    assert prefetched == [(0, [rec.calls[0]])]
    with pytest.raises(ValueError, match="lookahead"):
        run_search(space(), rec, budget=3, study=study(), lookahead=-1)


@pytest.mark.parametrize("strategy", ["tpe+polish", "exhaustive"])
def test_pick_measures_a_later_candidate_first_without_losing_any(strategy):
    """pick (the sweep: the candidate compiled first) gets the next untried
    candidates, the search's next first, at most LOOKAHEAD + 1; taking a later
    one measures the slow ones later, never twice, never dropped by the
    exhaustive order, and leaves no trial running."""
    sp = space() if strategy == "tpe+polish" else space(("mode", "group_tiles"))
    rec = Recorder()
    offered = []

    def slow(c):          # a model of a slow compile: mode 0
        return c.get("mode") == 0

    def pick(configs):
        assert 2 <= len(configs) <= LOOKAHEAD + 1
        assert all(tuple(c.items()) not in rec.idents() for c in configs)
        offered.append(configs)
        return next((i for i, c in enumerate(configs) if not slow(c)), 0)

    st = study()
    r = run_search(sp, rec, budget=40, study=st, strategy=strategy, seed=3, pick=pick)
    assert offered and len(set(rec.idents())) == len(rec.calls) == r.trials
    assert any(slow(c[0]) and not slow(c[1]) for c in offered)   # a slow one was skipped
    assert not st.get_trials(states=(optuna.trial.TrialState.RUNNING,))
    if strategy == "exhaustive":
        assert sorted(rec.idents()) == sorted(tuple(c.items()) for c in sp.configs())
        plain = Recorder()
        run_search(sp, plain, budget=40, study=study(), strategy=strategy)
        assert rec.idents() != plain.idents()


def test_start_runs_once_after_the_first_candidates_went_to_prefetch():
    """start (the sweep's baseline measurement) runs before anything is
    measured, once the first candidates were handed to prefetch; also when the
    budget is already spent (a resumed study still needs its baseline); an
    exception from it propagates and leaves no trial running."""
    events = []
    rec = Recorder()
    rec_call = rec.__call__

    def evaluate(config, must_beat):
        events.append("evaluate")
        return rec_call(config, must_beat)

    st = study()
    run_search(space(), evaluate, budget=8, study=st, seed=1, enqueue=[SCAN_BASE],
               prefetch=lambda cs: events.append("prefetch"),
               start=lambda: events.append("start"))
    assert events[:2] == ["prefetch", "start"] and events.count("start") == 1
    events.clear()
    run_search(space(), evaluate, budget=8, study=st, seed=1, start=lambda: events.append("start"))
    assert events == ["start"]

    def fails():
        raise RuntimeError("the baseline failed")
    failing = study()
    with pytest.raises(RuntimeError, match="baseline"):
        run_search(space(), evaluate, budget=8, study=failing, seed=1, start=fails)
    assert not failing.get_trials(states=(optuna.trial.TrialState.RUNNING,))
