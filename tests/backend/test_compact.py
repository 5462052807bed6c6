"""Compact code for long kernels (backend/cuda/fusion.py, outline.py): a kernel
whose fully unrolled code would be large fuses each run of element-wise ops
into one loop over the thread's elements, keeps long loops rolled, and emits
its blocks in outlined segments, so that its C++ grows linearly with its ops
and no function grows with it (NVVM's time is superlinear in a function's
size). Small kernels are emitted exactly as before.

The kernels below run in the interpreter against NumPy references with the
compact path forced on (tiny segments, so every kind of op crosses segment
boundaries); the suite's conftest compiles each launch for sm_80 and sm_90
and, on a GPU, checks its results against the interpreter's."""
from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tilecore as ct
import tilecore.backend.cuda.emit as emit
import tilecore.backend.cuda.outline as outline
from tilecore.backend import ArraySpec, CodegenOptions, compile_cubin, generate
from tilecore.backend.cuda.codegen import RULES
from tilecore.backend.cuda.layout import unrolled_size
from tilecore.ir.types import TileType
from tilecore.language import dtypes as D

from ir_builder import Builder
from kernels import control_kernel, dtype_kernel

F32 = TileType(D.float32, ())
SPECS = {0: ArraySpec(True, True), 1: ArraySpec(True, True), 2: ArraySpec(False, True)}


@pytest.fixture
def compact(monkeypatch):
    """Every kernel compact, outlined in segments of at most 6 ops."""
    monkeypatch.setattr(emit, "COMPACT_BUDGET", 0)
    monkeypatch.setattr(outline, "SEGMENT_OPS", 6)
    monkeypatch.setattr(outline, "MIN_SEGMENT", 2)


def _chain(lines: int, n: int = 256):
    """x, y loaded as (n,) float32; `lines` lines alternating
    x = x * 1.5 + y and y = exp(x) - y; x + y stored."""
    b = Builder(f"chain{lines}")
    a, c = b.array("a", D.float32, 1), b.array("c", D.float32, 1)
    bid = b.op("bid", (), (TileType(D.int32, ()),), axis=0)
    x, y = b.load(a, [bid], (n,)), b.load(a, [bid], (n,))
    t = x.type
    for i in range(lines):
        if i % 2 == 0:
            k = b.op("broadcast", (b.const(1.5, D.float32),), (t,), shape=(n,))
            x = b.binary("add", b.binary("mul", x, k), y)
        else:
            y = b.binary("sub", b.op("unary", (x,), (t,), fn="exp"), y)
    b.store(c, b.binary("add", x, y), [bid])
    return b.fn


def _functions(source: str) -> list[list[str]]:
    """The lines of each function definition in a generated source."""
    out, current = [], None
    for line in source.splitlines():
        if line.startswith(("static __device__", 'extern "C"')):
            current = [line]
            out.append(current)
        elif current is not None:
            current.append(line)
            if line == "}":
                current = None
    return out


# --- structure ----------------------------------------------------------------

def test_unrolled_size_counts_each_op_once_per_element_per_thread():
    # 32 threads, 8 elements per thread of a 256-element tile: bid and the constant
    # count 1 each; two loads, broadcast, mul, add, exp, sub, the final add and the
    # store 8 each
    assert unrolled_size(_chain(2), 32, 4) == 2 + 9 * 8
    assert unrolled_size(_chain(2), 256, 4) == 2 + 9 * 1
    # a reduction: its operand's elements per thread and its block-wide steps
    b = Builder()
    t = b.op("iota", (), (TileType(D.int32, (256,)),), shape=(256,), dtype=D.int32)
    b.op("reduce", (t,), (TileType(D.int32, ()),), fn="sum", axes=(0,), keepdims=False)
    assert unrolled_size(b.fn, 32, 4) == 8 + (8 + 32)


@pytest.mark.parametrize("dt", [D.float32, D.bfloat16, D.int64], ids=lambda d: d.name)
def test_small_kernels_stay_fully_unrolled_and_inline(dt):
    for fn in (dtype_kernel(dt).fn, _chain(40)):
        src = generate(fn, SPECS, CodegenOptions()).source
        assert "#pragma unroll 1" not in src and "__noinline__" not in src


def test_long_chain_is_compact_and_linear_in_size():
    small = generate(_chain(600), SPECS, CodegenOptions()).source
    large = generate(_chain(2400), SPECS, CodegenOptions()).source
    for src in (small, large):
        assert "#pragma unroll 1" in src and "__noinline__" in src
    ratio = large.count("\n") / small.count("\n")
    assert 3.6 < ratio < 4.4, ratio
    # each function (the kernel and every outlined segment) stays bounded
    longest = [max(len(f) for f in _functions(s)) for s in (small, large)]
    assert longest[1] <= 1.1 * longest[0], longest
    assert len(_functions(large)) > 3 * len(_functions(small))


