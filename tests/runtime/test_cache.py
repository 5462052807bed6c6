"""cache_key sensitivity, disk entries (atomic, checksummed, sharded, with the
user's file mode), corrupt or invalid entries rebuilt, every OS error of the
disk degraded to one warning per kind, several processes writing one key, the
memory+disk cache."""
import errno
import os
import stat
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import tilecore as ct

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


def test_validator_refuses_an_entry_with_a_valid_checksum(tmp_path):
    key = cache_key(BASE_PARTS)
    DiskCache(tmp_path).put(key, b"forged")
    cache = CompileCache(DiskCache(tmp_path))
    seen = []
    validate = lambda payload: seen.append(payload) or payload.startswith(b"\x7fELF")  # noqa: E731
    assert cache.get_or_build(key, lambda: b"\x7fELF real", validate) == b"\x7fELF real"
    assert seen == [b"forged"]
    assert (cache.disk.corrupt, cache.misses, cache.disk_hits) == (1, 1, 0)
    fresh = CompileCache(DiskCache(tmp_path))                      # the rebuilt entry passes
    assert fresh.get_or_build(key, lambda: pytest.fail("rebuilt"), validate) == b"\x7fELF real"
    assert fresh.disk_hits == 1


# ---- OS errors: each one warns once per kind and never fails the build ----------

def _build_all(cache: CompileCache, keys, payload=b"\x7fELF") -> None:
    for key in keys:
        assert cache.get_or_build(key, lambda: payload) == payload


KEYS = [cache_key({"k": i}) for i in range(4)]


def _messages(record) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, RuntimeWarning)]


