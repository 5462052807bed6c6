"""The differential fuzzer (tilecore.testing.fuzz): a CI run of a few hundred
random programs (interpreter against compile-only for sm_80/sm_90; with a
GPU, interpreter against the GPU), the oracle's tolerance rules, coverage of
the op catalog, the minimizer and reproducers, and regression tests for the
disagreements the fuzzer found."""
from __future__ import annotations

import math
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import tilecore as ct
from tilecore.language import dtypes as D
from tilecore.testing.fuzz import GenConfig, generate, run_program
from tilecore.testing.fuzz import execute
from tilecore.testing.fuzz.catalog import (NOT_FUZZED_FUNCTIONS, NOT_FUZZED_IR,
                                           catalog_keys, language_functions)
from tilecore.testing.fuzz.minimize import minimize
from tilecore.testing.fuzz.reproducer import load, save
from tilecore.testing.fuzz.runner import RunConfig, run_seeds
from tilecore.testing.fuzz.tolerance import (EXACT, ZSIGN, Tol, compare, join, math_tol,
                                             narrowed)

CPU_SEED, CPU_PROGRAMS = 1_000_000, 200
GPU_SEED, GPU_PROGRAMS = 2_000_000, 200


def _failures(results: list[dict]) -> str:
    return "\n\n".join(f"seed {r['seed']}: {r['status']} at {r['stage']}: {r['error']}\n"
                       f"{r.get('minimized_source', '')}\n{r['detail'][-1500:]}"
                       for r in results if r["status"] != "ok")


# --- the CI runs ------------------------------------------------------------------------------
@pytest.mark.interpreter_only  # the fuzzer compiles each program itself
def test_fuzz_interpreter_against_compile(tmp_path):
    """Every program runs in the interpreter (in block order and in a random
    one, which must agree) and compiles through NVRTC, alternately for sm_80
    and sm_90."""
    cfg = RunConfig(archs_per_program=1, save_dir=str(tmp_path), minimize=False)
    results = run_seeds(range(CPU_SEED, CPU_SEED + CPU_PROGRAMS), cfg, jobs=2)
    assert len(results) == CPU_PROGRAMS
    assert all(r["status"] == "ok" for r in results), _failures(results)


@pytest.mark.gpu
@pytest.mark.interpreter_only
def test_fuzz_interpreter_against_gpu(tmp_path):
    cfg = RunConfig(gpu=True, save_dir=str(tmp_path), minimize=False)
    results = run_seeds(range(GPU_SEED, GPU_SEED + GPU_PROGRAMS), cfg, jobs=4)
    assert all(r["status"] == "ok" for r in results), _failures(results)


# --- coverage of the catalog ------------------------------------------------------------------
@pytest.fixture(scope="module")
def lowered(tmp_path_factory):
    """IR op counts and sources of 300 generated programs (lowered, not run)."""
    workdir = tmp_path_factory.mktemp("fuzz")
    ops: set[str] = set()
    sources = []
    for seed in range(300):
        prog = generate(seed)
        ops |= set(execute.ir_coverage(execute.lower(prog, workdir)))
        sources.append(prog.source())
    return ops, "\n".join(sources)


@pytest.mark.interpreter_only
def test_every_ir_op_is_fuzzed_or_excused(lowered):
    ops, _ = lowered
    missing = catalog_keys() - ops - set(NOT_FUZZED_IR)
    assert not missing, f"IR ops the fuzzer never generates (add them, or a reason to " \
                        f"catalog.NOT_FUZZED_IR): {sorted(missing)}"
    assert set(NOT_FUZZED_IR) <= catalog_keys()
    assert all(reason for reason in NOT_FUZZED_IR.values())


@pytest.mark.interpreter_only
def test_every_language_function_is_fuzzed_or_excused(lowered):
    _, source = lowered
    missing = {f for f in language_functions() - set(NOT_FUZZED_FUNCTIONS)
               if f"ct.{f}(" not in source}
    assert not missing, f"tile functions the fuzzer never calls (add them, or a reason to " \
                        f"catalog.NOT_FUZZED_FUNCTIONS): {sorted(missing)}"
    assert set(NOT_FUZZED_FUNCTIONS) <= language_functions()


