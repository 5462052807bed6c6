"""Autotuning users' own tile kernels with cuTile Python's API, timed by the
tuner's measurement code (measure.py).

A kernel tuned with `cuda.tile` runs on tilecore after changing only the
imports (`import tilecore as ct`; `import tilecore.experimental as
ct_experimental` for the older `cuda.tile_experimental` API):

- `exhaustive_search(search_space, stream, grid_fn, kernel, args_fn,
  hints_fn=None, *, quiet=False, single_run_timeout_sec=None)` ->
  `TuningResult` (`best`, `successes`, `failures`) of `Measurement`s
  (`config`, `mean_us`, `num_samples`, `error_margin_us`): cuTile's
  `cuda.tile.tune.exhaustive_search`. Every config is built (grid, kernel,
  hints; errors there are raised, as in cuTile), launched once (which compiles
  it), checked, then timed: first a quick estimate of every config, then the
  TOP_K fastest measured to convergence, then the rest raced against them
  (measurement stops as soon as a config is surely slower than the TOP_K-th).
  A config that fails to compile, launch or run is a recorded failure
  (`(config, exception type, message)`), not an exception; only when every
  config fails is ValueError raised.
- `search(space, ...)`: the same on a space too large to enumerate: `space`
  maps each parameter to its values, configs are dicts, and Optuna's TPE
  sampler (categorical parameters) proposes configs until `n_trials` of them
  have been run, each timed with racing against the best so far; TPE
  re-proposes configs it has tried: those are answered from what was measured
  and do not count (after STUCK_AFTER such proposals in a row, an untried
  config drawn at random is run instead).
- `autotune_launch(...)`, `clear_autotune_cache(...)`: cuTile's deprecated
  `cuda.tile_experimental` API with its semantics: a per-(kernel, key) cache
  of the best config (the key defaults to the shapes, dtypes and strides of the
  arguments), up to `max_iter` configs sampled from the space, configs that do
  not compile skipped, the best one launched; both warn DeprecationWarning
  pointing to exhaustive_search, as cuTile's do.

tilecore's additions (keyword-only, so cuTile code never sees them):
`check_fn(config, args)` is called after a config's first launch has finished;
if it raises, the config is a failure (cuTile has no check). `timer` is a
measure.Timer, or a function config -> Timer (a model of run time per config,
as the tests inject).

Timing: `mean_us` is the per-launch time measure() reports (the median over
samples of back-to-back launches, each sample >= 1 ms, on the GPU behind a
spinning kernel so the host's launch time does not count; samples taken while
the SM clock was throttled discarded), `error_margin_us` half of its 95%
confidence interval, `num_samples` the samples taken. args_fn is called once
per config: its tuple is used for the first launch and every timed launch.

In the interpreter (NumPy arguments) nothing is timed unless a `timer` is
given: every config is compiled, run once and checked, its Measurement has
mean_us 0.0 and num_samples 0, and `best` is the first config in search-space
order that succeeded, the same on every run (CPU emulation times say nothing
about the GPU). Pass `timer=measure.HostTimer()` to time the interpreter with
the host clock anyway.

`single_run_timeout_sec`: a config whose first launch (after compilation)
has not finished within that time is a failure (TileLaunchTimeoutError).
cuTile runs that launch in a subprocess that it kills; tilecore polls the
launch from this process, so a kernel that never finishes still holds the GPU.
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
import math
import random
import sys
import threading
import time
import warnings
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Generic, Iterable, Mapping, Optional, Sequence, TypeVar

from ..errors import TileCompileError
from ..host.launch import launch
from ..kernel import Kernel, kernel as make_kernel
from . import measure as _measure

__all__ = ["Measurement", "TuningResult", "TileLaunchTimeoutError", "exhaustive_search",
           "search", "replace_hints", "TunedResult", "autotune_launch", "clear_autotune_cache",
           "TOP_K"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

TOP_K = 5                  # configs measured to convergence before racing the rest
STUCK_AFTER = 25           # search(): tried proposals in a row before a random untried config
_MAX_DRAWS = 2000          # search(): random draws looking for an untried config
_QUICK_SAMPLES = 3         # samples of the first estimate of every config


class TileLaunchTimeoutError(RuntimeError):
    """A config's launch did not finish within single_run_timeout_sec."""


