"""CUDA code for Array.get_raw_memory(): one element offset from the array's
pointer (no strides, no bounds checks, only the mask), 64-bit offsets kept
64-bit (wide arrays included), masked atomics on the same PTX helpers as
ct.atomic_*, a block barrier between a tile store and a raw load of the same
array, and cubins for sm_80 and sm_90."""
import re

import numpy as np
import pytest

import tilecore as ct
from test_dependent_launch import _ptx

MO, MS = ct.MemoryOrder, ct.MemoryScope
ARCHS = ("sm_80", "sm_90")
BIG = 2**31 + 5


def _body(kernel, args, arch="sm_90") -> str:
    source = ct.compile(kernel, args, arch=arch).source
    return source[source.index('extern "C"'):]


def _wide(dtype=np.float32) -> np.ndarray:
    """A read-only (BIG, 4) view without the memory (row stride 0): a wide array."""
    return np.lib.stride_tricks.as_strided(np.zeros(4, dtype), shape=(BIG, 4),
                                           strides=(0, np.dtype(dtype).itemsize))


@ct.kernel
def gather2d(x, off, out, MASKED: ct.Constant[bool]):
    o = ct.load(off, (0,), (64,))
    raw = x.get_raw_memory()
    if MASKED:
        t = raw.load_offset(o, mask=o < 100, padding_value=-1.0)
    else:
        t = raw.load_offset(o)
    ct.store(out, (0,), t)


@pytest.mark.parametrize("odt", [np.int32, np.int64])
def test_a_raw_load_is_pointer_plus_offset(odt):
    x = np.zeros((16, 12), np.float32)[:, ::3]          # strides (12, 3): ignored
    src = _body(gather2d, (x, np.zeros(64, odt), np.zeros(64, np.float32), False))
    (line,) = [ln.strip() for ln in src.splitlines() if "arg0[" in ln]
    assert re.fullmatch(r"v\d+\.v\[k\] = arg0\[\(long long\)v\d+\.v\[k\]\];", line), line
    assert "arg0_stride" not in src.split(") {", 1)[1] and "arg0_dim" not in src.split(") {", 1)[1]


def test_the_mask_is_the_only_condition():
    src = _body(gather2d, (np.zeros(256, np.float32), np.zeros(64, np.int32),
                           np.zeros(64, np.float32), True))
    (line,) = [ln.strip() for ln in src.splitlines() if "arg0[" in ln]
    assert re.fullmatch(r"v\d+\.v\[k\] = \(v\d+\.v\[k\]\) \? "
                        r"arg0\[\(long long\)v\d+\.v\[k\]\] : v\d+\.v\[0\];", line), line


@pytest.mark.parametrize("odt,frag", [(np.int64, "long long"), (np.uint32, "long long"),
                                      (np.uint64, "long long"), (np.int16, "int")])
def test_offsets_are_never_narrowed(odt, frag):
    """64-bit and uint32 offsets index as int64 (uint64 wraps to the same address)."""
    src = _body(gather2d, (np.zeros(8, np.float32), np.zeros(64, odt),
                           np.zeros(64, np.float32), False))
    (line,) = [ln.strip() for ln in src.splitlines() if "arg0[" in ln]
    name = re.search(r"arg0\[\(long long\)(v\d+)\.v\[k\]\]", line).group(1)
    assert re.search(rf"tc::Frag<{frag}, \d+> {name}\b", src), src


@ct.kernel
def wide_raw(a, off, out):
    o = ct.load(off, (0,), (4,))
    raw = a.get_raw_memory()
    ct.store(out, (0,), raw.load_offset(o, mask=o < 4, padding_value=7.0))


@pytest.mark.parametrize("arch", ARCHS)
def test_wide_arrays(arch):
    src = _body(wide_raw, (_wide(), np.zeros(4, np.int64), np.zeros(4, np.float32)), arch)
    assert "long long arg0_dim0" in src                      # the wide specialization
    assert re.search(r"arg0\[\(long long\)v\d+\.v\[k\]\]", src)


@ct.kernel
def raw_atomics(x, out, ORDER: ct.Constant, SCOPE: ct.Constant, USE: ct.Constant[bool]):
    o = ct.arange(64, dtype=ct.int32) * 2
    raw = x.get_raw_memory()
    old = raw.atomic_add_offset(o, 1, mask=o < 100, memory_order=ORDER, memory_scope=SCOPE)
    if USE:
        ct.store(out, (0,), old)


def test_masked_atomics_use_the_atomic_helpers():
    args = (np.zeros(128, np.int32), np.zeros(64, np.int32), MO.RELAXED, MS.DEVICE)
    unused = _body(raw_atomics, args + (False,))
    assert re.search(r"if \(v\d+\.v\[k\]\) tc::red_add_u32<1>\(arg0 \+ "
                     r"\(\(long long\)v\d+\.v\[k\]\), v\d+\.v\[k\]\);", unused), unused
    used = _body(raw_atomics, args + (True,))
    assert re.search(r"v\d+\.v\[k\] = \(v\d+\.v\[k\]\) \? tc::atom_add_u32<1>\(arg0 \+ "
                     r"\(\(long long\)v\d+\.v\[k\]\), v\d+\.v\[k\]\) : \(\(int\)0LL\);", used)


