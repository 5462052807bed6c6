"""CUDA code for atomics and ordered loads/stores: the PTX instructions, the
barriers and fences that make an order hold for the whole block, the
one-element case (thread 0 and a broadcast), `__restrict__` in kernels that
order accesses, the header included only on use, and load hoisting stopping
at atomics and ordered accesses."""
import re

import numpy as np
import pytest

import tilecore as ct
from test_dependent_launch import _ptx

MO, MS = ct.MemoryOrder, ct.MemoryScope
ARCHS = ("sm_80", "sm_90")


def _source(kernel, args, arch="sm_90") -> str:
    return ct.compile(kernel, args, arch=arch).source


def _body(source: str) -> str:
    return source[source.index('extern "C"'):]


def _lines(source: str) -> list[str]:
    """The statements of the kernel body, without comments."""
    return [ln.strip() for ln in _body(source).splitlines()
            if ln.strip() and not ln.strip().startswith("//")]


@ct.kernel
def add_kernel(x, out, ORDER: ct.Constant, SCOPE: ct.Constant, USE: ct.Constant[bool]):
    # indices of no known small range: updates go to global memory (ir/privatize.py)
    old = ct.atomic_add(x, ct.arange(64, dtype=ct.int32) + ct.bid(0) * 64, 1,
                        memory_order=ORDER, memory_scope=SCOPE)
    if USE:
        ct.store(out, (0,), old)


def _add(order, scope=MS.DEVICE, use=True, dtype=np.int32, arch="sm_90"):
    return _source(add_kernel, (np.zeros(64, dtype), np.zeros(64, dtype), order, scope, use),
                   arch)


def test_header_only_with_atomics():
    @ct.kernel
    def plain(x):
        ct.store(x, (0,), ct.load(x, (0,), (4,)) + 1)
    assert "atomic.cuh" not in _source(plain, (np.zeros(4, np.int32),))
    assert '#include "tilecore/atomic.cuh"' in _add(MO.RELAXED)


def test_an_unused_result_is_a_reduction():
    assert "tc::red_add_u32<1>(" in _add(MO.RELAXED, use=False)
    used = _add(MO.RELAXED, use=True)
    assert "tc::atom_add_u32<1>(" in used and "red_" not in _body(used)


@pytest.mark.parametrize("order,call,before,after", [
    (MO.RELAXED, "tc::red_add_u32<1>(", [], []),
    (MO.RELEASE, "tc::red_add_u32<1>(", ["__syncthreads();", "tc::fence_acq_rel<1>();"], []),
    (MO.ACQUIRE, "tc::atom_add_u32<1, true>(", [], ["__syncthreads();"]),
    (MO.ACQ_REL, "tc::atom_add_u32<1, true>(", ["__syncthreads();", "tc::fence_acq_rel<1>();"],
     ["__syncthreads();"]),
])
def test_block_wide_order_around_the_element_updates(order, call, before, after):
    """A thread holding one element: a release is a barrier and a fence before the
    updates, an acquire each update's own (atom.acquire, so not a `red`) and a barrier."""
    lines = _lines(_add(order, use=False))
    at = next(i for i, ln in enumerate(lines) if call in ln)
    loop = at - 2  # "#pragma unroll", "for (...) {"
    assert lines[loop - len(before):loop] == before
    assert lines[at + 2:at + 2 + len(after)] == after  # after the loop's "}"
    assert sum("fence_acq_rel" in ln for ln in lines) == len([s for s in before + after
                                                             if "fence" in s])


@ct.kernel(num_threads=32)
def add_many(x, ORDER: ct.Constant):
    ct.atomic_add(x, ct.arange(1024, dtype=ct.int32) + ct.bid(0) * 1024, 1, memory_order=ORDER)


@ct.kernel(num_threads=128)
def add_eight(x, ORDER: ct.Constant):
    ct.atomic_add(x, ct.arange(1024, dtype=ct.int32) + ct.bid(0) * 1024, 1, memory_order=ORDER)


def test_up_to_eight_elements_a_thread_acquire_each():
    """8 elements a thread (OWN_ACQUIRE_ELEMENTS): each update acquires, no fence after."""
    lines = _lines(_source(add_eight, (np.zeros(1024, np.int32), MO.ACQUIRE)))
    assert any("tc::atom_add_u32<1, true>(" in ln for ln in lines)
    assert not any("fence_acq_rel" in ln for ln in lines)


