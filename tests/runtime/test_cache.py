"""cache_key sensitivity, disk entries (atomic, checksummed, sharded), corrupt
entries rebuilt, several processes writing one key, the memory+disk cache."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tilecore.runtime import cache as cache_mod
from tilecore.runtime.cache import CompileCache, DiskCache, cache_key, default_cache

BASE_PARTS = {"source": "extern \"C\" __global__ void k() {}", "arch": "sm_90",
              "options": b"-O3", "nvrtc": 13005}


def test_cache_key_is_stable_and_order_free():
    key = cache_key(BASE_PARTS)
    assert len(key) == 64 and all(c in "0123456789abcdef" for c in key)
    assert cache_key(dict(reversed(list(BASE_PARTS.items())))) == key


@pytest.mark.parametrize("name,value", [("source", "extern \"C\" __global__ void k(){}"),
                                        ("arch", "sm_80"), ("options", b"-O2"),
                                        ("nvrtc", 13006), ("extra", "")])
def test_cache_key_changes_with_any_part(name, value):
    assert cache_key({**BASE_PARTS, name: value}) != cache_key(BASE_PARTS)


def test_cache_key_distinguishes_types_and_boundaries():
    assert cache_key({"a": 1}) != cache_key({"a": "1"}) != cache_key({"a": b"1"})
    assert cache_key({"a": "bc"}) != cache_key({"ab": "c"})
    assert cache_key({"a": "x", "b": ""}) != cache_key({"a": "", "b": "x"})
    with pytest.raises(TypeError) as e:
        cache_key({"flag": True})
    assert str(e.value) == 'Invalid cache key part "flag": expected str, bytes or int, got bool'


def test_disk_roundtrip_and_layout(tmp_path):
    disk = DiskCache(tmp_path)
    key = cache_key(BASE_PARTS)
    assert disk.get(key) is None
    disk.put(key, b"\x7fELF payload")
    assert disk.get(key) == b"\x7fELF payload"
    assert disk.path(key) == tmp_path / key[:2] / key[2:]
    assert os.listdir(tmp_path / key[:2]) == [key[2:]]          # no temp files left
    disk.put(key, b"")
    assert disk.get(key) == b""


def test_disk_rejects_bad_keys(tmp_path):
    with pytest.raises(ValueError) as e:
        DiskCache(tmp_path).get("../../etc/passwd")
    assert str(e.value) == ("Invalid cache key '../../etc/passwd': expected 8 to 128 lowercase "
                            "hex digits")


@pytest.mark.parametrize("damage", ["flip_payload", "flip_header", "truncate", "empty",
                                    "extend"])
def test_corrupt_entry_is_deleted_and_rebuilt(tmp_path, damage):
    key = cache_key(BASE_PARTS)
    payload = bytes(range(256)) * 4
    DiskCache(tmp_path).put(key, payload)
    path = DiskCache(tmp_path).path(key)
    data = bytearray(path.read_bytes())
    if damage == "flip_payload":
        data[-100] ^= 0x01
    elif damage == "flip_header":
        data[2] ^= 0xFF
    elif damage == "truncate":
        data = data[:len(data) // 2]
    elif damage == "empty":
        data = bytearray()
    else:
        data += b"\0"
    path.write_bytes(bytes(data))

    cache = CompileCache(DiskCache(tmp_path))
    builds = []
    out = cache.get_or_build(key, lambda: builds.append(1) or payload)
    assert out == payload and builds == [1]
    assert cache.disk.corrupt == 1 and cache.misses == 1 and cache.disk_hits == 0
    assert path.read_bytes() != bytes(data)                        # rewritten
    assert DiskCache(tmp_path).get(key) == payload


def test_compile_cache_counters(tmp_path):
    key = cache_key(BASE_PARTS)
    first = CompileCache(DiskCache(tmp_path))
    assert first.get_or_build(key, lambda: b"cubin") == b"cubin"
    assert first.get_or_build(key, lambda: pytest.fail("rebuilt")) == b"cubin"
    assert (first.misses, first.disk_hits, first.memory_hits) == (1, 0, 1)
    second = CompileCache(DiskCache(tmp_path))                     # a new process, same disk
    assert second.get_or_build(key, lambda: pytest.fail("rebuilt")) == b"cubin"
    assert (second.misses, second.disk_hits, second.memory_hits) == (0, 1, 0)


def test_memory_only_cache():
    cache = CompileCache(None)
    assert cache.get_or_build("ab" * 32, lambda: b"x") == b"x"
    assert cache.get_or_build("ab" * 32, lambda: b"y") == b"x"
    assert (cache.misses, cache.memory_hits) == (1, 1)
    with pytest.raises(TypeError) as e:
        cache.get_or_build("cd" * 32, lambda: "text")
    assert str(e.value) == "cache build function must return bytes, got str"


def test_unwritable_disk_warns_and_still_builds(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")                                       # root is a file: mkdir fails
    cache = CompileCache(DiskCache(blocker))
    with pytest.warns(RuntimeWarning, match="could not write its disk cache entry"):
        assert cache.get_or_build("ab" * 32, lambda: b"z") == b"z"


def test_default_cache_follows_config(monkeypatch, tmp_path):
    monkeypatch.setattr(cache_mod, "_default", None)
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(tmp_path / "a"))
    c = default_cache()
    assert c.disk.root == tmp_path / "a"
    monkeypatch.setenv("TILECORE_CACHE_DIR", "off")
    assert default_cache() is c and c.disk is None
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(tmp_path / "b"))
    assert default_cache().disk.root == tmp_path / "b"


_WORKER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from tilecore.runtime.cache import DiskCache
    root, key, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    payload = bytes((i * 7 + 3) % 251 for i in range(1 << 20))
    disk = DiskCache(root)
    for _ in range(n):
        disk.put(key, payload)
        got = disk.get(key)
        assert got == payload, "read back a different payload"
    assert disk.corrupt == 0, "saw a partial entry"
    print("ok")
""")


def test_concurrent_processes_write_and_read_one_key(tmp_path):
    key = cache_key({"k": "concurrent"})
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, str(tmp_path), key, "30"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(4)]
    results = [p.communicate(timeout=60) for p in procs]
    for p, (out, err) in zip(procs, results):
        assert p.returncode == 0, err
        assert out.strip() == "ok"
    assert DiskCache(tmp_path).get(key) == bytes((i * 7 + 3) % 251 for i in range(1 << 20))
    assert os.listdir(tmp_path / key[:2]) == [key[2:]]