@pytest.mark.interpreter_only
def test_generation_is_deterministic():
    a, b = generate(77), generate(77)
    assert a.source() == b.source() and a.grid == b.grid
    for p, q in zip(a.params, b.params):
        if p.is_array:
            assert p.base.tobytes() == q.base.tobytes() and p.view == q.view
        else:
            assert repr(p.value) == repr(q.value)
    assert generate(78).source() != a.source()


@pytest.mark.interpreter_only
def test_kernel_options_leave_the_program_alone(tmp_path):
    """The vector_width option comes from a stream of its own: a seed's program is
    the same with or without it but for the decorator, and a kernel with it runs in
    the interpreter and compiles under NVRTC (a 16-item chunk: every tile's layout
    and the derived block size change)."""
    plain = generate(5, GenConfig(vector_width_chance=0.0))
    wide = generate(5, GenConfig(vector_width_chance=1.0))
    assert not plain.options and wide.options["vector_width"] in (1, 2, 8, 16)
    decorator = f"@ct.kernel(vector_width={wide.options['vector_width']})"
    assert wide.source() == plain.source().replace("@ct.kernel\n", decorator + "\n")
    assert f"option.vector_width.{wide.options['vector_width']}" in wide.features
    seeds = [s for s in range(60) if generate(s).options]     # a quarter of the programs
    assert 5 <= len(seeds) <= 30
    for v in (1, 16):
        prog = generate(7, GenConfig(vector_width_chance=1.0))
        prog.options = {"vector_width": v}
        out = run_program(prog, tmp_path, archs=("sm_90",))
        assert out.status == "ok", (v, out.stage, out.error)


# --- the oracle -------------------------------------------------------------------------------
def _f32(*values) -> np.ndarray:
    return np.array(values, np.float32)


def test_exact_is_bitwise_except_nan_payloads():
    assert compare("x", _f32(1, np.nan), _f32(1, -np.nan), EXACT) is None
    msg = compare("x", _f32(1, 0.0), _f32(1, -0.0), EXACT)
    assert msg.startswith("x: 1 element(s) differ (bit-exact); (1,)")
    one_ulp = np.nextafter(np.float32(1), np.float32(2))
    assert compare("x", _f32(one_ulp), _f32(1), EXACT) is not None
    assert compare("i", np.array([3, 4], np.int8), np.array([3, 5], np.int8), EXACT) \
        .startswith("i: 1 element(s) differ (exact); (1,): gpu 4 interp 5")


def test_zero_sign_tolerance_accepts_only_the_sign_of_zero():
    assert compare("x", _f32(0.0, 2), _f32(-0.0, 2), ZSIGN) is None
    assert compare("x", _f32(0.0, 2), _f32(1e-45, 2), ZSIGN) is not None


def test_ulp_tolerance_counts_ulps_of_its_dtype():
    tol = Tol("ulp", 2, "float32")
    x = np.float32(3.5)
    two = np.nextafter(np.nextafter(x, np.float32(9)), np.float32(9))
    assert compare("x", _f32(two), _f32(x), tol) is None
    assert compare("x", _f32(np.nextafter(two, np.float32(9))), _f32(x), tol) is not None
    big = np.finfo(np.float32).max
    assert compare("x", _f32(np.inf), _f32(big), tol) is None      # overflow: one step
    assert compare("x", _f32(np.nan), _f32(1), tol) is not None
    assert compare("x", _f32(0.0), _f32(-0.0), tol) is None
    h = Tol("ulp", 1, "float16")
    got, want = np.array([1.0], np.float16), np.array([1.0009765625], np.float16)
    assert compare("h", got, want, h) is None
    assert compare("h", got, np.array([1.001953125], np.float16), h) is not None


