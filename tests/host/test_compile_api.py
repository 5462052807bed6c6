"""tilecore.compile (ahead of time, no GPU needed) and TILECORE_DUMP_DIR."""
import numpy as np
import pytest

import tilecore as ct


@ct.kernel
def scale(x, y, factor, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    ct.store(y, index=(bid,), tile=ct.load(x, index=(bid,), shape=(TILE,)) * factor)


def test_compile_returns_source_and_cubin_for_each_arch():
    x = np.zeros(1000, np.float32)
    for arch in ("sm_80", "sm_90"):
        ck = ct.compile(scale, (x, x, 2.0, 256), arch=arch)
        assert ck.cubin[:4] == b"\x7fELF"
        assert 'extern "C" __global__' in ck.source and ck.entry in ck.source
        assert ck.arch == arch and ck.block_threads >= 32
        assert "load" in ck.ir and "binary" in ck.ir


def test_codegen_is_deterministic_across_processes():
    import subprocess
    import sys
    code = ("import numpy as np, sys; sys.path.insert(0, 'tests/host'); "
            "import test_compile_api as t, tilecore as ct; "
            "print(ct.compile(t.scale, (np.zeros(8, np.float32),) * 2 + (2.0, 256)).source)")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True).stdout for _ in range(2)}
    assert len(outs) == 1


def test_dump_dir_receives_ir_and_cuda_source(monkeypatch, tmp_path):
    monkeypatch.setenv("TILECORE_DUMP_DIR", str(tmp_path))
    ck = ct.compile(scale, (np.zeros(64, np.float32),) * 2 + (3.0, 64), arch="sm_90")
    cu = list(tmp_path.glob("scale_*.cu"))
    ir = list(tmp_path.glob("scale_*.ir"))
    assert len(cu) == 1 and len(ir) == 1
    assert cu[0].read_text() == ck.source
    assert ir[0].read_text().startswith("func @scale(")


def test_compile_rejects_bad_arguments():
    with pytest.raises(ValueError, match='Invalid argument "arch" of compile\\(\\): expected a '
                                         'string like "sm_90", got \'90\''):
        ct.compile(scale, (np.zeros(8, np.float32),) * 2 + (1.0, 8), arch="90")
    with pytest.raises(TypeError, match="takes 4 argument"):
        ct.compile(scale, (np.zeros(8, np.float32),), arch="sm_90")


def test_nvrtc_errors_name_the_kernel_and_show_generated_lines():
    from tilecore.backend.cuda.nvrtc import compile_cubin
    with pytest.raises(ct.TileCompileError) as e:
        compile_cubin('extern "C" __global__ void k() {\n  int x = ;\n}\n', "sm_90",
                      kernel_name="broken")
    text = str(e.value)
    assert "broken" in text and "sm_90" in text
    assert ">  2 |   int x = ;" in text or "> 2 |   int x = ;" in text


def test_two_processes_compiling_the_same_kernel_share_the_disk_cache(tmp_path):
    """Both build at once into one cache directory (atomic writes), get the same
    cubin, and a third process finds it on disk instead of compiling."""
    import subprocess
    import sys
    code = ("import sys, time, hashlib; sys.path.insert(0, 'tests/host'); import numpy as np; "
            "import test_compile_api as t, tilecore as ct; "
            "from tilecore.runtime.cache import default_cache; "
            "ck = ct.compile(t.scale, (np.zeros(512, np.float32),) * 2 + (5.0, 512)); "
            "c = default_cache(); "
            "print(hashlib.sha256(ck.cubin).hexdigest(), c.misses, c.disk_hits)")
    env = {**__import__("os").environ, "TILECORE_CACHE_DIR": str(tmp_path)}
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outs = [p.communicate()[0].split() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert outs[0][0] == outs[1][0]
    third = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, check=True).stdout.split()
    assert third == [outs[0][0], "0", "1"]            # same cubin, no miss, one disk hit


def test_compile_uses_tilecore_arch_when_no_arch_is_given(monkeypatch):
    x = np.zeros(1000, np.float32)
    monkeypatch.setenv("TILECORE_ARCH", "sm_80")
    assert ct.compile(scale, (x, x, 2.0, 256)).arch == "sm_80"
    assert ct.compile(scale, (x, x, 2.0, 256), arch="sm_90").arch == "sm_90"
    monkeypatch.delenv("TILECORE_ARCH")
    assert ct.compile(scale, (x, x, 2.0, 256)).arch == "sm_90"


def test_compile_names_the_argument_like_a_launch():
    x = np.zeros(1000, np.float32)
    with pytest.raises(TypeError, match='Invalid kernel argument "x": NumPy dtype complex64 has '
                                        'no tilecore dtype'):
        ct.compile(scale, (x.astype(np.complex64), x, 2.0, 256))
    with pytest.raises(TypeError, match='Invalid kernel argument "y": NumPy masked arrays'):
        ct.compile(scale, (x, np.ma.masked_array(x), 2.0, 256))
    with pytest.raises(TypeError, match='Invalid kernel argument "factor"'):
        ct.compile(scale, (x, x, "2.0", 256))


@ct.kernel
def transpose_tile(a, b, N: ct.Constant[int]):
    ct.store(b, index=(0, 0), tile=ct.transpose(ct.load(a, index=(0, 0), shape=(N, N))))


def test_shared_memory_beyond_the_block_limit_is_refused_before_nvrtc():
    a = np.zeros((256, 256), np.float32)
    for arch, limit in (("sm_80", 166912), ("sm_90", 232448)):
        with pytest.raises(ct.TileValueError, match=f'Kernel "transpose_tile" needs 262144 bytes '
                                                    f"of shared memory per block .* more than a "
                                                    f"block of {arch} may use \\({limit}\\)"):
            ct.compile(transpose_tile, (a, a.copy(), 256), arch=arch)
    assert ct.compile(transpose_tile, (a, a.copy(), 128), arch="sm_90").smem_bytes == 65536


@ct.kernel
def fill_with(o, s):
    ct.store(o, index=(0,), tile=ct.full((4,), s, ct.float32))


def test_ml_dtypes_scalars_are_kernel_arguments():
    import ml_dtypes
    for value, want in ((ml_dtypes.bfloat16(1.5), 1.5), (np.float16(-2.25), -2.25),
                        (ml_dtypes.float8_e4m3fn(0.5), 0.5)):
        o = np.zeros(4, np.float32)
        ct.launch(None, (1,), fill_with, (o, value))
        np.testing.assert_array_equal(o, np.full(4, want, np.float32))
    with pytest.raises(TypeError, match='Invalid kernel argument "s": NumPy scalar of dtype'):
        ct.launch(None, (1,), fill_with, (np.zeros(4, np.float32), np.str_("x")))
