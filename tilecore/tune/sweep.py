"""The sweep behind `python -m tilecore.tune`: for each selected (algorithm,
tuning key) one Optuna study, searched with `run_search`, its finalists
re-measured against the current policy, the winner merged into a tuning table.

Per workload (an (algorithm, dtype, op) whose tuning key is tuned):

1. The study. One study per run of a workload, in the sweep's Optuna storage
   (default SQLite under the cache directory, see `default_storage`), named
   `tilecore.tune/<algorithm>/sm_<cc>/<key>/<sizes>[/<fields>]#<run>`. A new
   sweep starts run N+1; `resume` continues the latest run. The study keeps
   (user attributes) its baseline, the complete policy that was current when
   it started, and the nearest older architecture's policy, so a resumed
   study has the same search space and baseline even after a table was
   written in between; and, once finished, its result (`RESULT_ATTR`), so
   resuming a finished study with no larger budget measures nothing.
2. The space: `space_for(algorithm, key, baseline, fields=...)`, with the
   older architecture's policy included so that it can be enqueued.
3. The baseline is checked and measured once per session (every case: each
   size, and for segmented reduce each segment distribution); it scores 1.0.
   It is measured from `run_search`'s `start`, once the search's first
   candidates went to the compile pool, so they compile meanwhile.
4. `run_search` with the baseline and the older policy enqueued, and
   `evaluate(config, must_beat)` (`Evaluator`): the candidate runs under
   `override_policy`, is checked against the reference on every case before
   anything is timed, then every case is timed, largest size first, with
   racing. Its score is score.py's weighted mean of the per-size speedups over
   the baseline (a size with several cases: the geometric mean of theirs).
   Compile errors, resource limits, launch errors, a first run slower than
   `timeout_s` and wrong results are failed evaluations, never exceptions.
5. Finalists: the FINALISTS best "ok" candidates other than the baseline are
   re-measured with `measure.interleaved` against the baseline, ROUNDS rounds
   per case, and compared round by round (`speedup(paired=True)`), so slow
   drift falls on both alike. The best re-measured score wins when it is above
   1.0; otherwise the baseline stands (score 1.0).
6. The result (`TunedEntry`) is merged into `<out>/<algorithm>/sm_<cc>.yaml`
   (`output.write_table`: atomic, never silently overwriting a better row)
   and the lookup cache is cleared, so this process dispatches with it.

Racing and the measurement (`CaseBench`, `Evaluator`, injectable through
`run_sweep(bench=...)`) are in evaluate.py; the study storage and names in
studies.py.

Compile waits. With a pool, the GPU process waits for a candidate's kernels
only when nothing else is ready: every study's baseline is queued when the
sweep starts (`run_sweep(ahead=...)`), each study's first candidates before
its baseline is measured, later ones `LOOKAHEAD` ahead, and the search
measures whichever of its next candidates finished compiling first
(`Bench.pick`), so one slow compile does not idle the GPU.
"""
from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Optional, Protocol, Sequence

import optuna

from ..tunings.schema import schema_for
from . import measure as M
from .evaluate import (RACE_CAP, RACE_MARGIN, Bench, BenchRun, CaseBench, CaseInfo, Evaluator,
                       MakeBench, describe_error, geomean)
from .output import TunedEntry, write_table
from .score import score as weighted_score
from .score import weights as size_weights
from .strategies import Evaluation, run_search
from .space import SearchSpace, space_for
from .studies import (default_storage, entry_from_json, entry_json, open_storage, open_study,
                      parse_sizes, prior_run, study_base_name)
from .workloads import Workload, current_policy, gbs, older_policy, workloads

__all__ = ["CaseInfo", "Bench", "BenchRun", "MakeBench", "Ahead", "CaseBench", "Evaluator",
           "SweepConfig", "StudyOutcome", "SweepResult", "Progress", "run_sweep",
           "default_storage", "open_storage", "study_base_name", "parse_sizes", "FINALISTS",
           "ROUNDS", "RACE_MARGIN", "RACE_CAP", "DEFAULT_SIZES", "RESULT_ATTR", "SETUP_ATTR"]

FINALISTS = 3         # best candidates re-measured interleaved with the baseline
ROUNDS = 10           # interleaved rounds per case
DEFAULT_SIZES = (1 << 16, 1 << 20, 1 << 24, 1 << 28)   # CUB's tuning axis
SETUP_ATTR = "tilecore.tune.setup"     # study attr: what the study measures against
RESULT_ATTR = "tilecore.tune.result"   # study attr: the finished study's TunedEntry
BASELINE = "current"


