"""The selection every policy hub makes, written once: the hub's built-in
policy for the newest architecture not newer than the device, then the
tuning tables' fields for the key (tunings.lookup.resolve: exact row, table
default, previous architecture's table), then any active override_policy,
validated against the algorithm's schema."""
from __future__ import annotations

from dataclasses import asdict
from typing import Any, Callable, Sequence, TypeVar

from ..tunings.lookup import resolve
from ..tunings.schema import validate_params
from .overrides import policy_overrides
from .selector import chained

__all__ = ["select_policy", "policy_fields"]

P = TypeVar("P")


def select_policy(algorithm: str, cc: int, key: dict,
                  hub: Sequence[tuple[int, Callable[[], dict]]], make: Callable[..., P]) -> P:
    """`make(**fields, source=...)` for a device of compute capability `cc` and
    tuning `key`; `hub` lists (minimum cc, built-in fields) as `chained` takes
    them. `source` says where the fields came from (a table row, a table's
    default, "built-in" or "override_policy()")."""
    fields = chained(cc, hub)
    resolved = resolve(algorithm, cc, key)
    fields.update(resolved.params)
    over = policy_overrides(algorithm)
    fields.update(over)
    source = "override_policy()" if over else resolved.source
    validate_params(algorithm, fields, f"{algorithm} policy for sm_{cc} from {source}",
                    complete=True)
    return make(**fields, source=source)


def policy_fields(policy: Any) -> dict:
    """A policy's fields without its `source`: what a table row or an override sets."""
    d = asdict(policy)
    d.pop("source")
    return d