@dataclass(frozen=True, kw_only=True)
class Measurement(Generic[T]):
    """A configuration and its timing result."""

    config: T
    """The configuration"""
    mean_us: float
    """Time per launch in microseconds"""
    num_samples: int
    """Number of samples taken for the measurement"""
    error_margin_us: float
    """Half of the 95% confidence interval of the measurement"""


@dataclass(frozen=True, kw_only=True)
class TuningResult(Generic[T]):
    """The measurement of each config."""

    best: Measurement
    """The best measurement"""
    successes: Sequence[Measurement]
    """Measurement of each config that succeeded"""
    failures: Sequence[tuple[T, type[BaseException], str]]
    """`(config, exc_type, message)` for each config that failed"""

    def summary(self, *, top_k: int = 10, bottom_k: int = 2) -> str:
        """The result as text: the `top_k` fastest and `bottom_k` slowest
        configs (the best marked `*`) and up to `top_k` failures."""
        ranked = sorted(self.successes, key=lambda m: m.mean_us)
        lines = [f"{len(self.successes)} succeeded, {len(self.failures)} failed"]
        shown = ranked if len(ranked) <= top_k + bottom_k + 1 else \
            ranked[:top_k] + [None] + ranked[len(ranked) - bottom_k:]
        width = max((len(str(m.config)) for m in ranked), default=0)
        for m in shown:
            if m is None:
                lines.append(f"    ... {len(ranked) - top_k - bottom_k} more not shown")
                continue
            mark = "*" if m == self.best else " "
            lines.append(f"{mark} {str(m.config):<{width}}: {m.mean_us:.1f}"
                         f"\u00b1{m.error_margin_us:.1f} us ({m.num_samples} samples)")
        if self.failures:
            lines.append(f"  {len(self.failures)} failed:")
            for cfg, exc_type, message in list(self.failures)[:top_k]:
                first = message.split("\n", 1)[0]
                first = first if len(first) <= 60 else first[:57] + "..."
                lines.append(f"    {cfg}: {exc_type.__name__}: {first}")
            if len(self.failures) > top_k:
                lines.append(f"    ... {len(self.failures) - top_k} more not shown")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


# ---- kernels with hints --------------------------------------------------------------

_HINTED: "weakref.WeakKeyDictionary[Kernel, dict]" = weakref.WeakKeyDictionary()
_BLOCK_SIZE_OPTIONS = ("num_threads", "num_worker_warps")


def replace_hints(kernel: Kernel, **hints: Any) -> Kernel:
    """`kernel` with some of its options (num_ctas, occupancy, opt_level,
    num_worker_warps, num_threads; ints or ByTarget) replaced: cuTile's
    `kernel.replace_hints`. The kernel object for the same options is reused,
    so its compiled specializations are too."""
    if not isinstance(kernel, Kernel):
        raise TypeError(f'Invalid argument "kernel" of replace_hints(): expected a '
                        f"@tilecore.kernel, got {type(kernel).__name__}")
    if not hints:
        return kernel
    options = dataclasses.asdict(kernel.options)
    early = options.pop("early_start")      # not a hint: the launch's (Kernel.for_early_start)
    if any(hints.get(name) is not None for name in _BLOCK_SIZE_OPTIONS):
        for name in _BLOCK_SIZE_OPTIONS:    # one of the two sets the block size
            options[name] = None
    options.update(hints)
    key = tuple(sorted(options.items(), key=lambda kv: kv[0]))
    per_kernel = _HINTED.setdefault(kernel, {})
    hinted = per_kernel.get(key)
    if hinted is None:
        hinted = make_kernel(kernel.pyfunc, **options)
        if early:
            hinted = hinted.for_early_start()
        per_kernel[key] = hinted
    return hinted


# ---- one candidate --------------------------------------------------------------------

def _on_gpu(args: Sequence[Any]) -> bool:
    from .. import config
    from ..runtime.arrays import classify_arg
    return not config.interpret() and any(classify_arg(a) == "device" for a in args)


