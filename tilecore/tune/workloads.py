"""What the tuner runs: per algorithm and tuning key, the call it times, its
inputs, and the reference every candidate is checked against before it is
timed.

Workloads. A `Workload` is (algorithm, dtype, op); its tuning key is the key
the algorithm builds for that call (`tuning_key`, the same fields and values
as reduce.py / scan.py / segmented_reduce.py pass to their policy hubs;
tests/tune/test_workloads.py checks them against the hubs). The calls timed:

- reduce: `DeviceReduce.sum` (op add), `.min`, `.max`; output of the input's
  dtype (so the accumulator is CUB's: int32 for narrow integers, float32 for
  float16/bfloat16).
- scan: `DeviceScan.exclusive_sum` (op add: what CUB's scan tuning times,
  cub/benchmarks/bench/scan/exclusive/sum.cu), `.inclusive_scan(op)` for
  min/max; the rows written for them leave out `exclusive` (as CUB, one
  tuning for both scans), where a hand-set row naming it stays the more
  specific.
- segmented_reduce: `DeviceSegmentedReduce.sum`, `.min`, `.max` with int32
  offsets (`offsets[:-1]`, `offsets[1:]`), for each segment-length
  distribution of `SEGMENTS`:
  "short": lengths uniform in 1..256 (mean 128.5; the rows kernel),
  "uneven": lengths uniform in 1..4096 (mean 2048.5: where the rows and long
  kernels meet, so `long_min_avg_items` is measured; the H200 ran these 0.8x
  as fast on the kernel the equal-length cases had left it choosing), and
  "long": every segment 65536 items (one segment of n when n is smaller; the
  long kernel, split over several blocks while segments are few). The
  speedup the score sees for a size is the geometric mean over the three.

Inputs. Each size has rotating *buffer sets* (input, output, offsets), as
many as `buffer_sets` says, so that together they span five times the H100's
50 MB L2 and no call finds its inputs left in L2 by the call before; every set
holds the same data. Sums run on small integers (-8..8, 0..8 unsigned) stored
in the dtype, so float sums are exact whatever the association and the
reference is exact: NumPy/CuPy sums in int64 (floats: float64, exact for
integer values), converted to the output dtype once (round to nearest even,
as the kernels convert the float32 accumulator of float16/bfloat16).
Integer sums wrap as CUB's do. min/max run on random values (normal floats,
integers over half the dtype's range); for reduce min/max, whose result is one
item, the check plants an extreme at the first, the last and a pseudo-random
position in turn. A result that differs from the reference in any bit is a
wrong result: the candidate fails.

Candidates run inside `override_policy(algorithm, **policy)`, entered once
around all of a candidate's work (`Case.bind` and its calls): entering it
changes the policy generation, which rebuilds the algorithms' cached host
plans, so it must not be entered per call.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Callable, Optional

import numpy as np

from ..dispatch.reduce_policy import select_reduce_policy
from ..dispatch.scan_policy import select_scan_policy
from ..dispatch.segmented_policy import select_segmented_policy
from ..dispatch.selector import architectures_up_to
from ..language import dtypes as D
from ..language.dtypes import DType
from ..algorithms.operators import NUMERIC, sum_accumulator
from ..tunings.lookup import find_table

__all__ = ["ALGORITHMS", "OPS", "SEGMENTS", "Workload", "tuning_key", "workloads",
           "current_policy", "older_policy", "segment_offsets", "buffer_sets", "Side", "Case",
           "Bound", "invoke", "array_layout"]

ALGORITHMS = ("reduce", "scan", "segmented_reduce")
OPS = ("add", "min", "max")
SEGMENTS = {
    "short": "segment lengths uniform in 1..256 (mean 128.5): the rows kernel",
    "uneven": "segment lengths uniform in 1..4096 (mean 2048.5): where the rows and long "
              "kernels meet (long_min_avg_items)",
    "long": "every segment 65536 items (one segment of n when n is smaller): the long "
            "kernel, split over blocks while segments are few",
}
LONG_SEGMENT = 1 << 16
_MAX_LENGTH = {"short": 256, "uneven": 4096}     # lengths uniform in 1..this
_SELECT = {"reduce": select_reduce_policy, "scan": select_scan_policy,
           "segmented_reduce": select_segmented_policy}
_DTYPE_NAMES = tuple(d.name for d in NUMERIC)


@dataclass(frozen=True)
class Workload:
    """One tuned call: `algorithm` on `dtype` inputs (and outputs) with `op`."""
    algorithm: str
    dtype: str
    op: str

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f'Invalid argument "algorithm": expected one of {list(ALGORITHMS)}, '
                             f"got {self.algorithm!r}")
        if self.dtype not in _DTYPE_NAMES:
            raise ValueError(f'Invalid argument "dtype": expected one of {list(_DTYPE_NAMES)}, '
                             f"got {self.dtype!r}")
        if self.op not in OPS:
            raise ValueError(f'Invalid argument "op": expected one of {list(OPS)}, '
                             f"got {self.op!r}")

    @property
    def in_dtype(self) -> DType:
        return D.lookup(self.dtype)

    @property
    def key(self) -> dict:
        return tuning_key(self.algorithm, self.dtype, self.op)

    @property
    def label(self) -> str:
        return f"{self.algorithm} {self.dtype} {self.op}"

    @property
    def segments(self) -> tuple[Optional[str], ...]:
        """The segment-length distributions timed per size (None: not segmented)."""
        return tuple(SEGMENTS) if self.algorithm == "segmented_reduce" else (None,)


def tuning_key(algorithm: str, dtype: str, op: str) -> dict:
    """The tuning key the algorithm builds for this call on fewer than 2**31
    items (int32 segment offsets): value_size, accum, op, offset_size, and
    by_key and exclusive (the scan `invoke` times: exclusive sums, inclusive
    min/max) for scans. The accumulator is CUB's: the sum's `out + in` type
    (narrow floats in float32), the input's dtype for min/max."""
    t = D.lookup(dtype)
    acc = sum_accumulator(t, t) if op == "add" else t
    key = {"value_size": t.itemsize, "accum": acc.name, "op": op, "offset_size": 4}
    if algorithm == "scan":
        key["by_key"] = False
        key["exclusive"] = op == "add"
    return key


