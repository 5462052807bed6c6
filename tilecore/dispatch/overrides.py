"""Policy overrides: `with override_policy("reduce", block_threads=64, ...)`
replaces fields of the selected policy for every call inside the block (the
tuner measures candidates this way, tests make the interpreter run many small
blocks). Overrides are validated against the tuning schema like a table row.
`generation()` changes whenever overrides change, so cached host plans keyed
on it are rebuilt."""
from __future__ import annotations

import contextlib
import itertools
from typing import Iterator

__all__ = ["override_policy", "policy_overrides", "generation"]

_stack: list[tuple[str, dict]] = []
_counter = itertools.count(1)
_generation = [0]


def policy_overrides(algorithm: str) -> dict:
    """The fields overridden for `algorithm` now (innermost wins)."""
    out: dict = {}
    for algo, fields in _stack:
        if algo == algorithm:
            out.update(fields)
    return out


def generation() -> int:
    return _generation[0]


@contextlib.contextmanager
def override_policy(algorithm: str, **fields) -> Iterator[None]:
    from ..tunings.schema import validate_params
    validate_params(algorithm, fields, where="override_policy()")
    _stack.append((algorithm, fields))
    _generation[0] = next(_counter)
    try:
        yield
    finally:
        _stack.pop()
        _generation[0] = next(_counter)
