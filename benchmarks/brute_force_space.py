"""Brute-forces one tuner search space on the GPU: every config of
`space_for(algorithm, key, current policy, fields=...)` checked against the
reference and timed at every size, scored against the current policy the way
the sweep scores (tilecore/tune/sweep.py's Evaluator, no racing), and saved as
a replay table (tilecore/tune/replay.py) for benchmarks/bench_tuner_replay.py
and tests/tune/test_replay.py.

Configs surely scoring below --race-below (default 0.5) stop being timed
early (the sweep's racing) and keep the estimate so far: the table is exact
where searches compete, near the optimum, and the run takes minutes.

Resumable: the table is rewritten (atomically) every --save-every configs
with "complete": false; running the same command again skips the configs
already in it. Needs a GPU (the interpreter's timings say nothing about one),
except with --interpreter, a smoke test of the script on tiny sizes.

    python benchmarks/brute_force_space.py --algorithm reduce --dtype float32 --op add \\
        --fields block_threads,items_per_thread,blocks_per_sm --sizes 2^20,2^24,2^27 \\
        --table tests/tune/data/reduce-f32-add-h100.json [--timeout 250]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import optuna

from tilecore.tune.output import environment_provenance
from tilecore.tune.replay import load_table, save_table, table_from_evaluations
from tilecore.tune.space import space_for
from tilecore.tune.strategies import Evaluation
from tilecore.tune.sweep import CaseBench, Evaluator, parse_sizes
from tilecore.tune.workloads import Workload, current_policy


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--algorithm", required=True)
    p.add_argument("--dtype", required=True)
    p.add_argument("--op", default="add")
    p.add_argument("--fields", required=True, help="comma-separated policy fields")
    p.add_argument("--sizes", type=parse_sizes, required=True, help="e.g. 2^20,2^24,2^27")
    p.add_argument("--table", type=Path, required=True, help="the JSON table to write")
    p.add_argument("--timeout", type=float, default=None,
                   help="stop (table saved, incomplete) after this many seconds")
    p.add_argument("--save-every", type=int, default=10)
    p.add_argument("--race-below", type=float, default=0.5,
                   help="stop timing a config once its score is surely below this (its "
                        "score is then the estimate so far; 0: time every config fully)")
    p.add_argument("--profile", type=Path, default=None, metavar="FILE",
                   help="profile the run (cProfile): the 30 costliest functions printed, "
                        "the statistics written to FILE")
    p.add_argument("--interpreter", action="store_true",
                   help="run in the interpreter (a smoke test: its timings mean nothing)")
    return p


def _previous(path: Path, space) -> dict[tuple, Evaluation]:
    """The configs an earlier, cut-off run of the same space measured."""
    if not path.exists():
        return {}
    table = load_table(path)
    if table["dims"] != {d.name: list(d.values) for d in space.dims} or \
            table.get("key") != dict(space.key):
        raise SystemExit(f"{path}: holds another space; remove it or name another --table")
    return {space.canonical(r["config"]): Evaluation(r["config"], r["score"],
                                                     "ok" if r["score"] is not None
                                                     else "failed")
            for r in table["results"]}


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        w = Workload(args.algorithm, args.dtype, args.op)
    except ValueError as e:
        raise SystemExit(f"brute_force_space.py: {e}") from None
    if args.interpreter:
        device, cc, pool = None, 90, None
        prov = environment_provenance(None, cc)
    else:
        from tilecore.tune.cli import probe_device
        from tilecore.tune.compile_pool import CompilePool, default_workers
        facts = probe_device(0)
        device, cc, prov = 0, facts.cc, facts.provenance
        pool = CompilePool(f"sm_{cc}", facts.sm_count, default_workers())
    base = current_policy(w.algorithm, cc, w.key)
    try:
        space = space_for(w.algorithm, w.key, base, fields=tuple(args.fields.split(",")))
    except ValueError as e:
        raise SystemExit(f"brute_force_space.py: {e}") from None
    configs = list(space.configs())
    done = _previous(args.table, space)
    todo = [c for c in configs if space.canonical(c) not in done]
    print(f"{w.label} on {prov['gpu']} (sm_{cc}): {len(configs)} configs, {len(done)} already "
          f"measured, sizes {args.sizes}", flush=True)
    bench = CaseBench(w, args.sizes, device=device, pool=pool)
    meta = {"device": prov["gpu"], "cc": cc, "driver": prov["driver"], "nvrtc": prov["nvrtc"],
            "tilecore": prov["tilecore"], "date": prov["date"], "sizes": list(args.sizes),
            "raced_below": args.race_below,
            "command": "python benchmarks/brute_force_space.py " + " ".join(
                sys.argv[1:] if argv is None else argv)}

    def save(evaluations: dict, complete: bool) -> None:
        ordered = [evaluations[space.canonical(c)] for c in configs
                   if space.canonical(c) in evaluations]
        save_table(args.table, {**table_from_evaluations(space, ordered, meta),
                                "complete": complete})

    start = time.monotonic()
    try:
        with bench.run(space.complete(base)) as run:
            problem = run.check()
            if problem:
                raise SystemExit(f"the current policy fails its check: {problem}")
            baseline = [run.time(i, None) for i in range(len(bench.cases))]
        evaluate = Evaluator(space, bench, baseline, args.sizes)
        bench.prefetch([space.complete(c) for c in todo])
        for k, config in enumerate(todo, 1):
            ev = evaluate(config, args.race_below or None)
            if ev.status == "raced":    # far from the optimum: its estimate is its score
                ev = Evaluation(config, ev.score, "ok", ev.detail)
            done[space.canonical(config)] = ev
            score = "failed: " + ev.detail[:80] if ev.score is None else f"{ev.score:.4f}"
            print(f"[{k}/{len(todo)}] {config}  {score}", flush=True)
            if k % args.save_every == 0:
                save(done, False)
            if args.timeout is not None and time.monotonic() - start > args.timeout:
                print(f"--timeout reached: {len(done)}/{len(configs)} configs measured; run "
                      f"again to continue", flush=True)
                break
    finally:
        if pool is not None:
            pool.close()
    complete = len(done) == len(configs)
    save(done, complete)
    ok = sorted((ev for ev in done.values() if ev.score is not None),
                key=lambda ev: -ev.score)
    timer = bench.timer
    throttled = (f"; {timer.throttled_samples} samples throttled (discarded), "
                 f"{timer.recovery_s:.0f} s of recovery pauses"
                 if hasattr(timer, "throttled_samples") else "")
    print(f"{'complete' if complete else 'incomplete'}: {args.table}, "
          f"{time.monotonic() - start:.0f} s, {bench.compile_wait_s:.0f} s waiting for "
          f"compiles{throttled}; best:")
    for ev in ok[:8]:
        print(f"  {ev.score:.4f}  {ev.config}")
    return 0 if complete else 3


def profiled(argv=None) -> int:
    """main(), under cProfile when --profile is given (where a config's seconds go:
    compiling, planning, checking or timing)."""
    args = _parser().parse_args(argv)
    if args.profile is None:
        return main(argv)
    import cProfile
    import pstats
    prof = cProfile.Profile()
    try:
        return prof.runcall(main, argv)
    finally:
        prof.dump_stats(str(args.profile))
        pstats.Stats(prof).sort_stats("cumulative").print_stats(30)


if __name__ == "__main__":
    sys.exit(profiled())
