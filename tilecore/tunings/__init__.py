"""Tuning tables: the schema (`schema`: parameters, ranges, constraints, key
fields, provenance; one place, read by the loader, the overrides and the
tuner), YAML loading and validation (`loader`), and where tables are found and
how a tuning key is matched (`lookup`).

`loader` (and with it PyYAML) is imported when a table is first read, not with
this package: its names here are resolved on first use."""
from .lookup import TUNING_DIR_ENV, Resolved, best_row, clear_cache, find_table, resolve, table_dirs
from .schema import (OPTIONAL_PROVENANCE_FIELDS, PROVENANCE_FIELDS, SCHEMAS, AlgorithmSchema, Constraint, KeyField, Param,
                     TuningError, schema_for, validate_params)

__all__ = [
    "Row", "Table", "load_table", "parse_table", "TUNING_DIR_ENV", "Resolved", "best_row",
    "clear_cache", "find_table", "resolve", "table_dirs", "PROVENANCE_FIELDS",
    "OPTIONAL_PROVENANCE_FIELDS", "SCHEMAS",
    "AlgorithmSchema", "Constraint", "KeyField", "Param", "TuningError", "schema_for",
    "validate_params",
]

_LAZY = ("Row", "Table", "load_table", "parse_table")


def __getattr__(name: str):
    if name in _LAZY:
        from . import loader
        return getattr(loader, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
