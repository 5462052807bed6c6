"""Where a sweep's compile waits go: runs `python -m tilecore.tune` with the
compile pool and the bench instrumented, and prints per study how long the
GPU process waited for compiles, at which candidate (the baseline, the
search's first candidate, later ones) and in what state the candidate's
compile jobs were when the wait began (not queued, queued, running), and the
waits for whichever of the next candidates compiled first (`pick`); then the
pool's jobs (latency, NVRTC builds, how busy the workers were).

    python benchmarks/profile_sweep.py --trace /tmp/trace.json -- \\
        --algorithm reduce,scan,segmented_reduce --dtype float32,int32 --out /tmp/tdb --quiet

Needs a GPU (it runs the real sweep). The trace (JSON) lists every wait and job.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tilecore.tune import cli, sweep  # noqa: E402
from tilecore.tune import compile_pool as cp  # noqa: E402

T0 = time.monotonic()
_lock = threading.Lock()
jobs: dict = {}          # CompileJob -> record
waits: list = []         # one record per CaseBench.run
picks: list = []         # one record per CaseBench.pick (choosing among the next candidates)
studies: list = []       # (label, start, end)


def _now() -> float:
    return time.monotonic() - T0


def _job(job) -> dict:
    rec = jobs.get(job)
    if rec is None:
        rec = jobs[job] = {"queued": None, "kind": None, "started": None, "done": None,
                           "kernels": 0, "built": 0, "seconds": 0.0, "error": None}
    return rec


def instrument() -> None:
    pool = cp.CompilePool
    prefetch, wait, feed, done = pool.prefetch, pool.wait, pool._feed, pool._done

    def prefetch_(self, js, soon=False):
        js = list(js)
        with _lock:
            for j in js:
                r = _job(j)
                if r["queued"] is None:
                    r["queued"], r["kind"] = _now(), "soon" if soon else "speculative"
        return prefetch(self, js, soon)

    def wait_(self, js, timeout):
        with _lock:
            for j in js:
                r = _job(j)
                if r["queued"] is None:
                    r["queued"], r["kind"] = _now(), "waited"
        return wait(self, js, timeout)

    def feed_(self):
        before = set(self._running)
        feed(self)
        with _lock:
            for j in set(self._running) - before:
                _job(j)["started"] = _now()

    def done_(self, job, inner, executor):
        with _lock:
            r = _job(job)
            r["done"] = _now()
            if not inner.cancelled() and inner.exception() is None:
                res = inner.result()
                r.update(kernels=res.kernels, built=res.built, seconds=res.seconds,
                         error=res.error)
        return done(self, job, inner, executor)

    pool.prefetch, pool.wait, pool._feed, pool._done = prefetch_, wait_, feed_, done_

    run = sweep.CaseBench.run

    def run_(self, policy):
        states = []
        with _lock:
            for j in self._jobs(policy):
                r = jobs.get(j)
                states.append("not queued" if r is None else "done" if r["done"] is not None
                              else "running" if r["started"] is not None
                              else f"queued ({r['kind']})")
        before = self.compile_wait_s
        rec = {"study": self.workload.label, "at": _now(), "wait": 0.0, "states": states}
        waits.append(rec)
        try:
            with run(self, policy) as r:
                yield r
        finally:        # run() waits before it yields; nothing else moves compile_wait_s
            rec["wait"] = self.compile_wait_s - before

    sweep.CaseBench.run = contextlib.contextmanager(run_)

    pick = sweep.CaseBench.pick

    def pick_(self, policies):
        before = self.compile_wait_s
        t = _now()
        try:
            return pick(self, policies)
        finally:
            picks.append({"study": self.workload.label, "at": t,
                          "wait": self.compile_wait_s - before, "offered": len(policies)})

    sweep.CaseBench.pick = pick_

    run_study = sweep._run_study

    def run_study_(cfg, w, *a, **k):
        start = _now()
        try:
            return run_study(cfg, w, *a, **k)
        finally:
            studies.append((w.label, start, _now()))

    sweep._run_study = run_study_


def _state(states: list) -> str:
    """The least advanced state among a candidate's jobs."""
    for s in ("not queued", "queued (waited)", "queued (speculative)", "queued (soon)",
              "running"):
        if s in states:
            return s
    return "done"


def report() -> None:
    wall = _now()
    print(f"\n== compile waits ({wall:.1f} s of wall time)")
    by_study = defaultdict(list)
    for w in waits:
        by_study[w["study"]].append(w)
    for label, start, end in studies:
        ws = by_study.get(label, [])
        total = sum(w["wait"] for w in ws)
        first = ws[0]["wait"] if ws else 0.0
        second = ws[1]["wait"] if len(ws) > 1 else 0.0
        chose = sum(p["wait"] for p in picks if p["study"] == label)
        print(f"{label}: {end - start:.1f} s, {len(ws)} candidate runs, waited {total:.1f} s "
              f"(baseline {first:.1f}, first candidate {second:.1f}, later "
              f"{total - first - second:.1f}) + {chose:.1f} s in pick")
    states = defaultdict(lambda: [0, 0.0])
    for ws in by_study.values():
        for w in ws[2:]:
            s = states[_state(w["states"])]
            s[0] += 1
            s[1] += w["wait"]
    print("later candidates by their jobs' state when the wait began:")
    for s, (count, seconds) in sorted(states.items(), key=lambda kv: -kv[1][1]):
        print(f"  {s}: {count} runs, {seconds:.1f} s")
    chose = sum(p["wait"] for p in picks)
    print(f"waits choosing among the next candidates (pick): {len(picks)}, {chose:.1f} s")
    total = sum(w["wait"] for w in waits) + chose
    print(f"all waits: {total:.1f} s ({total / wall:.0%} of the wall time)")
    ran = [r for r in jobs.values() if r["done"] is not None and r["started"] is not None]
    if ran:
        secs = [r["seconds"] for r in ran]
        kinds = defaultdict(int)
        for r in jobs.values():
            kinds[r["kind"]] += 1
        lat = [r["started"] - r["queued"] for r in ran if r["kind"] == "soon"]
        span = max(r["done"] for r in ran) - min(r["started"] for r in ran)
        print(f"\n== pool: {len(jobs)} jobs ({dict(kinds)}), {len(ran)} ran; job seconds "
              f"median {statistics.median(secs):.2f}, max {max(secs):.2f}, sum {sum(secs):.0f} "
              f"({sum(secs) / span:.1f} workers busy on average)")
        print(f"kernels {sum(r['kernels'] for r in ran)}, NVRTC builds "
              f"{sum(r['built'] for r in ran)}; soon jobs queued->started: median "
              f"{statistics.median(lat) if lat else 0:.2f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, help="write every wait and job here (JSON)")
    parser.add_argument("tune_args", nargs=argparse.REMAINDER,
                        help="-- then the arguments of python -m tilecore.tune")
    args = parser.parse_args()
    tune_args = args.tune_args[1:] if args.tune_args[:1] == ["--"] else args.tune_args
    instrument()
    status = cli.main(tune_args)
    report()
    if args.trace is not None:
        args.trace.write_text(json.dumps({
            "studies": studies, "waits": waits, "picks": picks,
            "jobs": [dict(r, job=repr((j.workload.label, j.n, j.segments, j.policy)))
                     for j, r in jobs.items()]}, indent=1))
    return status


if __name__ == "__main__":
    sys.exit(main())