def workloads(algorithms, dtypes, ops) -> list[Workload]:
    """Every (algorithm, dtype, op) combination, one per distinct (algorithm,
    tuning key) (the first listed wins), in the order given."""
    out, seen = [], set()
    for a in algorithms:
        for t in dtypes:
            for o in ops:
                w = Workload(a, t, o)
                ident = (a, tuple(sorted(w.key.items())))
                if ident not in seen:
                    seen.add(ident)
                    out.append(w)
    return out


def _fields(policy) -> dict:
    d = asdict(policy)
    d.pop("source")
    return d


def current_policy(algorithm: str, cc: int, key: dict) -> dict:
    """The complete policy the hub selects for `key` on compute capability `cc`
    with the tables as they are now (call it outside any override_policy)."""
    return _fields(_SELECT[algorithm](cc, key))


def older_policy(algorithm: str, cc: int, key: dict) -> Optional[tuple[int, dict]]:
    """(older cc, its complete policy) when sm_cc has no table for `algorithm`
    and an older architecture of the chain has one: the nearest such
    architecture's tuned policy, a search's second starting point. None
    otherwise."""
    if find_table(algorithm, cc) is not None:
        return None
    for arch in architectures_up_to(cc):
        if arch < cc and find_table(algorithm, arch) is not None:
            return arch, _fields(_SELECT[algorithm](arch, key))
    return None


