"""Row softmax and row layer-norm over 16384 rows of 1024 and 4096 columns,
float32 and bfloat16: tilecore tile kernels (written in cuTile style) beside
torch.softmax / torch.nn.functional.layer_norm and Triton kernels, with the
copy bandwidth of the same run. GB/s counts the bytes that must move (input
read once, output written once; layer-norm also reads weight and bias).
Timed in the steady state (common.steady_ms: back-to-back calls over rotating
buffers, many calls between two events). "tilecore, no PDL" is the same
kernel launched in plain stream order (TILECORE_PDL=0), without programmatic
dependent launch; "triton, PDL" is Triton's kernel with `gdc_wait()` first,
launched with `launch_pdl=True`.

    python benchmarks/bench_rows.py [--out DIR] [--sweep] [--repeat N]

--sweep first prints each kernel at 64-512 threads as a percent of Triton's, with its
registers and resident blocks per SM.

--repeat N reports each cell's median over N interleaved rounds.
"""
from __future__ import annotations

import functools
import statistics
import sys

import torch
import triton
import triton.language as tl

import tilecore as ct
from tilecore.samples import softmax_rows as softmax
from common import (buffer_sets, copy_bandwidth_gbs, device_info, parse_out, plain_order,
                    print_table, steady_ms, write_json)

ROWS = 16384


@ct.kernel
def softmax_approx(x, y, N: ct.Constant[int]):
    """softmax with the hardware's approximate exp and division, as NVIDIA's TileGym
    writes its cuTile softmax (and the math Triton's kernel uses)."""
    row = ct.bid(0)
    t = ct.load(x, index=(row, 0), shape=(1, N), padding_mode=ct.PaddingMode.NEG_INF)
    t = t.astype(ct.float32)
    e = ct.exp(t - ct.max(t, axis=1, keepdims=True), rounding_mode=ct.RoundingMode.APPROX)
    s = ct.sum(e, axis=1, keepdims=True)
    ct.store(y, index=(row, 0),
             tile=ct.truediv(e, s, rounding_mode=ct.RoundingMode.APPROX,
                             flush_to_zero=True).astype(y.dtype))


@ct.kernel
def layer_norm(x, w, b, y, eps, N: ct.Constant[int]):
    row = ct.bid(0)
    t = ct.load(x, index=(row, 0), shape=(1, N), padding_mode=ct.PaddingMode.ZERO)
    t = t.astype(ct.float32)
    mean = ct.sum(t, axis=1, keepdims=True) / N
    d = t - mean
    rstd = ct.rsqrt(ct.sum(d * d, axis=1, keepdims=True) / N + eps)
    wt = ct.load(w, index=(0,), shape=(N,)).astype(ct.float32)
    bt = ct.load(b, index=(0,), shape=(N,)).astype(ct.float32)
    ct.store(y, index=(row, 0), tile=(d * rstd * wt + bt).astype(y.dtype))


