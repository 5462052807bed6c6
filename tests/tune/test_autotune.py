"""tilecore.tune.exhaustive_search / search (cuTile's autotuning API) and
tilecore.experimental.autotune_launch on a small kernel in the interpreter
(NumPy arrays), timed by an injected MODEL timer: each config's per-launch
time is a number chosen here (a model, not a measurement)."""
import dataclasses
import inspect
import time
import typing
import warnings

import numpy as np
import pytest

import tilecore as ct
from tilecore.samples import vec_add
import tilecore.experimental as ct_experimental
import tilecore.tune as tune
from tilecore.errors import TileValueError
from tilecore.tune import autotune as A
from tilecore.tune import measure as M

# The tuner's plumbing, not the kernel's code generation: skip the suite's NVRTC
# compile of every interpreter launch.
pytestmark = pytest.mark.interpreter_only

N = 1000


vadd = vec_add   # the tour's sample kernel: c = a + b in tiles of TILE


@pytest.fixture
def arrays():
    rng = np.random.default_rng(0)
    a = rng.standard_normal(N).astype(np.float32)
    b = rng.standard_normal(N).astype(np.float32)
    return a, b, np.zeros(N, np.float32)


# MODEL per-launch times (ms) per TILE; 100 is not a power of two: it does not compile
MODEL_MS = {32: 4.0, 64: 3.0, 128: 1.0, 256: 2.0, 512: 5.0, 1024: 6.0, 100: 0.5}


class ModelTimer:
    """A measure.Timer answering MODEL_MS[tile] per call (times the calls it
    is asked for, without running them); `noise` adds a deterministic wobble."""

    def __init__(self, ms, noise=0.0):
        self.ms, self.noise, self.samples, self.calls = ms, noise, 0, 0

    def sample_ms(self, calls, first, count):
        self.samples += 1
        self.calls += count
        wobble = self.noise * ((self.samples * 7919) % 11 - 5) / 5
        return (self.ms + wobble) * count

    def throttled(self):
        return ""


def run_exhaustive(arrays, space, **kw):
    a, b, c = arrays
    return tune.exhaustive_search(space, None, lambda t: (ct.cdiv(N, t),), vadd,
                                  lambda t: (a, b, c, t), quiet=True, **kw)


def test_exhaustive_search_finds_the_fastest_config_under_the_model(arrays):
    timers = {}

    def timer(tile):
        timers[tile] = ModelTimer(MODEL_MS[tile])
        return timers[tile]
    checked = []

    def check(tile, args):
        np.testing.assert_array_equal(args[2], args[0] + args[1])
        checked.append(tile)
    space = [64, 100, 128, 256, 512]
    r = run_exhaustive(arrays, space, timer=timer, check_fn=check)
    assert isinstance(r, tune.TuningResult)
    assert r.best == tune.Measurement(config=128, mean_us=1000.0, num_samples=5,
                                      error_margin_us=0.0)
    # successes in search-space order, each timed at the model's time
    assert [(m.config, m.mean_us) for m in r.successes] == [
        (64, 3000.0), (128, 1000.0), (256, 2000.0), (512, 5000.0)]
    assert checked == [64, 128, 256, 512]
    (cfg, exc_type, message), = r.failures
    assert cfg == 100 and exc_type is TileValueError and "powers of two" in message
    assert 100 not in timers


def test_exhaustive_search_races_configs_beyond_the_top_k(arrays):
    space = [32, 64, 128, 256, 512, 1024, 100]
    r = run_exhaustive(arrays, space, timer=lambda t: ModelTimer(MODEL_MS[t], noise=0.05))
    samples = {m.config: m.num_samples for m in r.successes}
    assert r.best.config == 128
    # the TOP_K=5 fastest quick estimates converge; the slowest (1024) is raced
    # against the slowest of them (512) and stops after RACE_AFTER samples
    assert len(r.successes) == 6 and A.TOP_K == 5
    assert samples[1024] == M.RACE_AFTER
    assert all(samples[t] > M.RACE_AFTER for t in (32, 64, 128, 256, 512))
    best = min(r.successes, key=lambda m: m.mean_us)
    assert best == r.best and abs(best.mean_us - 1000.0) <= 50.0
    assert all(m.error_margin_us > 0 for m in r.successes)


def test_a_failing_check_is_a_failure(arrays):
    def check(tile, args):
        if tile == 128:
            raise AssertionError("model: wrong result")
    r = run_exhaustive(arrays, [64, 128, 256], timer=lambda t: ModelTimer(MODEL_MS[t]),
                       check_fn=check)
    assert r.best.config == 256
    assert r.failures == ((128, AssertionError, "model: wrong result"),)


