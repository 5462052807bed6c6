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

Racing. `must_beat` is the search's RACE_TOP-th best score so far. Before a
case is timed, an optimistic bound of the candidate's score is formed: the
cases timed so far at the speedup their confidence interval's fast end
allows, the cases still to come at their cap (RACE_MARGIN times the best
speedup any candidate reached on that case this session; RACE_CAP before
one did). The case is timed with `give_up_if_faster_than_ms` set to the time
at which even this bound falls below `must_beat`; a measurement stopped there
ends the candidate as "raced" (its score: the estimate over the cases timed).
The bound is a heuristic where a candidate beats every speedup seen on a case
by more than RACE_MARGIN.

The measurement is injectable: `run_sweep(bench=...)` takes a function
(workload, sizes) -> `Bench`. `CaseBench` (the default of the command line)
runs the algorithm on GPU arrays (or, with device None, in the interpreter)
through workloads.Case and measure.py, compiling candidates ahead in a
CompilePool when given one; tests pass a model of run time over the policy
parameters.

Compile waits. With a pool, the GPU process waits for a candidate's kernels
only when nothing else is ready: every study's baseline is queued when the
sweep starts (`run_sweep(ahead=...)`), each study's first candidates before
its baseline is measured, later ones `LOOKAHEAD` ahead, and the search
measures whichever of its next candidates finished compiling first
(`Bench.pick`), so one slow compile does not idle the GPU.
"""
from __future__ import annotations

import contextlib
import functools
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, ContextManager, Iterator, Optional, Protocol, Sequence

import optuna

from ..dispatch import override_policy
from . import measure as M
from .output import TunedEntry, key_text, size_text, write_table
from .score import score as weighted_score
from .score import weights as size_weights
from .strategies import ATTR_DUPLICATE, ATTR_STATUS, INFEASIBLE, Evaluation, run_search
from .space import SearchSpace, space_for
from .workloads import Case, Side, Workload, current_policy, gbs, older_policy, workloads

__all__ = ["CaseInfo", "Bench", "BenchRun", "MakeBench", "Ahead", "CaseBench", "Evaluator",
           "SweepConfig", "StudyOutcome", "SweepResult", "Progress", "run_sweep",
           "default_storage", "open_storage", "study_base_name", "parse_sizes", "FINALISTS",
           "ROUNDS", "RACE_MARGIN", "RACE_CAP", "DEFAULT_SIZES", "RESULT_ATTR", "SETUP_ATTR"]

FINALISTS = 3         # best candidates re-measured interleaved with the baseline
ROUNDS = 10           # interleaved rounds per case
RACE_MARGIN = 1.10    # racing: a case's cap over the best speedup seen on it
RACE_CAP = 2.0        # racing: a case's cap before any speedup was seen on it
CHECK_TIMEOUT_S = 60.0
DEFAULT_SIZES = (1 << 16, 1 << 20, 1 << 24, 1 << 28)   # CUB's tuning axis
STUDY_PREFIX = "tilecore.tune"
SETUP_ATTR = "tilecore.tune.setup"     # study attr: what the study measures against
RESULT_ATTR = "tilecore.tune.result"   # study attr: the finished study's TunedEntry
BASELINE = "current"


# -- what the sweep measures with ------------------------------------------------------------

@dataclass(frozen=True)
class CaseInfo:
    """One timed case: `n` items (`segments`: the segment distribution of a
    segmented reduce, else None); `nbytes`: bytes a call moves (for GB/s)."""
    n: int
    segments: Optional[str]
    nbytes: int

    @property
    def label(self) -> str:
        return size_text(self.n) + (f" {self.segments}" if self.segments else "")


class BenchRun(Protocol):
    """One candidate policy in force (see Bench.run)."""

    def check(self) -> Optional[str]:
        """None when every case's result equals the reference, else what differs."""

    def time(self, case: int, give_up_if_faster_than_ms: Optional[float]) -> M.Measurement:
        """Case `case` timed as measure.measure times it (racing included)."""


