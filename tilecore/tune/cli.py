"""The command line of `python -m tilecore.tune`: parse and check the options,
refuse at once (exit status 2, one line) what cannot run (no GPU, an
architecture tilecore cannot compile for, --plot without matplotlib, a bad
value), then run the sweep (sweep.py) with a progress line and print the final
table. Optuna and the GPU stack are imported only after the options pass, so
`--help` and usage errors are quick.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, NoReturn, Optional, Sequence, TextIO

__all__ = ["main", "build_parser", "probe_device", "DeviceFacts", "Unavailable",
           "ProgressLine", "DEFAULT_DTYPES", "DEFAULT_OPS", "DEFAULT_TRIALS",
           "DEFAULT_TIMEOUT_S"]

PROG = "python -m tilecore.tune"
DEFAULT_DTYPES = ("float32", "int32", "float64")
DEFAULT_OPS = ("add",)
DEFAULT_TRIALS = 40
# the whole sweep's time limit unless --timeout says otherwise: a default run (every
# algorithm, three dtypes: 9 studies) gives a useful result in about 10 minutes; on the
# H100 a candidate takes 2.5-6 s to check and time at four sizes (brute_force_space.py)
DEFAULT_TIMEOUT_S = 600.0
EXIT_UNAVAILABLE = 2
EXIT_INTERRUPTED = 130

DESCRIPTION = """\
Search the policies of tilecore's device-scope algorithms on this GPU with
Optuna and write the tuning tables the dispatch layer uses. One study per
(algorithm, tuning key); every candidate is checked against a reference before
it is timed; the best few are re-measured interleaved with the current policy;
a table that exists is merged, keeping the better measured entry."""

EXAMPLE = f"""\
examples:
  {PROG}                              every algorithm, {','.join(DEFAULT_DTYPES)}, add
  {PROG} --algorithm reduce --dtype float32,bfloat16 --op add,min,max \\
      --sizes 2^16:2^28 --trials 60 --report report.md --plot speedup.png
  {PROG} --resume                     continue an interrupted sweep
  {PROG} --out tuning_db              write into the repository's tables

Tables go to the user tuning directory (read before the shipped tables), or to
--out DIR. Studies open in optuna-dashboard as they are:
  optuna-dashboard sqlite:///$HOME/.cache/tilecore/tune/studies.db
Docs: docs/tuning.md."""


class Unavailable(Exception):
    """The sweep cannot run here; the message is the one line to print."""


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line (`tilecore.tune: error: ...`), exit status 2."""

    def error(self, message: str) -> NoReturn:
        _fail(message)


def _fail(message: str) -> NoReturn:
    print(f"tilecore.tune: error: {message}", file=sys.stderr)
    raise SystemExit(EXIT_UNAVAILABLE)


def _choices(allowed: Sequence[str], all_word: bool) -> Callable[[str], tuple]:
    def parse(text: str) -> tuple:
        items = [s.strip() for s in text.split(",") if s.strip()]
        if all_word and items == ["all"]:
            return tuple(allowed)
        bad = [s for s in items if s not in allowed]
        if not items or bad:
            extra = " or 'all'" if all_word else ""
            raise argparse.ArgumentTypeError(
                f"expected a comma-separated list of {', '.join(allowed)}"
                f"{extra}, got {text!r}")
        return tuple(dict.fromkeys(items))
    return parse


def _positive(kind: type) -> Callable[[str], object]:
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not value > 0 or (kind is float and not math.isfinite(value)):
            raise argparse.ArgumentTypeError(
                f"expected a positive {kind.__name__}, got {text!r}")
        return value
    return parse


