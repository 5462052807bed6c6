"""Validated tuning tables cached as JSON beside the kernel cache, so that a
warm process never imports PyYAML nor re-validates a table (importing yaml
and parsing a table took about 11 ms of a first call).

An entry, ``<cache root>/tunings/<hash of the table's path, algorithm and
architecture>.json``, holds the SHA-256 of the YAML file's bytes, a
fingerprint of the validator (tilecore's version and the size and mtime of
loader.py, schema.py and tables.py) and the validated Table. It is used only
when both match; any change of the table (its bytes) or of the validator re-parses the
YAML (with its errors) and rewrites the entry. An unreadable or damaged entry
is ignored; an entry that cannot be written is skipped silently (the YAML
path still works). No cache root (TILECORE_CACHE_DIR off): YAML every
process, as before.

`loads` counts YAML parses in this process (tests check that a warm process
parses none).
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Optional

from .. import config
from .._version import __version__

__all__ = ["load", "loads"]

_FORMAT = 1
_HERE = Path(__file__).resolve().parent
loads = [0]  # YAML parses in this process
_validator: list = []


def _validator_fingerprint() -> str:
    if not _validator:
        parts = [__version__, str(_FORMAT)]
        for name in ("loader.py", "schema.py", "tables.py"):
            try:
                st = (_HERE / name).stat()
                parts.append(f"{name}:{st.st_size}:{st.st_mtime_ns}")
            except OSError:
                parts.append(f"{name}:?")
        _validator.append("|".join(parts))
    return _validator[0]


def _entry_path(path: Path, algorithm: str, cc: int) -> Optional[Path]:
    try:
        root = config.cache_dir()
    except (RuntimeError, ValueError):
        return None
    if root is None:
        return None
    name = hashlib.sha256(f"{Path(path).resolve()}\0{algorithm}\0{cc}".encode()).hexdigest()
    return Path(root) / "tunings" / f"{name[:40]}.json"


def _to_json(table) -> dict:
    return {"algorithm": table.algorithm, "cc": table.cc, "path": table.path,
            "provenance": table.provenance, "default": table.default,
            "rows": [{"match": r.match, "params": r.params, "provenance": r.provenance,
                      "line": r.line} for r in table.rows]}


def _provenance(p: dict) -> dict:
    """A provenance as the YAML gave it: JSON turned its `sizes` keys (input
    sizes, ints) into strings."""
    p = dict(p)
    if isinstance(p.get("sizes"), dict):
        p["sizes"] = {int(n): v for n, v in p["sizes"].items()}
    return p


def _from_json(d: dict):
    from .tables import Row, Table
    rows = tuple(Row(dict(r["match"]), dict(r["params"]), _provenance(r["provenance"]),
                     int(r["line"])) for r in d["rows"])
    return Table(d["algorithm"], int(d["cc"]), d["path"], _provenance(d["provenance"]),
                 dict(d["default"]), rows)


def load(path: Path, algorithm: str, cc: int):
    """The validated Table of the YAML file `path` (see the module's docstring)."""
    text = Path(path).read_bytes()
    digest = hashlib.sha256(text).hexdigest()
    entry = _entry_path(path, algorithm, cc)
    validator = _validator_fingerprint()
    if entry is not None:
        try:
            doc = json.loads(entry.read_bytes())
            if doc.get("sha256") == digest and doc.get("validator") == validator and \
                    doc.get("path") == str(path):
                return _from_json(doc["table"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass
    from .loader import parse_table
    loads[0] += 1
    table = parse_table(text.decode("utf-8"), str(path), algorithm, cc)
    if entry is not None:
        _store(entry, {"sha256": digest, "validator": validator, "path": str(path),
                       "table": _to_json(table)})
    return table


def _store(entry: Path, doc: dict) -> None:
    try:
        data = json.dumps(doc, sort_keys=True).encode()
    except (TypeError, ValueError):  # a value JSON cannot hold: no entry
        return
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=entry.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, entry)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    except OSError:
        pass
