"""The compiled-module cache: in memory, and on disk across processes.

Keys are sha256 digests of everything that determines the compiler's output
(`cache_key`), never of the output itself. A disk entry is one file,
``<root>/<key[:2]>/<key[2:]>``, holding a header (magic, format version,
payload length, sha256 of the payload) and the payload. Entries are written
to a temporary file in the same directory and renamed into place, so readers
never see a partial file and concurrent writers of the same key both succeed
(the last rename wins; both wrote the same bytes). An entry whose header or
checksum does not match, or whose payload the caller's validator refuses, is
deleted and reported as a miss, never loaded.

The disk never makes a compile fail: an OS error on the root, a shard or an
entry is a warning (once per kind of problem) and the module stays in memory.
One root may be shared (by a group, with a umask that lets the group write):
entries take the usual file mode, and an entry another user's permissions
keep from being read or replaced is rebuilt in memory. There is no per-user
subdirectory, since that would defeat sharing, and the default root is per
user already. Whoever can write the root can change the kernels that run,
so share it only with users you trust.
"""
from __future__ import annotations

import errno
import hashlib
import os
import re
import secrets
import stat
import struct
import threading
import warnings
from pathlib import Path
from typing import Callable, Optional, Union

from .. import config

__all__ = ["cache_key", "DiskCache", "CompileCache", "default_cache"]

_MAGIC = b"TCMODULE"
_VERSION = 1
_HEADER = struct.Struct("<8sIQ32s")  # magic, version, payload length, sha256(payload)
_KEY_RE = re.compile(r"[0-9a-f]{8,128}")

KeyPart = Union[str, bytes, int]


def _encode_part(name: str, value: KeyPart) -> bytes:
    if type(value) is str:
        tag, data = b"s", value.encode()
    elif type(value) is bytes:
        tag, data = b"b", value
    elif type(value) is int:
        tag, data = b"i", str(value).encode()
    else:
        raise TypeError(f'Invalid cache key part "{name}": expected str, bytes or int, '
                        f"got {type(value).__name__}")
    raw_name = name.encode()
    return b"".join((struct.pack("<Q", len(raw_name)), raw_name, tag,
                     struct.pack("<Q", len(data)), data))


def cache_key(parts: dict[str, KeyPart]) -> str:
    """sha256 hex digest of `parts` in a canonical encoding: sorted by name,
    each name and value length-prefixed and each value tagged with its type,
    so no two different dicts encode alike (e.g. 1 and "1" differ)."""
    h = hashlib.sha256()
    for name in sorted(parts):
        h.update(_encode_part(name, parts[name]))
    return h.hexdigest()