def segment_offsets(segments: str, n: int) -> np.ndarray:
    """The int32 offsets (num_segments + 1 of them, 0 first, n last) of the
    distribution `segments` over n items; the same for every caller (seeded by n)."""
    if segments in _MAX_LENGTH:
        most = _MAX_LENGTH[segments]
        lengths = np.random.default_rng(n).integers(1, most + 1, size=2 * n // most + 64)
        ends = np.cumsum(lengths)
        ends = ends[ends < n]
    elif segments == "long":
        ends = np.arange(LONG_SEGMENT, n, LONG_SEGMENT)
    else:
        raise ValueError(f'Invalid argument "segments": expected one of {list(SEGMENTS)}, '
                         f"got {segments!r}")
    return np.concatenate(([0], ends, [n])).astype(np.int32)


def buffer_sets(set_bytes: int, min_total: int = 256 << 20) -> int:
    """How many buffer sets of `set_bytes` a timing rotates over: enough that
    together they span `min_total` (five times the H100's 50 MB L2), at least 2."""
    return max(2, -(-min_total // max(set_bytes, 1)))


def array_layout(w: Workload, n: int, num_segments: int) -> dict[str, tuple[DType, int]]:
    """The arrays of one call: name -> (dtype, length). `offsets` (segmented
    reduce) is viewed as begins = offsets[:-1], ends = offsets[1:]."""
    t = w.in_dtype
    if w.algorithm == "reduce":
        return {"x": (t, n), "out": (t, 1)}
    if w.algorithm == "scan":
        return {"x": (t, n), "out": (t, n)}
    return {"x": (t, n), "out": (t, num_segments), "offsets": (D.int32, num_segments + 1)}


def invoke(w: Workload, temp: Any, arrays: dict, n: int, stream: Any) -> int:
    """One two-phase call of the workload's method (temp None: the size query)."""
    from ..algorithms import DeviceReduce, DeviceScan, DeviceSegmentedReduce
    op = w.op
    if w.algorithm == "reduce":
        method = {"add": DeviceReduce.sum, "min": DeviceReduce.min, "max": DeviceReduce.max}[op]
        return method(temp, arrays["x"], arrays["out"], n, stream)
    if w.algorithm == "scan":
        if op == "add":
            return DeviceScan.exclusive_sum(temp, arrays["x"], arrays["out"], n, stream)
        return DeviceScan.inclusive_scan(temp, arrays["x"], arrays["out"], op, n, stream)
    method = {"add": DeviceSegmentedReduce.sum, "min": DeviceSegmentedReduce.min,
              "max": DeviceSegmentedReduce.max}[op]
    return method(temp, arrays["x"], arrays["out"], arrays["segments"], arrays["begins"],
                  arrays["ends"], stream)


class Side:
    """Where a workload's arrays live: NumPy arrays for the CPU interpreter
    (device None), else CuPy arrays on GPU `device` with a non-blocking stream.
    bfloat16 (which CuPy lacks) is stored as uint16 and passed to the
    algorithms as tilecore DeviceArrays."""

    def __init__(self, device: Optional[int]) -> None:
        self.device = device
        if device is None:
            self.xp, self.stream = np, None
        else:
            import cupy
            self.xp = cupy
            cupy.cuda.Device(device).use()
            self.stream = cupy.cuda.Stream(non_blocking=True)

    @property
    def host(self) -> bool:
        return self.device is None

    def storage(self, t: DType) -> np.dtype:
        if t is D.bfloat16 and not self.host:
            return np.dtype(np.uint16)
        return np.dtype(t.numpy_dtype)

    def empty(self, t: DType, count: int):
        return self.xp.empty(count, self.storage(t))

    def arg(self, a, t: DType):
        """What the algorithm is passed for storage array `a` of dtype `t`."""
        if t is D.bfloat16 and not self.host:
            from ..runtime import DeviceArray
            return DeviceArray(a.data.ptr, (a.size,), (1,), D.bfloat16, a.device.id)
        return a

    def encode(self, values, t: DType):
        """Exact or round-to-nearest-even conversion of int64/float64 `values` to storage."""
        if t is D.bfloat16 and not self.host:
            bits = values.astype(np.float32).view(np.uint32)
            rounded = bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
            return (rounded >> np.uint32(16)).astype(np.uint16)
        return values.astype(self.storage(t))

    def decode(self, a, t: DType):
        """Storage `a` as int64 (integers; uint64 stays uint64) or float64 values."""
        if t is D.bfloat16 and not self.host:
            return (a.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
        if t.is_float:
            return a.astype(np.float64)
        return a if t is D.uint64 else a.astype(np.int64)

    def bits(self, a, t: DType):
        """`a` compared bit for bit: bfloat16 storage as uint16, else as is."""
        return a.view(np.uint16) if t is D.bfloat16 and self.host else a

    def to_host(self, a) -> np.ndarray:
        """`a` as a NumPy array."""
        return a if self.host else self.xp.asnumpy(a)

    def synchronize(self) -> None:
        if not self.host:
            self.xp.cuda.Device(self.device).synchronize()


def _data(side: Side, w: Workload, n: int):
    """The input values (int64 or float64) of workload `w` at size n (seeded)."""
    xp, t = side.xp, w.in_dtype
    rng = xp.random.default_rng(12345 + n)
    if w.op == "add":
        lo = 0 if (not t.is_float and t.name.startswith("u")) else -8
        return rng.integers(lo, 9, n, dtype=np.int64).astype(np.float64 if t.is_float
                                                             else np.int64)
    if t.is_float:
        return rng.standard_normal(n, dtype=np.float64)
    info = np.iinfo(t.numpy_dtype)
    return rng.integers(info.min // 2, info.max // 2, n, dtype=np.int64)


def _extreme(w: Workload):
    """A value beyond every input of a min/max workload (its planted result)."""
    t = w.in_dtype
    low = w.op == "min"
    if t.is_float:
        return -1.0e4 if low else 1.0e4
    info = np.iinfo(t.numpy_dtype)
    return int(info.min if low else info.max)


class Case:
    """One size of a workload (for segmented reduce, one segment distribution):
    its buffer sets, the reference result, and the bytes a call moves."""

    def __init__(self, w: Workload, n: int, side: Side, segments: Optional[str] = None,
                 sets: Optional[int] = None) -> None:
        self.workload, self.n, self.side, self.segments = w, n, side, segments
        xp, t = side.xp, w.in_dtype
        offsets = segment_offsets(segments, n) if segments is not None else None
        self.num_segments = 0 if offsets is None else len(offsets) - 1
        layout = array_layout(w, n, self.num_segments)
        self.nbytes = sum(dt.itemsize * count for dt, count in layout.values())
        values = _data(side, w, n)
        x = side.encode(values, t)
        values = side.decode(x, t)       # exactly what the kernels read
        self.expected = self._reference(values, offsets)
        count = 1 if side.host else (sets or buffer_sets(self.nbytes))
        self.sets: list[dict] = []
        for _ in range(count):
            a = {"x": x.copy(), "out": side.empty(t, layout["out"][1])}
            if offsets is not None:
                a["offsets"] = xp.asarray(offsets)
            self.sets.append(a)
        self.args = [self._args(a) for a in self.sets]
        side.synchronize()

    @property
    def label(self) -> str:
        size = f"2^{self.n.bit_length() - 1}" if self.n & (self.n - 1) == 0 else str(self.n)
        return size if self.segments is None else f"{size} {self.segments}"

    def _args(self, a: dict) -> dict:
        t, side = self.workload.in_dtype, self.side
        out = {"x": side.arg(a["x"], t), "out": side.arg(a["out"], t)}
        if "offsets" in a:
            out.update(begins=a["offsets"][:-1], ends=a["offsets"][1:],
                       segments=self.num_segments)
        return out

    def _reference(self, values, offsets):
        w, side, xp = self.workload, self.side, self.side.xp
        t = w.in_dtype
        if w.algorithm == "reduce":
            if w.op == "add":
                return side.encode(values.sum(keepdims=True), t)
            return None  # planted extremes (Bound.check)
        if w.algorithm == "scan":
            if w.op == "add":
                sums = xp.cumsum(values)
                return side.encode(xp.concatenate((xp.zeros(1, sums.dtype), sums[:-1])), t)
            # on the host: CuPy's ufunc.accumulate supports add and multiply only
            f = np.minimum if w.op == "min" else np.maximum
            return side.encode(xp.asarray(f.accumulate(side.to_host(values))), t)
        off = xp.asarray(offsets.astype(np.int64))
        if w.op == "add":
            sums = xp.concatenate((xp.zeros(1, values.dtype), xp.cumsum(values)))
            return side.encode(sums[off[1:]] - sums[off[:-1]], t)
        # on the host: CuPy's ufunc.reduceat supports add only
        f = np.minimum if w.op == "min" else np.maximum
        return side.encode(xp.asarray(f.reduceat(side.to_host(values),
                                                 offsets[:-1].astype(np.int64))), t)

    def bind(self) -> "Bound":
        """The calls of the policy in force now (call inside override_policy)."""
        w, side = self.workload, self.side
        nbytes = invoke(w, None, self.args[0], self.n, side.stream)
        temp = side.xp.empty(max(nbytes, 1), np.uint8)
        return Bound(self, temp)


class Bound:
    """A case's calls under one policy: `calls[i]` runs on buffer set i."""

    def __init__(self, case: Case, temp) -> None:
        self.case, self.temp = case, temp
        w, n, stream = case.workload, case.n, case.side.stream
        self.calls: list[Callable[[], object]] = [
            (lambda a=a: invoke(w, temp, a, n, stream)) for a in case.args]

    def check(self) -> Optional[str]:
        """None when the policy's result on buffer set 0 equals the reference
        bit for bit, else what differs."""
        case = self.case
        w, side, t = case.workload, case.side, case.workload.in_dtype
        out = case.sets[0]["out"]
        if case.expected is not None:
            self.calls[0]()
            side.synchronize()
            return _compare(side, t, side.bits(out, t), side.bits(case.expected, t), case.label)
        x, n = case.sets[0]["x"], case.n
        # uint64's maximum does not fit int64
        extreme = side.encode(side.xp.asarray([_extreme(w)], dtype=np.float64 if t.is_float
                                              else np.uint64 if t is D.uint64 else np.int64), t)
        for pos in sorted({0, n - 1, (n * 2654435761 >> 7) % n}):
            saved = x[pos:pos + 1].copy()
            x[pos:pos + 1] = extreme
            self.calls[0]()
            side.synchronize()
            x[pos:pos + 1] = saved
            problem = _compare(side, t, side.bits(out, t), side.bits(extreme, t),
                               f"{case.label}, extreme at {pos}")
            if problem:
                side.synchronize()
                return problem
        side.synchronize()
        return None


def _compare(side: Side, t: DType, got, want, where: str) -> Optional[str]:
    xp = side.xp
    if bool(xp.array_equal(got, want)):
        return None
    bad = xp.flatnonzero(got != want)
    i = int(bad[0])
    return (f"wrong result at {where}: {int(bad.size)} of {want.size} outputs differ, first "
            f"at [{i}]: got {got[i].item()!r}, expected {want[i].item()!r} ({t.name})")


def gbs(nbytes: int, ms: float) -> float:
    """Bandwidth in GB/s of `nbytes` moved in `ms` milliseconds."""
    return nbytes / ms / 1e6 if ms > 0 and math.isfinite(ms) else 0.0