@dataclass
class _Candidate:
    index: int
    config: Any
    grid: Any
    kernel: Kernel
    measurement: Optional[_measure.Measurement] = None
    calls: Sequence[Callable[[], object]] = ()
    timer: Optional[_measure.Timer] = None


class _Runner:
    """What a search shares: the stream, the user's functions, the timer."""

    def __init__(self, stream, grid_fn, kernel, args_fn, hints_fn, check_fn, timer,
                 single_run_timeout_sec):
        if single_run_timeout_sec is not None and not single_run_timeout_sec > 0:
            raise ValueError(f'Invalid argument "single_run_timeout_sec": expected a positive '
                             f"number of seconds or None, got {single_run_timeout_sec!r}")
        self.stream = stream
        self.grid_fn, self.kernel, self.args_fn = grid_fn, kernel, args_fn
        self.hints_fn, self.check_fn = hints_fn, check_fn
        self.timer = timer
        self.timeout = single_run_timeout_sec
        self._gpu_timer: Optional[_measure.GpuTimer] = None

    def build(self, index: int, cfg: Any) -> _Candidate:
        """The config's grid and kernel (errors here are the caller's, as in cuTile)."""
        grid = self.grid_fn(cfg)
        base = self.kernel if isinstance(self.kernel, Kernel) else self.kernel(cfg)
        if not isinstance(base, Kernel):
            raise TypeError(f'Invalid argument "kernel": expected a @tilecore.kernel or a '
                            f"function of the config returning one, got "
                            f"{type(base).__name__} for config {cfg!r}")
        hints = self.hints_fn(cfg) if self.hints_fn is not None else {}
        return _Candidate(index, cfg, grid, replace_hints(base, **hints))

    def first_run(self, cand: _Candidate) -> None:
        """Launch once (compiling), wait, check; then set up its timing."""
        args = self.args_fn(cand.config)
        if not isinstance(args, tuple):
            raise TypeError(f"args_fn must return a tuple of kernel arguments, got "
                            f"{type(args).__name__}")
        gpu = _on_gpu(args)
        t0 = time.perf_counter()
        launch(self.stream, cand.grid, cand.kernel, args)
        if gpu:
            self._wait(cand)
        elif self.timeout is not None and time.perf_counter() - t0 > self.timeout:
            raise TileLaunchTimeoutError(f"the launch took longer than {self.timeout} s")
        if self.check_fn is not None:
            self.check_fn(cand.config, args)
        cand.calls = (functools.partial(launch, self.stream, cand.grid, cand.kernel, args),)
        if self.timer is not None:
            cand.timer = self.timer if hasattr(self.timer, "sample_ms") else \
                self.timer(cand.config)
        elif gpu:
            if self._gpu_timer is None:
                self._gpu_timer = _measure.GpuTimer(self.stream)
            cand.timer = self._gpu_timer

    def _wait(self, cand: _Candidate) -> None:
        """Wait for the launch just queued (polling when there is a timeout),
        then raise any error the kernel recorded."""
        from ..runtime.device_errors import synchronize
        if self.timeout is not None:
            import cupy
            from ..runtime.streams import stream_handle
            handle = stream_handle(self.stream)
            stream = cupy.cuda.Stream.null if handle == 0 else cupy.cuda.ExternalStream(handle)
            done = cupy.cuda.Event(disable_timing=True)
            done.record(stream)
            deadline = time.perf_counter() + self.timeout
            while not done.done:
                if time.perf_counter() > deadline:
                    raise TileLaunchTimeoutError(
                        f"CUDA kernel launch exceeded timeout {self.timeout} sec")
                time.sleep(1e-4)
        synchronize(self.stream)

    def time(self, cand: _Candidate, *, quick: bool = False,
             must_beat_ms: Optional[float] = None) -> None:
        """Measure `cand` (nothing to do when it has no timer: the interpreter)."""
        if cand.timer is None:
            cand.measurement = _measure.Measurement(ms=0.0, ci_low=0.0, ci_high=0.0,
                                                    rel_noise=0.0, samples=0,
                                                    discarded_throttled=0, stopped_early=False)
            return
        if quick:
            cand.measurement = _measure.measure(cand.calls, min_samples=_QUICK_SAMPLES,
                                                max_samples=_QUICK_SAMPLES, timer=cand.timer)
        else:
            cand.measurement = _measure.measure(cand.calls, timer=cand.timer,
                                                give_up_if_faster_than_ms=must_beat_ms)


