"""The compiled-module cache: in memory, and on disk across processes.

Keys are sha256 digests of everything that determines the compiler's output
(`cache_key`), never of the output itself. A disk entry is one file,
``<root>/<key[:2]>/<key[2:]>``, holding a header (magic, format version,
payload length, sha256 of the payload) and the payload. Entries are written
to a temporary file in the same directory and renamed into place, so readers
never see a partial file and concurrent writers of the same key both succeed
(the last rename wins; both wrote the same bytes). An entry whose header or
checksum does not match is deleted and reported as a miss, never loaded.
"""
from __future__ import annotations

import hashlib
import os
import re
import struct
import tempfile
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

    `corrupt` counts entries found damaged (and deleted) by `get`."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.corrupt = 0

    def path(self, key: str) -> Path:
        """File holding the entry of `key` (sharded by its first 2 hex chars)."""
        if not _KEY_RE.fullmatch(key):
            raise ValueError(f"Invalid cache key {key!r}: expected 8 to 128 lowercase hex digits")
        return self.root / key[:2] / key[2:]

    def get(self, key: str) -> Optional[bytes]:
        """The payload stored under `key`, or None when absent or damaged."""
        path = self.path(key)
        try:
            data = path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None
        payload = _decode(data)
        if payload is None:
            self.corrupt += 1
            try:
                path.unlink()
            except FileNotFoundError:
                pass
        return payload

    def put(self, key: str, payload: bytes) -> None:
        """Store `payload` under `key` atomically. A cache that cannot be
        written (read-only or full disk) only warns: compiling still works."""
        path = self.path(key)
        header = _HEADER.pack(_MAGIC, _VERSION, len(payload), hashlib.sha256(payload).digest())
        tmp = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as f:
                f.write(header)
                f.write(payload)
            os.replace(tmp, path)
        except OSError as e:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
            warnings.warn(f"tilecore could not write its disk cache entry {path}: {e}",
                          RuntimeWarning, stacklevel=2)


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

    def get_or_build(self, key: str, build: Callable[[], bytes]) -> bytes:
        """The payload of `key`: from memory, else from disk, else `build()`
        (then stored in both)."""
        payload = self.memory.get(key)
        if payload is not None:
            self.memory_hits += 1
            return payload
        if self.disk is not None:
            payload = self.disk.get(key)
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


def default_cache() -> CompileCache:
    """The process-wide cache. Its disk root follows TILECORE_CACHE_DIR as it
    is now (None: memory only); the memory part survives root changes."""
    global _default
    root = config.cache_dir()
    with _default_lock:
        if _default is None:
            _default = CompileCache(None)
        current = None if _default.disk is None else _default.disk.root
        if current != root:
            _default.disk = None if root is None else DiskCache(root)
        return _default
