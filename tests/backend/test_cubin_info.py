"""Registers and stack read from a cubin, against ptxas's own `-v` report of
the same compile (taken in a fresh process: NVRTC 13.0 writes that report
only for a process's first program)."""
import json
import re
import subprocess
import sys

import numpy as np
import pytest

import tilecore as ct
from tilecore.backend.cuda.cubin_info import Resources, kernel_resources
from tilecore.backend.cuda.nvrtc import compile_cubin_report

SMALL = 'extern "C" __global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }\n'

# 96 live floats under a 32-register cap (1024 threads, 2 blocks per SM): ptxas spills.
SPILLING = r'''
extern "C" __global__ void __launch_bounds__(1024, 2) spill(const float* x, float* y) {
  float a[96];
  #pragma unroll
  for (int i = 0; i < 96; ++i) a[i] = x[threadIdx.x + i * 1024];
  float s = 0.f;
  #pragma unroll
  for (int i = 0; i < 96; ++i) s += a[i] * a[95 - i] + a[(i * 7) % 96];
  #pragma unroll
  for (int i = 0; i < 96; ++i) y[threadIdx.x + i * 1024] = a[i] * s;
}
'''

_PTXAS_REPORT = r'''
import io, json, sys
from cuda.core import Program, ProgramOptions
from tilecore.backend.cuda.cubin_info import kernel_resources
opts = ProgramOptions(name="k.cu", arch="sm_90", std="c++17", ptxas_options=["-O3", "-v"])
log = io.StringIO()
cubin = bytes(Program(sys.stdin.read(), "c++", opts).compile("cubin", logs=log).code)
r = kernel_resources(cubin)
print(json.dumps({"log": log.getvalue(), "registers": r.registers, "stack": r.stack_bytes}))
'''


def _ptxas_and_cubin(source: str) -> tuple[int, int, Resources]:
    """(registers, stack frame bytes) from ptxas's report, and the cubin's Resources."""
    out = subprocess.run([sys.executable, "-c", _PTXAS_REPORT], input=source, text=True,
                         capture_output=True, check=True).stdout
    got = json.loads(out)
    registers = int(re.search(r"Used (\d+) registers", got["log"]).group(1))
    stack = int(re.search(r"(\d+) bytes stack frame", got["log"]).group(1))
    return registers, stack, Resources(got["registers"], got["stack"])


@pytest.mark.parametrize("source", [SMALL, SPILLING], ids=["small", "spilling"])
def test_resources_match_ptxas_report(source):
    registers, stack, from_cubin = _ptxas_and_cubin(source)
    assert from_cubin == Resources(registers, stack)


def test_spilling_kernel_has_a_stack():
    _, used = compile_cubin_report(SPILLING, "sm_90")
    assert used.registers <= 32 and used.stack_bytes > 0
    _, small = compile_cubin_report(SMALL, "sm_80")
    assert small.stack_bytes == 0 and 1 <= small.registers <= 32
    assert used.uses_more_stack_than(small) and not small.uses_more_stack_than(used)


def test_same_source_compiled_again_reports_again():
    """The report comes from the cubin, so a second compile of the same
    source in one process knows its registers too."""
    first = compile_cubin_report(SMALL, "sm_90")[1]
    assert compile_cubin_report(SMALL, "sm_90")[1] == first


@pytest.mark.parametrize("data", [b"", b"not a cubin", b"\x7fELF\x02\x01\x01" + b"\0" * 9])
def test_not_a_cubin(data):
    assert kernel_resources(data) is None


def test_truncated_cubin_is_never_misread():
    """Cut anywhere, a cubin reads as unknown, or (when the cut spared what
    is read) as the whole one; it never raises."""
    cubin, whole = compile_cubin_report(SMALL, "sm_90")
    results = {kernel_resources(cubin[:cut]) for cut in range(0, len(cubin), 7)}
    assert results <= {None, whole} and None in results


def test_two_kernels_are_not_one():
    cubin, used = compile_cubin_report(SMALL + SMALL.replace("twice", "again"), "sm_90")
    assert used is None and cubin[:4] == b"\x7fELF"


@ct.kernel
def centered(x, y, N: ct.Constant[int]):
    t = ct.load(x, (ct.bid(0), 0), (1, N))
    ct.store(y, (ct.bid(0), 0), t - ct.sum(t, axis=1, keepdims=True))


def test_identical_sources_of_two_kernels_both_get_their_registers(monkeypatch):
    """The default block size and the same size named explicitly generate the
    same C++ under two cache keys: each build knows its registers."""
    from tilecore.host import compile as host_compile
    from tilecore.runtime.cache import CompileCache
    monkeypatch.setattr(host_compile, "default_cache", lambda: CompileCache(None))
    x = np.zeros((4, 4096), np.float32)
    plain = ct.compile(ct.kernel(centered.pyfunc), (x, x.copy(), 4096))
    named = ct.compile(ct.kernel(num_threads=512)(centered.pyfunc), (x, x.copy(), 4096))
    assert plain.block_threads == named.block_threads == 512
    assert plain.registers == named.registers > 0


@ct.kernel(num_threads=32)
def wide_rows(x, y, N: ct.Constant[int]):
    row = ct.bid(0)
    t = ct.load(x, index=(row, 0), shape=(1, N))
    ct.store(y, index=(row, 0), tile=t / ct.sum(t, axis=1, keepdims=True))


def test_compiled_kernel_reports_its_stack():
    """256 floats per thread do not fit in 255 registers: the build has a
    stack, which the launch takes as a reason to keep L1 large."""
    x = np.zeros((2, 8192), np.float32)
    got = ct.compile(wide_rows, (x, x.copy(), 8192))
    assert got.streams and got.registers == 255 and got.stack_bytes > 0 and not got.small_l1
    small = ct.compile(wide_rows, (x[:, :1024].copy(), x[:, :1024].copy(), 1024))
    assert small.streams and small.stack_bytes == 0 and small.small_l1


@pytest.mark.gpu
def test_streaming_kernel_that_spills_keeps_the_default_l1():
    """L1 caches the stack, so a spilling kernel is not given the smallest L1."""
    cp = pytest.importorskip("cupy")
    from cuda.bindings import driver as drv
    host = np.random.default_rng(3).random((2, 8192)).astype(np.float32) + 0.5
    rows, scaled = cp.asarray(host), cp.zeros((2, 8192), cp.float32)
    ct.launch(None, (2,), wide_rows, (rows, scaled, 8192))
    h64 = host.astype(np.float64)
    np.testing.assert_allclose(cp.asnumpy(scaled), h64 / h64.sum(1, keepdims=True), rtol=1e-5)
    attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT
    plans = [p for p in wide_rows.backend_cache.values() if getattr(p, "loaded", None)]
    assert plans
    for plan in plans:
        assert drv.cuFuncGetAttribute(attr, plan.loaded.function) == (drv.CUresult.CUDA_SUCCESS, -1)