def test_sum_tolerance_scales_with_the_magnitudes_summed():
    tol = Tol("sum", terms=64, acc="float32")
    u = 2.0 ** -24
    shadow = np.array([1000.0])
    bound = 2 * 64 * u * 1000.0
    assert compare("s", _f32(1.0 + bound * 0.9), _f32(1.0), tol, shadow) is None
    assert compare("s", _f32(1.0 + bound * 1.5), _f32(1.0), tol, shadow) is not None
    # sums that may overflow are not checked; non-finite shadows neither
    assert compare("s", _f32(np.inf), _f32(3e38), tol, np.array([3e38])) is None
    assert compare("s", _f32(5.0), _f32(1.0), tol, np.array([np.nan])) is None
    assert compare("s", _f32(5.0), _f32(1.0), tol, None) is not None


def test_prod_tolerance_is_relative_while_no_partial_product_can_overflow():
    tol = Tol("prod", terms=8, acc="float32")
    rel = 2 * 8 * 2.0 ** -24
    assert compare("p", _f32(100 * (1 + rel / 2)), _f32(100), tol, np.array([4.0])) is None
    assert compare("p", _f32(100 * (1 + 3 * rel)), _f32(100), tol, np.array([4.0])) \
        is not None
    assert compare("p", _f32(0.0), _f32(100), tol, np.array([1e20])) is None


def test_tolerance_propagation_rules():
    assert math_tol("sqrt", D.float32) == EXACT
    assert math_tol("exp", D.float32) == Tol("ulp", 6, "float32")
    assert math_tol("exp", D.float64) == Tol("ulp", 3, "float64")
    assert math_tol("tan", D.bfloat16) == Tol("ulp", 1, "bfloat16")
    ulp = Tol("ulp", 6, "float32")
    assert narrowed(ulp, D.float32, D.float16) == Tol("ulp", 1, "float16")
    assert narrowed(ulp, D.float32, D.float64) == ulp         # still counted in float32
    assert narrowed(ulp, D.float32, D.int32) is None          # could cross an integer
    assert narrowed(ZSIGN, D.float32, D.int8) == EXACT
    # float4_e2m1fn has no NaN: a NaN's sign (the GPU's and NumPy's differ) becomes a zero's
    assert narrowed(EXACT, D.float16, D.float4_e2m1fn) == ZSIGN
    assert narrowed(EXACT, D.int32, D.float4_e2m1fn) == EXACT
    assert join(EXACT, ZSIGN) == ZSIGN and join(EXACT, ulp) is None


# --- GPU comparison, minimizer and reproducers (with a simulated GPU) -------------------------
def _broken_gpu(target: str):
    """A stand-in for the GPU run: the interpreter's results with the first
    element of array `target` changed."""
    def run(prog, kernel, grid):
        bases, args = execute._host_args(prog)
        ct.launch(None, grid, kernel, tuple(args))
        arr = prog.param(target).array(bases[target])
        flat = arr.reshape(-1) if arr.flags.c_contiguous else None
        if flat is not None and flat.size:
            flat[0] = ~flat[0] if arr.dtype.kind in "iub" else flat[0] + 1
        return bases
    return run


def _find_program(want) -> tuple:
    for seed in range(200):
        prog = generate(seed, GenConfig(max_ops=8))
        outs = [p for p in prog.params if p.role == "out" and want(prog, p)]
        if outs:
            return prog, outs[0].name
    raise AssertionError("no suitable program")


