"""Tuning tables: the schema (`schema`: parameters, ranges, constraints, key
fields, provenance; one place, read by the loader, the overrides and the
tuner), YAML loading and validation (`loader`), and where tables are found and
how a tuning key is matched (`lookup`)."""
from .loader import Row, Table, load_table, parse_table
from .lookup import TUNING_DIR_ENV, Resolved, best_row, clear_cache, find_table, resolve, table_dirs
from .schema import (PROVENANCE_FIELDS, SCHEMAS, AlgorithmSchema, Constraint, KeyField, Param,
                     TuningError, schema_for, validate_params)

__all__ = [
    "Row", "Table", "load_table", "parse_table", "TUNING_DIR_ENV", "Resolved", "best_row",
    "clear_cache", "find_table", "resolve", "table_dirs", "PROVENANCE_FIELDS", "SCHEMAS",
    "AlgorithmSchema", "Constraint", "KeyField", "Param", "TuningError", "schema_for",
    "validate_params",
]