# -- the sweep -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class SweepConfig:
    """What to tune (see the command line's --help). fields: tune only these
    policy fields (None: every tuned field); timeout_s: the whole sweep's
    time limit (shared by the studies still to run); storage: an Optuna
    storage URL (None: in memory, nothing to resume)."""
    algorithms: tuple[str, ...]
    dtypes: tuple[str, ...]
    ops: tuple[str, ...]
    sizes: tuple[int, ...] = DEFAULT_SIZES
    trials: int = 40
    timeout_s: Optional[float] = None
    storage: Optional[str] = None
    out: Optional[Path] = None
    resume: bool = False
    strategy: str = "auto"
    seed: int = 0
    fields: Optional[tuple[str, ...]] = None


@dataclass
class StudyOutcome:
    """One workload's study: its name, the entry found (None: nothing was
    written, `detail` says why), the trials the study holds and how many
    this session measured, and whether the result was re-used from a
    finished study."""
    workload: Workload
    study: str
    entry: Optional[TunedEntry] = None
    trials: int = 0
    measured: int = 0
    failed: int = 0
    detail: str = ""
    reused: bool = False
    table: Optional[Path] = None


@dataclass
class SweepResult:
    outcomes: list[StudyOutcome] = field(default_factory=list)
    wall_s: float = 0.0
    bench_s: float = 0.0        # time spent inside the bench (measuring, checking, binding)
    compile_wait_s: float = 0.0  # time the bench waited for candidates' compiles (not in bench_s)
    throttled_samples: int = 0  # timing samples discarded as throttled (NVML), GpuTimer only

    @property
    def entries(self) -> list[tuple[str, TunedEntry]]:
        return [(o.workload.algorithm, o.entry) for o in self.outcomes if o.entry is not None]

    @property
    def tables(self) -> list[Path]:
        return sorted({o.table for o in self.outcomes if o.table is not None})


class Progress(Protocol):
    """What the sweep reports while it runs (the command line draws a progress line)."""

    def study_started(self, index: int, total: int, workload: Workload, budget: int,
                      prior: int, prior_best: Optional[float],
                      deadline: Optional[float]) -> None: ...

    def trial(self, evaluation: Evaluation) -> None: ...

    def study_finished(self, outcome: StudyOutcome) -> None: ...


class _Timed:
    """A Bench whose calls add their wall time to `totals.bench_s` (the sweep's
    measure of how busy the GPU was), less the time the bench waited for
    compiles (its `compile_wait_s`, where it has one), which goes to
    `totals.compile_wait_s`; on close, its timer's throttled samples go to
    `totals.throttled_samples`."""

    def __init__(self, bench: Bench, totals: "SweepResult") -> None:
        self._bench, self._totals = bench, totals
        self.cases = bench.cases

    @contextlib.contextmanager
    def _clock(self) -> Iterator[None]:
        t0 = time.monotonic()
        waited0 = getattr(self._bench, "compile_wait_s", 0.0)
        try:
            yield
        finally:
            waited = getattr(self._bench, "compile_wait_s", 0.0) - waited0
            self._totals.bench_s += time.monotonic() - t0 - waited
            self._totals.compile_wait_s += waited

    @contextlib.contextmanager
    def run(self, policy: dict) -> Iterator[BenchRun]:
        with self._clock(), self._bench.run(policy) as r:
            yield r

    def interleaved(self, policies: dict[str, dict], case: int,
                    rounds: int) -> dict[str, M.Measurement]:
        with self._clock():
            return self._bench.interleaved(policies, case, rounds)

    def prefetch(self, policies: Sequence[dict], soon: bool = False) -> None:
        self._bench.prefetch(policies, soon)

    def pick(self, policies: Sequence[dict]) -> int:
        with self._clock():
            return self._bench.pick(policies)

    def close(self) -> None:
        self._totals.throttled_samples += getattr(getattr(self._bench, "timer", None),
                                                  "throttled_samples", 0)
        self._bench.close()


Ahead = Callable[[Workload, Sequence[int], Sequence[dict]], None]