@pytest.mark.parametrize("order,call,after", [
    (MO.ACQUIRE, "tc::red_add_u32<1>(", ["tc::fence_acq_rel<1>();", "__syncthreads();"]),
    (MO.ACQ_REL, "tc::red_add_u32<1>(", ["tc::fence_acq_rel<1>();", "__syncthreads();"]),
    (MO.RELAXED, "tc::red_add_u32<1>(", [])])
def test_many_elements_a_thread_acquire_by_one_fence(order, call, after):
    """32 elements a thread: relaxed updates, then one fence (32 acquiring accesses
    would each wait for their own return)."""
    lines = _lines(_source(add_many, (np.zeros(1024, np.int32), order)))
    at = next(i for i, ln in enumerate(lines) if call in ln)
    assert lines[at + 2:at + 2 + len(after)] == after
    assert not any("true>(" in ln for ln in lines)


@pytest.mark.parametrize("scope,ptx", [(MS.BLOCK, "cta"), (MS.DEVICE, "gpu"), (MS.SYS, "sys")])
def test_scopes_in_ptx(scope, ptx):
    text = _ptx(_add(MO.ACQ_REL, scope, use=True), "sm_90")
    assert f"atom.acquire.{ptx}.global.add.u32" in text
    assert f"fence.acq_rel.{ptx}" in text
    many = _ptx(_source(add_many, (np.zeros(1024, np.int32), MO.ACQUIRE)), "sm_90")
    assert "red.relaxed.gpu.global.add.u32" in many and "fence.acq_rel.gpu" in many


@pytest.mark.parametrize("arch,instr", [("sm_80", "atom.relaxed.gpu.global.cas.b16"),
                                        ("sm_90", "red.relaxed.gpu.global.add.noftz.bf16")])
def test_bfloat16_add_is_native_from_sm_90(arch, instr):
    import ml_dtypes
    source = _add(MO.RELAXED, use=False, dtype=ml_dtypes.bfloat16, arch=arch)
    assert instr in _ptx(source, arch)


@pytest.mark.parametrize("dtype,instr", [
    (np.float16, "red.relaxed.gpu.global.add.noftz.f16"), (np.float32, "red.relaxed.gpu.global.add.f32"),
    (np.float64, "red.relaxed.gpu.global.add.f64"), (np.uint64, "red.relaxed.gpu.global.add.u64")])
def test_add_instructions(dtype, instr):
    for arch in ARCHS:
        assert instr in _ptx(_add(MO.RELAXED, use=False, dtype=dtype, arch=arch), arch)


@ct.kernel
def scalar_in_loop(x, out, N: ct.Constant[int]):
    acc = ct.zeros((1,), ct.int32)
    for i in range(N):
        acc += ct.atomic_add(x, 0, 1, memory_order=MO.RELAXED)
    ct.store(out, (0,), acc)


def test_a_one_element_atomic_is_thread_0s_and_broadcast():
    src = _body(_source(scalar_in_loop, (np.zeros(1, np.int32), np.zeros(1, np.int32), 3)))
    assert "if (threadIdx.x == 0) {" in src
    assert re.search(r"tc::broadcast0<int, \d+, true>\(r\)", src)   # in a loop: reused slot


@ct.kernel
def flag_protocol(data, flag, out):
    b = ct.bid(0)
    ct.store(data, (b,), ct.full((32,), 1.0, ct.float32))
    ct.store(flag, (b,), ct.full((1,), 1, ct.int32), memory_order=MO.RELEASE,
             memory_scope=MS.DEVICE)
    f = ct.load(flag, (0,), (1,), memory_order=MO.ACQUIRE, memory_scope=MS.DEVICE)
    t = ct.load(data, (0,), (32,))
    ct.store(out, (b,), t + f.astype(ct.float32))


