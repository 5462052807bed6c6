"""Host overhead of a cached launch of a small kernel: median host time of
one launch call (no synchronization inside the timed region), for tilecore,
Triton, CuPy element-wise and PyTorch, measured in one run, in interleaved
rounds (the host is a VM whose speed drifts within seconds). tilecore launches
with programmatic dependent launch (cuLaunchKernelEx with one attribute) on
sm_90+; "no PDL" is the same kernel with TILECORE_PDL=0 (cuLaunchKernel).

    python benchmarks/bench_launch.py [--out DIR]
"""
from __future__ import annotations

import statistics
import time

import cupy as cp
import torch

import tilecore as ct
from kernels import triton_add
from common import device_info, parse_out, plain_order, print_table, write_json

N = 1024
LAUNCHES = 20000
SYNC_EVERY = 200


@ct.kernel
def small_add(a, b, c, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    ct.store(c, index=(bid,), tile=ct.load(a, index=(bid,), shape=(TILE,)) +
             ct.load(b, index=(bid,), shape=(TILE,)))


def host_us(cases: dict, rounds: int = 10) -> dict:
    """Median, p10 and p90 host time of one call of each case (name -> (fn,
    sync)), no synchronization inside the timed region. The cases take turns,
    LAUNCHES / rounds calls at a time, so that a busy stretch of the (virtual)
    host hits all of them alike."""
    samples: dict = {name: [] for name in cases}
    clock = time.perf_counter_ns
    for _ in range(rounds):
        for name, (fn, sync) in cases.items():
            for _ in range(50):
                fn()
            sync()
            out = samples[name]
            for i in range(LAUNCHES // rounds):
                t0 = clock()
                fn()
                out.append(clock() - t0)
                if i % SYNC_EVERY == SYNC_EVERY - 1:
                    sync()
            sync()
    stats = {}
    for name, values in samples.items():
        values.sort()
        stats[name] = {"median_us": statistics.median(values) / 1e3,
                       "p10_us": values[len(values) // 10] / 1e3,
                       "p90_us": values[9 * len(values) // 10] / 1e3}
    return stats


def breakdown(a, b, c, raw, stream, sync) -> dict:
    """Where tilecore's launch time goes: argument extraction, the whole
    Python path without the driver call, and the launchers (the C extension,
    cuda.bindings through tilecore's fallback, a bare cuda.bindings call)."""
    from cuda.bindings import driver as drv
    from tilecore.host import gpu
    from tilecore.runtime.arrays import array_fields
    from tilecore.runtime.bindings_driver import BindingsDriver
    from tilecore.runtime.params import ParamBuffer, param_offsets
    from tilecore.runtime.streams import stream_handle
    args = (a, b, c, N)
    key, flat, _ = gpu._scan(small_add, args)
    plan = small_add.backend_cache[(0, key)]
    loaded = plan.loaded
    values = tuple(flat)
    fmt = loaded.param_format
    bindings = BindingsDriver(drv).Launcher(loaded.device.context, loaded.function,
                                            loaded.block_threads, 0, 1, fmt[1:],
                                            param_offsets(fmt), 0)
    buffer = ParamBuffer(fmt)
    buffer.pack(values)
    fn, threads, params = loaded.function, loaded.block_threads, buffer.kernel_params

    def bare(keep_alive=buffer):  # params points into buffer's memory
        err, = drv.cuLaunchKernel(fn, 1, 1, 1, threads, 1, 1, 0, raw, params, 0)
        if err:
            raise RuntimeError(f"bare cuLaunchKernel failed: {err}")

    c_launch = loaded.launcher.launch
    noop = lambda: None  # noqa: E731
    cupy_args = (cp.asarray(a), cp.asarray(b), cp.asarray(c), N)
    ct.launch(raw, (1,), small_add, cupy_args)  # validates these arrays
    ct.launch(raw, (1,), small_add, args)
    from tilecore.host.fastpath import make_fast_launch
    validated = small_add.backend_cache["validated"]
    cupy_key = gpu._scan(small_add, cupy_args)[0]

    noop_launcher = type("NoLaunch", (), {"launch": staticmethod(lambda *v: 0)})()

    def guards_only(key, example, native):
        """A fast launcher whose launch does nothing: the argument work alone
        (as installed in a one-GPU process)."""
        return make_fast_launch(key, example, 0, validated, noop_launcher, None, native=native,
                                only_device=True)

    stages = {}
    for native in (True, False):
        impl = "C" if native else "Python"
        fast_torch = guards_only(key, args, native)
        fast_cupy = guards_only(cupy_key, cupy_args, native)
        assert fast_torch(raw, (1,), args) and fast_cupy(raw, (1,), cupy_args)
        stages[f"stage: {impl} fast launcher, no launch (torch args)"] = (
            lambda f=fast_torch: f(raw, (1,), args), noop)
        stages[f"stage: {impl} fast launcher, no launch (CuPy args)"] = (
            lambda f=fast_cupy: f(raw, (1,), cupy_args), noop)
    return {
        **stages,
        "stage: 3x array_fields(torch)": (
            lambda: (array_fields(a, "a"), array_fields(b, "b"), array_fields(c, "c")), noop),
        "stage: _scan (args -> key, values)": (lambda: gpu._scan(small_add, args), noop),
        "stage: LoadedKernel.launch": (lambda: loaded.launch(raw, (1, 1, 1), values), sync),
        "stage: C launcher (pack + context check + cuLaunchKernel[Ex])": (
            lambda: c_launch(raw, 1, 1, 1, values), sync),
        "stage: cuda.bindings launcher (fallback)": (
            lambda: bindings.launch(raw, 1, 1, 1, values), sync),
        "stage: bare cuLaunchKernel (cuda.bindings)": (bare, sync),
        "stage: stream_handle(torch stream)": (lambda: stream_handle(stream), noop),
    }


def main() -> None:
    out = parse_out()
    a = torch.randn(N, device="cuda")
    b = torch.randn(N, device="cuda")
    c = torch.empty_like(a)
    ca, cb, cc = cp.asarray(a), cp.asarray(b), cp.asarray(c)
    stream = torch.cuda.current_stream()
    raw = stream.cuda_stream
    own = torch.cuda.Stream().cuda_stream  # PyTorch creates its streams non-blocking
    sync = torch.cuda.synchronize
    plain = plain_order(small_add, lambda k: ct.launch(stream, (1,), k, (a, b, c, N)))
    cases = {
        "tilecore (torch stream)": (
            lambda: ct.launch(stream, (1,), small_add, (a, b, c, N)), sync),
        "tilecore, no PDL (torch stream)": (
            lambda: ct.launch(stream, (1,), plain, (a, b, c, N)), sync),
        "tilecore (raw handle)": (lambda: ct.launch(raw, (1,), small_add, (a, b, c, N)), sync),
        "tilecore (cupy arrays)": (lambda: ct.launch(raw, (1,), small_add, (ca, cb, cc, N)),
                                   sync),
        "tilecore (torch tensors, non-blocking stream)": (
            lambda: ct.launch(own, (1,), small_add, (a, b, c, N)), sync),
        "triton": (lambda: triton_add[(1,)](a, b, c, N, BLOCK=N), sync),
        "cupy elementwise": (lambda: cp.add(ca, cb, out=cc), sync),
        "torch.add": (lambda: torch.add(a, b, out=c), sync),
    }
    for fn, _ in cases.values():  # compile, load and validate before the breakdown reads them
        fn()
    sync()
    cases.update(breakdown(a, b, c, raw, stream, sync))
    results = host_us(cases)
    print_table(f"host time per cached launch, us ({LAUNCHES} launches)",
                ["launcher", "median", "p10", "p90"],
                [[k, round(v["median_us"], 2), round(v["p10_us"], 2), round(v["p90_us"], 2)]
                 for k, v in results.items()])
    path = write_json(out, "launch", {**device_info(), "results": results})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
