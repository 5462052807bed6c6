"""The driver is loaded lazily, through the C extension or cuda.bindings; no
driver becomes NoDeviceError; check() unwraps results."""
import subprocess
import sys

import pytest
from cuda.bindings import driver as drv

from tilecore.runtime import driver as rt_driver
from tilecore.runtime.driver import CudaError, NoDeviceError, check, error_name


def test_import_does_not_load_the_driver():
    code = ("import sys, tilecore.runtime, tilecore.config; "
            "print('cuda.bindings.driver' in sys.modules, 'cuda.core' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"


def test_check_unwraps_values():
    ok = drv.CUresult.CUDA_SUCCESS
    assert check((ok,)) is None
    assert check((ok, 7)) == 7
    assert check((ok, 1, 2)) == (1, 2)


def test_check_raises_with_error_name(monkeypatch):
    monkeypatch.setattr(rt_driver, "_driver", None)  # no driver: name only, no description
    with pytest.raises(CudaError) as e:
        check((drv.CUresult.CUDA_ERROR_OUT_OF_MEMORY, None))
    assert str(e.value) == "CUDA_ERROR_OUT_OF_MEMORY"
    assert e.value.code == 2 and e.value.name == "CUDA_ERROR_OUT_OF_MEMORY"
    assert isinstance(e.value, RuntimeError)


def test_cuda_error_pickles():
    import pickle
    err = pickle.loads(pickle.dumps(CudaError(1, "CUDA_ERROR_INVALID_VALUE", "invalid argument")))
    assert str(err) == "CUDA_ERROR_INVALID_VALUE (invalid argument)" and err.code == 1


def test_error_name_unknown_code():
    assert error_name(1) == "CUDA_ERROR_INVALID_VALUE"
    assert error_name(123456) == "CUresult 123456"


def _fresh(monkeypatch, native="0"):
    monkeypatch.setattr(rt_driver, "_driver", None)
    monkeypatch.setattr(rt_driver, "_failure", None)
    monkeypatch.setattr(rt_driver, "_has_gpu", None)
    monkeypatch.setenv("TILECORE_NATIVE", native)


def test_missing_library_is_no_device_error(monkeypatch):
    _fresh(monkeypatch)
    calls = []

    def cu_init(flags):
        calls.append(flags)
        raise RuntimeError('"cuda" is an NVIDIA driver library and can only be found via '
                           'system search.')

    monkeypatch.setattr(drv, "cuInit", cu_init)
    for _ in range(2):
        with pytest.raises(NoDeviceError) as e:
            rt_driver.driver()
        assert str(e.value) == (
            'No NVIDIA driver was found ("cuda" is an NVIDIA driver library and can only be '
            'found via system search.). The NumPy interpreter (NumPy arrays as arguments, or '
            'TILECORE_INTERPRET=1) and tilecore.compile still work without a GPU.')
    assert calls == [0]  # the failure is remembered, not retried
    assert rt_driver.has_gpu() is False


def test_cuinit_error_is_no_device_error(monkeypatch):
    _fresh(monkeypatch)
    monkeypatch.setattr(drv, "cuInit", lambda flags: (drv.CUresult.CUDA_ERROR_NO_DEVICE,))
    with pytest.raises(NoDeviceError) as e:
        rt_driver.driver()
    assert str(e.value).startswith("The NVIDIA driver could not be initialized (cuInit failed "
                                   "with CUDA_ERROR_NO_DEVICE); no usable GPU was found.")


def test_has_gpu_counts_devices(monkeypatch):
    _fresh(monkeypatch)
    ok = drv.CUresult.CUDA_SUCCESS
    monkeypatch.setattr(drv, "cuInit", lambda flags: (ok,))
    monkeypatch.setattr(drv, "cuDeviceGetCount", lambda: (ok, 0))
    assert rt_driver.driver().drv is drv
    assert rt_driver.has_gpu() is False
    monkeypatch.setattr(rt_driver, "_has_gpu", None)
    monkeypatch.setattr(drv, "cuDeviceGetCount", lambda: (ok, 2))
    assert rt_driver.has_gpu() is True


def test_native_extension_is_built_and_selected(monkeypatch):
    # The C extension builds on every Linux install with a compiler (CI included).
    monkeypatch.setenv("TILECORE_NATIVE", "1")
    native = rt_driver.native_module()
    assert native is not None and native.__name__ == "tilecore.runtime._cudriver"
    monkeypatch.setenv("TILECORE_NATIVE", "0")
    assert rt_driver.native_module() is None


def test_native_missing_library_is_no_device_error(monkeypatch):
    _fresh(monkeypatch, native="1")
    monkeypatch.setattr(rt_driver, "LIBCUDA", "libcuda-does-not-exist.so.1")
    with pytest.raises(NoDeviceError) as e:
        rt_driver.driver()
    assert str(e.value).startswith("No NVIDIA driver was found (cannot load "
                                   "libcuda-does-not-exist.so.1: ")
    assert str(e.value).endswith("and tilecore.compile still work without a GPU.")