class Bench(Protocol):
    """The measurement of one workload at the sweep's sizes: `cases` in size
    order; `run(policy)` enters a complete policy for a candidate's work;
    `interleaved` re-measures several policies on one case round-robin;
    `prefetch` may compile policies ahead (or do nothing; `soon`: the search's
    next candidates, before speculative ones); `pick(policies)` is the index
    of the one to measure next (the first whose compiles are done, waiting
    for one when none is; 0 without compiles to wait for); `close` frees the
    buffers. Any method may raise: the sweep records a failed candidate."""
    cases: Sequence[CaseInfo]

    def run(self, policy: dict) -> ContextManager[BenchRun]: ...

    def interleaved(self, policies: dict[str, dict], case: int,
                    rounds: int) -> dict[str, M.Measurement]: ...

    def prefetch(self, policies: Sequence[dict], soon: bool = False) -> None: ...

    def pick(self, policies: Sequence[dict]) -> int: ...

    def close(self) -> None: ...


MakeBench = Callable[[Workload, Sequence[int]], Bench]


class CaseBench:
    """The real measurement: workloads.Case per (size, segment distribution)
    on GPU `device` (None: NumPy arrays in the interpreter), timed by `timer`
    (default: GpuTimer on the cases' stream; HostTimer in the interpreter).
    `pool`: a compile_pool.CompilePool compiling each candidate's kernels
    before it runs (and prefetched ones while the GPU times others); a compile
    error there fails the candidate."""

    def __init__(self, workload: Workload, sizes: Sequence[int], *, device: Optional[int] = None,
                 timer: Optional[M.Timer] = None, pool=None,
                 compile_timeout_s: float = 300.0) -> None:
        self.workload, self.sizes = workload, tuple(sizes)
        side = Side(device)
        self._cases = [Case(workload, n, side, seg) for n in sizes for seg in workload.segments]
        self.cases = tuple(CaseInfo(c.n, c.segments, c.nbytes) for c in self._cases)
        if timer is None:
            timer = M.HostTimer() if device is None else M.GpuTimer(side.stream, device=device)
        self.timer = timer
        self._pool = pool
        self._compile_timeout_s = compile_timeout_s
        self.compile_wait_s = 0.0     # time run() and pick() waited for the pool's compiles

    def _jobs(self, policy: dict) -> list:
        from .compile_pool import candidate_jobs
        return candidate_jobs(self.workload, self.sizes, policy)

    def prefetch(self, policies: Sequence[dict], soon: bool = False) -> None:
        if self._pool is not None:
            self._pool.prefetch([job for p in policies for job in self._jobs(p)], soon)

    def pick(self, policies: Sequence[dict]) -> int:
        if self._pool is None or len(policies) < 2:
            return 0
        t0 = time.monotonic()
        try:
            return self._pool.first_done([self._jobs(p) for p in policies],
                                         self._compile_timeout_s)
        finally:
            self.compile_wait_s += time.monotonic() - t0

    @contextlib.contextmanager
    def run(self, policy: dict) -> Iterator[BenchRun]:
        if self._pool is not None:
            t0 = time.monotonic()
            try:
                results = self._pool.wait(self._jobs(policy), self._compile_timeout_s)
            finally:
                self.compile_wait_s += time.monotonic() - t0
            for r in results:
                if r.error:
                    raise RuntimeError(f"compile: {r.error}")
        with override_policy(self.workload.algorithm, **policy):
            yield _CaseRun([c.bind() for c in self._cases], self.timer)

    def interleaved(self, policies: dict[str, dict], case: int,
                    rounds: int) -> dict[str, M.Measurement]:
        switch = _PolicySwitch(self.workload.algorithm)
        try:
            calls = {}
            for name, policy in policies.items():
                switch.use(name, policy)
                bound = self._cases[case].bind()
                calls[name] = [functools.partial(switch.call, name, policy, c)
                               for c in bound.calls]
            return M.interleaved(calls, rounds=rounds, timer=self.timer)
        finally:
            switch.close()

    def close(self) -> None:
        self._cases.clear()