@triton.jit
def triton_softmax(x_ptr, y_ptr, stride, n_cols, BLOCK: tl.constexpr, PDL: tl.constexpr = False):
    if PDL:  # launched with launch_pdl=True: wait for the previous kernel first
        tl.extra.cuda.gdc_wait()
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride + offs, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * stride + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def triton_layer_norm(x_ptr, w_ptr, b_ptr, y_ptr, stride, n_cols, eps, BLOCK: tl.constexpr,
                      PDL: tl.constexpr = False):
    if PDL:
        tl.extra.cuda.gdc_wait()
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride + offs, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    d = tl.where(mask, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + offs, mask=mask).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask).to(tl.float32)
    tl.store(y_ptr + row * stride + offs, (d * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)


def _warps(n: int) -> int:
    return 4 if n <= 1024 else 8 if n <= 4096 else 16


def _inputs(dtype: torch.dtype, n: int) -> tuple:
    """(bytes one call moves, the (x, y) buffer sets to rotate over, weight, bias)."""
    nbytes = 2 * ROWS * n * dtype.itemsize
    sets = [(torch.randn(ROWS, n, device="cuda", dtype=dtype),
             torch.empty(ROWS, n, device="cuda", dtype=dtype))
            for _ in range(buffer_sets(nbytes))]
    return (nbytes, sets, torch.randn(n, device="cuda", dtype=dtype),
            torch.randn(n, device="cuda", dtype=dtype))


def _resident(kernel, args, threads: int) -> str:
    """"[registers, resident blocks per SM]" of `kernel`'s build for `args`."""
    from tilecore.backend.cuda.occupancy import blocks_per_sm
    arch = "sm_{}{}".format(*torch.cuda.get_device_capability())
    registers = ct.compile(kernel, args, arch=arch).registers
    return f"[{registers}, {blocks_per_sm(threads, registers, arch)}]" if registers else ""


def sweep(stream, repeat: int) -> None:
    """Block sizes beside each other (to choose the compiler's default): percent of
    Triton's kernel, with each build's registers and resident blocks per SM."""
    rows = []
    sizes = (64, 128, 256, 512)
    for dtype in (torch.bfloat16, torch.float32):
        for n in (1024, 4096):
            nbytes, sets, w, b = _inputs(dtype, n)
            fns = {"softmax": [functools.partial(
                       triton_softmax[(ROWS,)], x, y, n, n, BLOCK=n, num_warps=_warps(n))
                       for x, y in sets],
                   "layer_norm": [functools.partial(
                       triton_layer_norm[(ROWS,)], x, w, b, y, n, n, 1e-5, BLOCK=n,
                       num_warps=_warps(n)) for x, y in sets]}
            built = {}
            for name, base in (("softmax", softmax), ("approx", softmax_approx),
                               ("layer_norm", layer_norm)):
                for threads in sizes:
                    k = ct.kernel(num_threads=threads)(base.pyfunc)
                    args = [(x, y, n) if name != "layer_norm" else (x, w, b, y, 1e-5, n)
                            for x, y in sets]
                    fns[(name, threads)] = [functools.partial(ct.launch, stream, (ROWS,), k, a)
                                            for a in args]
                    built[(name, threads)] = _resident(k, args[0], threads)
            times = _interleaved_medians(fns, repeat)
            for name in ("softmax", "approx", "layer_norm"):
                ref = times["layer_norm" if name == "layer_norm" else "softmax"]
                rows.append([name, str(dtype).replace("torch.", ""), n] +
                            [f"{100 * ref / times[(name, t)]:.1f}% {built[(name, t)]}"
                             for t in sizes])
    print_table("num_threads sweep: % of Triton's kernel [registers, resident blocks per SM]",
                ["op", "dtype", "cols"] + [str(t) for t in sizes], rows)


def _interleaved_medians(fns: dict, repeat: int) -> dict:
    """Median time of each entry (a list of calls over buffer sets, for
    steady_ms) over `repeat` rounds that run every entry once in turn, so that
    a slow stretch of the machine hits all of them alike."""
    samples: dict = {k: [] for k in fns}
    for _ in range(repeat):
        for k, f in fns.items():
            samples[k].append(steady_ms(f))
    return {k: statistics.median(v) for k, v in samples.items()}


def _plain_kernels(x, y, w, b, stream) -> dict:
    """softmax and layer_norm launched in plain stream order (no programmatic
    dependent launch), by name."""
    n = x.shape[1]
    return {"softmax": plain_order(softmax, lambda k: ct.launch(stream, (ROWS,), k, (x, y, n))),
            "layer_norm": plain_order(layer_norm, lambda k: ct.launch(
                stream, (ROWS,), k, (x, w, b, y, 1e-5, n)))}


def _check(x, y, w, b, stream, plain: dict) -> None:
    """tilecore's kernels against torch in float32 on one input."""
    n = x.shape[1]
    ref = torch.softmax(x.float(), dim=1)
    tol = 1e-5 if x.dtype == torch.float32 else 1e-2
    for kernel in (softmax, softmax_approx, plain["softmax"]):
        y.fill_(float("nan"))
        ct.launch(stream, (ROWS,), kernel, (x, y, n))
        assert torch.allclose(y.float(), ref, atol=tol, rtol=tol), f"{kernel.__name__} is wrong"
    ref = torch.nn.functional.layer_norm(x.float(), (n,), w.float(), b.float(), 1e-5)
    for kernel in (layer_norm, plain["layer_norm"]):
        y.fill_(float("nan"))
        ct.launch(stream, (ROWS,), kernel, (x, w, b, y, 1e-5, n))
        assert torch.allclose(y.float(), ref, atol=20 * tol, rtol=tol), "layer_norm is wrong"


def _cases(stream, n: int, w, b, plain: dict) -> dict:
    """Each op's contenders, as functions of one (x, y) buffer set."""
    eps = 1e-5
    return {
        "softmax": {
            "tilecore": lambda x, y: ct.launch(stream, (ROWS,), softmax, (x, y, n)),
            "tilecore, no PDL": lambda x, y: ct.launch(stream, (ROWS,), plain["softmax"],
                                                       (x, y, n)),
            "tilecore (approx)": lambda x, y: ct.launch(stream, (ROWS,), softmax_approx,
                                                        (x, y, n)),
            "torch": lambda x, y: torch.softmax(x, dim=1),
            "triton": lambda x, y: triton_softmax[(ROWS,)](x, y, n, n, BLOCK=n,
                                                           num_warps=_warps(n)),
            "triton, PDL": lambda x, y: triton_softmax[(ROWS,)](
                x, y, n, n, BLOCK=n, PDL=True, num_warps=_warps(n), launch_pdl=True),
        },
        "layer_norm": {
            "tilecore": lambda x, y: ct.launch(stream, (ROWS,), layer_norm,
                                               (x, w, b, y, eps, n)),
            "tilecore, no PDL": lambda x, y: ct.launch(stream, (ROWS,), plain["layer_norm"],
                                                       (x, w, b, y, eps, n)),
            "torch": lambda x, y: torch.nn.functional.layer_norm(x, (n,), w, b, eps),
            "triton": lambda x, y: triton_layer_norm[(ROWS,)](x, w, b, y, n, n, eps, BLOCK=n,
                                                              num_warps=_warps(n)),
            "triton, PDL": lambda x, y: triton_layer_norm[(ROWS,)](
                x, w, b, y, n, n, eps, BLOCK=n, PDL=True, num_warps=_warps(n), launch_pdl=True),
        },
    }


def main() -> None:
    out = parse_out()
    repeat = int(sys.argv[sys.argv.index("--repeat") + 1]) if "--repeat" in sys.argv else 1
    if "--sweep" in sys.argv:
        sweep(torch.cuda.current_stream(), repeat)
    copy_gbs = copy_bandwidth_gbs()
    stream = torch.cuda.current_stream()
    rows, records = [], []
    for dtype in (torch.float32, torch.bfloat16):
        for n in (1024, 4096):
            nbytes, sets, w, b = _inputs(dtype, n)
            plain = _plain_kernels(*sets[0], w, b, stream)
            _check(*sets[0], w, b, stream, plain)
            for op, contenders in _cases(stream, n, w, b, plain).items():
                fns = {k: [functools.partial(f, x, y) for x, y in sets]
                       for k, f in contenders.items()}
                moved = nbytes + (2 * n * dtype.itemsize if op == "layer_norm" else 0)
                times = _interleaved_medians(fns, repeat)
                gbs = {k: moved / ms / 1e6 for k, ms in times.items()}
                dname = str(dtype).replace("torch.", "")
                rows.append([op, dname, f"{ROWS}x{n}", round(gbs["tilecore"], 1),
                             round(gbs["tilecore, no PDL"], 1),
                             round(gbs["tilecore (approx)"], 1) if op == "softmax" else "",
                             round(gbs["torch"], 1), round(gbs["triton"], 1),
                             round(gbs["triton, PDL"], 1),
                             f"{100 * gbs['tilecore'] / gbs['triton']:.1f}%",
                             f"{100 * gbs['tilecore, no PDL'] / gbs['triton']:.1f}%",
                             f"{100 * gbs['tilecore'] / gbs['triton, PDL']:.1f}%",
                             f"{100 * gbs['tilecore (approx)'] / gbs['triton']:.1f}%"
                             if op == "softmax" else "",
                             f"{100 * gbs['tilecore'] / copy_gbs:.1f}%"])
                records.append({"op": op, "dtype": dname, "rows": ROWS, "cols": n,
                                "buffer_sets": len(sets), "ms": times, "gbs": gbs})
    print_table(f"row kernels, GB/s (copy bandwidth {copy_gbs:.0f} GB/s)",
                ["op", "dtype", "shape", "tilecore", "tilecore, no PDL", "tilecore, approx",
                 "torch", "triton", "triton, PDL", "tilecore/triton", "no PDL/triton",
                 "tilecore/triton PDL", "approx/triton", "tilecore/copy"], rows)
    path = write_json(out, "rows", {**device_info(), "copy_gbs": copy_gbs, "results": records})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
