"""Running many programs: a process pool over seeds, failures minimized and
saved as reproducers, a summary printed and a JSON report written.

python -m tilecore.testing.fuzz --count N --seed S [--gpu] [--jobs J] [--out report.json]
python -m tilecore.testing.fuzz --replay DIR [--gpu]
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Optional

from .execute import Outcome, run_program
from .generate import GenConfig, generate

__all__ = ["RunConfig", "run_seeds", "main"]


@dataclass
class RunConfig:
    """How each program runs: on the GPU (compared with the interpreter) or
    compiled for `archs`; `save_dir` receives reproducers of failures."""

    gen: GenConfig = field(default_factory=GenConfig)
    gpu: bool = False
    archs: tuple[str, ...] = ("sm_80", "sm_90")
    archs_per_program: int = 0   # compile each program for this many archs, rotating (0: all)
    save_dir: Optional[str] = None
    minimize: bool = True
    timeout: float = 120.0
    check_order: bool = True


def _init_worker() -> None:
    """Pool workers compile random kernels: keep them out of the disk cache."""
    os.environ.setdefault("TILECORE_CACHE_DIR", "off")


def _archs_for(seed: int, cfg: RunConfig) -> tuple[str, ...]:
    k = cfg.archs_per_program
    if not k or k >= len(cfg.archs):
        return cfg.archs
    return tuple(cfg.archs[(seed + i) % len(cfg.archs)] for i in range(k))


def run_seed(seed: int, cfg: RunConfig, workroot: Path) -> dict:
    """Generate, run, and on failure minimize and save one program; a summary
    dict. Kernel modules are written under `workroot` (one folder per process)."""
    if _CONTEXT_LOST:
        return {"seed": seed, "status": "skipped", "stage": "", "seconds": 0.0, "stages": {},
                "error": f"this worker's CUDA context was lost at seed {_CONTEXT_LOST[0]}",
                "detail": "", "ops": {}, "features": []}
    workdir = workroot / str(os.getpid())
    workdir.mkdir(exist_ok=True)
    start = time.perf_counter()
    prog = None
    try:
        prog = generate(seed, cfg.gen)
    except Exception as e:  # a generator bug: report it like any other failure
        out = Outcome(seed, "generator_error", "generate", type(e).__name__, repr(e))
    else:
        out = run_program(prog, workdir, gpu=cfg.gpu, archs=_archs_for(seed, cfg),
                          check_order=cfg.check_order, timeout=cfg.timeout)
    elapsed = time.perf_counter() - start
    summary = {"seed": seed, "status": out.status, "stage": out.stage, "error": out.error,
               "detail": out.detail[-2000:], "seconds": elapsed, "stages": out.seconds,
               "ops": out.ops, "features": sorted(prog.features) if prog else []}
    if out.failed and prog is not None:
        summary.update(_handle_failure(prog, out, cfg, workdir))
    return summary


# A launch that faults (illegal address, ...) leaves the process's CUDA context
# unusable: the worker then skips its remaining seeds, which run_seeds re-runs in
# fresh workers. The errors as the driver names them (CUDA_ERROR_ILLEGAL_ADDRESS,
# tilecore's launches) and as the runtime does (cudaErrorIllegalAddress, CuPy's
# synchronize in the GPU stage), compared lowercased without underscores.
_STICKY = ("cudaerrorillegaladdress", "cudaerrorlaunchfail", "cudaerrorillegalinstruction",
           "cudaerrormisalignedaddress", "cudaerrorhardwarestackerror", "cudaerrorinvalidpc",
           "cudaerrorassert", "cudaerrorlaunchtimeout")
_CONTEXT_LOST: list[int] = []


def _context_lost(detail: str) -> bool:
    """Whether a failure's text names an error that leaves the CUDA context unusable."""
    text = detail.lower().replace("_", "")
    return any(name in text for name in _STICKY)


def _handle_failure(prog, out: Outcome, cfg: RunConfig, workdir: Path) -> dict:
    from .minimize import minimize
    from .reproducer import save
    drop: frozenset = frozenset()
    best = out
    sticky = cfg.gpu and _context_lost(out.detail)
    if sticky:
        _CONTEXT_LOST.append(prog.seed)
    if cfg.minimize and out.status != "timeout" and not sticky:
        limit = max(2.0, 5 * sum(out.seconds.values()))  # reduced programs can hang

        def trial(d: frozenset) -> Outcome:
            return run_program(prog, workdir, gpu=cfg.gpu, archs=_archs_for(prog.seed, cfg),
                               check_order=cfg.check_order, drop=d, timeout=limit)
        try:
            drop, best = minimize(prog, out, trial)
        except Exception:  # minimizing is best effort
            drop, best = frozenset(), out
    info = {"minimized_source": prog.source(drop)}
    if cfg.save_dir:
        path = save(prog, best, Path(cfg.save_dir) / f"seed_{prog.seed}", drop, cfg.gpu)
        info["reproducer"] = str(path)
    return info


def _run(args: tuple[int, RunConfig, Path]) -> dict:
    return run_seed(*args)


def run_seeds(seeds: Iterable[int], cfg: RunConfig, jobs: int = 1,
              progress: bool = False) -> list[dict]:
    """Summaries of every seed, run on `jobs` processes (1 without a GPU: in
    this process). Seeds a worker skipped after losing its CUDA context run
    again in fresh workers."""
    seeds = list(seeds)
    with tempfile.TemporaryDirectory(prefix="tilecore-fuzz-") as tmp:
        root = Path(tmp)
        if jobs <= 1 and not cfg.gpu:
            return [run_seed(s, cfg, root) for s in seeds]
        done: dict[int, dict] = {}
        todo = seeds
        while todo:
            for r in _pool_run(todo, cfg, root, max(jobs, 1), progress, len(done)):
                done[r["seed"]] = r
            skipped = [s for s in todo if done[s]["status"] == "skipped"]
            if len(skipped) == len(todo):
                break   # no progress: leave them reported as skipped
            todo = skipped
    return [done[s] for s in sorted(done)]