def _result(cand: _Candidate) -> Measurement:
    m = cand.measurement
    return Measurement(config=cand.config, mean_us=m.ms * 1e3, num_samples=m.samples,
                       error_margin_us=(m.ci_high - m.ci_low) / 2 * 1e3)


def _progress(quiet: bool, phase: str, done: int, total: int, failed: int) -> None:
    if quiet or not _in_terminal():
        return
    print(f"\r\033[K{phase}: {done}/{total} | Errors: {failed}", end="", flush=True)


def _in_terminal() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def _finish(done: list[_Candidate], failures: list, quiet: bool) -> TuningResult:
    if not done:
        cfg, exc_type, message = failures[0]
        raise ValueError(f"No valid config found in search space.\nConfig: {cfg}\n"
                         f"{exc_type.__name__}: {message}")
    done = sorted(done, key=lambda c: c.index)
    successes = tuple(_result(c) for c in done)
    best = min(zip(done, successes), key=lambda p: (p[0].measurement.ms, p[0].index))[1]
    result = TuningResult(best=best, successes=successes, failures=tuple(failures))
    if not quiet:
        if _in_terminal():
            print("\r\033[K", end="")     # clear the progress line
        print(result)
    return result


def _time_or_fail(runner: _Runner, cand: _Candidate, must_beat_ms: Optional[float],
                  done: list, failures: list) -> None:
    try:
        runner.time(cand, must_beat_ms=must_beat_ms)
    except Exception as e:
        _failure(failures, cand.config, e)
        return
    done.append(cand)


def _failure(failures: list, cfg: Any, e: BaseException) -> None:
    failures.append((cfg, type(e), str(e)))
    logger.debug("config %r failed: %s: %s", cfg, type(e).__name__, e)


# ---- the searches --------------------------------------------------------------------

def exhaustive_search(search_space: Sequence[T], stream, grid_fn: Callable[[T], tuple],
                      kernel: Kernel | Callable[[T], Kernel],
                      args_fn: Callable[[T], tuple],
                      hints_fn: Optional[Callable[[T], dict]] = None, *,
                      quiet: bool = False, single_run_timeout_sec: Optional[float] = None,
                      check_fn: Optional[Callable[[T, tuple], None]] = None,
                      timer=None) -> TuningResult[T]:
    """Time every config of `search_space` and return the best (see the
    module docstring).

    Args:
        search_space: the configs (a sequence).
        stream: the CUDA stream the kernel runs on (None for the interpreter).
        grid_fn: config -> grid.
        kernel: the kernel, or a function config -> kernel.
        args_fn: config -> the kernel's arguments (a tuple).
        hints_fn: config -> kernel options (num_ctas, occupancy, ...). Default none.
        quiet: print neither progress nor the result.
        single_run_timeout_sec: a config whose first launch takes longer fails.
        check_fn: (config, args) -> None, raising when the config's result is wrong.
        timer: a measure.Timer or a function config -> Timer (default: CUDA
            events on the GPU, none in the interpreter).
    """
    try:
        total = len(search_space)
        configs = list(search_space)
    except TypeError:
        raise TypeError(f'Invalid argument "search_space" of exhaustive_search(): expected '
                        f"a sequence of configs, got {type(search_space).__name__}") from None
    if total == 0:
        raise ValueError("Search space is empty.")
    runner = _Runner(stream, grid_fn, kernel, args_fn, hints_fn, check_fn, timer,
                     single_run_timeout_sec)
    failures: list = []
    ready: list[_Candidate] = []
    for i, cfg in enumerate(configs):            # phase 0: first run, quick estimate
        _progress(quiet, "[Phase 0/2] Warmup & initial run", i, total, len(failures))
        cand = runner.build(i, cfg)
        try:
            runner.first_run(cand)
            runner.time(cand, quick=True)
        except Exception as e:
            _failure(failures, cfg, e)
            continue
        ready.append(cand)
    ready.sort(key=lambda c: (c.measurement.ms, c.index))
    done: list[_Candidate] = []
    top, rest = ready[:TOP_K], ready[TOP_K:]
    for n, cand in enumerate(top):               # phase 1: the fastest, to convergence
        _progress(quiet, "[Phase 1/2] Converging top configs", n, len(top), len(failures))
        _time_or_fail(runner, cand, None, done, failures)
    cutoff = max((c.measurement.ms for c in done), default=None)
    for n, cand in enumerate(rest):              # phase 2: the rest, raced against them
        _progress(quiet, "[Phase 2/2] Racing the rest", n, len(rest), len(failures))
        _time_or_fail(runner, cand, cutoff, done, failures)
    return _finish(done, failures, quiet)


