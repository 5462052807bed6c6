"""CUDA code generation: every op and dtype compiles to a cubin for sm_80 and sm_90."""
import math
import struct

import numpy as np
import pytest

from tilecore.backend import ArraySpec, CodegenOptions, compile_cubin, generate
from tilecore.backend.cuda.codegen import RULES
from tilecore.backend.cuda.emit import unravel
from tilecore.ir.ops import OPS
from tilecore.language import dtypes as D

from ir_builder import Builder
from kernels import I32, control_kernel, dtype_kernel

ARCHS = ("sm_80", "sm_90")
SPECS = {0: ArraySpec(True, True), 1: ArraySpec(True, True), 2: ArraySpec(False, True)}


def _compile_both(fn, specs=SPECS, options=CodegenOptions()):
    g = generate(fn, specs, options)
    for arch in ARCHS:
        cubin = compile_cubin(g.source, arch, kernel_name=g.entry)
        assert cubin[:4] == b"\x7fELF"
    return g


def test_rules_cover_every_op():
    assert set(RULES) == set(OPS)


@pytest.mark.parametrize("dt", D.ALL_DTYPES, ids=lambda d: d.name)
def test_every_op_compiles(dt):
    b = dtype_kernel(dt)
    ops = {op.name for op in b.fn.walk()}
    g = _compile_both(b.fn)
    assert g.entry == f"tc_all_{dt.name}"
    assert g.source.count("__syncthreads()") > 0
    if dt.arithmetic and not dt.is_bool:
        assert {"reduce", "argreduce", "binary", "unary"} <= ops


def test_control_flow_compiles():
    g = _compile_both(control_kernel().fn, {0: ArraySpec(False, False)})
    assert "break;" in g.source and "continue;" in g.source and "while (true)" in g.source


def test_unaligned_specs_compile_without_vector_access():
    fn = dtype_kernel(D.float16).fn
    g = _compile_both(fn, {0: ArraySpec(False, True), 1: ArraySpec(True, False)},
                      CodegenOptions(num_threads=128, occupancy=2))
    assert "tc::Vec" not in g.source
    assert "__launch_bounds__(128, 2)" in g.source


def test_vector_access_when_aligned():
    g = generate(dtype_kernel(D.float32).fn, SPECS, CodegenOptions(num_threads=64))
    assert "tc::Vec<float, 4>" in g.source


def test_deterministic_source():
    a = generate(dtype_kernel(D.bfloat16).fn, SPECS, CodegenOptions())
    b = generate(dtype_kernel(D.bfloat16).fn, SPECS, CodegenOptions())
    assert a.source == b.source and a.smem_bytes == b.smem_bytes


def test_headers_only_when_needed():
    f32 = generate(dtype_kernel(D.float32).fn, SPECS, CodegenOptions()).source
    assert "cuda_bf16" not in f32 and "fp16.cuh" not in f32 and "bf16.cuh" not in f32
    bf = generate(dtype_kernel(D.bfloat16).fn, SPECS, CodegenOptions()).source
    assert '#include "tilecore/bf16.cuh"' in bf and "fp16.cuh" not in bf
    assert "cub/" not in bf and "<cuda/" not in bf


def test_param_format_and_slots():
    g = generate(dtype_kernel(D.float16).fn, SPECS, CodegenOptions())
    assert g.param_format == "@QiiqqQiiqqQiqH"
    struct.calcsize(g.param_format)
    assert [(p.kind, p.format) for p in g.params] == [
        ("array", "Qiiqq"), ("array", "Qiiqq"), ("array", "Qiq"), ("scalar", "H")]
    assert g.smem_bytes % 16 == 0 and g.smem_bytes >= 512 * 2


def _copy_kernel(dt: D.DType, n: int):
    """y[bid] = x[bid] over 1-d tiles of n elements."""
    b = Builder(f"copy_{dt.name}_{n}")
    x, y = b.array("x", dt, 1), b.array("y", dt, 1)
    bx = b.op("bid", (), (I32,), axis=0)
    b.store(y, b.load(x, [bx], (n,)), [bx])
    return b.fn


@pytest.mark.parametrize("dt, n, threads", [
    (D.float32, 1024, 128),    # 1024 / (2 * 4): two float4 per thread
    (D.bfloat16, 1024, 64),    # 1024 / (2 * 8)
    (D.int8, 1024, 32),        # 1024 / (2 * 16)
    (D.float32, 4096, 512),    # 4096 / 8
    (D.float32, 16384, 512),   # capped
    (D.float32, 64, 32),       # at least a warp
    (D.float64, 1024, 256),    # 1024 / (2 * 2)
])
def test_block_size_is_two_vectors_of_the_largest_tile_per_thread(dt, n, threads):
    specs = {0: ArraySpec(True, True), 1: ArraySpec(True, True)}
    assert generate(_copy_kernel(dt, n), specs, CodegenOptions()).block_threads == threads


def test_block_size_choice_and_validation():
    fn = dtype_kernel(D.int8).fn  # 16x32 tiles of int8: 512 / (2 * 16) -> at least 32
    assert generate(fn, SPECS, CodegenOptions()).block_threads == 32
    assert generate(fn, SPECS, CodegenOptions(num_threads=512)).block_threads == 512
    for bad in (16, 48, 2048):
        with pytest.raises(ValueError):
            generate(fn, SPECS, CodegenOptions(num_threads=bad))


@pytest.mark.parametrize("shape, want", [
    ((1, 1024), ["0", "e"]),                      # a row tile: the column is e itself
    ((4, 8), ["(e / 8)", "(e % 8)"]),
    ((1, 4, 8), ["0", "(e / 8)", "(e % 8)"]),
    ((2, 1, 8), ["(e / 8)", "0", "(e % 8)"]),
    ((2, 3, 4), ["(e / 12)", "((e / 4) % 3)", "(e % 4)"]),
    ((1,), ["0"]),
])
def test_unravel_needs_no_remainder_on_the_outermost_long_axis(shape, want):
    assert unravel("e", shape) == want
    for e in range(min(64, math.prod(shape))):  # row-major order, as NumPy's
        got = [eval(x.replace("/", "//"), {"e": e}) for x in want]  # noqa: S307
        assert got == [int(i) for i in np.unravel_index(e, shape)]