def _timeout(text: str) -> Optional[float]:
    """--timeout: positive seconds, or 'none' for no limit."""
    if text.strip().lower() == "none":
        return None
    try:
        return _positive(float)(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected a positive number of seconds or 'none', got {text!r}") from None


def _device(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a CUDA device ordinal (0, 1, ...), got "
                                         f"{text!r}")
    return int(text)


def _sizes(text: str) -> tuple[int, ...]:
    from .sweep import parse_sizes
    try:
        return parse_sizes(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _storage(text: str) -> str:
    if "://" not in text:
        raise argparse.ArgumentTypeError(f"expected an Optuna storage URL such as "
                                         f"sqlite:///path.db, got {text!r}")
    return text


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (every option with its help)."""
    from ..algorithms.operators import NUMERIC
    from .strategies import STRATEGIES
    from .workloads import ALGORITHMS, OPS
    dtypes = tuple(d.name for d in NUMERIC)
    p = _Parser(prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
                description=DESCRIPTION,
                epilog=EXAMPLE)
    p.add_argument("--algorithm", type=_choices(ALGORITHMS, True),
                   default=ALGORITHMS, metavar="LIST|all",
                   help=f"algorithms to tune, comma-separated: {', '.join(ALGORITHMS)}; "
                        f"or all (default)")
    p.add_argument("--dtype", type=_choices(dtypes, False), default=DEFAULT_DTYPES,
                   metavar="LIST", help=f"input dtypes, comma-separated (default "
                                        f"{','.join(DEFAULT_DTYPES)}; any of {', '.join(dtypes)})")
    p.add_argument("--op", type=_choices(OPS, False), default=DEFAULT_OPS,
                   metavar="LIST", help=f"operators, comma-separated: {', '.join(OPS)} (default "
                                        f"{','.join(DEFAULT_OPS)}); dtypes and ops that give "
                                        f"the same tuning key are tuned once")
    p.add_argument("--sizes", type=_sizes, default=None, metavar="A:B[:S]|LIST",
                   help="input sizes in items: A:B is every 4th power of two from A to B "
                        "(2^16:2^28, the default, is 2^16, 2^20, 2^24, 2^28: CUB's tuning "
                        "axis), A:B:S steps the exponent by S; or a comma list (2^20,1000000). "
                        "The score weighs them as CUB does (docs/tuning.md)")
    p.add_argument("--trials", type=_positive(int), default=DEFAULT_TRIALS,
                   metavar="N", help=f"candidates measured per study (default "
                                     f"{DEFAULT_TRIALS}); a space no larger is searched "
                                     f"exhaustively")
    p.add_argument("--timeout", type=_timeout, default=DEFAULT_TIMEOUT_S,
                   metavar="SECONDS|none",
                   help=f"time limit of the whole sweep, shared by the studies still to run "
                        f"(default {DEFAULT_TIMEOUT_S:g}: about 10 minutes for the default "
                        f"sweep); 'none': every study runs its --trials")
    p.add_argument("--storage", type=_storage, default=None, metavar="URL",
                   help="Optuna storage of the studies (default sqlite:///"
                        "<TILECORE_CACHE_DIR>/tune/studies.db; in memory when the cache is off)")
    p.add_argument("--out", type=Path, default=None, metavar="DIR",
                   help="write the tables into DIR/<algorithm>/sm_XY.yaml (default: the user "
                        "tuning directory, TILECORE_TUNING_DIR or ~/.local/share/tilecore/"
                        "tuning_db; --out tuning_db writes into the repository)")
    p.add_argument("--device", type=_device, default=0, metavar="N",
                   help="CUDA device ordinal to tune on (default 0)")
    p.add_argument("--resume", action="store_true",
                   help="continue the latest study of each (algorithm, key, sizes) instead of "
                        "starting new ones: measured trials are re-used, never re-measured")
    p.add_argument("--strategy", choices=[s for s in STRATEGIES if s != "tpe-ordinal"],
                   default="auto", help="search strategy (default auto: exhaustive when the "
                                        "space is no larger than --trials, else tpe+polish)")
    p.add_argument("--report", type=Path, default=None, metavar="PATH",
                   help="also write a Markdown report (environment, per-size table)")
    p.add_argument("--plot", type=Path, default=None, metavar="PATH",
                   help="also write a PNG plot of the speedups (needs matplotlib: "
                        "pip install \"tilecore[plot]\")")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    return p


# -- the device ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class DeviceFacts:
    """The GPU tuned on: ordinal, name, compute capability (e.g. 90), SM
    count, and the provenance its tables carry."""
    ordinal: int
    name: str
    cc: int
    sm_count: int
    provenance: dict


def _nvrtc_archs() -> Optional[list[int]]:
    try:
        from cuda.bindings import nvrtc
        err, archs = nvrtc.nvrtcGetSupportedArchs()
    except (ImportError, OSError, RuntimeError, AttributeError):
        return None
    return None if err else [int(a) for a in archs]


def probe_device(ordinal: int) -> DeviceFacts:
    """The device to tune on; Unavailable (one line) without a GPU, for an
    ordinal the machine lacks, an architecture tilecore or this NVRTC cannot
    compile for, or without CuPy (the timer's events)."""
    from ..dispatch.selector import ARCHITECTURES
    from ..runtime import device_count, get_device
    from ..runtime.driver import NoDeviceError
    try:
        if device_count() == 0:
            raise Unavailable("no GPU to tune on: the driver reports no CUDA device "
                              "(CUDA_VISIBLE_DEVICES?)")
        dev = get_device(ordinal)
    except NoDeviceError as e:
        raise Unavailable(f"no GPU to tune on: {_first_sentence(e)}") from None
    except ValueError as e:
        raise Unavailable(f"argument --device: {_first_line(e)}") from None
    except Unavailable:
        raise
    except Exception as e:
        raise Unavailable(f"cannot open CUDA device {ordinal}: {_first_line(e)}") from None
    major, minor = dev.compute_capability
    cc = major * 10 + minor
    if cc < ARCHITECTURES[0]:
        raise Unavailable(f"{dev.name} is sm_{cc}; tilecore compiles for sm_{ARCHITECTURES[0]} "
                          f"and newer")
    archs = _nvrtc_archs()
    if archs is not None and cc not in archs:
        from ..backend import nvrtc_version
        raise Unavailable(f"{dev.name} is sm_{cc}, which NVRTC {nvrtc_version()} cannot compile "
                          f"for (it supports sm_{min(archs)} to sm_{max(archs)}); install an "
                          f"NVRTC that does")
    try:
        import cupy  # noqa: F401
    except ImportError:
        raise Unavailable("the tuner times kernels with CUDA events through CuPy, which is not "
                          "installed: pip install cupy-cuda13x") from None
    from .output import environment_provenance
    return DeviceFacts(ordinal, dev.name, cc, dev.sm_count, environment_provenance(ordinal, cc))


def _first_sentence(e: BaseException) -> str:
    """The first sentence of `e`'s first line (NoDeviceError goes on to
    recommend the interpreter, which cannot tune)."""
    line = _first_line(e)
    head, dot, _ = line.partition(". ")
    return head + "." if dot else line


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return lines[0] if lines else type(e).__name__


# -- progress -----------------------------------------------------------------------------------

def _duration(seconds: float) -> str:
    s = max(0, int(round(seconds)))
    return f"{s // 3600}h{s // 60 % 60:02d}m" if s >= 3600 else \
        f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


class ProgressLine:
    """One line per study, redrawn in place on a terminal (`[2/9] reduce
    float32 add  trial 12/40  best 1.043  failed 1  ~1m20s left`); elsewhere
    printed every `every` trials. When the study ends the line says so, with
    its result. `stream`: default standard error."""

    def __init__(self, stream: Optional[TextIO] = None, every: int = 10) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.every = every
        self.tty = self.stream.isatty()
        self.head: Optional[str] = None

    def study_started(self, index: int, total: int, workload, budget: int, prior: int,
                      prior_best: Optional[float], deadline: Optional[float]) -> None:
        self.head = f"[{index + 1}/{total}] {workload.label}"
        self.budget, self.count, self.best = budget, prior, prior_best
        self.failed, self.deadline = 0, deadline
        self.start, self.measured = time.monotonic(), 0
        self._draw(self._left())

    def trial(self, evaluation) -> None:
        """One more candidate measured (a search.Evaluation)."""
        self.count += 1
        self.measured += 1
        self.failed += evaluation.status == "failed"
        if evaluation.status == "ok" and (self.best is None or evaluation.score > self.best):
            self.best = evaluation.score
        if self.tty or self.measured % self.every == 0:
            self._draw(self._left())

    def _left(self) -> str:
        if not self.measured:
            return ""
        left = (time.monotonic() - self.start) / self.measured * max(0, self.budget - self.count)
        if self.deadline is not None:
            left = min(left, max(0.0, self.deadline - time.monotonic()))
        return f"  ~{_duration(left)} left"

    def _draw(self, tail: str, end: str = "") -> None:
        best = "-" if self.best is None else f"{self.best:.3f}"
        failed = f"  failed {self.failed}" if self.failed else ""
        line = (f"{self.head}  trial {min(self.count, self.budget)}/{self.budget}  best {best}"
                f"{failed}{tail}")
        self.stream.write(f"\r\033[K{line}{end}" if self.tty else line + "\n")
        self.stream.flush()

    def study_finished(self, outcome) -> None:
        if self.head is None:      # not started: skipped, or re-used from a finished study
            self.stream.write(f"{outcome.workload.label}: {outcome.detail}\n")
        else:
            result = f"score {outcome.entry.score:.3f}" if outcome.entry is not None \
                else f"nothing written: {outcome.detail}"
            self._draw(f"  done in {_duration(time.monotonic() - self.start)}: {result}", "\n")
        self.stream.flush()
        self.head = None


# -- main ---------------------------------------------------------------------------------------

def main(argv: Optional[Sequence[str]] = None, *, bench=None,
         probe: Callable[[int], DeviceFacts] = probe_device) -> int:
    """Run the command line; returns the exit status (0: every study wrote
    its result, 1: some did not, 2: usage error or nothing to tune on, 130:
    interrupted). bench: a sweep.MakeBench replacing the GPU measurement
    (tests: a model of run time); probe: the device check (tests: a stand-in)."""
    args = build_parser().parse_args(argv)
    if args.plot is not None:
        from .report import require_matplotlib
        try:
            require_matplotlib()
        except SystemExit as e:
            _fail(str(e.code))
    try:
        facts = probe(args.device)
    except Unavailable as e:
        _fail(str(e))
    from . import sweep
    from .output import default_directory
    try:
        out = args.out if args.out is not None else default_directory()
    except ValueError as e:
        _fail(str(e))
    storage = args.storage if args.storage is not None else sweep.default_storage()
    cfg = sweep.SweepConfig(algorithms=args.algorithm, dtypes=args.dtype, ops=args.op,
                            sizes=args.sizes or sweep.DEFAULT_SIZES, trials=args.trials,
                            timeout_s=args.timeout, storage=storage, out=out,
                            resume=args.resume, strategy=args.strategy)
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    pool, ahead = None, None
    if bench is None:
        from .compile_pool import CompilePool, candidate_jobs, default_workers
        pool = CompilePool(f"sm_{facts.cc}", facts.sm_count, default_workers())
        bench = (lambda w, sizes: sweep.CaseBench(w, sizes, device=facts.ordinal, pool=pool))
        ahead = (lambda w, sizes, policies: pool.prefetch(
            [job for p in policies for job in candidate_jobs(w, sizes, p)]))
    log = (lambda line: print(line, file=sys.stderr))
    try:
        result = sweep.run_sweep(cfg, cc=facts.cc, bench=bench, provenance=facts.provenance,
                                 progress=None if args.quiet else ProgressLine(), log=log,
                                 ahead=ahead)
    except KeyboardInterrupt:
        where = storage or "memory (not resumable: the cache directory is off)"
        print(f"\ntilecore.tune: interrupted; the studies are in {where}: run again with "
              f"--resume to continue", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        if pool is not None:
            pool.close()
    _finish(args, cfg, facts, result, storage)
    return 0 if all(o.entry is not None for o in result.outcomes) else 1


def _finish(args, cfg, facts: DeviceFacts, result, storage: Optional[str]) -> None:
    """The final table, the summary, and the optional report and plot."""
    from . import report
    from .output import size_text
    from .score import weights
    print(report.results_table(result.entries))
    for o in result.outcomes:
        if o.entry is None:
            print(f"{o.workload.label}: nothing written: {o.detail}")
    busy = result.bench_s / result.wall_s if result.wall_s > 0 else 0.0
    waiting = result.compile_wait_s / result.wall_s if result.wall_s > 0 else 0.0
    trials = sum(o.trials for o in result.outcomes)
    print(f"\n{len(result.outcomes)} studies, {trials} trials, {_duration(result.wall_s)}, "
          f"measuring {busy:.0%} of the time, waiting for compiles {waiting:.0%}; tables: "
          f"{', '.join(map(str, result.tables)) or 'none written'}")
    if result.throttled_samples:
        print(f"{result.throttled_samples} timing samples were taken while NVML reported the "
              f"SM clock throttled, and discarded (each followed by a 50 ms pause)")
    if storage:
        print(f"studies: {storage} (optuna-dashboard {storage})")
    if args.report is not None:
        meta = {**facts.provenance, "sizes": ", ".join(size_text(n) for n in cfg.sizes),
                "size weights": ", ".join(f"{size_text(n)}: {w:.3f}"
                                          for n, w in weights(cfg.sizes).items()),
                "trials per study": cfg.trials, "sweep time": _duration(result.wall_s),
                "time measuring": f"{busy:.0%}", "time waiting for compiles": f"{waiting:.0%}",
                "storage": storage or "memory"}
        report.write_markdown(args.report, result.entries, meta)
        print(f"report: {args.report}")
    if args.plot is not None:
        report.write_plot(args.plot, result.entries)
        print(f"plot: {args.plot}")
