"""The search over a SearchSpace: which candidates to measure, in what order,
recorded in an Optuna study (maximizing the score).

Strategies:
- "exhaustive": every valid config in the space's order (enqueued ones first).
- "tpe+polish" (the default for spaces larger than the budget): Optuna's TPE
  (multivariate, grouped for the conditional fields) over categorical
  parameters, define-by-run so a field is suggested only where it applies;
  after TPE_SHARE of the budget, a coordinate-descent polish around the best
  (every config one step away in one field; recentre on the best; until no
  neighbour is better), then TPE again, polishing each new best. TPE
  re-proposes configs it has tried: such a trial is answered from the study
  (told the stored value) without measuring. benchmarks/bench_tuner_replay.py
  replays the strategies against brute-forced tables to defend this choice.
- "tpe": TPE alone. "random": uniform choices per field (CUB's own search
  samples at random). "tpe-ordinal": TPE with each field's candidate index as
  an ordered integer, for the replay's comparison only.
- "auto": "exhaustive" when the space has at most `budget` configs, else
  "tpe+polish".

Compiles overlap measurement: "tpe" and "tpe+polish" keep LOOKAHEAD trials
asked ahead of the one being measured (TPE's constant liar counts them as
pending), "exhaustive" knows its order and the polish its neighbours; the
configs ahead go to `prefetch` (the sweep's compile pool), so the next
candidate's kernels compile while the GPU times this one. The first ones are
asked (listed) and prefetched before anything is measured, and `start` (the
sweep's baseline measurement) runs then. `pick` chooses which of the next
candidates (the next one and those ahead) to measure now: the sweep takes
the first whose kernels are compiled, so a slow compile is measured later
instead of idling the GPU. Without `pick` the search takes them in order:
the same search with or without the pool.

Every strategy measures the enqueued configs first (the current policy, the
nearest older architecture's tuned policy), never measures a config twice,
and passes `must_beat` to `evaluate`: the RACE_TOP-th best score so far
(racing: an evaluation may stop once it is surely below it and report
"raced"; None until there are that many). Configs that break a constraint are
told to the study as FAIL without evaluation and do not count against the
budget; evaluations that fail (or raise) are FAIL trials and count. Only "ok"
evaluations can be the best. The budget counts evaluations over the study's
whole life: a study that already holds trials of this space (a resumed sweep)
has them counted and re-used, never re-measured.
"""
from __future__ import annotations

import itertools
import math
import random
import time
import warnings
from collections import deque
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Callable, Optional, Sequence

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.trial import TrialState

from .space import SearchSpace

__all__ = ["Evaluation", "Evaluate", "SearchResult", "run_search", "STRATEGIES",
           "TPE_SHARE", "RACE_TOP", "LOOKAHEAD"]

STRATEGIES = ("auto", "exhaustive", "tpe+polish", "tpe", "random", "tpe-ordinal")
STATUSES = ("ok", "failed", "raced")

# Share of the budget TPE spends before the first polish (tpe+polish).
TPE_SHARE = 0.5
# Racing threshold: the score of the RACE_TOP-th best config so far.
RACE_TOP = 3
# Candidates asked (TPE) or listed (exhaustive) ahead of the one being measured, for
# their kernels to compile meanwhile (H100, 2026-11-27: 30-37% of a sweep's time waited
# for compiles asking one at a time). Asked ahead, TPE learns later: replayed cold on the
# brute-forced tables (20 seeds) it needed 8 and 22.5 configs to within 1% at 2, against
# 8 and 18.5 at 0 and 8 and 36 at 3.
LOOKAHEAD = 2
# Consecutive proposals that are all tried or infeasible before a sampler is
# considered stuck (then one untried config is drawn at random instead).
STUCK_AFTER = 25
# Random draws before "random" (and the stuck fallback) gives up finding an untried config.
MAX_DRAWS = 2000
# Trial user attributes this module writes (and reads back on resume).
ATTR_STATUS, ATTR_DETAIL, ATTR_CI, ATTR_SOURCE, ATTR_DUPLICATE = (
    "status", "detail", "ci", "source", "duplicate_of")
INFEASIBLE = "infeasible"