def test_every_config_failing_raises_value_error(arrays):
    with pytest.raises(ValueError, match="No valid config found"):
        run_exhaustive(arrays, [100, 48], timer=lambda t: ModelTimer(1.0))
    with pytest.raises(ValueError, match="empty"):
        run_exhaustive(arrays, [])


def test_grid_errors_are_the_callers(arrays):
    a, b, c = arrays

    def grid(t):
        raise KeyError(t)
    with pytest.raises(KeyError):
        tune.exhaustive_search([64], None, grid, vadd, lambda t: (a, b, c, t), quiet=True)


def test_without_a_timer_the_interpreter_picks_the_first_success(arrays):
    r = run_exhaustive(arrays, [100, 256, 64])
    assert r.best == tune.Measurement(config=256, mean_us=0.0, num_samples=0,
                                      error_margin_us=0.0)
    assert [m.config for m in r.successes] == [256, 64]
    np.testing.assert_array_equal(arrays[2], arrays[0] + arrays[1])


def test_slow_first_launch_times_out(arrays, monkeypatch):
    real = A.launch

    def slow_for_64(stream, grid, kernel, args):
        if args[3] == 64:
            time.sleep(0.3)
        return real(stream, grid, kernel, args)
    monkeypatch.setattr(A, "launch", slow_for_64)
    r = run_exhaustive(arrays, [64, 128], timer=lambda t: ModelTimer(MODEL_MS[t]),
                       single_run_timeout_sec=0.2)
    assert [m.config for m in r.successes] == [128]
    assert r.failures[0][:2] == (64, tune.TileLaunchTimeoutError)


def test_hints_reach_the_kernel(arrays):
    a, b, c = arrays
    seen = []
    real = A.launch

    def spy(stream, grid, kernel, args):
        seen.append(kernel.options.num_threads)
        return real(stream, grid, kernel, args)
    import tilecore.tune.autotune as mod
    mod_launch = mod.launch
    try:
        mod.launch = spy
        r = tune.exhaustive_search([(128, 64), (128, 256)], None, lambda c_: (ct.cdiv(N, 128),),
                                   vadd, lambda c_: (a, b, c, c_[0]),
                                   lambda c_: {"num_threads": c_[1]}, quiet=True)
    finally:
        mod.launch = mod_launch
    assert seen == [64, 256] and len(r.successes) == 2
    assert tune.replace_hints(vadd, num_threads=64) is tune.replace_hints(vadd, num_threads=64)
    assert tune.replace_hints(vadd) is vadd


def test_search_finds_the_model_optimum_and_never_times_a_config_twice(arrays):
    a, b, c = arrays
    timed = []

    def timer(cfg):
        timed.append(dict(cfg))
        return ModelTimer(MODEL_MS[cfg["TILE"]] * (1 + cfg["unroll"] / 10))
    space = {"TILE": [64, 100, 128, 256, 512], "unroll": [0, 1, 2]}
    r = A.search(space, None, lambda cfg: (ct.cdiv(N, cfg["TILE"]),), vadd,
                    lambda cfg: (a, b, c, cfg["TILE"]), n_trials=40, seed=1, quiet=True,
                    timer=timer, constraint=lambda cfg: cfg["TILE"] != 512 or cfg["unroll"] == 0)
    assert isinstance(r, tune.TuningResult)
    assert r.best.config == {"TILE": 128, "unroll": 0}
    assert r.best.mean_us == pytest.approx(1000.0)
    keys = [tuple(sorted(t.items())) for t in timed]
    assert len(keys) == len(set(keys))
    # TPE re-proposes tried configs; they do not count, so all 12 configs that the
    # constraint allows are run within 40 trials: 9 timed, 3 (TILE 100) fail
    assert sorted(keys) == sorted((("TILE", t), ("unroll", u)) for t in (64, 128, 256)
                                  for u in (0, 1, 2)) + [(("TILE", 512), ("unroll", 0))]
    assert sorted(f[0]["unroll"] for f in r.failures) == [0, 1, 2]
    assert all(f[0]["TILE"] == 100 and f[1] is TileValueError for f in r.failures)
    assert len(r.successes) == len(timed) == 10
    timed.clear()
    r = A.search(space, None, lambda cfg: (ct.cdiv(N, cfg["TILE"]),), vadd,
                    lambda cfg: (a, b, c, cfg["TILE"]), n_trials=6, seed=2, quiet=True,
                    timer=timer)
    assert len(r.successes) + len(r.failures) == 6 == len(timed) + len(r.failures)
    with pytest.raises(TypeError, match="search_space"):
        A.search({}, None, None, vadd, None)
    with pytest.raises(ValueError, match="repeats"):
        A.search({"TILE": [64, 64]}, None, None, vadd, None)
    with pytest.raises(ValueError, match="n_trials"):
        A.search({"TILE": [64]}, None, None, vadd, None, n_trials=0)


