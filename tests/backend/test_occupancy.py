"""Occupancy-aware launch bounds: hand-computed resident-block counts, when a
kernel is rebuilt with a min-blocks bound (a few registers over a boundary,
or spilling at an occupancy ptxas chose), and that the rebuild is dropped
when it does not spill less, where spills go (checked with the cubin's report
replaced)."""
import numpy as np
import pytest

import tilecore as ct
from tilecore.backend.cuda.cubin_info import Resources
from tilecore.backend.cuda.occupancy import blocks_per_sm, tighter_min_blocks
from tilecore.host import compile as host_compile
from tilecore.runtime.cache import CompileCache, DiskCache


@pytest.mark.parametrize("threads, registers, arch, blocks", [
    (512, 40, "sm_90", 3),    # 65536 / (16 warps * 40 * 32) = 3.2
    (512, 42, "sm_90", 2),    # 42 is allocated as 48: 2.67
    (512, 32, "sm_90", 4),    # the 2048-thread limit
    (64, 32, "sm_90", 32),    # the 32-block limit
    (64, 40, "sm_90", 25),
    (64, 32, "sm_86", 16),    # sm_86: 16 blocks, 1536 threads
    (512, 32, "sm_89", 3),
    (1024, 64, "sm_90", 1),
    (100, 32, "sm_90", 16),   # a partial warp counts as a whole one
    (128, 255, "sm_90", 2),
])
def test_blocks_per_sm(threads, registers, arch, blocks):
    assert blocks_per_sm(threads, registers, arch) == blocks


@pytest.mark.parametrize("threads, registers, want", [
    (512, 42, 3),      # 2 over 40, which fits three blocks
    (512, 33, 4),
    (512, 44, 3),      # 4 over: still squeezed
    (512, 45, None),   # 5 over: left alone
    (512, 40, None),   # already on a boundary
    (64, 46, None),    # 6 over 40
    (64, 34, 32),
    (32, 34, None),    # 32 blocks of one warp either way
    (8, 4, None),
])
def test_tighter_min_blocks(threads, registers, want):
    assert tighter_min_blocks(threads, registers, "sm_90") == want


@ct.kernel
def row_sum(x, y, N: ct.Constant[int]):
    t = ct.load(x, (ct.bid(0), 0), (1, N))
    ct.store(y, (ct.bid(0), 0), t - ct.sum(t, axis=1, keepdims=True))


def _with_report(monkeypatch, first: Resources, second: Resources):
    """Make the cubin report `first` for the plain source and `second` for the rebuild."""
    real = host_compile.compile_cubin_report
    sources = []

    def report(source, arch, **kw):
        sources.append(source)
        cubin, _ = real(source, arch, **kw)
        return cubin, (second if ", " in source.split("__launch_bounds__(")[1].split(")")[0]
                       else first)
    monkeypatch.setattr(host_compile, "compile_cubin_report", report)
    monkeypatch.setattr(host_compile, "default_cache", lambda: CompileCache(None))
    return sources


def _args(n=4096):
    x = np.zeros((4, n), np.float32)
    return (x, x.copy(), n)


def test_rebuilt_with_min_blocks_when_it_spills_no_more(monkeypatch):
    sources = _with_report(monkeypatch, Resources(42, 0), Resources(40, 0))
    k = ct.kernel(row_sum.pyfunc)
    got = ct.compile(k, _args(), arch="sm_90")
    assert len(sources) == 2
    assert "__launch_bounds__(512, 3)" in got.source and got.source == sources[1]
    assert got.cubin[:4] == b"\x7fELF" and got.registers == 40


def test_rebuild_dropped_when_it_needs_more_stack(monkeypatch):
    sources = _with_report(monkeypatch, Resources(42, 0), Resources(40, 8))
    got = ct.compile(ct.kernel(row_sum.pyfunc), _args(), arch="sm_90")
    assert len(sources) == 2
    assert "__launch_bounds__(512)" in got.source and got.source == sources[0]
    assert got.registers == 42


def test_no_rebuild_with_the_kernels_own_occupancy(monkeypatch):
    sources = _with_report(monkeypatch, Resources(42, 0), Resources(40, 0))
    got = ct.compile(ct.kernel(occupancy=2)(row_sum.pyfunc), _args(), arch="sm_90")
    assert len(sources) == 1 and "__launch_bounds__(512, 2)" in got.source


def test_spilling_build_rebuilt_at_its_own_occupancy(monkeypatch):
    """ptxas capped the registers itself (64: two blocks of 512) and spilled; asked
    for those two blocks it may fit without the stack: that build is kept."""
    sources = _with_report(monkeypatch, Resources(64, 8), Resources(64, 0))
    got = ct.compile(ct.kernel(row_sum.pyfunc), _args(), arch="sm_90")
    assert len(sources) == 2
    assert "__launch_bounds__(512, 2)" in got.source and got.source == sources[1]
    assert (got.registers, got.stack_bytes) == (64, 0)


@pytest.mark.parametrize("second", [Resources(64, 8), Resources(60, 16)])
def test_spill_rebuild_dropped_without_less_stack(monkeypatch, second):
    sources = _with_report(monkeypatch, Resources(64, 8), second)
    got = ct.compile(ct.kernel(row_sum.pyfunc), _args(), arch="sm_90")
    assert len(sources) == 2
    assert "__launch_bounds__(512)" in got.source and got.source == sources[0]
    assert (got.registers, got.stack_bytes) == (64, 8)


def test_no_rebuild_without_spills_off_the_boundary(monkeypatch):
    sources = _with_report(monkeypatch, Resources(64, 0), Resources(56, 0))
    got = ct.compile(ct.kernel(row_sum.pyfunc), _args(), arch="sm_90")
    assert len(sources) == 1 and got.registers == 64


def test_cache_entry_keeps_the_bounds(monkeypatch, tmp_path):
    """A disk-cache hit gives the source the cubin was built from."""
    cache = CompileCache(DiskCache(tmp_path))
    monkeypatch.setattr(host_compile, "default_cache", lambda: cache)
    real = host_compile.compile_cubin_report
    monkeypatch.setattr(host_compile, "compile_cubin_report",
                        lambda source, arch, **kw: (real(source, arch, **kw)[0],
                                                    Resources(33 if "(512)" in source else 32,
                                                              0)))
    # the disk entry's check compares the stored registers with the cubin's: fake those too
    monkeypatch.setattr(host_compile, "kernel_resources", lambda cubin: Resources(32, 0))
    first = ct.compile(ct.kernel(row_sum.pyfunc), _args(), arch="sm_80")
    cache.memory.clear()
    again = ct.compile(ct.kernel(row_sum.pyfunc), _args(), arch="sm_80")
    assert cache.disk_hits == 1
    assert "__launch_bounds__(512, 4)" in first.source
    assert again.source == first.source and again.cubin == first.cubin
    assert again.registers == first.registers == 32


def test_compile_reports_the_registers_ptxas_gave():
    got = ct.compile(ct.kernel(row_sum.pyfunc), _args(1024), arch="sm_90")
    assert 8 <= got.registers <= 255