@dataclass(frozen=True)
class Evaluation:
    """One measured candidate. status: "ok", "failed" (did not compile, ran
    out of resources, wrong result, timed out; score None) or "raced"
    (stopped early, surely worse than `must_beat`; score the estimate so far).
    ci: the score's confidence interval where the measurement gives one."""
    config: dict
    score: Optional[float]
    status: str
    detail: str = ""
    ci: Optional[tuple[float, float]] = None


Evaluate = Callable[[dict, Optional[float]], Evaluation]


@dataclass
class SearchResult:
    """best: the best "ok" evaluation (None when none succeeded);
    evaluations: every distinct config measured, in order (re-used ones from
    a resumed study first); trials: evaluations counted against the budget."""
    best: Optional[Evaluation]
    evaluations: list[Evaluation]
    strategy: str
    trials: int
    stopped: str = ""        # why the search ended: "budget", "deadline" or "exhausted"


def run_search(space: SearchSpace, evaluate: Evaluate, *, budget: int, study: optuna.Study,
               enqueue: Sequence[dict] = (), strategy: str = "auto", seed: int = 0,
               on_trial: Optional[Callable[[Evaluation], None]] = None,
               deadline: Optional[float] = None, race_top: int = RACE_TOP,
               tpe_share: float = TPE_SHARE,
               prefetch: Optional[Callable[[Sequence[dict]], None]] = None,
               lookahead: int = LOOKAHEAD,
               pick: Optional[Callable[[Sequence[dict]], int]] = None,
               start: Optional[Callable[[], None]] = None) -> SearchResult:
    """Search `space` for the config with the highest score, measuring at
    most `budget` configs (see the module docstring). evaluate(config,
    must_beat) measures a config (the dimensions that apply, as
    space.project gives them). study: an Optuna study that maximizes (its
    sampler is replaced); enqueue: configs measured first (complete policies
    or partial configs; values must be candidates of the space). deadline: a
    time.monotonic() value after which no new evaluation starts. on_trial:
    called with each new evaluation. race_top: racing threshold rank (0: no
    racing). prefetch: called with the configs `lookahead` ahead (see the
    module docstring; the search is the same with or without it). pick:
    given the next candidates (untried, feasible; the search's next first),
    the index of the one to measure now (None: always the first). start:
    called once, after the first candidates went to prefetch and before any
    config is measured; an exception from it ends the search and
    propagates."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy: expected one of {list(STRATEGIES)}, got {strategy!r}")
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"budget: expected an int >= 1, got {budget!r}")
    if study.direction != optuna.study.StudyDirection.MAXIMIZE:
        raise ValueError(f"study: expected a study that maximizes, got {study.direction.name}")
    if not 0 < tpe_share <= 1:
        raise ValueError(f"tpe_share: expected a fraction in (0, 1], got {tpe_share}")
    if isinstance(lookahead, bool) or not isinstance(lookahead, int) or lookahead < 0:
        raise ValueError(f"lookahead: expected an int >= 0, got {lookahead!r}")
    if strategy == "auto":
        strategy = "exhaustive" if space.size() <= budget else "tpe+polish"
    s = _Search(space, evaluate, budget, study, seed, on_trial, deadline, race_top, strategy,
                prefetch, lookahead, pick)
    s.resume()
    enqueued = [space.project(c) for c in enqueue]
    try:
        s.prime(enqueued)
        if start is not None:
            start()
        s.run_enqueued(enqueued)
        if strategy == "exhaustive":
            s.exhaustive()
        elif strategy == "random":
            s.random()
        else:
            s.tpe(strategy, tpe_share)
    finally:
        s.drop_pending()
    return SearchResult(s.best(), s.evaluations, strategy, s.count, s.stop_reason())


@dataclass
class _Search:
    space: SearchSpace
    evaluate: Evaluate
    budget: int
    study: optuna.Study
    seed: int
    on_trial: Optional[Callable[[Evaluation], None]]
    deadline: Optional[float]
    race_top: int
    strategy: str
    prefetch: Optional[Callable[[Sequence[dict]], None]]
    lookahead: int
    pick: Optional[Callable[[Sequence[dict]], int]]
    done: dict = field(default_factory=dict)        # canonical -> (Evaluation, trial number)
    infeasible: set = field(default_factory=set)    # canonical configs that break a constraint
    evaluations: list = field(default_factory=list)
    count: int = 0                                  # evaluations against the budget
    exhausted: bool = False                         # no untried valid config left to find
    pending: deque = field(default_factory=deque)   # TPE trials asked ahead: (trial, config)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.ordinal = self.strategy == "tpe-ordinal"
        self.dims = {d.name: d for d in self.space.dims}
        # how the study sees a field: its values as categories, or ("tpe-ordinal") the
        # index of the value as an integer
        self.dists: dict[str, BaseDistribution] = {
            d.name: IntDistribution(0, len(d.values) - 1) if self.ordinal
            else CategoricalDistribution(d.values) for d in self.space.dims}

    def encode(self, config: dict) -> dict:
        """A config as the study's parameters."""
        if not self.ordinal:
            return dict(config)
        return {k: self.dims[k].values.index(v) for k, v in config.items()}

    def decode(self, params: dict) -> dict:
        if not self.ordinal:
            return dict(params)
        return {k: self.dims[k].values[i] for k, i in params.items()}

    # --- bookkeeping -----------------------------------------------------------------------

    def resume(self) -> None:
        """Re-use the study's finished trials of this space. A trial still
        RUNNING was cut off (Ctrl-C, a crash, a lost machine: one process runs a
        study at a time): it is closed as FAIL, so the study (and
        optuna-dashboard) does not show it running for ever; its config was not
        recorded, so it may be measured again."""
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            self.study.tell(t.number, state=TrialState.FAIL)
        finished = self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,
                                                                  TrialState.FAIL))
        # in the order they were measured (trials asked ahead have earlier numbers)
        finished.sort(key=lambda t: (t.datetime_complete or datetime.max, t.number))
        for t in finished:
            status = t.user_attrs.get(ATTR_STATUS)
            if status is None or ATTR_DUPLICATE in t.user_attrs:
                continue
            for name, dist in t.distributions.items():
                ours = self.dists.get(name)
                if ours is None or dist != ours:
                    raise ValueError(
                        f"study {self.study.study_name!r}: trial {t.number} has parameter "
                        f"{name!r} with {dist}, but this search space has "
                        f"{ours or 'no such parameter'}: the study belongs to another search "
                        f"space (start a new study)")
            ident = self.space.canonical(self.decode(t.params))
            if status == INFEASIBLE:
                self.infeasible.add(ident)
                continue
            if ident in self.done:
                continue
            ci = t.user_attrs.get(ATTR_CI)
            ev = Evaluation(dict(ident), t.value if t.state == TrialState.COMPLETE else None,
                            status, t.user_attrs.get(ATTR_DETAIL, ""),
                            tuple(ci) if ci is not None else None)
            self.done[ident] = (ev, t.number)
            self.evaluations.append(ev)
            self.count += 1

    def best(self) -> Optional[Evaluation]:
        ok = [e for e in self.evaluations if e.status == "ok"]
        return max(ok, key=lambda e: e.score) if ok else None

    def must_beat(self) -> Optional[float]:
        if self.race_top < 1:
            return None
        scores = sorted((e.score for e in self.evaluations if e.status == "ok"), reverse=True)
        return scores[self.race_top - 1] if len(scores) >= self.race_top else None

    def should_stop(self) -> bool:
        return (self.count >= self.budget or self.exhausted
                or (self.deadline is not None and time.monotonic() >= self.deadline))

    def stop_reason(self) -> str:
        if self.count >= self.budget:
            return "budget"
        if self.deadline is not None and time.monotonic() >= self.deadline:
            return "deadline"
        return "exhausted"

    def measure(self, config: dict) -> Evaluation:
        """evaluate(config), normalized: an exception or a malformed result is a failure."""
        try:
            ev = self.evaluate(dict(config), self.must_beat())
        except Exception as e:  # a candidate must never crash the sweep
            ev = Evaluation(config, None, "failed", f"{type(e).__name__}: {e}")
        if not isinstance(ev, Evaluation):
            ev = Evaluation(config, None, "failed", f"evaluate returned {ev!r}")
        elif ev.status not in STATUSES:
            ev = Evaluation(config, None, "failed", f"evaluate returned status {ev.status!r}")
        elif ev.status != "failed" and (ev.score is None or not math.isfinite(ev.score)):
            ev = Evaluation(config, None, "failed",
                            f"evaluate returned status {ev.status!r} with score {ev.score!r}")
        ev = replace(ev, config=dict(config), score=None if ev.status == "failed" else ev.score)
        self.count += 1
        self.evaluations.append(ev)
        if self.on_trial is not None:
            self.on_trial(ev)
        return ev

    @staticmethod
    def attrs(ev: Evaluation, source: str) -> dict:
        return {ATTR_STATUS: ev.status, ATTR_DETAIL: ev.detail, ATTR_SOURCE: source,
                ATTR_CI: list(ev.ci) if ev.ci is not None else None}

    @staticmethod
    def told(ev: Evaluation) -> tuple[Optional[float], TrialState]:
        if ev.status == "failed":
            return None, TrialState.FAIL
        return ev.score, TrialState.COMPLETE

    # --- one candidate ---------------------------------------------------------------------

    def run_trial(self, trial: optuna.Trial, config: dict, source: str) -> str:
        """Answer an asked trial whose parameters are `config`: from the study
        when tried before, FAIL when infeasible, else measured. Returns
        "duplicate", "infeasible" or "measured"."""
        ident = tuple(config.items())
        if ident in self.done:
            ev, number = self.done[ident]
            value, state = self.told(ev)
            trial.set_user_attr(ATTR_DUPLICATE, number)
            self.study.tell(trial, value, state=state)
            return "duplicate"
        if ident in self.infeasible or not self.space.valid(config):
            self.infeasible.add(ident)
            trial.set_user_attr(ATTR_STATUS, INFEASIBLE)
            trial.set_user_attr(ATTR_SOURCE, source)
            self.study.tell(trial, None, state=TrialState.FAIL)
            return "infeasible"
        ev = self.measure(config)
        for k, v in self.attrs(ev, source).items():
            trial.set_user_attr(k, v)
        value, state = self.told(ev)
        self.study.tell(trial, value, state=state)
        self.done[ident] = (ev, trial.number)
        return "measured"

    def run_config(self, config: dict, source: str) -> str:
        """Measure a config the search chose itself (recorded with add_trial);
        "duplicate" or "infeasible" without measuring, like run_trial."""
        ident = tuple(config.items())
        if ident in self.done:
            return "duplicate"
        if ident in self.infeasible or not self.space.valid(config):
            self.infeasible.add(ident)
            return "infeasible"
        ev = self.measure(config)
        value, state = self.told(ev)
        self.study.add_trial(optuna.trial.create_trial(
            state=state, value=value, params=self.encode(config),
            distributions={k: self.dists[k] for k in config}, user_attrs=self.attrs(ev, source)))
        self.done[ident] = (ev, self.study.get_trials(deepcopy=False)[-1].number)
        return "measured"

    def ask(self) -> tuple[optuna.Trial, dict]:
        """A trial from the study's sampler and its config, define-by-run."""
        trial = self.study.ask()
        if not self.ordinal:
            return trial, self.space.build(
                lambda d: trial.suggest_categorical(d.name, d.values))
        return trial, self.space.build(
            lambda d: d.values[trial.suggest_int(d.name, 0, len(d.values) - 1)])

    # --- strategies --------------------------------------------------------------------------

    def prime(self, enqueued: Sequence[dict]) -> None:
        """Before anything is measured, hand the enqueued configs and the
        strategy's first candidates to prefetch: TPE's first trials are asked
        now (its sampler set), the exhaustive order's first ones listed."""
        if self.strategy in ("tpe", "tpe+polish", "tpe-ordinal"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                self.study.sampler = optuna.samplers.TPESampler(
                    seed=self.seed, multivariate=True, group=True,
                    constant_liar=self.lookahead > 0)
        if self.should_stop():
            return
        first: list[dict] = []
        if self.strategy == "exhaustive":
            first = list(itertools.islice((c for c in self.space.configs() if self.untried(c)),
                                          self.lookahead + 1))
        elif self.strategy != "random":
            self.fill()
            first = [c for _, c in self.pending]
        self.ahead(list(enqueued) + first)

    def run_enqueued(self, configs: Sequence[dict]) -> None:
        """Measure `configs` first, in order, unless measured already (recorded
        with add_trial, not Optuna's enqueue_trial: its skip_if_exists also
        skips a config whose trial was left RUNNING by an interrupted sweep,
        which a resumed search must measure)."""
        for c in configs:
            if self.should_stop():
                return
            self.run_config(c, "enqueued")

    def untried(self, config: dict) -> bool:
        """Whether measuring `config` is still to come (not tried, feasible)."""
        ident = tuple(config.items())
        return ident not in self.done and ident not in self.infeasible and self.space.valid(config)

    def choose(self, configs: Sequence[dict]) -> int:
        """Which of `configs` (the next ones, in the search's order) to take
        now: the first when it needs no measuring (tried or infeasible: answered
        at once) or without `pick`; else the one `pick` chooses among those
        that need measuring."""
        if self.pick is None or not self.untried(configs[0]):
            return 0
        todo = [i for i, c in enumerate(configs) if self.untried(c)]
        return todo[self.pick([configs[i] for i in todo])] if len(todo) > 1 else 0

    def run_window(self, configs: list[dict], source: str) -> bool:
        """Measure `configs` with run_config, the next lookahead + 1 at a time
        (the one `choose` takes; those ahead go to prefetch). False when the
        search stopped before all were taken."""
        while configs:
            if self.should_stop():
                return False
            config = configs.pop(self.choose(configs[:self.lookahead + 1]))
            self.ahead(configs[:self.lookahead])
            self.run_config(config, source)
        return True

    def exhaustive(self) -> None:
        if self.run_window(list(self.space.configs()), "exhaustive"):
            self.exhausted = True

    def ahead(self, configs: Sequence[dict]) -> None:
        """Hand the untried feasible ones of `configs` to prefetch."""
        if self.prefetch is None:
            return
        todo = [c for c in configs if self.untried(c)]
        if todo:
            self.prefetch(todo)

    def random(self) -> None:
        while not self.should_stop():
            self.draw_untried("random")

    def draw_untried(self, source: str) -> None:
        """Measure one untried valid config drawn at random (uniform choice
        per field); the space counts as exhausted when MAX_DRAWS draws find none."""
        for _ in range(MAX_DRAWS):
            config = self.space.build(lambda d: self.rng.choice(d.values))
            if self.run_config(config, source) == "measured":
                return
        self.exhausted = True

    def tpe(self, strategy: str, share: float) -> None:
        """TPE (its sampler set by prime), with the polish for "tpe+polish"."""
        if strategy != "tpe+polish":
            while not self.should_stop():
                self.tpe_step()
            return
        first_polish = max(1, math.ceil(share * self.budget))
        while not self.should_stop() and self.count < first_polish:
            self.tpe_step()
        polished = self.polish()
        while not self.should_stop():
            self.tpe_step()
            best = self.best()
            if best is not None and tuple(best.config.items()) != polished:
                polished = self.polish()

    def fill(self) -> None:
        """Ask TPE until lookahead + 1 trials are pending."""
        while len(self.pending) <= self.lookahead:
            self.pending.append(self.ask())

    def tpe_step(self) -> None:
        """Take TPE's next proposal (asked LOOKAHEAD ahead; `choose` may take
        a later pending one) until one is an untried feasible config and
        measure it; after STUCK_AFTER proposals in a row that are not, measure
        an untried config drawn at random instead."""
        for _ in range(STUCK_AFTER):
            if self.should_stop():
                return
            self.fill()
            i = self.choose([c for _, c in self.pending])
            trial, config = self.pending[i]
            del self.pending[i]
            self.ahead([c for _, c in self.pending])
            if self.run_trial(trial, config, "tpe") == "measured":
                return
        self.draw_untried("random")

    def drop_pending(self) -> None:
        """Close the trials asked ahead but never run as FAIL, without a status
        (resume() skips them), so the study shows none running for ever."""
        while self.pending:
            trial, _ = self.pending.popleft()
            self.study.tell(trial, None, state=TrialState.FAIL)

    def polish(self) -> Optional[tuple]:
        """Coordinate descent around the best: measure every neighbour (radius
        1), recentre on the best, until no neighbour is better. Returns the
        final centre."""
        while True:
            best = self.best()
            if best is None:
                return None
            centre = tuple(best.config.items())
            if not self.run_window(list(self.space.neighbors(best.config, 1)), "polish"):
                return centre
            if tuple(self.best().config.items()) == centre:
                return centre

