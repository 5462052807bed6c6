"""How `python -m tilecore.tune` measures a candidate (sweep.py has the
flow): `CaseBench` runs an algorithm's cases under a policy, `Evaluator`
checks and times a candidate against the baseline for run_search.

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
"""
from __future__ import annotations

import contextlib
import functools
import math
import time
from dataclasses import dataclass
from typing import Callable, ContextManager, Iterator, Optional, Protocol, Sequence

from ..dispatch import override_policy
from ..dispatch.target import device_target, interpreter_target
from . import measure as M
from .output import size_text
from .score import score as weighted_score
from .score import weights as size_weights
from .strategies import Evaluation
from .temp_budget import temp_budget_problem
from .space import SearchSpace
from .workloads import Case, Side, Workload

__all__ = ["CaseInfo", "Bench", "BenchRun", "MakeBench", "CaseBench", "Evaluator", "geomean",
           "describe_error", "RACE_MARGIN", "RACE_CAP", "CHECK_TIMEOUT_S"]

RACE_MARGIN = 1.10    # racing: a case's cap over the best speedup seen on it
RACE_CAP = 2.0        # racing: a case's cap before any speedup was seen on it
CHECK_TIMEOUT_S = 60.0

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
    on GPU `device` (None: NumPy arrays in the interpreter), of policies within
    their temporary-storage budget (temp_budget.py), timed by `timer`
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
        self.target = interpreter_target() if device is None else device_target(device)
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
        # one override for the candidate (entering one rebuilds the host plans); the
        # pool compiles in its own processes, from the policy it is given
        with override_policy(self.workload.algorithm, **policy):
            problem = temp_budget_problem(self.workload, self.target)
            if problem:
                raise ValueError(problem)
            if self._pool is not None:
                t0 = time.monotonic()
                try:
                    results = self._pool.wait(self._jobs(policy), self._compile_timeout_s)
                finally:
                    self.compile_wait_s += time.monotonic() - t0
                for r in results:
                    if r.error:
                        raise RuntimeError(f"compile: {r.error}")
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

def geomean(xs: Sequence[float]) -> float:
    """The geometric mean of positive `xs` (0.0 when one is not positive)."""
    if any(x <= 0 for x in xs):
        return 0.0
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def describe_error(e: BaseException) -> str:
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
            return Evaluation(config, None, "failed", describe_error(e))
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
            return {n: geomean(v) for n, v in sizes.items()}
        mid = by_size(lambda i: self.base[i].ms / max(got[i].ms, 1e-30))
        lo = by_size(lambda i: self.base[i].ms / got[i].ci_high)
        hi = by_size(lambda i: self.base[i].ms / max(got[i].ci_low, 1e-30))
        return (weighted_score(mid, self.weights),
                (weighted_score(lo, self.weights), weighted_score(hi, self.weights)))
