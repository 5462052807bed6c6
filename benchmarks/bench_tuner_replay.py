"""Replays the tuner's search strategies against brute-forced tables on the
CPU (tilecore/tune/replay.py): for each strategy and seed, how many measured
configs until one is within 1% of the table's optimum, with the current
policy enqueued first as the tuner does. The default strategy
(tilecore/tune/strategies.py) is chosen on these numbers.

Tables: every *.json under --tables (measured brute-force runs: H100 sweeps
saved by tilecore.tune.replay.save_table). --synthetic adds tables made from
a model over real tilecore search spaces (labelled synthetic: a check of the
machinery, not evidence about GPUs); they are used alone when --tables holds
none. No GPU needed.

    python benchmarks/bench_tuner_replay.py [--tables tests/tune/data] [--synthetic]
        [--seeds 10] [--budget 200] [--strategies exhaustive,tpe+polish,...] [--cold]
        [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from dataclasses import asdict
from pathlib import Path

import optuna

from tilecore.dispatch.reduce_policy import select_reduce_policy
from tilecore.dispatch.scan_policy import select_scan_policy
from tilecore.dispatch.segmented_policy import select_segmented_policy
from tilecore.tune.replay import (REPLAY_SAMPLERS, load_table, replay, summarize,
                                  synthetic_table, table_optimum)
from tilecore.tune.space import space_for

F32_ADD = {"value_size": 4, "accum": "float32", "op": "add", "offset_size": 4}
I32_ADD = {"value_size": 4, "accum": "int32", "op": "add", "offset_size": 4}

# (name, algorithm, key, policy selector, fields tuned): spaces of the size a
# brute force on one GPU covers (hundreds to a few thousand configs).
SYNTHETIC_SPACES = (
    ("scan-f32-add", "scan", {**F32_ADD, "by_key": False}, select_scan_policy,
     ("block_threads", "items_per_thread", "mode", "blocks_per_sm", "group_tiles")),
    ("scan-i32-add", "scan", {**I32_ADD, "by_key": False}, select_scan_policy,
     ("block_threads", "items_per_thread", "exact_mode", "lookback_window", "group_tiles",
      "exclusive_inverse")),
    ("reduce-f32-add", "reduce", F32_ADD, select_reduce_policy,
     ("block_threads", "items_per_thread", "blocks_per_sm", "final_block_threads")),
    ("segmented-f32-add", "segmented_reduce", {**F32_ADD, "offset_size": 8},
     select_segmented_policy,
     ("block_threads", "rows_items_per_thread", "min_row_items", "long_block_threads",
      "long_items_per_thread")),
)


def synthetic_tables(models: int) -> dict[str, dict]:
    """`models` synthetic tables (model seeds 0..models-1) per space of SYNTHETIC_SPACES,
    around the sm_90 policy."""
    out = {}
    for name, algorithm, key, select, fields in SYNTHETIC_SPACES:
        policy = asdict(select(90, key))
        policy.pop("source")
        space = space_for(algorithm, key, policy, fields=fields)
        for m in range(models):
            out[f"synthetic:{name}:m{m}"] = synthetic_table(space, seed=m)
    return out


def measured_tables(directory: Path) -> dict[str, dict]:
    return {p.stem: load_table(p) for p in sorted(directory.glob("*.json"))}


def print_table(title: str, header: list[str], rows: list[list]) -> None:
    cells = [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(header)]
    print(f"\n{title}")
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in cells:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |")


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return ">budget" if math.isinf(v) else f"{v:.1f}"
    return str(v)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", type=Path, default=Path("tests/tune/data"),
                    help="directory of measured replay tables (*.json)")
    ap.add_argument("--synthetic", action="store_true",
                    help="add synthetic tables (used alone when --tables has none)")
    ap.add_argument("--models", type=int, default=2, help="synthetic models per space")
    ap.add_argument("--seeds", type=int, default=10, help="runs per strategy and table")
    ap.add_argument("--budget", type=int, default=200, help="measured configs per run")
    ap.add_argument("--tolerance", type=float, default=0.01, help="within this of the optimum")
    ap.add_argument("--strategies", default=",".join(REPLAY_SAMPLERS),
                    help=f"comma-separated, of {','.join(REPLAY_SAMPLERS)}")
    ap.add_argument("--cold", action="store_true",
                    help="enqueue nothing (by default the table's base policy is the first "
                         "trial, as the tuner enqueues the current policy)")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"),
                    help="directory for the JSON file")
    args = ap.parse_args()
    strategies = args.strategies.split(",")
    unknown = [s for s in strategies if s not in REPLAY_SAMPLERS]
    if unknown:
        ap.error(f"--strategies: unknown {unknown}; known: {list(REPLAY_SAMPLERS)}")
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    tables = measured_tables(args.tables) if args.tables.is_dir() else {}
    if args.synthetic or not tables:
        if not tables:
            print(f"no measured tables under {args.tables}: synthetic tables only (a model, "
                  f"not GPU measurements)")
        tables.update(synthetic_tables(args.models))
    print_table("Tables (complete no: a brute force cut off, replayed over the configs it "
                "measured)", ["table", "algorithm", "device", "configs", "complete", "failed",
                              "optimum"],
                [[n, t["algorithm"], t.get("device", "?"), len(t["results"]),
                  "no" if t.get("complete") is False else "yes",
                  sum(1 for r in t["results"] if r.get("score", r.get("gbs")) is None),
                  table_optimum(t)] for n, t in tables.items()])

    t0 = time.perf_counter()
    rows = replay(tables, strategies, tuple(range(args.seeds)), args.budget, args.tolerance,
                  warm=not args.cold)
    elapsed = time.perf_counter() - t0
    summary = summarize(rows)
    start = "nothing enqueued" if args.cold else "the base policy enqueued first"
    print_table(f"Measured configs until within {args.tolerance:.0%} of the optimum "
                f"({start}; budget {args.budget}; {args.seeds} seeds; exhaustive: one run "
                f"per table)",
                ["strategy", "tables", "median trials", "mean (runs within)", "runs within budget"],
                [[s["strategy"], s["tables"], s["median_trials"], s["mean_trials"],
                  f"{s['within_budget']}/{s['runs']}"] for s in summary])
    per_table = []
    for name in tables:
        row = [name]
        for strategy in strategies:
            mine = [r for r in rows if r["table"] == name and r["strategy"] == strategy]
            row.append(summarize(mine)[0]["median_trials"])
        per_table.append(row)
    print_table("Median per table", ["table", *strategies], per_table)
    print(f"\nreplay time {elapsed:.1f} s")

    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "bench_tuner_replay.json"
    path.write_text(json.dumps({
        "benchmark": "bench_tuner_replay", "host": platform.node(),
        "python": sys.version.split()[0], "optuna": optuna.__version__,
        "budget": args.budget, "seeds": args.seeds, "tolerance": args.tolerance,
        "cold": args.cold,
        "tables": {n: {"algorithm": t["algorithm"], "device": t.get("device"),
                       "synthetic": bool(t.get("synthetic")), "configs": len(t["results"]),
                       "complete": t.get("complete") is not False}
                   for n, t in tables.items()},
        "summary": [{**s, "median_trials": None if math.isinf(s["median_trials"])
                     else s["median_trials"]} for s in summary],
        "runs": rows}, indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
