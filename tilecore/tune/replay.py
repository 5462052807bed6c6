"""Replays of search strategies against brute-forced tables, on the CPU: how
many measured configs each strategy needs to come within 1% of a space's
optimum (benchmarks/bench_tuner_replay.py prints them; tests/tune/data/ holds
the tables).

A table is JSON:
    {"algorithm": "scan", "key": {...}, "device": "NVIDIA H100 80GB HBM3",
     "dims": {"block_threads": [32, 64, ...], ...},      # in the space's order
     "base": {"block_threads": 1024, ...},                # the current policy (every dim)
     "results": [{"config": {...}, "score": 1.02}, ...]}  # "gbs" instead of "score" also
                                                          # works; null: the config failed
Every config of the space is in `results` (the dimensions that apply to it,
as SearchSpace.configs gives them). A brute-force run writes one with
`save_table(path, table_from_evaluations(space, evaluations, meta))`.
`synthetic_table` makes tables from a model (labelled "synthetic": they are
not measurements) for tests, until measured ones exist.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import random
import statistics
import tempfile
from pathlib import Path
from typing import Iterator, Optional, Sequence

import optuna

from .strategies import Evaluation, run_search
from .space import Dimension, SearchSpace

__all__ = ["TableSpace", "table_from_evaluations", "save_table", "load_table",
           "table_optimum", "trials_to_within", "replay", "summarize", "synthetic_table",
           "REPLAY_SAMPLERS", "SYNTHETIC_DEVICE"]

# Strategies a replay compares (strategies.py's, "tpe-ordinal" the integer encoding).
REPLAY_SAMPLERS = ("exhaustive", "tpe+polish", "tpe", "tpe-ordinal", "random")
SYNTHETIC_DEVICE = "synthetic (a model of run time, not a measurement)"


def table_from_evaluations(space: SearchSpace, evaluations: Sequence[Evaluation],
                           meta: dict) -> dict:
    """A replay table from a brute-force run over `space` (every config
    evaluated; failed ones are null). meta: at least "device"; any other
    keys (date, sizes, tilecore version) are kept."""
    if "device" not in meta:
        raise ValueError(f"meta: expected a 'device' entry, got keys {sorted(meta)}")
    results, seen = [], set()
    for ev in evaluations:
        ident = space.canonical(ev.config)
        if ident in seen:
            continue
        seen.add(ident)
        score = ev.score if ev.status == "ok" else None
        results.append({"config": dict(ident), "score": score})
    return {**meta, "algorithm": space.algorithm, "key": dict(space.key),
            "dims": {d.name: list(d.values) for d in space.dims},
            "base": {d.name: space.base[d.name] for d in space.dims if d.name in space.base},
            "results": results}


def save_table(path: Path, table: dict) -> None:
    """Write `table` as JSON atomically (a temporary file renamed over `path`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(table, f, indent=1)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def load_table(path: Path) -> dict:
    table = json.loads(Path(path).read_text())
    for k in ("algorithm", "dims", "results"):
        if k not in table:
            raise ValueError(f"{path}: not a replay table (no {k!r} entry)")
    return table


def _value(row: dict) -> Optional[float]:
    v = row["score"] if "score" in row else row.get("gbs")
    return None if v is None else float(v)


class TableSpace(SearchSpace):
    """The search space a table was brute-forced over: its dims, which apply
    where (read off the table's configs), and its configs (the valid ones)."""

    def __init__(self, table: dict) -> None:
        dims = tuple(Dimension(n, tuple(v)) for n, v in table["dims"].items())
        base = {d.name: table.get("base", {}).get(d.name, d.values[0]) for d in dims}
        self.scores: dict[tuple, Optional[float]] = {}
        self._order: list[dict] = []
        presence: list[dict] = [{} for _ in dims]
        for row in table["results"]:
            config = {d.name: row["config"][d.name] for d in dims if d.name in row["config"]}
            full = {**base, **config}
            for i, d in enumerate(dims):
                prefix = tuple(full[e.name] for e in dims[:i])
                seen = presence[i].setdefault(prefix, d.name in config)
                if seen != (d.name in config):
                    raise ValueError(f"table: whether {d.name!r} applies is not a function of the "
                                     f"fields before it (prefix {prefix}): list dims in the "
                                     f"space's order")
            self.scores[tuple(config.items())] = _value(row)
            self._order.append(config)
        applies = {}
        for i, d in enumerate(dims):
            names = tuple(e.name for e in dims[:i])
            known = presence[i]
            applies[d.name] = ((lambda f, names=names, known=known:
                                known.get(tuple(f[n] for n in names), True)), frozenset(names))
        super().__init__(table["algorithm"], table.get("key", {}), dims, base, applies)

    def valid(self, config) -> bool:
        try:
            return self.canonical(config) in self.scores
        except ValueError:
            return False

    def configs(self) -> Iterator[dict]:
        return (dict(c) for c in self._order)

    def size(self) -> int:
        return len(self._order)

    def evaluate(self, config: dict, must_beat: Optional[float]) -> Evaluation:
        """The table's measurement of `config` (replays do not race)."""
        score = self.scores[self.canonical(config)]
        if score is None:
            return Evaluation(config, None, "failed", "failed when brute-forced")
        return Evaluation(config, score, "ok")


def table_optimum(table: dict) -> float:
    scores = [v for v in map(_value, table["results"]) if v is not None]
    if not scores:
        raise ValueError("table: no successful config")
    return max(scores)


class _Found(Exception):
    """Ends a replay once a config within the tolerance is measured."""


def trials_to_within(table: dict, strategy: str, seed: int, budget: int,
                     tolerance: float = 0.01, warm: bool = True) -> Optional[int]:
    """Measured configs `strategy` needs (with the table's base policy
    enqueued first, as the tuner does, when `warm`; cold, nothing is enqueued:
    a search that knows no good policy) until one scores at least (1 -
    tolerance) x the table's optimum; None when the budget runs out first."""
    space = TableSpace(table)
    target = (1 - tolerance) * table_optimum(table)
    count = [0]

    def on_trial(ev: Evaluation) -> None:
        count[0] += 1
        if ev.status == "ok" and ev.score >= target:
            raise _Found

    study = optuna.create_study(direction="maximize")
    enqueue = [space.base] if warm and space.valid(space.base) else []
    try:
        run_search(space, space.evaluate, budget=budget, study=study, enqueue=enqueue,
                   strategy=strategy, seed=seed, on_trial=on_trial, race_top=0)
    except _Found:
        return count[0]
    return None


def replay(tables: dict[str, dict], strategies: Sequence[str] = REPLAY_SAMPLERS,
           seeds: Sequence[int] = tuple(range(10)), budget: int = 200,
           tolerance: float = 0.01, warm: bool = True) -> list[dict]:
    """One row per (table, strategy, seed): {"table", "strategy", "seed",
    "trials"} (trials None: not within the tolerance in `budget`).
    "exhaustive" does not depend on the seed: it runs once per table. `warm`:
    as trials_to_within."""
    rows = []
    for name, table in tables.items():
        for strategy in strategies:
            for seed in (seeds[:1] if strategy == "exhaustive" else seeds):
                rows.append({"table": name, "strategy": strategy, "seed": seed,
                             "trials": trials_to_within(table, strategy, seed, budget,
                                                        tolerance, warm)})
    return rows


def summarize(rows: Sequence[dict]) -> list[dict]:
    """Per strategy: runs, runs within the budget, the median measured
    configs to within the tolerance (runs that never got there count as
    infinitely many), and the mean over the runs that got there."""
    out = []
    for strategy in dict.fromkeys(r["strategy"] for r in rows):
        mine = [r for r in rows if r["strategy"] == strategy]
        got = [r["trials"] for r in mine if r["trials"] is not None]
        out.append({"strategy": strategy, "tables": len({r["table"] for r in mine}),
                    "runs": len(mine), "within_budget": len(got),
                    "median_trials": statistics.median(
                        [t if t is not None else math.inf for t in (r["trials"] for r in mine)]),
                    "mean_trials": statistics.fmean(got) if got else None})
    return out


def synthetic_table(space: SearchSpace, seed: int, fail_rate: float = 0.03) -> dict:
    """A SYNTHETIC table over every config of `space`, from a model with
    the traits of measured ones, not a measurement: a smooth optimum per
    field over the candidates' positions, unordered per-value effects for
    fields of at most 4 values (modes), pairwise interactions, a "resource
    limit" that fails configs with large values of two fields, `fail_rate`
    of other configs failing at random, and +-1.5% ruggedness."""
    rng = random.Random(seed)
    names = [d.name for d in space.dims]
    centre = {n: rng.random() for n in names}
    weight = {n: rng.uniform(0.5, 3.0) for n in names}
    offsets = {d.name: [rng.uniform(-0.3, 0.0) for _ in d.values]
               for d in space.dims if len(d.values) <= 4}
    pairs = [tuple(rng.sample(names, 2)) for _ in range(max(1, len(names) // 2))] \
        if len(names) > 1 else []
    coupling = [rng.uniform(-2.0, 2.0) for _ in pairs]
    limit = tuple(rng.sample(names, 2)) if len(names) > 1 else None

    def pos(d: Dimension, v: int) -> float:
        return d.values.index(v) / max(1, len(d.values) - 1)

    def noise(ident: tuple, salt: str) -> float:
        h = hashlib.sha256(f"{seed}:{salt}:{ident}".encode()).digest()
        return int.from_bytes(h[:8], "little") / 2.0 ** 64

    evaluations = []
    for config in space.configs():
        x = {d.name: pos(d, config[d.name]) for d in space.dims if d.name in config}
        ident = tuple(config.items())
        log_score = 0.0
        for n, xn in x.items():
            if n in offsets:
                log_score += offsets[n][space.dims[names.index(n)].values.index(config[n])]
            else:
                log_score -= weight[n] * (xn - centre[n]) ** 2
        for (a, b), c in zip(pairs, coupling):
            if a in x and b in x:
                log_score -= 0.5 * c * (x[a] - centre[a]) * (x[b] - centre[b])
        score = math.exp(log_score) * (1 + 0.03 * (noise(ident, "rugged") - 0.5))
        over = limit is not None and all(n in x for n in limit) and \
            x[limit[0]] + x[limit[1]] > 1.8
        if over or noise(ident, "fail") < fail_rate:
            evaluations.append(Evaluation(config, None, "failed"))
        else:
            evaluations.append(Evaluation(config, round(score, 6), "ok"))
    return table_from_evaluations(space, evaluations, {"device": SYNTHETIC_DEVICE,
                                                       "synthetic": True, "seed": seed})