def _pool_run(seeds: list[int], cfg: RunConfig, root: Path, jobs: int, progress: bool,
              before: int) -> list[dict]:
    ctx = multiprocessing.get_context("spawn")  # CUDA contexts do not survive fork
    results = []
    with ctx.Pool(jobs, initializer=_init_worker) as pool:
        for r in pool.imap_unordered(_run, [(s, cfg, root) for s in seeds], chunksize=4):
            results.append(r)
            if progress and len(results) % 100 == 0:
                bad = sum(1 for x in results if x["status"] != "ok")
                print(f"  {before + len(results)} programs, {bad} failing", file=sys.stderr,
                      flush=True)
    return results


def report(results: list[dict], wall: float, cfg: RunConfig, jobs: int) -> dict:
    """Counts, timings, coverage of IR ops and generator features, and failures."""
    statuses = Counter(r["status"] for r in results)
    ops: Counter = Counter()
    features: Counter = Counter()
    for r in results:
        ops.update(r["ops"])
        features.update(r["features"])
    n = max(len(results), 1)
    stages: Counter = Counter()
    for r in results:
        stages.update(r["stages"])
    return {
        "programs": len(results), "statuses": dict(statuses), "wall_seconds": wall,
        "jobs": jobs, "seconds_per_program": sum(r["seconds"] for r in results) / n,
        "wall_per_program": wall / n,
        "stage_seconds_per_program": {k: v / n for k, v in stages.items()},
        "mode": "gpu" if cfg.gpu else "compile " + ",".join(cfg.archs),
        "config": asdict(cfg.gen), "ir_ops": dict(sorted(ops.items())),
        "features": dict(sorted(features.items())),
        "failures": [r for r in results if r["status"] != "ok"],
    }


def _print_summary(rep: dict) -> None:
    print(f"{rep['programs']} programs ({rep['mode']}), {rep['wall_seconds']:.1f} s wall, "
          f"{rep['seconds_per_program'] * 1000:.0f} ms per program on one core "
          f"({rep['jobs']} jobs)")
    print("statuses:", ", ".join(f"{k} {v}" for k, v in sorted(rep["statuses"].items())))
    print("stage seconds per program:", ", ".join(
        f"{k} {v * 1000:.0f} ms" for k, v in rep["stage_seconds_per_program"].items()))
    for f in rep["failures"]:
        print(f"--- seed {f['seed']}: {f['status']} at {f['stage']}: {f['error']}")
        if f.get("reproducer"):
            print(f"    reproducer: {f['reproducer']}")


def _replay(directory: str, gpu: bool, archs: tuple[str, ...]) -> int:
    from .reproducer import load
    prog = load(Path(directory))
    with tempfile.TemporaryDirectory(prefix="tilecore-fuzz-") as workdir:
        out = run_program(prog, Path(workdir), gpu=gpu, archs=archs)
    print(prog.source())
    print(f"status: {out.status} at {out.stage}: {out.error}")
    if out.detail:
        print(out.detail)
    return 1 if out.failed else 0


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tilecore.testing.fuzz",
                                 description="Differential fuzzer of the tile language: random "
                                             "kernels run in the interpreter and compiled (or "
                                             "on the GPU), results compared.")
    ap.add_argument("--count", type=int, default=100, help="programs to run")
    ap.add_argument("--seed", type=int, default=0, help="first seed (seeds are consecutive)")
    ap.add_argument("--gpu", action="store_true", help="run on the GPU and compare")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    ap.add_argument("--out", help="write the JSON report here")
    ap.add_argument("--save", default="fuzz-failures", help="directory for reproducers")
    ap.add_argument("--archs", default="sm_80,sm_90", help="compile-only architectures")
    ap.add_argument("--max-ops", type=int, default=GenConfig.max_ops)
    ap.add_argument("--max-depth", type=int, default=GenConfig.max_depth,
                    help="nesting of control flow")
    ap.add_argument("--ignore-known-issues", action="store_true",
                    help="also generate the patterns of catalog.KNOWN_ISSUES")
    ap.add_argument("--no-outside-tiles", action="store_true",
                    help="never generate tiles wholly outside their arrays")
    ap.add_argument("--no-minimize", action="store_true")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per program")
    ap.add_argument("--replay", help="run the reproducer saved in this directory")
    a = ap.parse_args(argv)
    archs = tuple(x for x in a.archs.split(",") if x)
    if a.replay:
        return _replay(a.replay, a.gpu, archs)
    if a.gpu:
        from ...runtime.driver import has_gpu
        if not has_gpu():
            print("--gpu: no GPU found", file=sys.stderr)
            return 2
    gen = GenConfig(max_ops=a.max_ops, max_depth=a.max_depth,
                    outside_tiles=not a.no_outside_tiles)
    if a.ignore_known_issues:
        gen.known_issues = ()
    cfg = RunConfig(gen, gpu=a.gpu,
                    archs=archs, save_dir=a.save, minimize=not a.no_minimize,
                    timeout=a.timeout)
    start = time.perf_counter()
    results = run_seeds(range(a.seed, a.seed + a.count), cfg, a.jobs, progress=True)
    rep = report(results, time.perf_counter() - start, cfg, a.jobs)
    _print_summary(rep)
    if a.out:
        Path(a.out).write_text(json.dumps(rep, indent=1, default=str))
    return 1 if rep["failures"] else 0
