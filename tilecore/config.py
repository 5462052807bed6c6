"""Every TILECORE_* environment variable, typed, in one place.

Each setting is a function that reads the environment when called, so a
change made at run time (or by a test's monkeypatch) takes effect at once and
importing tilecore never freezes a value. An invalid value raises ValueError
in one format, naming the variable, the accepted values and the value found;
`validate_environment` checks every setting at once (each entry point calls
it, so a junk value is reported even on a path that would not read it).
Switches take ``1``, ``true``, ``yes``, ``on`` or ``0``, ``false``, ``no``,
``off`` in any case; an empty value counts as off.

==========================  =================================================
TILECORE_CACHE_DIR          Root of the on-disk compiled-module cache.
                            Unset (or ``1``, ``true``, ``yes``, ``on``):
                            ``~/.cache/tilecore``. ``0``, ``off``, ``false``,
                            ``no`` or the empty string disable the disk cache
                            (compiled modules are then cached in memory only).
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
TILECORE_STRICT_BOUNDS      ``1`` makes the interpreter warn (once per op and
                            launch) of a load or store whose tile lies wholly
                            outside its array (default ``0``: such tiles read
                            padding and drop their stores silently, as on the
                            GPU).
TILECORE_TUNING_DIR         The user's directory of tuning tables, laid out
                            as the shipped ``tuning_db/``
                            (``<algorithm>/sm_XY.yaml``); its tables override
                            the shipped ones and ``python -m tilecore.tune``
                            writes there by default. Unset:
                            ``$XDG_DATA_HOME/tilecore/tuning_db`` (default
                            ``~/.local/share/tilecore/tuning_db``; it need
                            not exist). Empty or ``0``, ``off``, ``false``,
                            ``no``: no user directory, the shipped tables
                            only. Any other value must be a directory.
==========================  =================================================
"""
from __future__ import annotations

import difflib
import contextlib
import os
import re
import warnings
from pathlib import Path
from typing import Iterator, Optional

__all__ = ["cache_dir", "dump_dir", "interpret", "block_order", "arch", "native", "pdl",
           "strict_bounds", "tuning_dir", "user_tuning_dir", "invalid_value", "validate_environment", "override"]

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})
_SWITCH_VALUES = "one of 1, 0, true, false, yes, no, on, off"
_BLOCK_ORDERS = ("sequential", "random")
_ARCH_RE = re.compile(r"sm_[1-9][0-9]+[af]?")
_PREFIX = "TILECORE_"


def _get(name: str) -> Optional[str]:
    value = os.environ.get(name)
    return None if value is None else value.strip()


def invalid_value(name: str, expected: str, reason: str = "") -> ValueError:
    """The error for environment variable `name` holding a value it does not
    accept: names the variable, what it accepts and its value (plus `reason`,
    e.g. the OS's answer, when given). The one format of every setting."""
    detail = f" ({reason})" if reason else ""
    return ValueError(f"Invalid value of {name}: expected {expected}, "
                      f"got {os.environ.get(name)!r}{detail}")


def cache_dir() -> Optional[Path]:
    """Root of the disk cache of compiled modules, or None when disabled.

    TILECORE_CACHE_DIR unset or an on-word means ``~/.cache/tilecore``
    (RuntimeError when there is no home directory); an off-word or an empty
    value disables the disk cache; anything else is a path."""
    value = _get("TILECORE_CACHE_DIR")
    if value is not None and value.lower() in _FALSE:
        return None
    if value is None or value.lower() in _TRUE:
        return Path.home() / ".cache" / "tilecore"
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
    raise invalid_value(name, _SWITCH_VALUES)


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


def strict_bounds() -> bool:
    """True when TILECORE_STRICT_BOUNDS asks the interpreter to warn of tiles
    wholly outside their array (read at each interpreter launch)."""
    return _flag("TILECORE_STRICT_BOUNDS", False)


def block_order() -> str:
    """Order in which the interpreter runs a grid's blocks
    (TILECORE_BLOCK_ORDER): "sequential" (default) or "random"."""
    value = _get("TILECORE_BLOCK_ORDER")
    if not value:
        return "sequential"
    low = value.lower()
    if low not in _BLOCK_ORDERS:
        raise invalid_value("TILECORE_BLOCK_ORDER", "'sequential' or 'random'")
    return low


def arch() -> Optional[str]:
    """Architecture to compile for (TILECORE_ARCH, e.g. "sm_90"), or None to
    use the architecture of the device."""
    value = _get("TILECORE_ARCH")
    if not value:
        return None
    if not _ARCH_RE.fullmatch(value):
        raise invalid_value("TILECORE_ARCH", "an architecture like 'sm_90' or 'sm_90a'")
    return value


