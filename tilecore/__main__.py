"""`python -m tilecore`: a short tour. Compiles and runs a few sample kernels
and the device-scope algorithms (DeviceReduce's two-phase call and the
convenience layer) on the GPU when one is present (CuPy arrays), otherwise on
the CPU interpreter (NumPy arrays), and checks each result against NumPy."""
from __future__ import annotations

import sys
import time

import numpy as np

import tilecore as ct
from tilecore.samples import gather_reverse, softmax_rows, tile_sum, vec_add


def _backend():
    """(name, to_device, to_host, stream) for the GPU via CuPy, else the interpreter."""
    from tilecore.runtime.driver import has_gpu
    if has_gpu():
        try:
            import cupy as cp
            return ("GPU (" + cp.cuda.runtime.getDeviceProperties(0)["name"].decode() + ")",
                    cp.asarray, cp.asnumpy, cp.cuda.get_current_stream())
        except ImportError:
            pass
    return "CPU interpreter (no GPU found)", (lambda a: a), (lambda a: a), None


def _check(name: str, got, want, tol: float, seconds: float) -> bool:
    err = float(np.max(np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64)))) \
        if np.size(want) else 0.0
    ok = err <= tol
    print(f"  {'ok  ' if ok else 'FAIL'} {name:<44} max |err| = {err:.2e}   ({seconds * 1e3:.1f} ms)")
    return ok


def _algorithms(dev, host, stream, rng) -> bool:
    """DeviceReduce (two-phase temporary storage, as CUB) and the convenience
    layer; DeviceScan and DeviceSegmentedReduce where this tilecore has them."""
    import tilecore.algorithms as A
    from tilecore.algorithms import DeviceReduce

    ok = True
    n = 1_000_003
    h = rng.standard_normal(n).astype(np.float32)
    x, out = dev(h), dev(np.zeros(1, np.float32))
    t = time.perf_counter()
    nbytes = DeviceReduce.sum(None, x, out, n)           # size query: launches nothing
    temp = dev(np.empty(nbytes, np.uint8))
    DeviceReduce.sum(temp, x, out, n, stream)
    ok &= _check(f"DeviceReduce.sum (two-phase), n={n}", host(out), [h.astype(np.float64).sum()],
                 1e-5 * np.abs(h).sum(), time.perf_counter() - t)
    t = time.perf_counter()
    s, i = A.sum(x), A.argmax(x)
    ok &= _check("tilecore.algorithms.sum / argmax", [float(s), int(i)],
                 [h.astype(np.float64).sum(), h.argmax()], 1e-5 * np.abs(h).sum(),
                 time.perf_counter() - t)
    small = h[:10_000]
    t = time.perf_counter()
    c = A.cumsum(dev(small))
    ok &= _check("tilecore.algorithms.cumsum, n=10000", host(c),
                 np.cumsum(small.astype(np.float64)), 1e-3, time.perf_counter() - t)
    offsets = np.array([0, 3, 3, 1000, 4096, 10_000], np.int64)
    t = time.perf_counter()
    seg = A.segmented_sum(dev(small), dev(offsets))
    ref = [small[a:b].astype(np.float64).sum() for a, b in zip(offsets[:-1], offsets[1:])]
    ok &= _check("tilecore.algorithms.segmented_sum, 5 segs", host(seg), ref, 1e-3,
                 time.perf_counter() - t)
    return ok


def main() -> int:
    where, dev, host, stream = _backend()
    print(f"tilecore {ct.__version__}: running sample kernels on the {where}")
    rng = np.random.default_rng(0)
    ok = True

    n = 100_003
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    c = dev(np.zeros(n, np.float32))
    t = time.perf_counter()
    ct.launch(stream, (ct.cdiv(n, 1024),), vec_add, (dev(a), dev(b), c, 1024))
    ok &= _check(f"vec_add, n={n}", host(c), a.astype(np.float64) + b, 1e-6,
                 time.perf_counter() - t)

    x = rng.standard_normal((64, 1000)).astype(np.float32)
    y = dev(np.zeros_like(x))
    t = time.perf_counter()
    ct.launch(stream, (64,), softmax_rows, (dev(x), y, 1024))
    ref = np.exp(x - x.max(1, keepdims=True))
    ok &= _check("softmax over rows, 64 x 1000", host(y), ref / ref.sum(1, keepdims=True), 1e-6,
                 time.perf_counter() - t)

    src = rng.standard_normal(1000).astype(np.float32)
    dst = dev(np.zeros(1000, np.float32))
    t = time.perf_counter()
    ct.launch(stream, (ct.cdiv(1000, 256),), gather_reverse, (dev(src), dst, 256))
    ok &= _check("gather/scatter reversal, n=1000", host(dst), src[::-1], 0.0,
                 time.perf_counter() - t)

    arr = rng.standard_normal(5000).astype(np.float32)
    out = dev(np.zeros(1, np.float32))
    t = time.perf_counter()
    ct.launch(stream, (1,), tile_sum, (dev(arr), out, 512))
    ok &= _check("loop + reduction, sum of 5000", host(out), [arr.astype(np.float64).sum()],
                 1e-3, time.perf_counter() - t)

    ok &= _algorithms(dev, host, stream, rng)

    t = time.perf_counter()
    compiled = ct.compile(vec_add, (a, b, a, 1024), arch="sm_90")
    print(f"  ok   tilecore.compile(vec_add, arch='sm_90'): {len(compiled.cubin)} bytes of cubin, "
          f"{compiled.block_threads} threads per block ({(time.perf_counter() - t) * 1e3:.1f} ms)")

    print("all checks passed" if ok else "SOME CHECKS FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
