"""Every TILECORE_* environment variable, typed, in one place.

Each setting is a function that reads the environment when called, so a
change made at run time (or by a test's monkeypatch) takes effect at once and
importing tilecore never freezes a value. Invalid values raise ValueError
naming the variable, instead of being silently ignored.

==========================  =================================================
TILECORE_CACHE_DIR          Root of the on-disk compiled-module cache.
                            Unset: ``~/.cache/tilecore``. ``0``, ``off`` or
                            the empty string disable the disk cache (compiled
                            modules are then cached in memory only).
TILECORE_DUMP_DIR           When set, the compiler writes each kernel's IR and
                            generated C++ into this directory.
TILECORE_INTERPRET          ``1`` runs every launch in the NumPy interpreter,
                            even when the arguments are device arrays.
TILECORE_BLOCK_ORDER        Order in which the interpreter runs the blocks of
                            a grid: ``sequential`` (default) or ``random``
                            (shakes out kernels that depend on block order).
TILECORE_ARCH               Target architecture for compilation (``sm_90``),
                            overriding the one read from the device.
TILECORE_NATIVE             ``0`` calls the CUDA driver through cuda.bindings
                            instead of tilecore's C extension (default ``1``:
                            the extension when it was built).
TILECORE_PDL                ``0`` launches kernels in plain stream order
                            instead of with programmatic dependent launch
                            (default ``1``; sm_90 and newer). Read when a
                            kernel specialization is first loaded.
==========================  =================================================
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Optional

__all__ = ["cache_dir", "dump_dir", "interpret", "block_order", "arch", "native", "pdl"]

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})
_CACHE_DISABLED = frozenset({"", "0", "off"})
_BLOCK_ORDERS = ("sequential", "random")
_ARCH_RE = re.compile(r"sm_[1-9][0-9]+[af]?")


def _get(name: str) -> Optional[str]:
    value = os.environ.get(name)
    return None if value is None else value.strip()


def cache_dir() -> Optional[Path]:
    """Root of the disk cache of compiled modules, or None when disabled.

    TILECORE_CACHE_DIR unset means ``~/.cache/tilecore``; ``0``, ``off`` or
    an empty value disable the disk cache."""
    value = _get("TILECORE_CACHE_DIR")
    if value is None:
        return Path.home() / ".cache" / "tilecore"
    if value.lower() in _CACHE_DISABLED:
        return None
    return Path(value).expanduser()


def dump_dir() -> Optional[Path]:
    """Directory receiving the IR and generated C++ of each compiled kernel
    (TILECORE_DUMP_DIR), or None when dumping is off."""
    value = _get("TILECORE_DUMP_DIR")
    if not value:
        return None
    return Path(value).expanduser()


def _flag(name: str, default: bool) -> bool:
    value = _get(name)
    if value is None:
        return default
    low = value.lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise ValueError(f"Invalid value of {name}: expected one of 1, 0, true, "
                     f"false, yes, no, on, off, got {value!r}")


def interpret() -> bool:
    """True when TILECORE_INTERPRET forces the NumPy interpreter for every
    launch, device arrays included."""
    return _flag("TILECORE_INTERPRET", False)


def native() -> bool:
    """False when TILECORE_NATIVE=0 asks for cuda.bindings instead of the C
    extension for driver calls (read when the driver is first loaded)."""
    return _flag("TILECORE_NATIVE", True)


def pdl() -> bool:
    """False when TILECORE_PDL=0 asks for kernels launched in plain stream order
    rather than with programmatic dependent launch (read when a kernel
    specialization is first loaded)."""
    return _flag("TILECORE_PDL", True)


def block_order() -> str:
    """Order in which the interpreter runs a grid's blocks
    (TILECORE_BLOCK_ORDER): "sequential" (default) or "random"."""
    value = _get("TILECORE_BLOCK_ORDER")
    if not value:
        return "sequential"
    low = value.lower()
    if low not in _BLOCK_ORDERS:
        raise ValueError(f"Invalid value of TILECORE_BLOCK_ORDER: expected "
                         f"'sequential' or 'random', got {value!r}")
    return low


def arch() -> Optional[str]:
    """Architecture to compile for (TILECORE_ARCH, e.g. "sm_90"), or None to
    use the architecture of the device."""
    value = _get("TILECORE_ARCH")
    if not value:
        return None
    if not _ARCH_RE.fullmatch(value):
        raise ValueError(f"Invalid value of TILECORE_ARCH: expected an architecture "
                         f"like 'sm_90' or 'sm_90a', got {value!r}")
    return value
