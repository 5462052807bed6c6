"""The scan kernels the GPU runs with the shipped sm_80/sm_90 policies
(full-size tiles, both modes, packed and wide status, 64-bit offsets from
2**31 items) compile under NVRTC without spilling. Launches are captured
instead of run."""
import numpy as np
import pytest

import tilecore as ct
from tilecore.algorithms import DeviceScan as S
from tilecore.dispatch import override_policy


def captured(monkeypatch, method, *args):
    calls = []
    monkeypatch.setattr(ct, "launch", lambda stream, grid, kernel, a: calls.append((kernel, a)))
    nbytes = method(None, *args)
    method(np.zeros(nbytes, np.uint8), *args)
    return calls


def affine(p, q):
    return ((((p >> 16) * (q >> 16)) & 0xFFFF) << 16) | \
        (((q >> 16) * (p & 0xFFFF) + (q & 0xFFFF)) & 0xFFFF)


N = 1 << 20
CASES = {
    "incl-f32": lambda: (S.inclusive_sum, np.zeros(N, np.float32), np.zeros(N, np.float32), N),
    "excl-f32": lambda: (S.exclusive_sum, np.zeros(N, np.float32), np.zeros(N, np.float32), N),
    "excl-i32": lambda: (S.exclusive_sum, np.zeros(N, np.int32), np.zeros(N, np.int32), N),
    "incl-f64": lambda: (S.inclusive_sum, np.zeros(N, np.float64), np.zeros(N, np.float64), N),
    "user-u32": lambda: (S.inclusive_scan, np.zeros(N, np.uint32), np.zeros(N, np.uint32),
                         affine, N),
    "bykey-f32": lambda: (S.exclusive_sum_by_key, np.zeros(N, np.int32),
                          np.zeros(N, np.float32), np.zeros(N, np.float32), N),
}


@pytest.mark.interpreter_only
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("case", list(CASES))
def test_default_policy_kernels_compile(monkeypatch, arch, case):
    monkeypatch.setenv("TILECORE_ARCH", arch)              # the interpreter takes arch's policy
    calls = captured(monkeypatch, *CASES[case]())
    assert len(calls) == 2                                  # status init, the single pass
    for kernel, args in calls:
        ck = ct.compile(kernel, args, arch=arch)
        assert ck.stack_bytes == 0, f"{case}: spills ({ck.stack_bytes} bytes of stack)"


@pytest.mark.interpreter_only
def test_reduce_then_scan_compiles(monkeypatch):
    with override_policy("scan", mode=1):
        calls = captured(monkeypatch, *CASES["excl-f32"]())
    assert len(calls) == 2                                  # partials, downsweep
    for kernel, args in calls:
        assert ct.compile(kernel, args, arch="sm_90").stack_bytes == 0


@pytest.mark.interpreter_only
def test_64bit_offsets_compile(monkeypatch):
    """2**31 + 5 items (broadcast views stand for the 2 GB arrays)."""
    n = (1 << 31) + 5
    x = np.broadcast_to(np.int8(1), (n,))
    y = np.broadcast_to(np.int8(0), (n,))
    calls = captured(monkeypatch, S.exclusive_sum, x, y, n)
    kernel, args = calls[-1]
    assert "long long" in ct.compile(kernel, args, arch="sm_90").source
