"""The tuner's search space for one (algorithm, tuning key): the schema's tuned
fields (tilecore/tunings/schema.py: their candidate values, when they apply,
the constraints), around the current policy.

A candidate (a "config") holds the fields that apply to it and nothing else:
a field that does not apply (scan's `lookback_window` unless the operator is
exact and runs mode 2) is left out, and the policy keeps its current value
there. So two candidates never differ only in a field no kernel reads, and
`canonical` is a config's identity for de-duplication.

Fields are decided in the schema's order; a field's applicability may read
only the fields before it. Constraints are checked on the complete policy
(the current policy's fields, then the config's). `size` counts the valid
configs without listing them: it walks the fields in order and merges the
branches that no later applicability or constraint can tell apart, so a
space of 10^8 candidates is counted in milliseconds.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Mapping, Optional, Sequence

from ..tunings.schema import AlgorithmSchema, schema_for

__all__ = ["Dimension", "SearchSpace", "space_for", "space_from_schema"]


@dataclass(frozen=True)
class Dimension:
    """A tuned field and its candidate values, in increasing order."""
    name: str
    values: tuple[int, ...]


# (test on the policy's fields, the dimension names it reads)
Rule = tuple[Callable[[dict], bool], frozenset]


class SearchSpace:
    """Configs over `dims` around `base` (see the module docstring).

    applies[name]: (whether dimension `name` applies given the fields decided
    before it merged over `base`, the dimensions that test reads); checks:
    tests on the complete policy that a valid config passes, each with the
    dimensions it reads."""

    def __init__(self, algorithm: str, key: dict, dims: Sequence[Dimension], base: dict,
                 applies: Mapping[str, Rule], checks: Sequence[Rule] = ()) -> None:
        self.algorithm = algorithm
        self.key = dict(key)
        self.dims = tuple(dims)
        self.base = dict(base)
        self._index = {d.name: i for i, d in enumerate(self.dims)}
        if len(self._index) != len(self.dims):
            raise ValueError(f"dims: duplicate names in {[d.name for d in self.dims]}")
        for d in self.dims:
            if not d.values:
                raise ValueError(f"dims: dimension {d.name!r} has no values")
        self._applies = [applies.get(d.name, (_always, frozenset())) for d in self.dims]
        for i, (d, (_, reads)) in enumerate(zip(self.dims, self._applies)):
            late = [r for r in reads if self._index.get(r, -1) >= i]
            if late:
                raise ValueError(f"whether {d.name!r} applies depends on {late}, decided after "
                                 f"it: list those fields before {d.name!r} in the schema")
        # each check runs as soon as the last dimension it reads is decided (depth = its
        # index + 1; 0: reads none, checked once on the base)
        self._checks: list[list[Callable[[dict], bool]]] = [[] for _ in range(len(self.dims) + 1)]
        check_reads = []
        for fn, reads in checks:
            depth = max((self._index[r] + 1 for r in reads if r in self._index), default=0)
            self._checks[depth].append(fn)
            check_reads.append((depth, reads))
        # the decided dimensions that something at depth >= i still reads (size()'s memo key)
        self._live: list[tuple[str, ...]] = []
        for i in range(len(self.dims) + 1):
            live = set()
            for _, reads in self._applies[i:]:
                live |= reads
            for depth, reads in check_reads:
                if depth > i:
                    live |= reads
            self._live.append(tuple(d.name for d in self.dims[:i] if d.name in live))
        self._size: Optional[int] = None

    def __repr__(self) -> str:
        dims = ", ".join(f"{d.name}[{len(d.values)}]" for d in self.dims)
        return f"SearchSpace({self.algorithm}, {self.key}, {dims})"

    def applies(self, name: str, fields: dict) -> bool:
        """Whether dimension `name` applies, given the config decided so far
        (`fields`: at least the dimensions before it; the base fills the rest)."""
        i = self._index[name]
        return self._applies[i][0]({**self.base, **fields})

    def build(self, choose: Callable[[Dimension], int]) -> dict:
        """A config decided dimension by dimension in order: `choose(dim)` for
        each dimension that applies given the choices before it (an Optuna
        trial's suggest_categorical in a define-by-run search)."""
        config: dict = {}
        for d, (test, _) in zip(self.dims, self._applies):
            if test({**self.base, **config}):
                config[d.name] = choose(d)
        return config

    def project(self, config: Mapping) -> dict:
        """`config` reduced to the dimensions that apply to it: dimensions it
        lacks take the base's value; policy fields that are not dimensions
        (a complete policy's) are dropped. ValueError for a field the policy
        does not have, or a value that is not a candidate."""
        extra = [k for k in config if k not in self._index and k not in self.base]
        if extra:
            raise ValueError(f"config: unknown fields {extra} for {self.algorithm} "
                             f"(dimensions: {[d.name for d in self.dims]})")

        def choose(d: Dimension) -> int:
            if d.name in config:
                v = config[d.name]
            elif d.name in self.base:
                v = self.base[d.name]
            else:
                raise ValueError(f"config: field {d.name!r} missing (no base value for it)")
            if v not in d.values:
                raise ValueError(f"config: field {d.name!r}: expected one of {list(d.values)}, "
                                 f"got {v!r}")
            return v
        return self.build(choose)

    def canonical(self, config: Mapping) -> tuple:
        """A hashable identity: configs that run the same kernels share it."""
        return tuple(self.project(config).items())

    def complete(self, config: Mapping) -> dict:
        """The complete policy a config stands for: the base's fields, then
        the config's (those that apply)."""
        return {**self.base, **self.project(config)}

    def valid(self, config: Mapping) -> bool:
        """The config's values are candidates and the complete policy passes
        every constraint."""
        try:
            full = self.complete(config)
        except ValueError:
            return False
        return all(check(full) for level in self._checks for check in level)

    def configs(self) -> Iterator[dict]:
        """Every valid config (dimensions that apply only), in order: the
        first dimension varies slowest, each in its values' order."""
        if not all(check(self.base) for check in self._checks[0]):
            return
        yield from self._walk(0, {})

    def _walk(self, i: int, config: dict) -> Iterator[dict]:
        if i == len(self.dims):
            yield dict(config)
            return
        d = self.dims[i]
        fields = {**self.base, **config}
        if not self._applies[i][0](fields):
            yield from self._walk(i + 1, config)
            return
        for v in d.values:
            fields[d.name] = v
            if all(check(fields) for check in self._checks[i + 1]):
                config[d.name] = v
                yield from self._walk(i + 1, config)
                del config[d.name]

    def size(self) -> int:
        """The number of valid configs (counted, not listed; cached)."""
        if self._size is None:
            ok = all(check(self.base) for check in self._checks[0])
            self._size = self._count(0, {}, {}) if ok else 0
        return self._size

    def _count(self, i: int, config: dict, memo: dict) -> int:
        if i == len(self.dims):
            return 1
        fields = {**self.base, **config}
        key = (i, tuple(fields.get(n) for n in self._live[i]))
        got = memo.get(key)
        if got is not None:
            return got
        d = self.dims[i]
        if not self._applies[i][0](fields):
            total = self._count(i + 1, config, memo)
        else:
            total = 0
            for v in d.values:
                fields[d.name] = v
                if all(check(fields) for check in self._checks[i + 1]):
                    total += self._count(i + 1, {**config, d.name: v}, memo)
        memo[key] = total
        return total

    def neighbors(self, config: Mapping, radius: int = 1) -> list[dict]:
        """The valid configs that move one dimension of `config` by at most
        `radius` steps through its values (dimensions that start or stop
        applying follow: a newly applying one takes the base's value)."""
        if radius < 1:
            raise ValueError(f"radius: expected >= 1, got {radius}")
        center = self.project(config)
        own = tuple(center.items())
        out: dict[tuple, dict] = {}
        for name, value in center.items():
            values = self.dims[self._index[name]].values
            at = values.index(value)
            for step in range(-radius, radius + 1):
                if step == 0 or not 0 <= at + step < len(values):
                    continue
                moved = self.project({**center, name: values[at + step]})
                ident = tuple(moved.items())
                if ident != own and ident not in out and self.valid(moved):
                    out[ident] = moved
        return list(out.values())


def _always(fields: dict) -> bool:
    return True


class _Recorder(dict):
    """A dict that records which keys are read (to find what a rule reads)."""

    def __init__(self, data: dict) -> None:
        super().__init__(data)
        self.read: set = set()

    def __getitem__(self, k):
        self.read.add(k)
        return super().__getitem__(k)

    def get(self, k, default=None):
        self.read.add(k)
        return super().get(k, default)

    def __contains__(self, k) -> bool:
        self.read.add(k)
        return super().__contains__(k)


def _reads(fn: Callable[[dict], object], base: dict) -> frozenset:
    rec = _Recorder(base)
    fn(rec)
    return frozenset(rec.read)


def space_from_schema(schema: AlgorithmSchema, key: dict, base: dict,
                      fields: Optional[Iterable[str]] = None,
                      exclude: Iterable[str] = (), include: Sequence[dict] = ()) -> SearchSpace:
    """The search space of `schema` for tuning `key` around the complete
    policy `base`. fields: tune only these (default: every tuned field);
    exclude: keep these at the base's value (e.g. a field the workload cannot
    observe); include: configs whose values become candidates too (e.g. the
    nearest older architecture's policy, to enqueue it). The base's own
    values are always candidates, so the current policy is a config."""
    problems = []
    for kf in schema.key_fields:
        if kf.name not in key:
            if kf.required:
                problems.append(f"missing {kf.name!r}")
        elif not kf.accepts(key[kf.name]):
            problems.append(f"{kf.name!r}: expected one of {list(kf.values)}, got "
                            f"{key[kf.name]!r}")
    if problems:
        raise ValueError(f"key: {'; '.join(problems)} ({schema.algorithm} key {key})")
    missing = [p.name for p in schema.params if p.name not in base]
    if missing:
        raise ValueError(f"base: expected a complete {schema.algorithm} policy, missing {missing}")
    names = [p.name for p in schema.params]
    chosen = set(fields) if fields is not None else None
    for what, given in (("fields", chosen or ()), ("exclude", exclude)):
        unknown = [n for n in given if n not in names]
        if unknown:
            raise ValueError(f"{what}: unknown {schema.algorithm} fields {unknown}; known: {names}")
    skip = set(exclude)
    dims, applies = [], {}
    for p in schema.tuned_params():
        if (chosen is not None and p.name not in chosen) or p.name in skip:
            continue
        values = set(p.candidates()) | {base[p.name]}
        for c in include:
            if p.name in c:
                problem = p.check(c[p.name])
                if problem:
                    raise ValueError(f"include: field {p.name!r}: {problem}")
                values.add(c[p.name])
        dims.append(Dimension(p.name, tuple(sorted(values))))
        if p.applies is not None:
            test = (lambda f, p=p: p.applies(key, f))
            applies[p.name] = (test, _reads(test, base))
    checks = [(c.holds, _reads(c.holds, base)) for c in schema.constraints]
    return SearchSpace(schema.algorithm, key, dims, base, applies, checks)


def space_for(algorithm: str, key: dict, base: dict, **options) -> SearchSpace:
    """The search space of `algorithm` (a tilecore.tunings schema) for tuning
    `key` around the complete current policy `base` (options: see
    space_from_schema)."""
    return space_from_schema(schema_for(algorithm), key, base, **options)