def test_ordered_store_and_load():
    args = (np.zeros(64, np.float32), np.zeros(2, np.int32), np.zeros(64, np.float32))
    lines = _lines(_source(flag_protocol, args))
    st = next(i for i, ln in enumerate(lines) if "tc::st_relaxed<1>(" in ln)
    sync = max(i for i in range(st) if lines[i] == "__syncthreads();")
    between = lines[sync + 1:st]     # thread 0 fences, then stores: nothing else touches memory
    assert between.count("tc::fence_acq_rel<1>();") == 1 and "if (threadIdx.x == 0) {" in between
    assert not any("arg" in ln and "[" in ln for ln in between)
    ld = next(i for i, ln in enumerate(lines) if "tc::ld_acquire<1>(" in ln)   # thread 0 reads
    assert lines[ld + 1] == "}"                                        # the flag: no fence
    assert re.fullmatch(r"v\d+\.v\[0\] = tc::broadcast0<int, \d+, false>\(r\);", lines[ld + 2])
    assert not any("ld_relaxed" in ln for ln in lines)


def test_restrict_is_dropped_from_written_arrays_of_ordering_kernels():
    args = (np.zeros(64, np.float32), np.zeros(2, np.int32), np.zeros(64, np.float32))
    head = _body(_source(flag_protocol, args)).split(") {")[0]
    assert "float* arg0" in head and "int* arg1" in head and "__restrict__" not in head
    relaxed = _body(_add(MO.RELAXED)).split(") {")[0]
    assert relaxed.count("* __restrict__") == 2   # relaxed atomics order nothing


@pytest.mark.parametrize("arch", ARCHS)
def test_ordered_accesses_in_ptx(arch):
    args = (np.zeros(64, np.float32), np.zeros(2, np.int32), np.zeros(64, np.float32))
    text = _ptx(_source(flag_protocol, args, arch), arch)
    assert "st.relaxed.gpu.global.b32" in text and "ld.acquire.gpu.global.b32" in text
    assert text.count("fence.acq_rel.gpu") >= 1 and "bar.sync" in text


def _ir_names(kernel):
    (fn,) = kernel._ir.values()
    return [(op.name, op.attrs.get("memory_order")) for op in fn.body.ops]


@ct.kernel
def after_atomic(x, y, out):
    ct.atomic_add(x, 0, 1)
    s = ct.sum(ct.ones((4,), ct.int32))
    t = ct.load(y, (0,), (4,))                        # another array: still not above the atomic
    f = ct.load(x, (0,), (4,), memory_order=MO.RELAXED, memory_scope=MS.DEVICE)
    ct.store(out, (0,), t + f + s)


def test_loads_are_not_hoisted_above_atomics_or_ordered_loads():
    x, y, out = np.zeros(4, np.int32), np.arange(4, dtype=np.int32), np.zeros(4, np.int32)
    ct.launch(None, (1,), after_atomic, (x, y, out))
    np.testing.assert_array_equal(out, [5, 5, 6, 7])
    ops = _ir_names(after_atomic)
    names = [n for n, _ in ops]
    first_load = names.index("load")
    assert names[first_load - 1] == "atomic_rmw"    # moved up to the atomic, not above it
    assert ops[first_load][1] is None
    ordered = names.index("load", first_load + 1)
    assert ops[ordered][1] is MO.RELAXED and ordered > names.index("reduce")  # never moved


@ct.kernel
def ordered_roundtrip(x, y):
    t = ct.load(x, (0,), (8,), memory_order=MO.ACQUIRE, memory_scope=MS.BLOCK)
    s = ct.load(x, (1,), (1,), memory_order=MO.RELAXED, memory_scope=MS.SYS)
    ct.store(y, (0,), t, memory_order=MO.RELEASE, memory_scope=MS.SYS)
    ct.store(y, (8,), s, memory_order=MO.RELAXED, memory_scope=MS.BLOCK)


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "float16", "bfloat16",
                                   "float8_e4m3fn", "float4_e2m1fn", "int64", "float64"])
def test_ordered_accesses_of_every_element_size(dtype):
    """Each element moves as its bits: 1, 2, 4 or 8 bytes (u8/b16/b32/b64)."""
    import ml_dtypes
    np_dtype = np.dtype(getattr(ml_dtypes, dtype, dtype))
    x = np.arange(16).astype(np_dtype)
    y = np.zeros(16, np_dtype)
    ct.launch(None, (1,), ordered_roundtrip, (x, y))
    expect = np.zeros(16, np_dtype)
    expect[:8], expect[8] = x[:8], x[1]
    assert y.tobytes() == expect.tobytes()
