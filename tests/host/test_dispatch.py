"""`tilecore.launch` as the C extension's Dispatch: a cached launch goes
straight to the kernel's fast launcher; every other call reaches the Python
path with its arguments unchanged, so errors and results are the Python
function's."""
import sys

import numpy as np
import pytest

import tilecore as ct
from tilecore.host import launch as launch_module
from tilecore.host.fastpath import make_fast_launch
from tilecore.kernel import Kernel

from tilecore.runtime import _cudriver as native  # built by every install with a C compiler

from fakes import KEY, FakeTensor, Recorder


@ct.kernel
def double(a, b):
    ct.store(b, index=(0,), tile=ct.load(a, index=(0,), shape=(4,)) * 2)


class Calls:
    """A stand-in for the general path (or the entry): records its calls."""

    def __init__(self, name):
        self.name, self.calls = name, []

    def __call__(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        return f"{self.name} result"


def _dispatch():
    general, entry = Calls("general"), Calls("entry")
    return native.Dispatch(Kernel, general, entry), general, entry


def _kernel_with_fast_launcher(use_c: bool):
    @ct.kernel
    def k(a, n, x, C: ct.Constant[int]):
        pass
    rec = Recorder()
    t = FakeTensor(0x2000, (4, 8), (8, 1))
    k.backend_cache["fast_launch"] = make_fast_launch(
        KEY, (t, 3, 1.5, 64), 0, {(0x2000, 4, 8, 8, 1): 0}, rec, rec.fail, native=use_c)
    return k, t, rec


def test_tilecore_launch_is_the_dispatch_and_keeps_its_signature():
    import inspect
    assert type(ct.launch) is native.Dispatch
    assert ct.launch.__name__ == "launch"
    assert ct.launch.__doc__ == launch_module.launch.__doc__
    assert list(inspect.signature(ct.launch).parameters) == ["stream", "grid", "kernel",
                                                             "kernel_args"]


@pytest.mark.parametrize("use_c", [True, False], ids=["C fast launcher", "Python fast launcher"])
def test_cached_launch_takes_the_fast_launcher(use_c):
    dispatch, general, entry = _dispatch()
    k, t, rec = _kernel_with_fast_launcher(use_c)
    assert dispatch(7, (3,), k, (t, 5, 2.5, 64)) is None
    assert rec.calls == [(7, (3, 1, 1), (0x2000, 4, 8, 8, 1, 5, 2.5))]
    assert general.calls == [] and entry.calls == []


@pytest.mark.parametrize("use_c", [True, False], ids=["C fast launcher", "Python fast launcher"])
def test_failed_guard_goes_to_the_general_path_with_the_same_arguments(use_c):
    dispatch, general, entry = _dispatch()
    k, t, rec = _kernel_with_fast_launcher(use_c)
    args = (t, 5, 2.5, 32)  # another constant
    assert dispatch(None, (3,), k, args) == "general result"
    assert general.calls == [((None, (3,), k, args), {})]
    assert rec.calls == [] and entry.calls == []


def test_kernel_without_fast_launcher_and_non_kernels_go_to_the_general_path():
    dispatch, general, entry = _dispatch()
    dispatch(None, (1,), double, ())
    dispatch(None, (1,), "not a kernel", ())
    assert [c[0][2] for c in general.calls] == [double, "not a kernel"]
    assert entry.calls == []


def test_calls_of_another_shape_go_to_the_entry():
    dispatch, general, entry = _dispatch()
    dispatch(None, (1,), double)
    dispatch(None, (1,), double, (), 5)
    dispatch(None, (1,), double, (), stream=None)
    assert entry.calls == [((None, (1,), double), {}), ((None, (1,), double, (), 5), {}),
                           ((None, (1,), double, ()), {"stream": None})]
    assert general.calls == []


def test_launch_errors_of_the_fast_launcher_propagate():
    dispatch, general, entry = _dispatch()
    k, t, rec = _kernel_with_fast_launcher(True)
    rec.result = 700
    with pytest.raises(RuntimeError, match="launch failed: 700"):
        dispatch(None, (1,), k, (t, 5, 2.5, 64))
    with pytest.raises(ValueError, match='Invalid argument "grid"'):
        dispatch(None, (0,), k, (t, 5, 2.5, 64))
    assert general.calls == []


def test_a_broken_backend_cache_raises():
    dispatch, _, _ = _dispatch()
    k, t, _ = _kernel_with_fast_launcher(True)
    del k.backend_cache
    with pytest.raises(AttributeError, match="backend_cache"):
        dispatch(None, (1,), k, (t, 5, 2.5, 64))


def test_messages_name_launch():
    with pytest.raises(TypeError, match=r"launch\(\) missing 1 required positional"):
        ct.launch(None, (1,), double)
    with pytest.raises(TypeError, match='Invalid argument "kernel" of launch'):
        ct.launch(None, (1,), 5, ())


def test_runs_on_the_interpreter():
    a = np.arange(4, dtype=np.float32)
    b = np.zeros(4, np.float32)
    ct.launch(None, (1,), double, (a, b))
    np.testing.assert_array_equal(b, 2 * a)


def test_no_reference_leaks():
    dispatch, general, _ = _dispatch()
    k, t, rec = _kernel_with_fast_launcher(True)
    args, bad = (t, 5, 2.5, 64), (t, 5, 2.5, 32)
    dispatch(None, (1,), k, args)
    rec.calls.clear()
    watched = (k, t, args, bad, general, k.backend_cache)
    before = [sys.getrefcount(o) for o in watched]
    for _ in range(1000):
        dispatch(None, (1,), k, args)
        dispatch(None, (1,), k, bad)
        rec.calls.clear()
        general.calls.clear()
    assert [sys.getrefcount(o) for o in watched] == before


def test_uninitialized_dispatch_raises():
    d = native.Dispatch.__new__(native.Dispatch)
    with pytest.raises(TypeError):  # no vectorcall entry until __init__ ran: never a crash
        d(None, (1,), double, ())