def test_root_is_a_file_warns_once_and_builds(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")
    cache = CompileCache(DiskCache(blocker))
    with pytest.warns(RuntimeWarning) as record:
        _build_all(cache, KEYS)
    [message] = _messages(record)
    assert message.startswith(f"tilecore could not write its disk cache at {blocker}: "
                              f"[Errno {errno.ENOTDIR}] Not a directory")
    assert "stay in memory" in message
    assert cache.misses == len(KEYS) and blocker.read_bytes() == b""


def test_shard_is_a_file_warns_and_builds(tmp_path):
    key = KEYS[0]
    (tmp_path / key[:2]).write_bytes(b"not a shard")
    cache = CompileCache(DiskCache(tmp_path))
    with pytest.warns(RuntimeWarning, match=r"could not write .*File exists"):
        _build_all(cache, [key])
    assert cache.get_or_build(key, lambda: pytest.fail("rebuilt")) == b"\x7fELF"   # memory


def test_entry_is_a_directory_warns_for_read_and_write(tmp_path):
    disk = DiskCache(tmp_path)
    key = KEYS[0]
    disk.path(key).mkdir(parents=True)
    cache = CompileCache(disk)
    with pytest.warns(RuntimeWarning) as record:
        _build_all(cache, [key])
        cache.memory.clear()
        _build_all(cache, [key])                                   # same problems: no new warning
    read, write = _messages(record)
    assert f"could not read its disk cache at {tmp_path}" in read and "Is a directory" in read
    assert "could not write" in write and "Is a directory" in write
    assert cache.misses == 2 and disk.path(key).is_dir()
    assert os.listdir(disk.path(key).parent) == [key[2:]]          # the temporary file removed


@pytest.mark.parametrize("special", ["fifo", "device"])
def test_entry_that_is_not_a_regular_file_is_not_read(tmp_path, special):
    """A FIFO would block the read forever and /dev/zero never end it."""
    disk = DiskCache(tmp_path)
    path = disk.path(KEYS[0])
    path.parent.mkdir()
    if special == "fifo":
        if not hasattr(os, "mkfifo"):
            pytest.skip("os.mkfifo does not exist on this platform (Windows)")
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    with pytest.warns(RuntimeWarning, match="not a regular file"):
        assert disk.get(KEYS[0]) is None
    assert disk.corrupt == 0


def _deny(monkeypatch, module_attr: str, under: Path, exc=PermissionError) -> None:
    """Make `os.<module_attr>` raise `exc` (errno EACCES) for paths under `under`,
    as chmod 000 would for a user other than root."""
    original = getattr(os, module_attr)

    def denied(path, *args, **kwargs):
        if str(path).startswith(str(under)):
            raise exc(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return original(path, *args, **kwargs)
    monkeypatch.setattr(os, module_attr, denied)


def test_unreadable_entries_warn_once_and_rebuild(tmp_path, monkeypatch):
    writer = DiskCache(tmp_path)
    for key in KEYS:
        writer.put(key, b"\x7fELF")
    _deny(monkeypatch, "open", tmp_path)
    cache = CompileCache(DiskCache(tmp_path))
    with pytest.warns(RuntimeWarning) as record:
        _build_all(cache, KEYS)
    [message] = _messages(record)
    assert message.startswith(f"tilecore could not read its disk cache at {tmp_path}: "
                              f"[Errno {errno.EACCES}] Permission denied: '{tmp_path}")
    assert cache.misses == len(KEYS) and cache.disk.corrupt == 0


def test_read_only_shards_warn_once_and_keep_modules_in_memory(tmp_path, monkeypatch):
    """A cache written under sudo: root-owned shards the user cannot write into."""
    _deny(monkeypatch, "replace", tmp_path)
    cache = CompileCache(DiskCache(tmp_path))
    with pytest.warns(RuntimeWarning) as record:
        _build_all(cache, KEYS)
    [message] = _messages(record)
    assert "could not write" in message and "Permission denied" in message
    assert [os.listdir(tmp_path / k[:2]) for k in KEYS] == [[]] * len(KEYS)   # no temp files
    for key in KEYS:
        assert cache.get_or_build(key, lambda: pytest.fail("rebuilt")) == b"\x7fELF"
    assert cache.memory_hits == len(KEYS)


def test_undeletable_damaged_entry_warns_and_rebuilds(tmp_path, monkeypatch):
    disk = DiskCache(tmp_path)
    disk.path(KEYS[0]).parent.mkdir()
    disk.path(KEYS[0]).write_bytes(b"junk")
    _deny(monkeypatch, "unlink", tmp_path)
    cache = CompileCache(disk)
    with pytest.warns(RuntimeWarning, match="could not delete a damaged entry of"):
        _build_all(cache, [KEYS[0]])
    monkeypatch.undo()
    assert DiskCache(tmp_path).get(KEYS[0]) == b"\x7fELF"        # replaced by the rename


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0,
                    reason="file modes do not deny root")
def test_chmod_000_root_and_entry(tmp_path):
    writer = DiskCache(tmp_path)
    writer.put(KEYS[0], b"\x7fELF")
    writer.path(KEYS[0]).chmod(0)
    tmp_path.chmod(stat.S_IRUSR | stat.S_IXUSR)                   # no new shards
    try:
        cache = CompileCache(DiskCache(tmp_path))
        with pytest.warns(RuntimeWarning) as record:
            _build_all(cache, KEYS)
        assert len(_messages(record)) == 2                         # one read, one write
        assert cache.misses == len(KEYS)
    finally:
        tmp_path.chmod(stat.S_IRWXU)
        writer.path(KEYS[0]).chmod(stat.S_IRUSR | stat.S_IWUSR)


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_entries_take_the_users_file_mode(tmp_path, umask):
    """0666 and 0777 less the umask, as for any file the user creates: the same
    user's processes read them, and a group does where the umask lets it."""
    old = os.umask(umask)
    try:
        disk = DiskCache(tmp_path / "root")
        disk.put(KEYS[0], b"\x7fELF")
    finally:
        os.umask(old)
    assert stat.S_IMODE(disk.path(KEYS[0]).stat().st_mode) == 0o666 & ~umask
    assert stat.S_IMODE(disk.path(KEYS[0]).parent.stat().st_mode) == 0o777 & ~umask


def test_no_home_directory_warns_once_and_keeps_memory_only(monkeypatch):
    monkeypatch.delenv("TILECORE_CACHE_DIR", raising=False)
    monkeypatch.setattr(cache_mod, "_default", None)
    monkeypatch.setattr(cache_mod, "_no_home_warned", False)

    def no_home():
        raise RuntimeError("Could not determine home directory.")
    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    with pytest.warns(RuntimeWarning, match="tilecore has no disk cache: Could not determine "
                                            "home directory. Set TILECORE_CACHE_DIR"):
        assert default_cache().disk is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert default_cache().get_or_build(KEYS[0], lambda: b"x") == b"x"


# ---- the compiler's entries: a forged entry is never loaded ----------------------

@ct.kernel
def _double(x, y, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    ct.store(y, index=(bid,), tile=ct.load(x, index=(bid,), shape=(TILE,)) * 2.0)


_DOUBLE_ARGS = (np.zeros(256, np.float32), np.zeros(256, np.float32), 128)


@pytest.fixture
def fresh_default_cache(monkeypatch, tmp_path):
    """The process-wide cache, emptied, with its disk at tmp_path/cache."""
    monkeypatch.setattr(cache_mod, "_default", None)
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _only_entry(root: Path) -> tuple[str, Path]:
    [path] = [p for p in root.rglob("*") if p.is_file()]
    return path.parent.name + path.name, path


def _genuine_entry(root: Path) -> tuple[ct.CompiledKernel, str, bytes]:
    ck = ct.compile(_double, _DOUBLE_ARGS, arch="sm_90")
    key, _ = _only_entry(root)
    return ck, key, DiskCache(root).get(key)


def test_entry_validator_checks_every_field(fresh_default_cache):
    from tilecore.host.compile import _ENTRY_HEADER, _entry_is_valid
    ck, _, entry = _genuine_entry(fresh_default_cache)
    blocks, registers, stack = _ENTRY_HEADER.unpack_from(entry)
    cubin = entry[_ENTRY_HEADER.size:]
    assert cubin == ck.cubin and registers == ck.registers and registers > 0
    valid = lambda e: _entry_is_valid(ck.block_threads, "sm_90", e)  # noqa: E731
    assert valid(entry)

    def with_header(b, r, s):
        return _ENTRY_HEADER.pack(b, r, s) + cubin

    def with_byte(offset, value):
        data = bytearray(cubin)
        data[offset] = value
        return _ENTRY_HEADER.pack(blocks, registers, stack) + bytes(data)
    forged = {
        "empty": b"", "short": b"abc", "header only": entry[:_ENTRY_HEADER.size],
        "truncated ELF header": entry[:_ENTRY_HEADER.size + 40],
        "not ELF": _ENTRY_HEADER.pack(blocks, registers, stack) + b"\0" * len(cubin),
        "32-bit ELF": with_byte(4, 1), "big-endian": with_byte(5, 2),
        "x86-64 machine": with_byte(18, 62),
        "registers": with_header(blocks, registers + 1, stack),
        "stack": with_header(blocks, registers, stack + 8),
        "min blocks": with_header(1000, registers, stack),
        "cubin cut": entry[:len(entry) // 2],
    }
    assert [name for name, e in forged.items() if valid(e)] == []


@pytest.mark.parametrize("forgery", ["short payload", "junk cubin"])
def test_forged_entry_with_valid_checksum_is_rebuilt(fresh_default_cache, monkeypatch, forgery):
    ck, key, entry = _genuine_entry(fresh_default_cache)
    forged = b"abc" if forgery == "short payload" else entry[:8] + b"\x7fELF junk" * 20
    DiskCache(fresh_default_cache).put(key, forged)
    monkeypatch.setattr(cache_mod, "_default", None)              # as a new process would
    again = ct.compile(_double, _DOUBLE_ARGS, arch="sm_90")
    assert again == ck
    cache = default_cache()
    assert (cache.disk.corrupt, cache.misses, cache.disk_hits) == (1, 1, 0)
    assert DiskCache(fresh_default_cache).get(key) == entry       # the entry rewritten


def test_compile_works_with_an_unusable_disk_cache(fresh_default_cache, monkeypatch):
    fresh_default_cache.write_bytes(b"")                           # the root is a file
    with pytest.warns(RuntimeWarning, match="could not write its disk cache"):
        ck = ct.compile(_double, _DOUBLE_ARGS, arch="sm_90")
    assert ck.cubin[:4] == b"\x7fELF"