@pytest.mark.interpreter_only
def test_a_gpu_mismatch_is_found_minimized_and_replayed(tmp_path, monkeypatch):
    prog, target = _find_program(lambda prog, p: p.view is None and not p.transpose
                                 and p.base.dtype.kind in "iu"
                                 and prog.outputs[p.name].tol == EXACT)
    monkeypatch.setattr(execute, "_run_gpu", _broken_gpu(target))
    out = run_program(prog, tmp_path, gpu=True)
    assert out.status == "mismatch" and out.error == target
    assert out.detail.startswith(f"{target}: 1 element(s) differ (exact)")

    drop, best = minimize(prog, out, lambda d: run_program(prog, tmp_path, gpu=True, drop=d))
    assert best.key() == out.key()
    kept = prog.source(drop)
    assert len(kept.splitlines()) < len(prog.source().splitlines())
    assert f"{target}" in kept

    directory = save(prog, best, tmp_path / "repro", drop, gpu=True)
    assert "--replay" in (directory / "README.txt").read_text()
    again = load(directory)
    assert again.source() == kept and again.grid == prog.grid
    replayed = run_program(again, tmp_path, gpu=True)
    assert replayed.key() == out.key()
    monkeypatch.undo()
    assert run_program(again, tmp_path, archs=("sm_90",)).status == "ok"


@pytest.mark.interpreter_only
def test_reproducers_keep_dtypes_views_and_scalars(tmp_path):
    prog = next(p for p in map(generate, range(100))
                if any(q.is_array and q.base.dtype.kind == "V" for q in p.params)
                and any(q.view is not None for q in p.params))
    again = load(save(prog, execute.Outcome(prog.seed), tmp_path / "r"))
    assert again.source() == prog.source() and again.outputs == prog.outputs
    for p, q in zip(prog.params, again.params):
        assert (p.name, p.role, p.view, p.transpose) == (q.name, q.role, q.view, q.transpose)
        if p.is_array:
            assert p.base.dtype == q.base.dtype and p.base.tobytes() == q.base.tobytes()
        else:
            assert repr(p.value) == repr(q.value)


@pytest.mark.interpreter_only
def test_a_compile_failure_is_reported_with_its_stage(tmp_path, monkeypatch):
    prog = generate(5)

    def broken_compile(*args, **kwargs):
        raise ct.TileCompileError("NVRTC failed (simulated)")
    monkeypatch.setattr(ct, "compile", broken_compile)
    out = run_program(prog, tmp_path, archs=("sm_80",))
    assert (out.status, out.stage, out.error) == ("compile_error", "compile", "TileCompileError")
    assert "NVRTC failed (simulated)" in out.detail


@pytest.mark.interpreter_only
@pytest.mark.parametrize("detail", [
    "TileLaunchError: CUDA_ERROR_ILLEGAL_ADDRESS in fuzz_kernel",
    # CuPy's synchronize after the launch (seed 3900037: not recognized before, so the
    # worker minimized in a dead context, to an empty kernel, and failed 42 more programs)
    "CUDARuntimeError: cudaErrorIllegalAddress: an illegal memory access was encountered",
    "CUDARuntimeError: cudaErrorLaunchFailure: unspecified launch failure"])
def test_a_worker_whose_cuda_context_is_lost_skips_the_rest(tmp_path, monkeypatch, detail):
    """After a fault that kills the CUDA context, a worker's remaining programs
    are reported skipped (run_seeds runs them again in fresh workers), and the
    faulting program is saved unminimized."""
    from tilecore.testing.fuzz import runner
    monkeypatch.setattr(runner, "_CONTEXT_LOST", [])
    prog = generate(3)
    fault = execute.Outcome(3, "gpu_error", "gpu", "CUDARuntimeError", detail)
    info = runner._handle_failure(prog, fault, RunConfig(gpu=True, save_dir=str(tmp_path)),
                                  tmp_path)
    assert Path(info["reproducer"], "kernel.py").read_text() == prog.source()
    skipped = runner.run_seed(4, RunConfig(gpu=True), tmp_path)
    assert skipped["status"] == "skipped" and "seed 3" in skipped["error"]


def test_other_gpu_errors_leave_the_worker_running():
    from tilecore.testing.fuzz import runner
    assert not runner._context_lost("CUDARuntimeError: cudaErrorMemoryAllocation: out of memory")
    assert not runner._context_lost("mismatch in o1: gpu 0.0 interp -0.0")


