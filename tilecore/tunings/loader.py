"""Loading one tuning table (YAML, PyYAML's safe loader) and validating it
against the schema, with errors naming the file, line and field.

A table, `tuning_db/<algorithm>/sm_XY.yaml`:

    schema: 1
    algorithm: reduce
    arch: sm_90
    provenance: {gpu: ..., date: ..., method: ..., gain: ...}   # required
    default:                # optional: this architecture's policy (any fields)
      block_threads: 256
    tunings:                # optional: rows refining it for some tuning keys
      - match: {value_size: 1}
        params: {items_per_thread: 64}
        provenance: {...}   # optional, else the table's
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .tables import Row, Table
from .schema import OPTIONAL_PROVENANCE_FIELDS, PROVENANCE_FIELDS, SCHEMA_VERSION, TuningError, schema_for, validate_params

__all__ = ["Row", "Table", "load_table", "parse_table"]


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """The safe loader (libyaml's parser where PyYAML has it: a table parses in
    about 1 ms instead of 9), recording each mapping key's line (1-based) in
    `_lines`."""


class _LinedDict(dict):
    lines: dict


def _construct_mapping(loader, node, deep=False):
    loader.flatten_mapping(node)
    out = _LinedDict()
    out.lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in out:
            raise TuningError(f"{loader.name}:{key_node.start_mark.line + 1}: duplicate field "
                              f"{key!r}")
        out[key] = loader.construct_object(value_node, deep=True)
        out.lines[key] = key_node.start_mark.line + 1
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _line(d: Any, key: str, default: int = 1) -> int:
    return getattr(d, "lines", {}).get(key, default)


def _mapping(value: Any, where: str, what: str) -> dict:
    if not isinstance(value, dict):
        raise TuningError(f"{where}: field {what!r}: expected a mapping, got "
                          f"{type(value).__name__}")
    return value


def _provenance(value: Any, path: str, line: int, what: str) -> dict:
    prov = _mapping(value, f"{path}:{line}", what)
    missing = [k for k in PROVENANCE_FIELDS if k not in prov]
    if missing:
        raise TuningError(f"{path}:{line}: field {what!r}: missing {missing} (every tuned value "
                          f"carries {list(PROVENANCE_FIELDS)})")
    known = {**PROVENANCE_FIELDS, **OPTIONAL_PROVENANCE_FIELDS}
    unknown = [k for k in prov if k not in known]
    if unknown:
        raise TuningError(f"{path}:{_line(prov, unknown[0], line)}: field {what}.{unknown[0]}: "
                          f"unknown provenance field; known: {list(known)}")
    gain = prov["gain"]
    if gain is not None and (isinstance(gain, bool) or not isinstance(gain, (int, float))):
        raise TuningError(f"{path}:{_line(prov, 'gain', line)}: field {what}.gain: expected a "
                          f"number or null, got {gain!r}")
    return {k: (str(v) if k in PROVENANCE_FIELDS and k != "gain" and v is not None else v)
            for k, v in prov.items()}


def _match(value: Any, schema, path: str, line: int) -> dict:
    m = _mapping(value, f"{path}:{line}", "match")
    for k, v in m.items():
        kf = schema.key_field(k)
        at = f"{path}:{_line(m, k, line)}"
        if kf is None:
            raise TuningError(f"{at}: field match.{k}: unknown tuning-key field; known: "
                              f"{[f.name for f in schema.key_fields]}")
        if not kf.accepts(v):
            raise TuningError(f"{at}: field match.{k}: expected one of {list(kf.values)}, "
                              f"got {v!r}")
    return dict(m)


_TOP = ("schema", "algorithm", "arch", "provenance", "default", "tunings")


def parse_table(text: str, path: str, algorithm: str, cc: int) -> Table:
    """Validate the YAML `text` of the table for (`algorithm`, sm_`cc`) read from `path`."""
    loader = _Loader(text)
    loader.name = path
    try:
        doc = loader.get_single_data()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else path
        raise TuningError(f"{where}: not valid YAML: {getattr(e, 'problem', e)}") from None
    finally:
        loader.dispose()
    doc = _mapping(doc, path, "<document>") if doc is not None else _LinedDict()
    for k in doc:
        if k not in _TOP:
            raise TuningError(f"{path}:{_line(doc, k)}: unknown field {k!r}; known: {list(_TOP)}")
    if doc.get("schema") != SCHEMA_VERSION:
        raise TuningError(f"{path}:{_line(doc, 'schema')}: field 'schema': expected "
                          f"{SCHEMA_VERSION}, got {doc.get('schema')!r}")
    if doc.get("algorithm") != algorithm:
        raise TuningError(f"{path}:{_line(doc, 'algorithm')}: field 'algorithm': expected "
                          f"{algorithm!r} (the table's folder), got {doc.get('algorithm')!r}")
    if doc.get("arch") != f"sm_{cc}":
        raise TuningError(f"{path}:{_line(doc, 'arch')}: field 'arch': expected 'sm_{cc}' (the "
                          f"file's name), got {doc.get('arch')!r}")
    if "provenance" not in doc:
        raise TuningError(f"{path}:1: field 'provenance' is missing (every table says where "
                          f"its values come from: {list(PROVENANCE_FIELDS)})")
    schema = schema_for(algorithm)
    prov = _provenance(doc["provenance"], path, _line(doc, "provenance"), "provenance")
    default = _mapping(doc.get("default") or _LinedDict(), f"{path}:{_line(doc, 'default')}",
                       "default")
    validate_params(algorithm, default, path, getattr(default, "lines", None))
    rows = []
    raw_rows = doc.get("tunings") or []
    if not isinstance(raw_rows, list):
        raise TuningError(f"{path}:{_line(doc, 'tunings')}: field 'tunings': expected a list of "
                          f"rows, got {type(raw_rows).__name__}")
    for i, raw in enumerate(raw_rows):
        where = f"{path}:{_line(doc, 'tunings')}"
        r = _mapping(raw, where, f"tunings[{i}]")
        line = min(getattr(r, "lines", {}).values(), default=_line(doc, "tunings"))
        for k in r:
            if k not in ("match", "params", "provenance"):
                raise TuningError(f"{path}:{_line(r, k, line)}: field tunings[{i}].{k}: unknown "
                                  f"field; known: ['match', 'params', 'provenance']")
        if "match" not in r or "params" not in r:
            raise TuningError(f"{path}:{line}: tunings[{i}] needs 'match' and 'params'")
        match = _match(r["match"], schema, path, _line(r, "match", line))
        params = _mapping(r["params"], f"{path}:{_line(r, 'params', line)}",
                          f"tunings[{i}].params")
        validate_params(algorithm, params, path, getattr(params, "lines", None))
        row_prov = _provenance(r["provenance"], path, _line(r, "provenance", line),
                               f"tunings[{i}].provenance") if "provenance" in r else prov
        rows.append(Row(match, dict(params), row_prov, line))
    return Table(algorithm, cc, path, prov, dict(default), tuple(rows))


def load_table(path: Path, algorithm: str, cc: int) -> Table:
    return parse_table(path.read_text(), str(path), algorithm, cc)
