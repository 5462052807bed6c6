"""The kernels the GPU runs with the shipped sm_80/sm_90 policies (full-size
tiles, both passes, 64-bit offsets from 2**31 items) compile under NVRTC for
sm_80 and sm_90. Launches are captured instead of run."""
import ml_dtypes
import numpy as np
import pytest

import tilecore as ct
from tilecore.algorithms import DeviceReduce as R


def captured(monkeypatch, method, *args):
    calls = []
    monkeypatch.setattr(ct, "launch", lambda stream, grid, kernel, a: calls.append((kernel, a)))
    nbytes = method(None, *args)
    method(np.zeros(nbytes, np.uint8), *args)
    return calls


def user_add(a, b):
    return a + b


CASES = {
    "sum-f32": lambda n, x: (R.sum, x.astype(np.float32), np.zeros(1, np.float32), n),
    "sum-i8": lambda n, x: (R.sum, x.astype(np.int8), np.zeros(1, np.int8), n),
    "sum-f64": lambda n, x: (R.sum, x.astype(np.float64), np.zeros(1, np.float64), n),
    "min-f16": lambda n, x: (R.min, x.astype(np.float16), np.zeros(1, np.float16), n),
    "argmax-f32": lambda n, x: (R.arg_max, x.astype(np.float32), np.zeros(1, np.float32),
                                np.zeros(1, np.int64), n),
    "user-f32": lambda n, x: (R.reduce, x.astype(np.float32), np.zeros(1, np.float32), n,
                              user_add, 0.0),
    # arg_reduce's four-tile loop for 1- and 2-byte items (registers fitted to the policy)
    "argmax-bf16": lambda n, x: (R.arg_max, x.astype(ml_dtypes.bfloat16),
                                 np.zeros(1, ml_dtypes.bfloat16), np.zeros(1, np.int64), n),
    "argmin-i8": lambda n, x: (R.arg_min, x.astype(np.int8), np.zeros(1, np.int8),
                               np.zeros(1, np.int64), n),
}


@pytest.mark.interpreter_only
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("case", list(CASES))
def test_default_policy_kernels_compile(monkeypatch, arch, case):
    n = 1 << 20
    x = np.zeros(n, np.float32)
    monkeypatch.setenv("TILECORE_ARCH", arch)              # the interpreter takes arch's policy
    calls = captured(monkeypatch, *CASES[case](n, x))
    assert len(calls) == 2                                  # two passes
    for kernel, args in calls:
        ck = ct.compile(kernel, args, arch=arch)
        assert ck.stack_bytes == 0, f"{case}: spills ({ck.stack_bytes} bytes of stack)"


@pytest.mark.interpreter_only
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("case", list(CASES))
def test_single_block_kernels_compile(monkeypatch, arch, case):
    """Small inputs: one launch of the single-block kernel, with the policy's
    single_block_threads (on sm_90 1024, 512 for 32 items a thread and for the
    4-byte arg_max's 16: it runs alone on one SM), unspilled."""
    n = 5000
    x = np.zeros(n, np.float32)
    monkeypatch.setenv("TILECORE_ARCH", arch)
    (call,) = captured(monkeypatch, *CASES[case](n, x))
    ck = ct.compile(*call, arch=arch)
    assert ck.stack_bytes == 0, f"{case}: spills ({ck.stack_bytes} bytes of stack)"
    threads = 256 if arch == "sm_80" else 512 if case in (
        "sum-i8", "min-f16", "argmax-f32", "argmax-bf16", "argmin-i8") else 1024
    assert f": {threads} threads" in ck.source.splitlines()[0]


@pytest.mark.interpreter_only
@pytest.mark.parametrize("method", ["sum", "arg_min"])
def test_64bit_offsets_compile(monkeypatch, method):
    """2**31 + 5 items (a broadcast view stands for the 2 GB array)."""
    n = (1 << 31) + 5
    x = np.broadcast_to(np.int8(1), (n,))
    outs = (np.zeros(1, np.int64),) if method == "sum" else (np.zeros(1, np.int8),
                                                             np.zeros(1, np.int64))
    calls = captured(monkeypatch, getattr(R, method), x, *outs, n)
    for kernel, args in calls:
        src = ct.compile(kernel, args, arch="sm_90").source
        assert "long long" in src


# DeviceReduce.reduce_by_key's one launch (rbk_small) at the shipped tile, up to the threshold
RBK_CASES = {
    "i32-f32-add": (np.int32, np.float32, "add"),
    "i32-f32-max": (np.int32, np.float32, "max"),
    "i32-f32-user": (np.int32, np.float32, user_add),
    "i64-f64-add": (np.int64, np.float64, "add"),
    "f64-i64-user": (np.float64, np.int64, user_add),
    "bool-f16-add": (np.bool_, np.float16, "add"),
    "u8-i8-xor": (np.uint8, np.int8, "xor"),
}


@pytest.mark.interpreter_only
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("case", list(RBK_CASES))
def test_reduce_by_key_one_launch_compiles(monkeypatch, arch, case):
    """The largest small input (the policy's small_max_items): one launch of
    rbk_small with the shipped small tile, unspilled."""
    from tilecore.algorithms import reduce_by_key as RBK
    from tilecore.dispatch.reduce_by_key_policy import select_reduce_by_key_policy
    monkeypatch.setenv("TILECORE_ARCH", arch)      # the interpreter takes arch's policy
    kd, vd, op = RBK_CASES[case]
    n = select_reduce_by_key_policy(int(arch[3:]), {"op": "add"}).small_max_items
    k, v = np.zeros(n, kd), np.zeros(n, vd)
    u, a, r = np.zeros(n, kd), np.zeros(n, vd), np.zeros(1, np.int32)
    monkeypatch.setattr(RBK, "_sigs", {})
    (call,) = captured(monkeypatch, R.reduce_by_key, k, u, v, a, r, op, n)
    kernel, args = call
    assert kernel.pyfunc.__name__ == "rbk_small"
    ck = ct.compile(kernel, args, arch=arch)
    assert ck.stack_bytes == 0, f"{case}: spills ({ck.stack_bytes} bytes of stack)"