# --- regressions found by the fuzzer ----------------------------------------------------------
@ct.kernel
def _convert_wide(src, to_bf16, to_tf32, to_e8m0):
    x = ct.load(src, index=(0,), shape=(4,))
    ct.store(to_bf16, index=(0,), tile=x.astype(ct.bfloat16))
    ct.store(to_tf32, index=(0,), tile=x.astype(ct.tfloat32).astype(ct.float32))
    ct.store(to_e8m0, index=(0,), tile=x.astype(ct.float8_e8m0fnu))


@pytest.mark.parametrize("dtype", [np.int64, np.uint64])
def test_wide_integers_round_once_to_narrow_floats(dtype):
    """int64/uint64 -> bfloat16, tfloat32, float8_e8m0fnu round the integer
    once (they went through float64 first, which rounds away the bits that
    decide a near-tie: 2^62 + 2^54 + 1 became bfloat16 2^62 instead of
    2^62 + 2^55)."""
    src = np.array([2**62 + 2**54 + 1, 2**62 + 2**54, 2**30 + 2**19 + 1, 3 * 2**59 - 1],
                   dtype)
    outs = [np.zeros(4, ml_dtypes.bfloat16), np.zeros(4, np.float32),
            np.zeros(4, ml_dtypes.float8_e8m0fnu)]
    ct.launch(None, (1,), _convert_wide, (src, *outs))
    bf16, tf32, e8m0 = (o.astype(np.float64) for o in outs)
    # bfloat16 keeps 8 significant bits, tfloat32 11; e8m0 rounds up from 1.5 * 2^k
    assert bf16.tolist() == [2.0**62 + 2.0**55, 2.0**62, 2.0**30, 2.0**60 + 2.0**59]
    assert tf32.tolist() == [2.0**62 + 2.0**54, 2.0**62 + 2.0**54, 2.0**30 + 2.0**20,
                             2.0**60 + 2.0**59]
    assert e8m0.tolist() == [2.0**62, 2.0**62, 2.0**30, 2.0**60]


@ct.kernel
def _double_to_narrow(src, to_tf32, to_e8m0):
    x = ct.load(src, index=(0,), shape=(4,))
    ct.store(to_tf32, index=(0,), tile=x.astype(ct.tfloat32).astype(ct.float32))
    ct.store(to_e8m0, index=(0,), tile=x.astype(ct.float8_e8m0fnu))


def test_float64_rounds_once_to_tfloat32_and_e8m0():
    """float64 -> tfloat32 and -> float8_e8m0fnu round once: through a
    rounded float32, 1.5 - 2^-30 became 1.5 (e8m0: 2 instead of 1) and a value
    a hair above a tfloat32 midpoint rounded to even."""
    mid = 1.0 + 2.0**-11            # halfway between two tfloat32 values
    src = np.array([1.5 - 2.0**-30, mid + 2.0**-40, mid - 2.0**-40, 3.0 * 2.0**-140])
    tf32, e8m0 = np.zeros(4, np.float32), np.zeros(4, ml_dtypes.float8_e8m0fnu)
    ct.launch(None, (1,), _double_to_narrow, (src, tf32, e8m0))
    assert tf32.astype(np.float64).tolist() == [1.5, 1.0 + 2.0**-10, 1.0, 0.0]
    assert e8m0.astype(np.float64).tolist()[:3] == [1.0, 1.0, 1.0]