def test_fused_run_gives_fragments_only_to_values_used_later(compact, monkeypatch):
    monkeypatch.setattr(outline, "SEGMENT_OPS", 10 ** 6)  # no outlining: one function
    monkeypatch.setattr(outline, "MIN_SEGMENT", 10 ** 6)
    src = generate(_chain(8), SPECS, CodegenOptions()).source
    # fragments for the two loads and the stored sum; one loop computes the 8 lines
    # (two ops each: the broadcast of the constant reads it in place) and the sum
    assert len(re.findall(r"tc::Frag<float, 8> v\d+;", src)) == 3
    assert len(re.findall(r"const float u\d+ = ", src)) == 8 * 2 + 1
    assert src.count("for (int k = 0; k < 8; ++k)") == 1
    assert "#pragma unroll 1\n  for (int k = 0; k < 8; ++k)" in src


def test_reduction_folds_in_the_loop_of_its_operand(compact, monkeypatch):
    monkeypatch.setattr(outline, "MIN_SEGMENT", 10 ** 6)
    b = Builder()
    a = b.array("a", D.float32, 1)
    bid = b.op("bid", (), (TileType(D.int32, ()),), axis=0)
    x = b.load(a, [bid], (256,))
    e = b.op("unary", (x,), (x.type,), fn="exp")
    s = b.op("reduce", (e,), (TileType(D.float32, ()),), fn="sum", axes=(0,), keepdims=False)
    b.op("scatter", (a, s, bid), (), has_mask=False, check_bounds=True)
    src = generate(b.fn, {0: ArraySpec(True, True)}, CodegenOptions()).source
    loop = src[src.index("auto acc"):src.index("tc_allreduce<tc::RSum<float>, 32>(acc")]
    assert "tc::op_exp(v" in loop and "acc4 = tc::RSum<float>::combine(acc4" in loop
    assert "tc::Frag<float, 8> v4" not in src  # exp's result needs no fragment


def test_row_broadcast_is_staged_in_the_loop_that_reads_it(compact, monkeypatch):
    """x - sum(x, axis=1) on (64, 64): the broadcast of the row sums is read in
    the subtraction's loop (staged once before it), not copied to a fragment."""
    monkeypatch.setattr(outline, "MIN_SEGMENT", 10 ** 6)
    b = Builder()
    a, c = b.array("a", D.float32, 2), b.array("c", D.float32, 2)
    bid = b.op("bid", (), (TileType(D.int32, ()),), axis=0)
    x = b.load(a, [bid, bid], (64, 64))
    s = b.op("reduce", (x,), (TileType(D.float32, (64, 1)),), fn="sum", axes=(1,),
             keepdims=True)
    t = b.op("broadcast", (s,), (x.type,), shape=(64, 64))
    b.store(c, b.binary("sub", x, t), [bid, bid])
    src = generate(b.fn, {0: ArraySpec(True, True), 1: ArraySpec(True, True)},
                   CodegenOptions()).source
    name = re.search(r"(sm\d+)\[\(e / 64\)\]", src).group(1)
    loop = src[src.index(f"const float u{t.id} = {name}[(e / 64)];") - 200:]
    assert "tc::op_sub(" in loop
    assert f"tc::Frag<float, 8> v{t.id};" not in src  # the broadcast needs no fragment


def test_staged_reductions_share_one_function_and_shared_memory_is_declared_once(
        compact, monkeypatch):
    """Row sums of (64, 64) tiles in a compact kernel: the staging, barriers and
    folds of every call site are one `__noinline__` function, defined once;
    the dynamic shared memory is declared once, at file scope, ahead of every
    function that uses it (declarations in each function drew NVRTC's warning
    "name linkage conflicts with previous declaration")."""
    monkeypatch.setattr(outline, "SEGMENT_OPS", 4)
    b = Builder()
    a, c = b.array("a", D.float32, 2), b.array("c", D.float32, 2)
    bid = b.op("bid", (), (TileType(D.int32, ()),), axis=0)
    x = b.load(a, [bid, bid], (64, 64))
    for _ in range(3):
        s = b.op("reduce", (x,), (TileType(D.float32, (64, 1)),), fn="sum", axes=(1,),
                 keepdims=True)
        x = b.binary("sub", x, b.op("broadcast", (s,), (x.type,), shape=(64, 64)))
    b.store(c, x, [bid, bid])
    g = generate(b.fn, {0: ArraySpec(True, True), 1: ArraySpec(True, True)}, CodegenOptions())
    src = g.source
    defs = re.findall(r"static __device__ __noinline__ void (tc_fold_\w+)\(", src)
    assert len(defs) == 1 and src.count(defs[0] + "(") == 1 + 3
    decl = "extern __shared__ __align__(16) unsigned char tc_smem[];"
    head, kernel = src.split('extern "C"')
    assert head.count(decl) == 1 and head.index(decl) < head.index("static __device__")
    assert head.count("tc_smem") > 1  # used by the functions
    assert compile_cubin(src, "sm_90", kernel_name=g.entry)[:4] == b"\x7fELF"


