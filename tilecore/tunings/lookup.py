"""Finding tables and matching a tuning key against them.

Where tables are looked for, first found wins per (algorithm, architecture):
1. the user's directory (`config.user_tuning_dir()`: TILECORE_TUNING_DIR,
   or by default `~/.local/share/tilecore/tuning_db`, where
   `python -m tilecore.tune` writes; an empty or off TILECORE_TUNING_DIR
   means none), laid out as the shipped one: `<dir>/<algorithm>/sm_XY.yaml`;
   its tables override the shipped ones;
2. the shipped tables: `tilecore/tuning_db/` inside an installed package (a
   wheel or `pip install .`: setup.py copies the checkout's `tuning_db/`
   there), else `tuning_db/` at the root of the source checkout the package
   is imported from (an editable install). One copy in the repository.

Tables are read and validated when a plan first needs them (not at import),
and cached per (directory, algorithm, architecture), a missing table too (one
stat per table a process ever asks for, none per call); `clear_cache()`
forgets them and has plans built from them rebuilt (the tuner calls it after
writing a table, so the process that wrote it uses it at once).

Matching (`resolve`): for the device's own architecture (its table, where one
was written for it, sm_86 say) and then each architecture of the chain not
newer than it (sm_120 -> sm_100 -> sm_90 -> sm_80 -> sm_70), the first table found
decides: its most specific row whose `match` fields all equal the key's (ties:
the first in the file), merged over the table's `default`; a table with no
matching row and no default passes to the previous architecture. With no table
at all the policy hub's built-in policy stands. Never an error for a missing
table; an invalid table is a TuningError naming file, line and field.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple, Optional

from .. import config
from ..dispatch import overrides
from ..dispatch.selector import architectures_up_to

__all__ = ["TUNING_DIR_ENV", "user_dir", "table_dirs", "shipped_dir", "find_table", "best_row", "resolve",
           "Resolved", "clear_cache", "state", "table_architectures"]

TUNING_DIR_ENV = "TILECORE_TUNING_DIR"
_PACKAGE = Path(__file__).resolve().parent.parent


def user_dir() -> Optional[Path]:
    """The user's tuning directory, `config.user_tuning_dir()` (ValueError
    naming TILECORE_TUNING_DIR when it is set to something not a directory)."""
    return config.user_tuning_dir()


_shipped: list = []


def shipped_dir() -> Optional[Path]:
    """The shipped tables: the installed package's `tuning_db/`, else the
    checkout's (decided once)."""
    if not _shipped:
        installed = _PACKAGE / "tuning_db"
        checkout = _PACKAGE.parent / "tuning_db"
        if installed.is_dir():
            _shipped.append(installed)
        elif checkout.is_dir() and (_PACKAGE.parent / "pyproject.toml").is_file():
            _shipped.append(checkout)
        else:
            _shipped.append(None)
    return _shipped[0]


def table_dirs() -> list[Path]:
    u = user_dir()
    shipped = shipped_dir()
    return ([u] if u is not None else []) + ([shipped] if shipped is not None else [])


def state() -> str:
    """Changes when where tables come from changes (a part of host-plan cache keys)."""
    return os.environ.get(TUNING_DIR_ENV, "")


_tables: dict[tuple[str, str, int], Optional[Table]] = {}


def clear_cache() -> None:
    """Forget the tables read so far and make cached host plans, which hold
    policies resolved from them, rebuild: the policy overrides' generation is
    part of every plan's cache key (hostpath.epoch, the scan and segmented
    plans), so advancing it is the one signal they all observe."""
    _tables.clear()
    overrides._generation[0] = next(overrides._counter)


def find_table(algorithm: str, cc: int) -> Optional[Table]:
    """The table for (algorithm, sm_cc) from the first directory holding one."""
    for d in table_dirs():
        key = (str(d), algorithm, cc)
        if key not in _tables:
            path = d / algorithm / f"sm_{cc}.yaml"
            if path.is_file():
                # a validated copy cached as JSON (table_cache.py), else the YAML: PyYAML is
                # imported with the first table parsed
                from .table_cache import load
                _tables[key] = load(path, algorithm, cc)
            else:
                _tables[key] = None
        if _tables[key] is not None:
            return _tables[key]
    return None


def best_row(table: Table, key: dict) -> Optional[Row]:
    best: Optional[Row] = None
    for row in table.rows:
        if all(key.get(k) == v for k, v in row.match.items()):
            if best is None or row.specificity > best.specificity:
                best = row
    return best


class Resolved(NamedTuple):
    params: dict          # the fields the tables set (merge over the hub's policy)
    source: str           # "path:line" of the row, "path (default)", or "built-in"
    provenance: Optional[dict]


def table_architectures(cc: int) -> list[int]:
    """The architectures whose tables a device of `cc` reads, newest first: its
    own (a table the tuner wrote on an sm_86 or sm_89 GPU, say, outside the
    policy chain), then the chain's architectures not newer than it."""
    chain = architectures_up_to(cc)
    return chain if cc in chain else [cc, *chain]


def resolve(algorithm: str, cc: int, key: dict) -> Resolved:
    for arch in table_architectures(cc):
        table = find_table(algorithm, arch)
        if table is None:
            continue
        row = best_row(table, key)
        if row is not None:
            return Resolved({**table.default, **row.params}, f"{table.path}:{row.line}",
                            row.provenance)
        if table.default:
            return Resolved(dict(table.default), f"{table.path} (default)", table.provenance)
    return Resolved({}, "built-in", None)
