"""A validated tuning table (loader.py parses the YAML; table_cache.py keeps
it as JSON): plain data, importable without PyYAML."""
from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Row", "Table"]


@dataclass(frozen=True)
class Row:
    match: dict
    params: dict
    provenance: dict
    line: int

    @property
    def specificity(self) -> int:
        return len(self.match)


@dataclass(frozen=True)
class Table:
    algorithm: str
    cc: int
    path: str
    provenance: dict
    default: dict = field(default_factory=dict)
    rows: tuple[Row, ...] = ()