@ct.kernel
def _int_min_by_minus_one(a, b, q, r):
    x = ct.load(a, index=(0,), shape=(4,))
    y = ct.load(b, index=(0,), shape=(4,))
    ct.store(q, index=(0,), tile=x // y)
    ct.store(r, index=(0,), tile=x % y)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_int_min_floordiv_minus_one_wraps(dtype):
    """min // -1 wraps to min and min % -1 is 0, as NumPy computes them (in C++
    both overflow, which is undefined: the GPU had no defined answer)."""
    lo = np.iinfo(dtype).min
    a = np.array([lo, lo, 7, -7], dtype)
    b = np.array([-1, 1, -1, -1], dtype)
    q, r = np.zeros(4, dtype), np.ones(4, dtype)
    ct.launch(None, (1,), _int_min_by_minus_one, (a, b, q, r))
    assert q.tolist() == [lo, lo, -7, 7] and r.tolist() == [0, 0, 0, 0]


@ct.kernel
def _by_zero(a, b, flag, q, r, kept):
    x = ct.load(a, index=(0,), shape=(4,))
    y = ct.load(b, index=(0,), shape=(4,))
    d = x // y
    m = x % y
    if flag == 0:
        ct.store(kept, index=(0,), tile=x)
    else:   # stores after a division by zero: undefined in C++, NVRTC may drop them
        ct.store(q, index=(0,), tile=d)
        ct.store(r, index=(0,), tile=m)
        ct.store(kept, index=(0,), tile=ct.where(y == 0, x, d))


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int32, np.uint32, np.int64, np.uint64])
def test_integer_floordiv_and_mod_by_zero_give_zero(dtype):
    """x // 0 and x % 0 are 0 (the interpreter's answer; undefined in the
    generated C++ before), and the code after them runs."""
    info = np.iinfo(dtype)
    a = np.array([7, info.max, info.min if info.min else 5, 9], dtype)
    b = np.array([0, 0, 0, 2], dtype)
    for flag in (0, 1):
        q, r, kept = np.full(4, 3, dtype), np.full(4, 3, dtype), np.zeros(4, dtype)
        ct.launch(None, (1,), _by_zero, (a, b, flag, q, r, kept))
        if flag:
            assert q.tolist() == [0, 0, 0, 4] and r.tolist() == [0, 0, 0, 1]
            assert kept.tolist() == [int(a[0]), int(a[1]), int(a[2]), 4]
        else:
            assert q.tolist() == r.tolist() == [3] * 4 and kept.tolist() == a.tolist()


@ct.kernel
def _div_ftz(a, b, out):
    x = ct.load(a, index=(0,), shape=(4,))
    y = ct.load(b, index=(0,), shape=(4,))
    ct.store(out, index=(0,), tile=ct.truediv(x, y, flush_to_zero=True))


def test_flush_to_zero_flushes_subnormal_operands():
    """flush_to_zero flushes subnormal operands, not only results (PTX .ftz):
    2^-20 / 2^-140 is 2^-20 / 0 = inf (not 2^120), 2^-140 / 2^-20 is 0 (not 2^-120)."""
    sub = np.float32(2.0**-140)
    a = np.array([2.0**-20, sub, -sub, 4.0], np.float32)
    b = np.array([sub, 2.0**-20, 1.0, 2.0], np.float32)
    out = np.zeros(4, np.float32)
    ct.launch(None, (1,), _div_ftz, (a, b, out))
    assert out.tolist() == [math.inf, 0.0, 0.0, 2.0]
    assert np.signbit(out[2])


# --- fixed fuzzer findings ------------------------------------------------------------------
@ct.kernel
def _shifts(x, c, flag, left, right, by_61, kept):
    t = ct.load(x, index=(0,), shape=(8,))
    n = ct.load(c, index=(0,), shape=(8,))
    ct.store(left, index=(0,), tile=t << n)
    ct.store(right, index=(0,), tile=t >> n)
    wide = t >> 61                      # a constant count past the width (8 to 64 bits)
    if flag == 0:
        ct.store(kept, index=(0,), tile=t)
    else:   # stores after an out-of-range shift: NVRTC dropped this branch while C++ called it UB
        ct.store(by_61, index=(0,), tile=wide)
        ct.store(kept, index=(0,), tile=wide + 1)


def _shift_reference(a: int, n: int, bits: int, signed: bool, left: bool) -> int:
    """The language's shift, from its definition: a count outside [0, bits)
    gives 0, or for a signed right shift the sign's fill."""
    if not 0 <= n < bits:
        return -1 if (signed and not left and a < 0) else 0
    mask = (1 << bits) - 1
    r = ((a << n) & mask) if left else (a >> n)
    return r - (1 << bits) if signed and r >= 1 << (bits - 1) else r


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
                                   np.int64, np.uint64])