def run_sweep(cfg: SweepConfig, *, cc: int, bench: MakeBench, provenance: dict,
              progress: Optional[Progress] = None, log: Callable[[str], None] = print,
              ahead: Optional[Ahead] = None) -> SweepResult:
    """Tune every distinct (algorithm, tuning key) of `cfg` on a device of
    compute capability `cc` (see the module docstring), measuring with
    `bench(workload, sizes)`, and write the results into `cfg.out`
    (`output.default_directory()` when None). provenance: the environment
    (output.environment_provenance). log: receives the table decisions and
    notes. ahead(workload, sizes, policies): queues compiles before the
    workload's bench exists (speculative; the command line's compile pool):
    every study's current policy (and the nearest older architecture's) is
    queued at the start, so no study waits for its baseline's compile."""
    from .output import default_directory
    out = Path(cfg.out) if cfg.out is not None else default_directory()
    storage = open_storage(cfg.storage)
    todo = workloads(cfg.algorithms, cfg.dtypes, cfg.ops)
    if ahead is not None:
        for w in todo:
            older = older_policy(w.algorithm, cc, w.key)
            ahead(w, cfg.sizes, [current_policy(w.algorithm, cc, w.key)]
                  + ([older[1]] if older else []))
    result = SweepResult()
    start = time.monotonic()
    sweep_deadline = start + cfg.timeout_s if cfg.timeout_s is not None else None
    for index, w in enumerate(todo):
        now = time.monotonic()
        deadline = None
        if sweep_deadline is not None:
            deadline = now + (sweep_deadline - now) / (len(todo) - index)
        name = study_base_name(w.algorithm, cc, w.key, cfg.sizes, cfg.fields)
        if sweep_deadline is not None and now >= sweep_deadline:
            outcome = StudyOutcome(w, name, detail="skipped: the sweep's --timeout was reached")
        else:
            outcome = _run_study(cfg, w, cc, name, storage, bench, result, deadline,
                                 (index, len(todo)), progress, log)
            if outcome.entry is not None:
                outcome.table = write_table(out, w.algorithm, cc, [outcome.entry], provenance,
                                            log=log)
        if progress is not None:
            progress.study_finished(outcome)
        result.outcomes.append(outcome)
    result.wall_s = time.monotonic() - start
    return result


def _run_study(cfg: SweepConfig, w: Workload, cc: int, base_name: str, storage,
               make_bench: MakeBench, totals: SweepResult, deadline: Optional[float],
               position: tuple[int, int], progress: Optional[Progress],
               log: Callable[[str], None]) -> StudyOutcome:
    study = open_study(storage, base_name, cfg.resume, log)
    outcome = StudyOutcome(w, study.study_name)
    setup = study.user_attrs.get(SETUP_ATTR)
    if setup is None:
        older = older_policy(w.algorithm, cc, w.key)
        setup = {"baseline": current_policy(w.algorithm, cc, w.key),
                 "older": older[1] if older else None, "older_cc": older[0] if older else None}
        study.set_user_attr(SETUP_ATTR, setup)
    done = study.user_attrs.get(RESULT_ATTR)
    prior, prior_best = prior_run(study)
    if done is not None and prior >= cfg.trials:
        outcome.entry = entry_from_json(done)
        outcome.trials, outcome.reused = prior, True
        outcome.detail = f"re-used the finished study's result ({prior} trials)"
        return outcome
    baseline, older = setup["baseline"], setup["older"]
    try:
        space = space_for(w.algorithm, w.key, baseline, fields=cfg.fields,
                          include=[older] if older else ())
    except ValueError as e:
        outcome.detail = f"no search space: {e}"
        return outcome
    if progress is not None:
        progress.study_started(position[0], position[1], w, cfg.trials, prior, prior_best,
                               deadline)
    bench = _Timed(make_bench(w, cfg.sizes), totals)
    try:
        return _search(cfg, w, space, bench, study, baseline, older, deadline, progress,
                       outcome)
    finally:
        bench.close()


class _BaselineFailed(Exception):
    """The current policy failed its check or its measurement: the study ends (message: why)."""


def _search(cfg: SweepConfig, w: Workload, space: SearchSpace, bench: Bench,
            study: optuna.Study, baseline: dict, older: Optional[dict],
            deadline: Optional[float], progress: Optional[Progress],
            outcome: StudyOutcome) -> StudyOutcome:
    evaluators: list[Evaluator] = []

    def measure_baseline() -> None:
        """Check and measure the baseline (run_search's start: the first
        candidates compile meanwhile)."""
        try:
            with bench.run(baseline) as run:
                problem = run.check()
                base = [] if problem else [run.time(i, None) for i in range(len(bench.cases))]
        except Exception as e:
            raise _BaselineFailed(f"the current policy failed: {describe_error(e)}") from e
        if problem:
            raise _BaselineFailed(f"the current policy fails its check ({problem}): a bug to "
                                  f"report")
        evaluators.append(Evaluator(space, bench, base, cfg.sizes))

    prefetcher = _Prefetcher(space, bench)

    def on_trial(ev: Evaluation) -> None:
        outcome.measured += 1
        outcome.failed += ev.status == "failed"
        prefetcher.after(ev)
        if progress is not None:
            progress.trial(ev)

    enqueue = [baseline] + ([older] if older else [])
    try:
        found = run_search(
            space, lambda config, must_beat: evaluators[0](config, must_beat),
            budget=cfg.trials, study=study, enqueue=enqueue, strategy=cfg.strategy,
            seed=cfg.seed, on_trial=on_trial, deadline=deadline, start=measure_baseline,
            prefetch=lambda cs: bench.prefetch([space.complete(c) for c in cs], True),
            pick=lambda cs: bench.pick([space.complete(c) for c in cs]))
    except _BaselineFailed as e:
        outcome.detail = str(e)
        return outcome
    base = evaluators[0].base
    outcome.trials = found.trials
    try:
        entry = _finalists(w, space, bench, base, cfg.sizes, baseline, found.evaluations)
    except Exception as e:
        outcome.detail = (f"re-measuring the finalists failed ({describe_error(e)}); the study "
                          f"keeps its trials: --resume re-measures them")
        return outcome
    entry.trials, entry.strategy = found.trials, found.strategy
    study.set_user_attr(RESULT_ATTR, entry_json(entry))
    outcome.entry = entry
    outcome.detail = f"{found.trials} trials ({found.strategy}, stopped: {found.stopped})"
    return outcome


