"""workloads.py: the tuning keys against the keys the algorithms really pass
to their policy hubs (recorded by wrapping the hubs' selectors while the
algorithm runs in the interpreter), current_policy against the policy those
calls were given, and each workload's call + reference check on NumPy
arrays at tiny sizes."""
import numpy as np
import pytest

import tilecore.algorithms.reduce as reduce_mod
import tilecore.algorithms.scan_plan as scan_mod
import tilecore.algorithms.segmented_reduce as segmented_mod
from tilecore import config
from tilecore.dispatch import override_policy
from tilecore.tune.workloads import (ALGORITHMS, LONG_SEGMENT, OPS, Case, Side, Workload,
                                     array_layout, buffer_sets, current_policy, gbs,
                                     older_policy, segment_offsets, tuning_key, workloads)

SELECTORS = {"reduce": (reduce_mod, "select_reduce_policy"),
             "scan": (scan_mod, "select_scan_policy"),
             "segmented_reduce": (segmented_mod, "select_segmented_policy")}
DTYPES = ("float32", "int8", "uint16", "float16", "bfloat16", "float64", "int64", "uint64")
N = 3000    # tiny: the interpreter runs every kernel

# The tuner's plumbing, not the kernels (tests/algorithms compile and compare those):
# skip the suite's NVRTC compile of every interpreter launch.
pytestmark = pytest.mark.interpreter_only


@pytest.fixture
def hub_calls(monkeypatch):
    """(cc, key, policy) of every policy selection the algorithms make."""
    calls = []
    for module, name in SELECTORS.values():
        original = getattr(module, name)

        def recording(cc, key, original=original):
            policy = original(cc, key)
            calls.append((cc, dict(key), policy))
            return policy
        monkeypatch.setattr(module, name, recording)
    return calls


def fields(policy):
    return {k: v for k, v in vars(policy).items() if k != "source"}


def test_hand_written_keys():
    assert tuning_key("reduce", "int8", "add") == {"value_size": 1, "accum": "int32",
                                                   "op": "add", "offset_size": 4}
    assert tuning_key("reduce", "int8", "min")["accum"] == "int8"
    assert tuning_key("segmented_reduce", "bfloat16", "add") == {
        "value_size": 2, "accum": "float32", "op": "add", "offset_size": 4}
    assert tuning_key("scan", "float64", "max") == {"value_size": 8, "accum": "float64",
                                                    "op": "max", "offset_size": 4,
                                                    "by_key": False, "exclusive": False}
    assert tuning_key("scan", "int32", "add")["exclusive"]       # it times exclusive_sum


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_keys_policies_and_results_agree_with_the_algorithms(algorithm, dtype, hub_calls):
    side = Side(None)
    for op in OPS:
        w = Workload(algorithm, dtype, op)
        for segments in w.segments:
            case = Case(w, N, side, segments)
            hub_calls.clear()
            with override_policy(algorithm):       # a new generation: plans are rebuilt
                problem = case.bind().check()
            assert problem is None, (w.label, segments, problem)
            assert hub_calls, f"{w.label}: no policy selected"
            for cc, key, policy in hub_calls:
                assert key == w.key == tuning_key(algorithm, dtype, op)
                assert cc == 90
                assert fields(policy) == current_policy(algorithm, 90, key)


def _independent_reference(w: Workload, x: np.ndarray, offsets):
    """The expected output straight from the input array (NumPy, by hand)."""
    wide = x.astype(np.float64 if x.dtype.kind == "f" or w.dtype == "bfloat16" else np.int64)
    out = x.dtype
    if w.algorithm == "reduce":
        return np.array([wide.sum()]).astype(out)
    if w.algorithm == "scan":
        if w.op == "add":
            return np.concatenate(([0], np.cumsum(wide)[:-1])).astype(out)
        return (np.minimum if w.op == "min" else np.maximum).accumulate(wide).astype(out)
    f = {"add": np.sum, "min": np.min, "max": np.max}[w.op]
    return np.array([f(wide[b:e]) for b, e in zip(offsets[:-1], offsets[1:])]).astype(out)


@pytest.mark.parametrize("label", ["reduce float32 add", "reduce int8 add", "scan int16 add",
                                   "scan float64 min", "segmented_reduce int32 max",
                                   "segmented_reduce float16 add"])
def test_reference_matches_an_independent_computation(label):
    w = Workload(*label.split())
    segments = "short" if w.algorithm == "segmented_reduce" else None
    case = Case(w, N, Side(None), segments)
    x = case.sets[0]["x"]
    offsets = case.sets[0].get("offsets")
    want = _independent_reference(w, x, offsets)
    assert case.expected.dtype == want.dtype
    assert np.array_equal(case.expected.view(np.uint8), want.view(np.uint8))
    if w.op == "add":     # small integers: -8..8
        assert x.astype(np.float64).min() >= -8 and x.astype(np.float64).max() <= 8


def test_int8_sums_wrap_like_cub():
    w = Workload("reduce", "int8", "add")
    case = Case(w, N, Side(None))
    total = int(case.sets[0]["x"].astype(np.int64).sum())
    assert int(case.expected[0]) == (total + 128) % 256 - 128