def _check_space(space: Mapping[str, Sequence[Any]]) -> dict[str, list]:
    if not isinstance(space, Mapping) or not space:
        raise TypeError(f'Invalid argument "search_space" of search(): expected a non-empty '
                        f"mapping from parameter name to its values, got {space!r}")
    out = {}
    for name, values in space.items():
        if not isinstance(name, str):
            raise TypeError(f'Invalid argument "search_space" of search(): parameter names '
                            f"must be strings, got {name!r}")
        if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
            raise TypeError(f'Invalid argument "search_space" of search(): the values of '
                            f"{name!r} must be a sequence, got {values!r}")
        values = list(values)
        if not values:
            raise ValueError(f'Invalid argument "search_space" of search(): parameter {name!r} '
                             f"has no values")
        bad = [v for v in values if not (v is None or isinstance(v, (bool, int, float, str)))]
        if bad:
            raise TypeError(f'Invalid argument "search_space" of search(): the values of '
                            f"{name!r} must be None, bool, int, float or str (Optuna's "
                            f"categorical choices), got {bad[0]!r}")
        if len(set(values)) != len(values):
            raise ValueError(f'Invalid argument "search_space" of search(): parameter {name!r} '
                             f"repeats a value: {values!r}")
        out[name] = values
    return out


def search(search_space: Mapping[str, Sequence[Any]], stream,
           grid_fn: Callable[[dict], tuple], kernel: Kernel | Callable[[dict], Kernel],
           args_fn: Callable[[dict], tuple],
           hints_fn: Optional[Callable[[dict], dict]] = None, *,
           n_trials: int = 50, seed: Optional[int] = 0,
           constraint: Optional[Callable[[dict], bool]] = None, sampler=None,
           quiet: bool = False, single_run_timeout_sec: Optional[float] = None,
           check_fn: Optional[Callable[[dict, tuple], None]] = None,
           timer=None) -> TuningResult[dict]:
    """Optuna-guided search for spaces too large to enumerate (see the module
    docstring). `search_space` maps each parameter to its values; configs are
    dicts. `sampler` (default Optuna's TPESampler with `seed`) proposes
    configs until `n_trials` distinct configs have been run (or every config
    has been proposed); a config for which `constraint(config)` is False is not
    run and does not count; a proposal already run is answered from that run
    and does not count either. The other arguments are exhaustive_search's."""
    import optuna
    space = _check_space(search_space)
    if isinstance(n_trials, bool) or not isinstance(n_trials, int) or n_trials < 1:
        raise ValueError(f'Invalid argument "n_trials" of search(): expected a positive int, '
                         f"got {n_trials!r}")
    runner = _Runner(stream, grid_fn, kernel, args_fn, hints_fn, check_fn, timer,
                     single_run_timeout_sec)
    names = list(space)
    size = math.prod(len(v) for v in space.values())
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study = optuna.create_study(direction="minimize",
                                    sampler=sampler or optuna.samplers.TPESampler(seed=seed))
        seen: dict[tuple, Optional[float]] = {}
        failures: list = []
        done: list[_Candidate] = []
        best_ms: Optional[float] = None
        rng = random.Random(seed)
        run = stuck = 0
        while run < n_trials and len(seen) < size:
            if stuck >= STUCK_AFTER:
                # the sampler keeps proposing tried configs: enqueue an untried one
                for _ in range(_MAX_DRAWS):
                    draw = {name: rng.choice(space[name]) for name in names}
                    if tuple(draw[name] for name in names) not in seen:
                        study.enqueue_trial(draw)
                        break
                stuck = 0
            _progress(quiet, "Searching", run, n_trials, len(failures))
            trial = study.ask()
            cfg = {name: trial.suggest_categorical(name, space[name]) for name in names}
            key = tuple(cfg[name] for name in names)
            if key in seen:
                stuck += 1
            else:
                stuck = 0
                seen[key] = None
                if constraint is None or constraint(cfg):
                    run += 1
                    cand = runner.build(len(seen) - 1, cfg)
                    try:
                        runner.first_run(cand)
                        runner.time(cand, must_beat_ms=best_ms)
                    except Exception as e:
                        _failure(failures, cfg, e)
                    else:
                        done.append(cand)
                        seen[key] = cand.measurement.ms
                        if cand.timer is not None and not cand.measurement.stopped_early and \
                                (best_ms is None or cand.measurement.ms < best_ms):
                            best_ms = cand.measurement.ms
            if seen[key] is None:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
            else:
                study.tell(trial, seen[key])
        _progress(quiet, "Searching", n_trials, n_trials, len(failures))
    finally:
        optuna.logging.set_verbosity(verbosity)
    if not done and not failures:
        raise ValueError("No valid config found in search space: the constraint rejected "
                         "every config proposed")
    return _finish(done, failures, quiet)