class _Prefetcher:
    """Queues likely next candidates for compilation: the neighbours of the
    best config so far (the polish's next moves)."""

    def __init__(self, space: SearchSpace, bench: Bench) -> None:
        self.space, self.bench = space, bench
        self.best: Optional[Evaluation] = None

    def after(self, ev: Evaluation) -> None:
        if ev.status != "ok" or (self.best is not None and ev.score <= self.best.score):
            return
        self.best = ev
        self.bench.prefetch([self.space.complete(c) for c in self.space.neighbors(ev.config)])


def _finalists(w: Workload, space: SearchSpace, bench: Bench, base: list[M.Measurement],
               sizes: Sequence[int], baseline: dict,
               evaluations: Sequence[Evaluation]) -> TunedEntry:
    """The result: the finalists re-measured interleaved with the baseline;
    the best above 1.0 wins, else the baseline (see the module docstring)."""
    ident = space.canonical(baseline)
    ok = sorted((e for e in evaluations if e.status == "ok" and space.canonical(e.config) != ident),
                key=lambda e: -e.score)[:FINALISTS]
    cases = bench.cases
    weights = size_weights(sizes)
    if not ok:
        rows = {c.n: [] for c in cases}
        for c, m in zip(cases, base):
            rows[c.n].append((gbs(c.nbytes, m.ms), gbs(c.nbytes, m.ms), 1.0, None))
        return _entry(w, space.project(baseline), baseline, rows, 1.0)
    policies = {BASELINE: baseline}
    policies.update({f"#{k}": space.complete(e.config) for k, e in enumerate(ok)})
    rounds = [bench.interleaved(policies, i, ROUNDS) for i in range(len(cases))]
    best_name, best_score, best_rows = None, 1.0, None
    for k in range(len(ok)):
        name = f"#{k}"
        rows: dict[int, list] = {c.n: [] for c in cases}
        for c, got in zip(cases, rounds):
            s, rel = M.speedup(got[BASELINE], got[name], paired=True)
            rows[c.n].append((gbs(c.nbytes, got[BASELINE].ms), gbs(c.nbytes, got[name].ms),
                              s, rel))
        value = weighted_score({n: geomean([r[2] for r in v]) for n, v in rows.items()},
                               weights)
        if value > best_score:
            best_name, best_score, best_rows = k, value, rows
    if best_name is None:
        rows = {c.n: [] for c in cases}
        for c, got in zip(cases, rounds):
            g = gbs(c.nbytes, got[BASELINE].ms)
            rows[c.n].append((g, g, 1.0, None))
        return _entry(w, space.project(baseline), baseline, rows, 1.0)
    return _entry(w, ok[best_name].config, baseline, best_rows, best_score)


def _entry(w: Workload, params: dict, baseline: dict, rows: dict[int, list],
           value: float) -> TunedEntry:
    """A TunedEntry from per-size rows of (old GB/s, new GB/s, speedup,
    relative noise or None), one per case of the size (geometric means)."""
    sizes = {}
    for n, cases in rows.items():
        s = geomean([r[2] for r in cases])
        rel = [r[3] for r in cases]
        noise = None if None in rel else s * math.sqrt(sum(x * x for x in rel)) / len(rel)
        sizes[n] = {"old_gbs": round(geomean([r[0] for r in cases]), 3),
                    "new_gbs": round(geomean([r[1] for r in cases]), 3),
                    "speedup": round(s, 4),
                    "noise": None if noise is None else round(noise, 4)}
    return TunedEntry(schema_for(w.algorithm).row_match(w.key), dict(params), dict(baseline),
                      sizes, round(value, 4), 0)