@pytest.mark.parametrize("scope,ptx", [(MS.BLOCK, "cta"), (MS.DEVICE, "gpu"), (MS.SYS, "sys")])
def test_order_and_scope_in_ptx(scope, ptx):
    args = (np.zeros(128, np.int32), np.zeros(64, np.int32), MO.ACQ_REL, scope, True)
    text = _ptx(ct.compile(raw_atomics, args, arch="sm_90").source, "sm_90")
    assert f"atom.acquire.{ptx}.global.add.u32" in text and f"fence.acq_rel.{ptx}" in text


@ct.kernel
def raw_ordered_load(x, out, ORDER: ct.Constant):
    o = ct.arange(64, dtype=ct.int32)
    ct.store(out, (0,), x.get_raw_memory().load_offset(
        o, mask=o < 40, padding_value=3, memory_order=ORDER, memory_scope=MS.DEVICE))


@pytest.mark.parametrize("order,helper", [(MO.RELAXED, "ld_relaxed"), (MO.ACQUIRE, "ld_acquire")])
def test_an_ordered_raw_load_is_one_strong_read_per_enabled_element(order, helper):
    """load_offset with a memory order: each enabled element through the strong
    load helper (masked-off ones read nothing), an acquire followed by the
    block barrier (its later accesses after every thread's reads), a relaxed
    one by nothing; PTX ld.relaxed.gpu / ld.acquire.gpu."""
    args = (np.zeros(128, np.int32), np.zeros(64, np.int32), order)
    src = _body(raw_ordered_load, args)
    assert re.search(r"v\d+\.v\[k\] = \(v\d+\.v\[k\]\) \? tc::%s<1>\(arg0 \+ "
                     r"\(\(long long\)v\d+\.v\[k\]\)\) : v\d+\.v\[0\];" % helper, src), src
    assert ("__syncthreads();" in src.split(helper)[1]) == (order is MO.ACQUIRE)
    word = "acquire" if order is MO.ACQUIRE else "relaxed"
    assert f"ld.{word}.gpu.global" in _ptx(ct.compile(raw_ordered_load, args, arch="sm_90").source,
                                           "sm_90")


@ct.kernel
def raw_cas(x, out):
    o = ct.arange(32, dtype=ct.int64)
    raw = x.get_raw_memory()
    ct.store(out, (0,), raw.atomic_cas_offset(o, 0.0, 1.0, mask=o % 2 == 0))


def test_masked_off_cas_gives_expected():
    src = _body(raw_cas, (np.zeros(32, np.float64), np.zeros(32, np.float64)))
    assert re.search(r"v\d+\.v\[k\] = \(v\d+\.v\[k\]\) \? tc::atom_cas_b64<1, true>\(arg0 \+ "
                     r"\(\(long long\)v\d+\.v\[k\]\), v\d+\.v\[k\], v\d+\.v\[k\]\) : "
                     r"v\d+\.v\[k\];", src), src


@ct.kernel
def store_then_load(x, out):
    ct.store(x, (0,), ct.arange(64, dtype=ct.int32))
    ct.store(out, (0,), x.get_raw_memory().load_offset(63 - ct.arange(64, dtype=ct.int32)))


def test_a_raw_load_after_a_store_of_the_array_waits_for_the_block():
    src = _body(store_then_load, (np.zeros(64, np.int32), np.zeros(64, np.int32)))
    lines = [ln.strip() for ln in src.splitlines()]
    gather = next(i for i, ln in enumerate(lines) if "arg0[(long long)" in ln)
    sync = [i for i, ln in enumerate(lines) if ln.startswith("__syncthreads();")]
    store = max(i for i, ln in enumerate(lines) if "(arg0 + (c0)) = w;" in ln)
    assert any(store < i < gather for i in sync)


@ct.kernel
def every_method(x, y, out):
    o = ct.arange(16, dtype=ct.int32)
    raw = x.get_raw_memory()
    m = o < 10
    t = raw.load_offset(o, mask=m, padding_value=3, latency=2)
    raw.store_offset(o + 16, t, mask=m, latency=10)
    acc = raw.atomic_xchg_offset(o, t, mask=m)
    acc += raw.atomic_add_offset(o, t, memory_order=MO.RELAXED, memory_scope=MS.BLOCK)
    acc += raw.atomic_max_offset(o, t, memory_order=MO.ACQUIRE)
    acc += raw.atomic_min_offset(o, t, memory_order=MO.RELEASE, memory_scope=MS.SYS)
    acc += raw.atomic_and_offset(o, t)
    acc += raw.atomic_or_offset(o, t)
    acc += raw.atomic_xor_offset(3, 1)
    acc += raw.atomic_cas_offset(o, t, acc)
    y.get_raw_memory().store_offset(0, acc.sum())
    ct.store(out, (0,), acc)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", [np.int32, np.uint64])
def test_every_method_compiles(arch, dtype):
    args = (np.zeros(32, dtype), np.zeros(1, dtype), np.zeros(16, dtype))
    compiled = ct.compile(every_method, args, arch=arch)
    assert compiled.cubin