def test_generated_code_is_identical_across_processes():
    script = textwrap.dedent("""
        import sys
        sys.path[:0] = [sys.argv[1]]
        import test_compact
        from tilecore.backend import CodegenOptions, generate
        print(generate(test_compact._chain(700), test_compact.SPECS, CodegenOptions()).source)
    """)
    here = str(__import__("pathlib").Path(__file__).parent)
    outs = {subprocess.run([sys.executable, "-c", script, here], capture_output=True, text=True,
                           check=True, env={**__import__("os").environ, "PYTHONHASHSEED": seed}
                           ).stdout for seed in ("1", "2")}
    assert len(outs) == 1
    assert "__noinline__" in outs.pop()


def test_segment_that_returns_from_the_kernel_stays_inline(compact, monkeypatch):
    """A device check ends the kernel with `return`; in an outlined function
    it would only end the segment, so such a segment is emitted inline."""
    store = RULES["store"]

    def checked_store(ctx, op):
        ctx.line("if (blockIdx.x > 1000000) return;")
        store(ctx, op)

    monkeypatch.setitem(RULES, "store", checked_store)
    src = generate(_chain(20), SPECS, CodegenOptions()).source
    functions = _functions(src)
    assert len(functions) > 2
    for f in functions[:-1]:  # the outlined segments (the kernel is last)
        assert not any("return" in line for line in f)
    assert "return;" in "\n".join(functions[-1])


@pytest.mark.parametrize("dt", D.ALL_DTYPES, ids=lambda d: d.name)
def test_every_op_compiles_compact(dt, compact):
    g = generate(dtype_kernel(dt).fn, SPECS, CodegenOptions())
    assert "__noinline__" in g.source
    for arch in ("sm_80", "sm_90"):
        assert compile_cubin(g.source, arch, kernel_name=g.entry)[:4] == b"\x7fELF"


def test_control_flow_compiles_compact(compact):
    g = generate(control_kernel().fn, {0: ArraySpec(False, False)}, CodegenOptions())
    assert "__noinline__" in g.source
    for arch in ("sm_80", "sm_90"):
        assert compile_cubin(g.source, arch, kernel_name=g.entry)[:4] == b"\x7fELF"


# --- behaviour (interpreter; the conftest compiles and, on a GPU, compares) -------

