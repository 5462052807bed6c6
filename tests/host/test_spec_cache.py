"""The spec-key disk cache (host/spec_cache.py), on the CPU through NVRTC: a
second process gets tilecore's own kernels (the algorithms') compiled without
lowering them; a user kernel, or a constant the key cannot vouch for, always
takes the regular path; a damaged entry is ignored."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("cuda.bindings")

_SCRIPT = r"""
import hashlib, json, sys
import numpy as np
import tilecore as ct
KM = sys.modules["tilecore.kernel"]
from tilecore.host import gpu, spec_cache
from tilecore.backend.cuda import ArraySpec
from tilecore.frontend.specialize import ArrayArg, ConstArg, ScalarArg
from tilecore.algorithms import reduce_kernels as K
from tilecore.algorithms.reduce import _no_transform
lowered_ir = [0]
real = KM.lower_kernel
def counting(*a):
    lowered_ir[0] += 1
    return real(*a)
KM.lower_kernel = counting
f32 = ct.float32
k = ct.kernel(K.reduce_known_fixed.pyfunc, num_threads=256)
const = sys.argv[1]
value = {"plain": 0.0, "numpy": np.float32(0.0), "object": object()}[const]
kinds = [ArrayArg(f32, 1), ArrayArg(f32, 1), ScalarArg(ct.int32)] + [ConstArg(v) for v in
         (0, 4096, f32, "add", value, _no_transform, False, True)]
specs = {0: ArraySpec(True, True, True), 1: ArraySpec(True, True, False)}
if const == "object":
    print(json.dumps({"key": spec_cache.spec_key(k, kinds, specs, "sm_90")}))
    sys.exit()
c, written = gpu.compiled_for(k, kinds, specs, "sm_90")
print(json.dumps({"lowered": lowered_ir[0], "written": sorted(written),
                  "source": hashlib.sha256(c.source.encode()).hexdigest(),
                  "cubin": hashlib.sha256(c.cubin).hexdigest(), "entry": c.entry,
                  "regs": c.registers, "checks": len(c.checks), "threads": c.block_threads,
                  "key": spec_cache.spec_key(k, kinds, specs, "sm_90")}))
"""


def _run(cache, const="plain"):
    env = dict(os.environ, TILECORE_CACHE_DIR=str(cache))
    r = subprocess.run([sys.executable, "-c", _SCRIPT, const], env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_a_warm_process_does_not_lower_tilecore_kernels(tmp_path):
    cold = _run(tmp_path)
    assert cold["lowered"] == 1 and cold["written"] == [1] and cold["key"]
    warm = _run(tmp_path)
    assert warm["lowered"] == 0
    assert {k: v for k, v in warm.items() if k != "lowered"} == \
        {k: v for k, v in cold.items() if k != "lowered"}
    # a NumPy scalar constant has its own key, and is served warm too
    first = _run(tmp_path, "numpy")
    assert first["lowered"] == 1 and first["key"] != cold["key"]
    assert _run(tmp_path, "numpy")["lowered"] == 0


def test_unvouched_constants_have_no_spec_key(tmp_path):
    assert _run(tmp_path, "object")["key"] is None


def test_a_damaged_entry_is_ignored(tmp_path):
    cold = _run(tmp_path)
    key = cold["key"]
    path = tmp_path / key[:2] / key[2:]
    assert path.is_file()
    data = bytearray(path.read_bytes())
    data[-100] ^= 0xFF  # the DiskCache's checksum fails: the entry is not used
    path.write_bytes(bytes(data))
    again = _run(tmp_path)
    assert again["lowered"] == 1 and again["cubin"] == cold["cubin"]


def test_user_kernels_and_lambdas_have_no_spec_key():
    import tilecore as ct
    from tilecore.frontend.specialize import ArrayArg
    from tilecore.host.spec_cache import _value_id, spec_key

    @ct.kernel
    def user(x):
        pass
    assert spec_key(user, [ArrayArg(ct.float32, 1)], {}, "sm_90") is None
    assert _value_id(lambda t: t) is None
    assert _value_id((1, 2.0, "a", ct.float32, np.int8(3))) is not None
    assert _value_id(0.0) != _value_id(-0.0) != _value_id(0) != _value_id(False)
    assert _value_id(np.float32(1)) != _value_id(np.float64(1))
    from tilecore.algorithms import reduce as RM
    assert _value_id(RM._no_transform) is not None


def test_a_dump_directory_turns_the_spec_key_off(monkeypatch, tmp_path):
    import tilecore as ct
    from tilecore.algorithms import reduce_kernels as K
    from tilecore.frontend.specialize import ArrayArg
    from tilecore.host.spec_cache import spec_key
    k = ct.kernel(K.reduce_known_fixed.pyfunc, num_threads=256)
    kinds = [ArrayArg(ct.float32, 1)]
    assert spec_key(k, kinds, {}, "sm_90") is not None
    monkeypatch.setenv("TILECORE_DUMP_DIR", str(tmp_path))
    assert spec_key(k, kinds, {}, "sm_90") is None