class DiskCache:
    """Checksummed cache entries under `root`; safe with concurrent processes.

    The disk is only ever an accelerator: any OS error on the root, a shard or
    an entry (unreadable or read-only files, a file where a directory should
    be, a full disk) makes the entry a miss or leaves it unwritten, with one
    RuntimeWarning per kind of problem (action and errno), never an
    exception. Entries get the mode of any new file of the user (0666 less
    the umask), so the same user's processes, and a group sharing the root
    when the umask allows, read them. `corrupt` counts entries found damaged
    (and deleted) by `get`."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.corrupt = 0
        self._warned: set[tuple] = set()

    def path(self, key: str) -> Path:
        """File holding the entry of `key` (sharded by its first 2 hex chars)."""
        if not _KEY_RE.fullmatch(key):
            raise ValueError(f"Invalid cache key {key!r}: expected 8 to 128 lowercase hex digits")
        return self.root / key[:2] / key[2:]

    def get(self, key: str, validate: Optional[Callable[[bytes], bool]] = None
            ) -> Optional[bytes]:
        """The payload stored under `key`, or None when absent, unreadable or
        damaged. `validate` checks the payload's own format: the checksum only
        proves that the bytes are those written, not who wrote them."""
        path = self.path(key)
        try:
            data = _read_regular_file(path)
        except (FileNotFoundError, NotADirectoryError):
            return None  # a file in place of the root or shard: `put` reports it
        except OSError as e:
            self._warn("read", e)
            return None
        payload = _decode(data)
        if payload is not None and validate is not None and not validate(payload):
            payload = None
        if payload is None:
            self.corrupt += 1
            try:
                path.unlink()
            except FileNotFoundError:
                pass
            except OSError as e:
                self._warn("delete a damaged entry of", e)
        return payload

    def put(self, key: str, payload: bytes) -> None:
        """Store `payload` under `key` atomically (a temporary file renamed
        into place); on an OS error, warn and leave the entry unwritten."""
        path = self.path(key)
        header = _HEADER.pack(_MAGIC, _VERSION, len(payload), hashlib.sha256(payload).digest())
        tmp = path.parent / f".tmp-{os.getpid()}-{secrets.token_hex(8)}"
        created = False
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "xb") as f:  # mode 0666 less the umask, as for any new file
                created = True
                f.write(header)
                f.write(payload)
            os.replace(tmp, path)
        except OSError as e:
            if created:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
            self._warn("write", e)

    def _warn(self, action: str, error: OSError) -> None:
        kind = (action, type(error), error.errno)
        if kind in self._warned:
            return
        self._warned.add(kind)
        warnings.warn(f"tilecore could not {action} its disk cache at {self.root}: {error}; "
                      f"compiled modules it cannot store or load stay in memory (this warning "
                      f"is shown once)", RuntimeWarning, stacklevel=4)


def _read_regular_file(path: Path) -> bytes:
    """The contents of `path`, refusing anything but a regular file: a FIFO
    would block the read forever and a device (a link to /dev/zero) never end
    it. Opening with O_NONBLOCK makes opening a FIFO return at once."""
    with open(path, "rb", opener=_open_nonblocking) as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        return f.read()


def _open_nonblocking(path: str, flags: int) -> int:
    return os.open(path, flags | getattr(os, "O_NONBLOCK", 0))


def _decode(data: bytes) -> Optional[bytes]:
    if len(data) < _HEADER.size:
        return None
    magic, version, length, digest = _HEADER.unpack_from(data)
    payload = data[_HEADER.size:]
    if (magic != _MAGIC or version != _VERSION or length != len(payload)
            or hashlib.sha256(payload).digest() != digest):
        return None
    return payload


class CompileCache:
    """A memory dict in front of an optional `DiskCache`.

    Counters `memory_hits`, `disk_hits` and `misses` record where each
    `get_or_build` was answered."""

    def __init__(self, disk: Optional[DiskCache]):
        self.disk = disk
        self.memory: dict[str, bytes] = {}
        self.memory_hits = 0
        self.disk_hits = 0
        self.misses = 0

    def get_or_build(self, key: str, build: Callable[[], bytes],
                     validate: Optional[Callable[[bytes], bool]] = None) -> bytes:
        """The payload of `key`: from memory, else from disk when `validate`
        (if given) accepts it, else `build()` (then stored in both)."""
        payload = self.memory.get(key)
        if payload is not None:
            self.memory_hits += 1
            return payload
        if self.disk is not None:
            payload = self.disk.get(key, validate)
            if payload is not None:
                self.disk_hits += 1
                self.memory[key] = payload
                return payload
        self.misses += 1
        payload = build()
        if not isinstance(payload, bytes):
            raise TypeError(f"cache build function must return bytes, got "
                            f"{type(payload).__name__}")
        self.memory[key] = payload
        if self.disk is not None:
            self.disk.put(key, payload)
        return payload


_default: Optional[CompileCache] = None
_default_lock = threading.Lock()


_no_home_warned = False


def default_cache() -> CompileCache:
    """The process-wide cache. Its disk root follows TILECORE_CACHE_DIR as it
    is now (None: memory only, as when the default root has no home
    directory to live in: warned once); the memory part survives root
    changes."""
    global _default, _no_home_warned
    try:
        root = config.cache_dir()
    except RuntimeError as e:  # Path.home() of a user without a home (containers)
        root = None
        if not _no_home_warned:
            _no_home_warned = True
            warnings.warn(f"tilecore has no disk cache: {e} Set TILECORE_CACHE_DIR to a "
                          f"directory; compiled modules stay in memory", RuntimeWarning,
                          stacklevel=3)
    with _default_lock:
        if _default is None:
            _default = CompileCache(None)
        current = None if _default.disk is None else _default.disk.root
        if current != root:
            _default.disk = None if root is None else DiskCache(root)
        return _default