class _CaseRun:
    def __init__(self, bounds: list, timer: M.Timer) -> None:
        self._bounds, self._timer = bounds, timer

    def check(self) -> Optional[str]:
        for b in self._bounds:
            problem = b.check()
            if problem:
                return problem
        return None

    def time(self, case: int, give_up_if_faster_than_ms: Optional[float]) -> M.Measurement:
        return M.measure(self._bounds[case].calls, timer=self._timer,
                         give_up_if_faster_than_ms=give_up_if_faster_than_ms)


class _PolicySwitch:
    """Keeps one policy override entered and switches when a call of another
    policy comes (interleaved samples: one switch per sample, not per call,
    since entering an override rebuilds the algorithms' host plans)."""

    def __init__(self, algorithm: str) -> None:
        self.algorithm, self.active = algorithm, None
        self._stack = contextlib.ExitStack()

    def use(self, name: str, policy: dict) -> None:
        if self.active != name:
            self._stack.close()
            self._stack.enter_context(override_policy(self.algorithm, **policy))
            self.active = name

    def call(self, name: str, policy: dict, fn: Callable[[], object]) -> object:
        self.use(name, policy)
        return fn()

    def close(self) -> None:
        self._stack.close()
        self.active = None


# -- one candidate -------------------------------------------------------------------------------

def _geomean(xs: Sequence[float]) -> float:
    """The geometric mean of positive `xs` (0.0 when one is not positive)."""
    if any(x <= 0 for x in xs):
        return 0.0
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _describe(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]


class Evaluator:
    """evaluate(config, must_beat) for run_search over `space` (see the module
    docstring): check, time every case with racing, score against `base` (the
    baseline's measurements, one per case of `bench`)."""

    def __init__(self, space: SearchSpace, bench: Bench, base: Sequence[M.Measurement],
                 sizes: Sequence[int], timeout_s: float = CHECK_TIMEOUT_S) -> None:
        self.space, self.bench, self.base = space, bench, list(base)
        self.cases = list(bench.cases)
        self.timeout_s = timeout_s
        self.weights = size_weights(sizes)
        per_size = {n: sum(1 for c in self.cases if c.n == n) for n in self.weights}
        self.case_weight = [self.weights[c.n] / per_size[c.n] for c in self.cases]
        self.order = sorted(range(len(self.cases)), key=lambda i: (-self.cases[i].n, i))
        self.best_seen: list[Optional[float]] = [None] * len(self.cases)
        self.baseline = space.canonical(space.base)

    def __call__(self, config: dict, must_beat: Optional[float]) -> Evaluation:
        if self.space.canonical(config) == self.baseline:
            return Evaluation(config, 1.0, "ok", "the current policy (the baseline)")
        policy = self.space.complete(config)
        got: dict[int, M.Measurement] = {}
        try:
            with self.bench.run(policy) as run:
                t0 = time.monotonic()
                problem = run.check()
                spent = time.monotonic() - t0
                if problem:
                    return Evaluation(config, None, "failed", f"wrong result: {problem}")
                if spent > self.timeout_s:
                    return Evaluation(config, None, "failed", f"timed out: its checked first "
                                      f"run took {spent:.1f} s (limit {self.timeout_s:g} s)")
                for i in self.order:
                    m = run.time(i, self.race_limit(i, got, must_beat))
                    got[i] = m
                    self._seen(i, m)
                    if m.stopped_early:
                        return Evaluation(config, self.score(got)[0], "raced",
                                          f"stopped at {self.cases[i].label}: surely below "
                                          f"the score to beat {must_beat:.4f}")
        except Exception as e:  # a candidate never crashes the sweep
            return Evaluation(config, None, "failed", _describe(e))
        value, ci = self.score(got)
        return Evaluation(config, value, "ok", "", ci)

    def _seen(self, i: int, m: M.Measurement) -> None:
        s = self.base[i].ms / m.ms
        if self.best_seen[i] is None or s > self.best_seen[i]:
            self.best_seen[i] = s

    def race_limit(self, i: int, got: dict[int, M.Measurement],
                   must_beat: Optional[float]) -> Optional[float]:
        """The time of case i above which the candidate surely scores below
        `must_beat` (None: no racing on this case)."""
        if must_beat is None:
            return None
        bound = 0.0
        for j, w in enumerate(self.case_weight):
            if j == i:
                continue
            if j in got:
                bound += w * self.base[j].ms / max(got[j].ci_low, 1e-30)
            else:
                seen = self.best_seen[j]
                bound += w * (RACE_CAP if seen is None else max(1.0, seen) * RACE_MARGIN)
        need = (must_beat - bound) / self.case_weight[i]
        return self.base[i].ms / need if need > 0 else None

    def score(self, got: dict[int, M.Measurement]) -> tuple[float, tuple[float, float]]:
        """(score, its interval from the cases' confidence intervals) over the cases in `got`."""
        def by_size(speed: Callable[[int], float]) -> dict[int, float]:
            sizes: dict[int, list[float]] = {}
            for i in got:
                sizes.setdefault(self.cases[i].n, []).append(speed(i))
            return {n: _geomean(v) for n, v in sizes.items()}
        mid = by_size(lambda i: self.base[i].ms / max(got[i].ms, 1e-30))
        lo = by_size(lambda i: self.base[i].ms / got[i].ci_high)
        hi = by_size(lambda i: self.base[i].ms / max(got[i].ci_low, 1e-30))
        return (weighted_score(mid, self.weights),
                (weighted_score(lo, self.weights), weighted_score(hi, self.weights)))


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