def tuning_dir() -> Optional[Path]:
    """The directory TILECORE_TUNING_DIR names, or None when it is unset, empty
    or an off-word (`user_tuning_dir` gives the directory the lookup uses,
    the default one included). A value that is not an existing directory is
    invalid (a typo would otherwise silently leave the shipped tables in
    force)."""
    value = _get("TILECORE_TUNING_DIR")
    if not value or value.lower() in _FALSE:
        return None
    path = Path(value).expanduser()
    if not path.is_dir():
        reason = "it is not a directory" if path.exists() else "no such directory"
        raise invalid_value("TILECORE_TUNING_DIR", "a directory of tuning tables "
                            "(<algorithm>/sm_XY.yaml)", reason)
    return path


def user_tuning_dir() -> Optional[Path]:
    """The user's directory of tuning tables: read before the shipped ones by
    the dispatch layer, written by `python -m tilecore.tune` by default.

    TILECORE_TUNING_DIR when it names a directory (validated as in
    `tuning_dir`); None when it is set but empty or an off-word (the shipped
    tables only: tests, reproducible benchmarks); unset:
    ``$XDG_DATA_HOME/tilecore/tuning_db``, ``~/.local/share/tilecore/tuning_db``
    when XDG_DATA_HOME is unset or relative (the XDG base-directory rule). Not
    the cache directory: tuned tables cost a GPU sweep to remake, and clearing
    a cache must not drop them. The default need not exist (no tables then);
    None when there is no home directory. Computed without touching the file
    system."""
    value = _get("TILECORE_TUNING_DIR")
    if value is not None:
        return tuning_dir()
    data = _get("XDG_DATA_HOME")
    if data and os.path.isabs(data):
        return Path(data) / "tilecore" / "tuning_db"
    try:
        return Path.home() / ".local" / "share" / "tilecore" / "tuning_db"
    except RuntimeError:  # no home directory
        return None


# The settings whose values can be invalid, each with its reader; the others
# (the cache and dump directories) accept any path.
_CHECKED = {"TILECORE_INTERPRET": interpret, "TILECORE_NATIVE": native, "TILECORE_PDL": pdl,
            "TILECORE_STRICT_BOUNDS": strict_bounds, "TILECORE_BLOCK_ORDER": block_order,
            "TILECORE_ARCH": arch, "TILECORE_TUNING_DIR": tuning_dir}
_KNOWN = ("TILECORE_CACHE_DIR", "TILECORE_DUMP_DIR", *_CHECKED)
# validate_environment's memo key is the raw values of the checked settings,
# read from os.environ's own dict of encoded names and values: os.environ.get
# decodes (0.56 us a variable, measured), the dict lookup takes 0.02 us.
_ENCODED = tuple(map(os.environ.encodekey, _CHECKED))
_valid_values: Optional[tuple] = None
_warned_names: set[str] = set()


def _raw_values() -> tuple:
    data = getattr(os.environ, "_data", None)
    if data is None:  # os.environ replaced by a plain mapping
        return tuple(map(os.environ.get, _CHECKED))
    return tuple(map(data.get, _ENCODED))


def validate_environment() -> None:
    """Raise the ValueError of the first TILECORE_* setting with an invalid
    value. Memoized on the raw values (about 1 us when they are unchanged).
    When they change, also warns once of each unknown TILECORE_* variable
    whose name is close to a known one (a likely typo, silently ignored
    otherwise); other unknown names are left alone, as a newer tilecore or a
    user's script may define them."""
    global _valid_values
    values = _raw_values()
    if values == _valid_values:
        return
    for read in _CHECKED.values():
        read()
    _warn_misspelled()
    _valid_values = values


def _warn_misspelled() -> None:
    suffixes = [name[len(_PREFIX):] for name in _KNOWN]
    for name in list(os.environ):
        upper = name.upper()
        if not upper.startswith(_PREFIX) or name in _KNOWN or name in _warned_names:
            continue
        close = difflib.get_close_matches(upper[len(_PREFIX):], suffixes, n=1, cutoff=0.7)
        if close:
            _warned_names.add(name)
            warnings.warn(f"Unknown environment variable {name} is ignored; did you mean "
                          f"{_PREFIX}{close[0]}?", RuntimeWarning, stacklevel=3)


@contextlib.contextmanager
def override(name: str, value: str) -> Iterator[None]:
    """Set the environment variable `name` to `value` for the duration of a
    `with` block, restoring (or removing) it afterwards."""
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            del os.environ[name]
        else:
            os.environ[name] = old