def test_search_stops_once_the_space_is_exhausted(arrays):
    a, b, c = arrays
    timed = []

    def timer(cfg):
        timed.append(cfg["TILE"])
        return ModelTimer(MODEL_MS[cfg["TILE"]])
    r = A.search({"TILE": [64, 128, 256]}, None, lambda cfg: (ct.cdiv(N, cfg["TILE"]),),
                    vadd, lambda cfg: (a, b, c, cfg["TILE"]), n_trials=100, quiet=True,
                    timer=timer)
    assert sorted(timed) == [64, 128, 256] and r.best.config == {"TILE": 128}


def test_tilecore_tune_search_stays_cutiles_function():
    """The sweep's strategies module (strategies.py) does not shadow cuTile's
    `tilecore.tune.search` once imported."""
    import tilecore.tune.replay  # noqa: F401  (imports the strategies module)
    from tilecore.tune import search
    assert search is A.search


def test_cutile_signatures_and_result_types():
    sig = inspect.signature(tune.exhaustive_search)
    params = list(sig.parameters.values())
    assert [p.name for p in params[:6]] == ["search_space", "stream", "grid_fn", "kernel",
                                            "args_fn", "hints_fn"]
    assert all(p.kind is p.POSITIONAL_OR_KEYWORD for p in params[:6])
    assert sig.parameters["hints_fn"].default is None
    for name, default in (("quiet", False), ("single_run_timeout_sec", None)):
        assert sig.parameters[name].kind is inspect.Parameter.KEYWORD_ONLY
        assert sig.parameters[name].default is default
    assert list(inspect.signature(A.search).parameters)[:6] == [
        "search_space", "stream", "grid_fn", "kernel", "args_fn", "hints_fn"]
    for cls, fields in ((tune.Measurement, ["config", "mean_us", "num_samples",
                                            "error_margin_us"]),
                        (tune.TuningResult, ["best", "successes", "failures"])):
        assert [f.name for f in dataclasses.fields(cls)] == fields
        assert typing.Generic in cls.__mro__
        with pytest.raises(TypeError):
            cls(*range(len(fields)))                                   # keyword-only
    m = tune.Measurement(config=1, mean_us=2.0, num_samples=3, error_margin_us=0.5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.mean_us = 1.0
    text = str(tune.TuningResult(best=m, successes=(m,), failures=((7, ValueError, "bad"),)))
    assert text.splitlines() == ["1 succeeded, 1 failed", "* 1: 2.0\u00b10.5 us (3 samples)",
                                 "  1 failed:", "    7: ValueError: bad"]


def test_autotune_launch_caches_the_best_config(arrays):
    a, b, c = arrays
    launched = []

    def args_fn(t):
        launched.append(t)
        return (a, b, c, t)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        ct_experimental.clear_autotune_cache()
        r = ct_experimental.autotune_launch(None, lambda t: (ct.cdiv(N, t),), vadd, args_fn,
                                            search_space=[256, 64, 128], seed=0)
    assert all(issubclass(x.category, DeprecationWarning) for x in w) and len(w) == 2
    assert isinstance(r, A.TunedResult) and not r.cache_hit
    # in the interpreter nothing is timed: ties go to the first config of the space
    assert r.tuned_config == 256 and r.grid == (ct.cdiv(N, 256),)
    assert sorted(cfg for cfg, ms in r.tuning_record) == [64, 128, 256]
    np.testing.assert_array_equal(c, a + b)
    launched.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        again = ct_experimental.autotune_launch(None, lambda t: (ct.cdiv(N, t),), vadd, args_fn,
                                                search_space=[256, 64, 128])
        assert again.cache_hit and again.tuned_config == 256
        assert launched == [256, 256]           # the key's args, then the launch's
        ct_experimental.clear_autotune_cache(kernel=vadd)
        third = ct_experimental.autotune_launch(None, lambda t: (ct.cdiv(N, t),), vadd,
                                                args_fn, search_space=[64, 128])
        assert not third.cache_hit and third.tuned_config == 64
        with pytest.raises(ValueError, match="at least 1"):
            ct_experimental.autotune_launch(None, None, vadd, args_fn, search_space=[])
        with pytest.raises(ValueError, match="key must be None"):
            ct_experimental.clear_autotune_cache(key=1)
        ct_experimental.clear_autotune_cache()


def test_autotune_launch_samples_at_most_max_iter():
    rng = __import__("random").Random(3)
    sample = A._reservoir_sample(range(1000), 10, rng)
    assert len(sample) == 10 == len(set(sample)) and all(0 <= s < 1000 for s in sample)
    assert A._reservoir_sample(range(4), 10, rng) == [0, 1, 2, 3]
    key = A._default_key((np.zeros((2, 3), np.float32), 5))
    assert key == (((2, 3), np.dtype(np.float32), (3, 1)), "int")