def test_check_reports_wrong_results():
    side = Side(None)
    case = Case(Workload("scan", "int32", "add"), N, side)
    with override_policy("scan"):
        bound = case.bind()
    out = case.sets[0]["out"]

    def wrong():
        out[:] = case.expected
        out[17] += 1
    bound.calls[0] = wrong
    problem = bound.check()
    assert problem == (f"wrong result at {N}: 1 of {N} outputs differ, first at [17]: "
                       f"got {int(case.expected[17]) + 1}, expected "
                       f"{int(case.expected[17])} (int32)")
    # reduce min: the planted extreme must come out
    case = Case(Workload("reduce", "float32", "min"), N, side)
    with override_policy("reduce"):
        bound = case.bind()
    bound.calls[0] = lambda: case.sets[0]["out"].__setitem__(0, 0.0)
    problem = bound.check()
    assert problem is not None and "extreme at 0" in problem and "-10000.0" in problem
    # the input is restored after each planted extreme
    again = Case(Workload("reduce", "float32", "min"), N, side)
    assert np.array_equal(case.sets[0]["x"], again.sets[0]["x"])


def test_reduce_min_max_plant_extremes_for_every_integer_dtype():
    side = Side(None)
    for dtype in ("uint64", "int64", "uint8"):
        for op in ("min", "max"):
            case = Case(Workload("reduce", dtype, op), 500, side)
            with override_policy("reduce"):
                assert case.bind().check() is None, (dtype, op)


def test_segment_offsets():
    for n in (1000, 1 << 16, 300_000):
        for name, most in (("short", 256), ("uneven", 4096)):
            got = segment_offsets(name, n)
            lengths = np.diff(got)
            assert got.dtype == np.int32 and got[0] == 0 and got[-1] == n
            assert lengths.min() >= 1 and lengths.max() <= most
            assert np.array_equal(got, segment_offsets(name, n))      # seeded by n
            if n >= 300_000:        # uniform in 1..most: the mean near (most + 1) / 2
                assert abs(lengths[:-1].mean() / ((most + 1) / 2) - 1) < 0.1, name
        long = segment_offsets("long", n)
        assert long[0] == 0 and long[-1] == n
        assert np.all(np.diff(long)[:-1] == LONG_SEGMENT)
        assert np.diff(long)[-1] == (n - 1) % LONG_SEGMENT + 1      # the rest, never empty
    assert segment_offsets("long", 1000).tolist() == [0, 1000]
    assert segment_offsets("long", 3 * LONG_SEGMENT).tolist() == [0, 65536, 131072, 196608]
    with pytest.raises(ValueError, match="segments"):
        segment_offsets("medium", 100)


def test_layout_sizes_and_buffer_sets():
    w = Workload("segmented_reduce", "float64", "add")
    assert array_layout(w, 1000, 7) == {"x": (w.in_dtype, 1000), "out": (w.in_dtype, 7),
                                         "offsets": (array_layout(w, 1, 1)["offsets"][0], 8)}
    case = Case(w, 1000, Side(None), "short")
    assert case.nbytes == 8 * 1000 + 8 * case.num_segments + 4 * (case.num_segments + 1)
    assert Case(Workload("scan", "float32", "add"), 1000, Side(None)).nbytes == 8000
    assert buffer_sets(1 << 20) == 256
    assert buffer_sets(100 << 20) == 3
    assert buffer_sets(1 << 30) == 2 and buffer_sets(0) == 256 << 20
    assert gbs(1_000_000, 1.0) == 1.0 and gbs(10, 0.0) == 0.0


def test_workload_validation_and_deduplication():
    for bad in [("sort", "float32", "add"), ("scan", "complex64", "add"),
                ("scan", "float32", "mul")]:
        with pytest.raises(ValueError, match="Invalid argument"):
            Workload(*bad)
    got = workloads(["reduce", "scan"], ["float16", "bfloat16"], ["add", "min"])
    # bfloat16 and float16 sums share a key (2-byte items, float32 accumulator)
    assert [(w.algorithm, w.dtype, w.op) for w in got] == [
        ("reduce", "float16", "add"), ("reduce", "float16", "min"), ("reduce", "bfloat16", "min"),
        ("scan", "float16", "add"), ("scan", "float16", "min"), ("scan", "bfloat16", "min")]
    assert Workload("segmented_reduce", "int32", "add").segments == ("short", "uneven", "long")
    assert Workload("scan", "int32", "add").segments == (None,)


def test_current_and_older_policy_follow_the_tables():
    key = tuning_key("reduce", "float32", "add")
    with config.override("TILECORE_TUNING_DIR", "no"):     # the shipped tables only
        assert older_policy("reduce", 90, key) is None    # sm_90 has a table
        assert older_policy("reduce", 86, key) == (80, current_policy("reduce", 80, key))
        assert older_policy("reduce", 100, key) == (90, current_policy("reduce", 90, key))
        assert older_policy("reduce", 75, key) is None    # sm_70 has none either