def default_storage() -> Optional[str]:
    """The default study storage: SQLite at `<cache_dir>/tune/studies.db`,
    None when the disk cache is disabled."""
    from .. import config
    try:
        root = config.cache_dir()
    except RuntimeError:
        return None
    if root is None:
        return None
    return f"sqlite:///{root / 'tune' / 'studies.db'}"


def open_storage(url: Optional[str]) -> optuna.storages.BaseStorage:
    """The Optuna storage at `url` (None: in memory). An SQLite file is put
    in write-ahead-log mode first (persistent, in the file): each trial's
    commits then append to the log instead of rewriting the database with an
    fsync each (20x faster on a slow disk), and optuna-dashboard can read the
    study while the sweep writes it."""
    if url is None:
        return optuna.storages.InMemoryStorage()
    prefix = "sqlite:///"
    if url.startswith(prefix) and url != prefix + ":memory:":
        import sqlite3
        path = Path(url[len(prefix):])
        path.parent.mkdir(parents=True, exist_ok=True)

        def connect() -> sqlite3.Connection:
            db = sqlite3.connect(path, timeout=60, check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            return db
        return optuna.storages.RDBStorage(url, engine_kwargs={"creator": connect})
    return optuna.storages.RDBStorage(url)


def parse_sizes(text: str) -> tuple[int, ...]:
    """Sizes from `A:B[:S]` (powers of two from A to B, A and B written 2^k
    or as numbers, exponent step S, default 4: 2^16:2^28 is 2^16, 2^20,
    2^24, 2^28) or a comma list of sizes (2^k or numbers). ValueError naming
    what is wrong."""
    def number(s: str) -> int:
        s = s.strip()
        if s.startswith("2^") and s[2:].isdigit():
            return 1 << int(s[2:])
        if s.isdigit():
            return int(s)
        raise ValueError(f"expected a size like 2^20 or 1048576, got {s!r}")
    if ":" in text:
        parts = text.split(":")
        if len(parts) not in (2, 3):
            raise ValueError(f"expected A:B or A:B:STEP, got {text!r}")
        lo, hi = number(parts[0]), number(parts[1])
        step = 4 if len(parts) == 2 else int(parts[2]) if parts[2].strip().isdigit() else 0
        if step < 1:
            raise ValueError(f"expected a positive exponent step, got {parts[2]!r}")
        for v in (lo, hi):
            if v < 1 or v & (v - 1):
                raise ValueError(f"a range's ends must be powers of two, got {v}")
        if lo > hi:
            raise ValueError(f"expected A <= B in A:B, got {text!r}")
        out = tuple(1 << e for e in range(lo.bit_length() - 1, hi.bit_length(), step))
    else:
        out = tuple(sorted({number(s) for s in text.split(",")}))
    if not out or out[0] < 1:
        raise ValueError(f"expected positive sizes, got {text!r}")
    if out[-1] >= 1 << 31:
        raise ValueError(f"sizes must be below 2^31 (the tuning keys assume int32 offsets), "
                         f"got {size_text(out[-1])}")
    return out


def study_base_name(algorithm: str, cc: int, key: dict, sizes: Sequence[int],
                    fields: Optional[Sequence[str]] = None) -> str:
    """The study name of a workload's runs, without the `#run` suffix."""
    name = (f"{STUDY_PREFIX}/{algorithm}/sm_{cc}/{key_text(key)}/"
            f"{','.join(size_text(n) for n in sizes)}")
    return name + (f"/{','.join(fields)}" if fields else "")


def _open_study(storage, base: str, resume: bool, log: Callable[[str], None]) -> optuna.Study:
    runs = []
    for name in optuna.get_all_study_names(storage):
        head, _, run = name.rpartition("#")
        if head == base and run.isdigit():
            runs.append(int(run))
    if resume and runs:
        return optuna.load_study(study_name=f"{base}#{max(runs)}", storage=storage)
    if resume:
        log(f"{base}: no study to resume; starting one")
    return optuna.create_study(study_name=f"{base}#{max(runs, default=0) + 1}",
                               storage=storage, direction="maximize")


def _prior(study: optuna.Study) -> tuple[int, Optional[float]]:
    """(evaluations a study holds, the best "ok" score among them)."""
    count, best = 0, None
    for t in study.get_trials(deepcopy=False):
        status = t.user_attrs.get(ATTR_STATUS)
        if status is None or status == INFEASIBLE or ATTR_DUPLICATE in t.user_attrs:
            continue
        count += 1
        if status == "ok" and t.value is not None and (best is None or t.value > best):
            best = t.value
    return count, best


def _entry_json(e: TunedEntry) -> dict:
    return {"key": e.key, "params": e.params, "old_params": e.old_params,
            "sizes": {str(n): m for n, m in e.sizes.items()}, "score": e.score,
            "trials": e.trials, "strategy": e.strategy}


def _entry_from_json(d: dict) -> TunedEntry:
    return TunedEntry(d["key"], d["params"], d["old_params"],
                      {int(n): m for n, m in d["sizes"].items()}, d["score"], d["trials"],
                      d["strategy"])


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
    study = _open_study(storage, base_name, cfg.resume, log)
    outcome = StudyOutcome(w, study.study_name)
    setup = study.user_attrs.get(SETUP_ATTR)
    if setup is None:
        older = older_policy(w.algorithm, cc, w.key)
        setup = {"baseline": current_policy(w.algorithm, cc, w.key),
                 "older": older[1] if older else None, "older_cc": older[0] if older else None}
        study.set_user_attr(SETUP_ATTR, setup)
    done = study.user_attrs.get(RESULT_ATTR)
    prior, prior_best = _prior(study)
    if done is not None and prior >= cfg.trials:
        outcome.entry = _entry_from_json(done)
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
            raise _BaselineFailed(f"the current policy failed: {_describe(e)}") from e
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
        outcome.detail = (f"re-measuring the finalists failed ({_describe(e)}); the study keeps "
                          f"its trials: --resume re-measures them")
        return outcome
    entry.trials, entry.strategy = found.trials, found.strategy
    study.set_user_attr(RESULT_ATTR, _entry_json(entry))
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
        value = weighted_score({n: _geomean([r[2] for r in v]) for n, v in rows.items()},
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
        s = _geomean([r[2] for r in cases])
        rel = [r[3] for r in cases]
        noise = None if None in rel else s * math.sqrt(sum(x * x for x in rel)) / len(rel)
        sizes[n] = {"old_gbs": round(_geomean([r[0] for r in cases]), 3),
                    "new_gbs": round(_geomean([r[1] for r in cases]), 3),
                    "speedup": round(s, 4),
                    "noise": None if noise is None else round(noise, 4)}
    return TunedEntry(dict(w.key), dict(params), dict(baseline), sizes, round(value, 4), 0)