# ---- cuda.tile_experimental (deprecated in cuTile too) --------------------------------

_MAX_SEARCH_ITEMS = 10_000
_autotune_lock = threading.RLock()
_autotune_cache: dict[Any, dict[Any, "_CacheEntry"]] = {}


@dataclass
class TunedResult:
    """What autotune_launch ran."""

    tuned_config: Any
    """The tuned config"""
    grid: tuple
    """The grid the kernel was launched with"""
    kernel: Kernel
    """The kernel with the tuned config's hints"""
    tuning_record: Sequence[tuple[Any, float]]
    """(config, milliseconds) of each config timed when the entry was tuned"""
    cache_hit: bool
    """Whether the config came from the cache"""


@dataclass
class _CacheEntry:
    best_cfg: Any
    best_grid: tuple
    best_kernel: Kernel
    tuning_record: Sequence[tuple[Any, float]]


def _default_key(args: tuple) -> tuple:
    """(shape, dtype, strides in elements) of each array argument, the type
    name of any other: cuTile's default cache key."""
    key = []
    for arg in args:
        if hasattr(arg, "shape") and hasattr(arg, "dtype"):
            stride = None
            if hasattr(arg, "stride"):
                s = arg.stride() if callable(arg.stride) else arg.stride
                stride = tuple(int(x) for x in s)
            elif hasattr(arg, "strides"):
                itemsize = getattr(arg, "itemsize", 1)
                stride = tuple(int(b // itemsize) for b in arg.strides)
            key.append((tuple(arg.shape), arg.dtype, stride))
        else:
            key.append(type(arg).__name__)
    return tuple(key)


def _reservoir_sample(items: Iterable[Any], k: int, rng: random.Random) -> list:
    """Up to `k` items drawn uniformly from the first _MAX_SEARCH_ITEMS of `items`
    (in their order when there are at most `k`)."""
    sample: list = []
    for n, item in enumerate(itertools.islice(items, _MAX_SEARCH_ITEMS)):
        if n < k:
            sample.append(item)
        else:
            j = rng.randint(0, n)
            if j < k:
                sample[j] = item
    return sample


def clear_autotune_cache(*, kernel: Optional[Kernel] = None, key: Any = None) -> None:
    """Forget tuned configs: all of them, a kernel's (`kernel`), or one key
    of a kernel (`kernel` and `key`). Deprecated like cuTile's: manage your own
    cache of exhaustive_search's results."""
    warnings.warn("clear_autotune_cache is deprecated, use tilecore.tune.exhaustive_search "
                  "and manage your own cache instead", DeprecationWarning, stacklevel=2)
    with _autotune_lock:
        if kernel is None:
            if key is not None:
                raise ValueError("key must be None when kernel is None")
            _autotune_cache.clear()
            return
        per_kernel = _autotune_cache.get(kernel.pyfunc)
        if per_kernel is None:
            return
        if key is None:
            per_kernel.clear()
        else:
            per_kernel.pop(key, None)


def autotune_launch(stream, grid_fn, kernel: Kernel,
                    args_fn: Callable[[Any], tuple],
                    launch_args_fn: Optional[Callable[[Any], tuple]] = None,
                    hints_fn: Optional[Callable[[Any], dict]] = None,
                    *,
                    search_space: Iterable[Any] | Callable[[], Iterable[Any]],
                    key: Any = None,
                    max_iter: int = 60,
                    compiler_time_limit_sec: int = 10,
                    seed: Optional[int] = None,
                    force_retune: bool = False) -> TunedResult:
    """Launch `kernel` with the best config for (kernel, key), tuning it first
    when the cache has none (cuTile's cuda.tile_experimental.autotune_launch).

    Up to `max_iter` configs are sampled from `search_space` (an iterable, or a
    function returning one) with `seed`, timed in a shuffled order, and the
    fastest is cached under the kernel and `key` (default: shapes, dtypes and
    strides of `args_fn(first config)`) and launched with
    `launch_args_fn(config)` (default `args_fn`). Configs that fail to compile,
    or whose first launch (compilation included) takes longer than
    `compiler_time_limit_sec`, are skipped; other errors are raised.
    `force_retune` tunes again even when cached. Deprecated like cuTile's:
    use exhaustive_search."""
    warnings.warn("autotune_launch is deprecated, use tilecore.tune.exhaustive_search "
                  "instead", DeprecationWarning, stacklevel=2)
    if not isinstance(kernel, Kernel):
        raise TypeError(f'Invalid argument "kernel" of autotune_launch(): expected a '
                        f"@tilecore.kernel, got {type(kernel).__name__}")
    if callable(search_space):
        search_space = search_space()
    rng = random.Random(seed)
    configs = _reservoir_sample(search_space, max_iter, rng)
    if not configs:
        raise ValueError("Search space must contain at least 1 configuration")
    with _autotune_lock:
        per_kernel = _autotune_cache.setdefault(kernel.pyfunc, {})
        arg_key = _default_key(args_fn(configs[0])) if key is None else key
        cache_hit = not force_retune and arg_key in per_kernel
        if not cache_hit:
            per_kernel[arg_key] = _tune(stream, grid_fn, kernel, args_fn, hints_fn, configs,
                                        rng, compiler_time_limit_sec)
        entry = per_kernel[arg_key]
    args = (launch_args_fn or args_fn)(entry.best_cfg)
    launch(stream, entry.best_grid, entry.best_kernel, args)
    return TunedResult(tuned_config=entry.best_cfg, grid=entry.best_grid,
                       kernel=entry.best_kernel, tuning_record=entry.tuning_record,
                       cache_hit=cache_hit)


def _tune(stream, grid_fn, kernel, args_fn, hints_fn, configs, rng,
          compiler_time_limit_sec) -> _CacheEntry:
    """autotune_launch's search: each config in a shuffled order, racing the
    best so far; ties go to the config earliest in the search space."""
    runner = _Runner(stream, grid_fn, kernel, args_fn, hints_fn, None, None, None)
    order = list(range(len(configs)))
    rng.shuffle(order)
    record: list[tuple[Any, float]] = []
    best: Optional[_Candidate] = None
    for i in order:
        cand = runner.build(i, configs[i])
        t0 = time.perf_counter()
        try:
            runner.first_run(cand)
        except TileCompileError as e:
            logger.debug("%r compilation error: %s", cand.config, e)
            continue
        if time.perf_counter() - t0 > compiler_time_limit_sec:
            logger.debug("%r compilation timeout", cand.config)
            continue
        runner.time(cand, must_beat_ms=best.measurement.ms if best is not None and
                    best.timer is not None else None)
        record.append((cand.config, cand.measurement.ms))
        if best is None or (cand.measurement.ms, cand.index) < (best.measurement.ms, best.index):
            best = cand
    if best is None:
        raise ValueError("No valid config found")
    return _CacheEntry(best.config, best.grid, best.kernel, record)