def test_shift_counts_outside_the_width_are_defined(dtype):
    """A fuzzer finding, fixed: `uint16 >> 61` was undefined in the generated
    C++, and NVRTC then dropped a later branch's stores on the GPU. Counts
    outside [0, bits), negative ones included, give 0 (the sign's fill for a
    signed right shift), as NumPy and the interpreter compute them."""
    info = np.iinfo(dtype)
    bits, signed = info.bits, info.min < 0
    x = np.array([1, 3, info.max, info.min, 5, info.max // 3, 7, 100], dtype)
    if signed:
        x[4:6] = [-5, info.min + 7]
    counts = [0, 1, bits - 1, bits, bits + 3, min(61, info.max), 2, bits // 2]
    if signed:
        counts[6] = -3
    c = np.array(counts, dtype)
    for flag in (0, 1):
        left, right, by_61, kept = (np.full(8, 9, dtype) for _ in range(4))
        ct.launch(None, (1,), _shifts, (x, c, flag, left, right, by_61, kept))
        xs, cs = [int(v) for v in x], [int(v) for v in c]
        assert left.tolist() == [_shift_reference(a, n, bits, signed, True)
                                 for a, n in zip(xs, cs)]
        assert right.tolist() == [_shift_reference(a, n, bits, signed, False)
                                  for a, n in zip(xs, cs)]
        wide = [_shift_reference(a, 61, bits, signed, False) for a in xs]
        if flag:
            assert by_61.tolist() == wide
            assert kept.tolist() == [int(np.array(w + 1).astype(dtype)) for w in wide]
        else:
            assert by_61.tolist() == [9] * 8 and kept.tolist() == xs


@ct.kernel
def _fold_against_run_time(src, folded, computed):
    ct.store(folded, index=(0,), tile=ct.full((2,), ct.bfloat16(1.0 + 2.0**-8 + 2.0**-30)))
    ct.store(computed, index=(0,), tile=ct.load(src, index=(0,), shape=(2,)).astype(ct.bfloat16))


def test_constant_folding_rounds_once_like_run_time():
    """A fuzzer finding, fixed: a float64 constant folded to bfloat16 was rounded
    twice (through float32) and gave 1.0; run time rounds once: 1 + 2^-7."""
    src = np.full(2, 1.0 + 2.0**-8 + 2.0**-30)
    folded, computed = (np.zeros(2, ml_dtypes.bfloat16) for _ in range(2))
    ct.launch(None, (1,), _fold_against_run_time, (src, folded, computed))
    assert computed.astype(np.float64).tolist() == [1.0 + 2.0**-7] * 2
    assert folded.astype(np.float64).tolist() == [1.0 + 2.0**-7] * 2


@ct.kernel
def _store_then_load(a, scratch, out):
    bl = ct.bid(0)
    ct.store(scratch, index=(bl,), tile=ct.load(a, index=(bl,), shape=(4096,)) + 1)
    # the second quarter of the block's own tile: elements other warps stored
    ct.store(out, index=(bl,), tile=ct.load(scratch, index=(4 * bl + 1,), shape=(1024,)))


def test_a_block_reads_back_what_it_stored():
    """Program order within a block: a load after a store of the same array sees
    the stored values, also where other threads of the block stored them (the
    fuzzer's read-after-write pattern; on the GPU this needs a barrier)."""
    blocks = 64
    a = np.arange(blocks * 4096, dtype=np.float32)
    scratch = np.zeros_like(a)
    out = np.zeros(blocks * 1024, np.float32)
    ct.launch(None, (blocks,), _store_then_load, (a, scratch, out))
    expect = (a + 1).reshape(blocks, 4, 1024)[:, 1]
    np.testing.assert_array_equal(out.reshape(blocks, 1024), expect)