@ct.kernel
def chain(a, b, out, iout, hout, alpha, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    x = ct.load(a, index=(bid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    y = ct.load(b, index=(bid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    s = alpha * 0.5 + 1.0
    x = x * s + y
    y = ct.exp(x * -0.25) - y / 4.0
    x = ct.where(x > y, x - y, y - x)
    y = ct.maximum(x, y) / s
    x = ct.sqrt(ct.abs(x) + 1.0) - y
    ct.store(out, index=(bid,), tile=x + y * 0.5)
    i = ct.arange(TILE, dtype=ct.int32) + bid * TILE
    ct.store(iout, index=(bid,), tile=(i * 7 + 3) % 11 - i // 3)
    h = ct.load(b, index=(bid,), shape=(16,))  # fewer elements than threads
    ct.store(hout, index=(bid,), tile=ct.max(h * 3.0 - 1.0, axis=0, keepdims=True))


def test_chain(compact):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 1000)).astype(np.float32)
    out, iout, hout = np.empty(1000, np.float32), np.empty(1000, np.int32), np.empty(4, np.float32)
    ct.launch(None, (4,), chain, (a, b, out, iout, hout, np.float32(0.75), 256))
    x, y, s = a.astype(np.float64), b.astype(np.float64), 0.75 * 0.5 + 1.0
    x = x * s + y
    y = np.exp(x * -0.25) - y / 4.0
    x = np.where(x > y, x - y, y - x)
    y = np.maximum(x, y) / s
    x = np.sqrt(np.abs(x) + 1.0) - y
    np.testing.assert_allclose(out, x + y * 0.5, rtol=1e-5, atol=1e-6)
    i = np.arange(1000)
    np.testing.assert_array_equal(iout, (i * 7 + 3) % 11 - i // 3)
    h = b.astype(np.float64)[:64].reshape(4, 16)
    np.testing.assert_allclose(hout, (h * 3.0 - 1.0).max(axis=1), rtol=1e-6)


@ct.kernel
def rows(x, y, amax, N: ct.Constant[int]):
    row = ct.bid(0)
    t = ct.load(x, index=(row, 0), shape=(1, N), padding_mode=ct.PaddingMode.ZERO)
    t = t.astype(ct.float32)
    e = ct.exp(t - ct.max(t, axis=1, keepdims=True))
    p = e / ct.sum(e, axis=1, keepdims=True)
    d = p - ct.sum(p, axis=1, keepdims=True) / N
    ct.store(y, index=(row, 0), tile=(d * 2.0 + p).astype(y.dtype))
    ct.store(amax, index=(row,), tile=ct.argmax(t * -1.0, axis=1))


def test_rows_with_reductions_and_packed_half_loads(compact):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((6, 512)).astype(np.float16)
    y, amax = np.empty_like(x), np.empty(6, np.int32)
    ct.launch(None, (6,), rows, (x, y, amax, 512))
    t = x.astype(np.float64)
    e = np.exp(t - t.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    d = p - p.sum(axis=1, keepdims=True) / 512
    np.testing.assert_allclose(y.astype(np.float64), d * 2.0 + p, rtol=2e-3, atol=1e-6)
    np.testing.assert_array_equal(amax, (-t).argmax(axis=1))


@ct.kernel
def tiles2d(a, out, cols, TILE: ct.Constant[int]):
    bx = ct.bid(0)
    t = ct.load(a, index=(bx, 0), shape=(TILE, TILE))
    u = ct.transpose(t) * 0.5 + t
    c = ct.sum(u, axis=0, keepdims=True)
    v = u - ct.max(u, axis=1, keepdims=True) + c * 0.25
    ct.store(out, index=(bx, 0), tile=v)
    ct.store(cols, index=(bx, 0), tile=c)


def test_two_dimensional_movement_and_axis_reductions(compact):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((64, 32)).astype(np.float32)
    out, cols = np.empty_like(a), np.empty((2, 32), np.float32)
    ct.launch(None, (2,), tiles2d, (a, out, cols, 32))
    for blk in range(2):
        t = a[32 * blk:32 * blk + 32].astype(np.float64)
        u = t.T * 0.5 + t
        c = u.sum(axis=0, keepdims=True)
        np.testing.assert_allclose(out[32 * blk:32 * blk + 32],
                                   u - u.max(axis=1, keepdims=True) + c * 0.25,
                                   rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(cols[blk], c[0], rtol=1e-5, atol=1e-5)


@ct.kernel
def loops(a, out, n, step, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    x = ct.load(a, index=(bid,), shape=(TILE,))
    acc = ct.zeros((TILE,), dtype=ct.float32)
    for i in range(0, n, step):
        x = ct.sin(x) * 0.5 + 0.25
        x = x * x - 0.125
        x = ct.cos(x) * 0.75 + x * 0.125
        if i % 2 == 0:
            acc = acc + x
        else:
            acc = acc - x * 0.5
    k = 0
    while True:
        acc = acc * 0.5 + 1.0
        k += 1
        if k >= 3:
            break
    ct.store(out, index=(bid,), tile=acc)


def test_loops_branches_and_a_runtime_step(compact):
    rng = np.random.default_rng(4)
    a = rng.standard_normal(256).astype(np.float32)
    out = np.empty_like(a)
    ct.launch(None, (2,), loops, (a, out, np.int32(7), np.int32(2), 128))
    x, acc = a.astype(np.float64).reshape(2, 128), np.zeros((2, 128))
    for i in range(0, 7, 2):
        x = np.sin(x) * 0.5 + 0.25
        x = x * x - 0.125
        x = np.cos(x) * 0.75 + x * 0.125
        acc = acc + x if i % 2 == 0 else acc - x * 0.5
    for _ in range(3):
        acc = acc * 0.5 + 1.0
    np.testing.assert_allclose(out, acc.ravel(), rtol=1e-5, atol=1e-6)


@ct.kernel
def shuffle(src, dst, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    idx = bid * TILE + ct.arange(TILE, dtype=ct.int32)
    j = (idx * 7 + 3) % TILE + bid * TILE
    ct.scatter(dst, idx, ct.gather(src, j) * 2 + 1)


def test_gather_scatter(compact):
    src = np.arange(512, dtype=np.int32) * 5 - 100
    dst = np.empty_like(src)
    ct.launch(None, (4,), shuffle, (src, dst, 128))
    idx = np.arange(512)
    np.testing.assert_array_equal(dst, src[(idx * 7 + 3) % 128 + idx // 128 * 128] * 2 + 1)


def test_long_kernel_at_the_default_thresholds(tmp_path):
    """600 lines of a contracting recurrence: compact by default."""
    body = ["bid = ct.bid(0)",
            "x = ct.load(a, index=(bid,), shape=(256,))",
            "y = ct.load(b, index=(bid,), shape=(256,))"]
    body += ["x = ct.sin(x) * 0.5 + y * 0.25" if i % 2 == 0 else
             "y = ct.cos(y) * 0.5 - x * 0.25" for i in range(600)]
    body.append("ct.store(c, index=(bid,), tile=x + y)")
    path = tmp_path / "long_kernel.py"
    path.write_text("import tilecore as ct\n\n\n@ct.kernel\ndef long_kernel(a, b, c):\n"
                    + "".join(f"    {line}\n" for line in body))
    spec = importlib.util.spec_from_file_location("long_kernel", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((2, 512)).astype(np.float32)
    c = np.empty_like(a)
    src = ct.compile(module.long_kernel, (a, b, c), arch="sm_90").source
    assert "#pragma unroll 1" in src and "__noinline__" in src
    ct.launch(None, (2,), module.long_kernel, (a, b, c))
    x, y = a.astype(np.float64), b.astype(np.float64)
    for i in range(600):
        if i % 2 == 0:
            x = np.sin(x) * 0.5 + y * 0.25
        else:
            y = np.cos(y) * 0.5 - x * 0.25
    np.testing.assert_allclose(c, x + y, rtol=1e-5, atol=1e-5)


def _long_rows_kernel():
    return ct.kernel(_rows_source.pyfunc)


@ct.kernel
def _rows_source(x, y, N: ct.Constant[int]):
    t = ct.load(x, (ct.bid(0), 0), (1, N))
    ct.store(y, (ct.bid(0), 0), t - ct.sum(t, axis=1, keepdims=True))


def test_compact_kernel_is_compiled_once_with_fast_compile(compact, monkeypatch):
    """No occupancy refit for a compact kernel (it would compile a long kernel
    twice), and ptxas's fast-compile level; the registers are still read from
    the cubin, whose outlined functions are kept apart."""
    import tilecore.host.compile as host_compile
    from tilecore.backend.cuda import nvrtc
    from tilecore.backend.cuda.cubin_info import Resources
    from tilecore.runtime.cache import CompileCache

    real, calls = host_compile.compile_cubin_report, []

    def report(source, arch, **kw):
        calls.append(kw.get("fast_compile"))
        cubin, used = real(source, arch, **kw)
        assert used is not None and used.registers > 0
        return cubin, Resources(42, 0)  # 2 registers over 3 blocks of 512 threads
    monkeypatch.setattr(host_compile, "compile_cubin_report", report)
    monkeypatch.setattr(host_compile, "default_cache", lambda: CompileCache(None))
    x = np.zeros((4, 4096), np.float32)
    got = ct.compile(_long_rows_kernel(), (x, x.copy(), 4096), arch="sm_90")
    assert "__noinline__" in got.source and "__launch_bounds__(512)" in got.source
    assert calls == [nvrtc.COMPACT_FAST_COMPILE] and nvrtc.COMPACT_FAST_COMPILE
    assert got.registers == 42


def test_compact_register_cap_through_launch_bounds(compact, monkeypatch):
    """host/compile.COMPACT_RESIDENT_THREADS: a compact kernel's launch bounds
    ask for that many resident threads per SM (off by default)."""
    import tilecore.host.compile as host_compile
    from tilecore.runtime.cache import CompileCache

    monkeypatch.setattr(host_compile, "default_cache", lambda: CompileCache(None))
    x = np.zeros((4, 4096), np.float32)
    plain = ct.compile(_long_rows_kernel(), (x, x.copy(), 4096), arch="sm_90")
    assert "__launch_bounds__(512)" in plain.source
    monkeypatch.setattr(host_compile, "COMPACT_RESIDENT_THREADS", 1024)
    capped = ct.compile(_long_rows_kernel(), (x, x.copy(), 4096), arch="sm_90")
    assert "__launch_bounds__(512, 2)" in capped.source
    assert 0 < capped.registers <= 64
