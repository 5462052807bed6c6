"""Writing the tuner's results as tuning tables: `<dir>/<algorithm>/sm_XY.yaml`
in the schema of `tilecore/tunings/` (loader.py, schema.py), merged with the
table already there, written atomically, with provenance.

What a written row holds. `match` is the tuning key the search ran for;
`params` is the complete policy measured (the policy that was current, with
the search's winning fields over it, restricted to the schema's fields), so
the policy dispatched is the one measured whatever table default or hub
policy the row lands over; `provenance` is the environment (gpu, cc, driver,
nvrtc, tilecore, date), `method` ("tilecore.tune, tpe+polish, 120 trials"),
`trials`, `score` (score.py's weighted speedup over the policy that was
current, which scores 1.0), `gain` = score - 1 (so 0.04: 4% faster on the
weighted mean) and `sizes` (per input size in items: `old_gbs`, `new_gbs`,
`speedup`, `noise`). A row with a `score` was measured; a row without one is
hand-set.

The merge rule (`merge`), for an existing row with the same `match` as a new
entry (rows are keyed by `match`; other rows are always kept):
1. the entry was measured against this row's policy (its `old_params` agree
   with every field the row and the table default set: a re-tune starting
   from the row): the entry replaces the row when its policy differs and its
   score is above 1.0 (it beat the row head-to-head, in one run); when its
   policy is the row's, it replaces a hand-set row (adding measurements) and
   leaves a measured one;
2. otherwise, a hand-set row loses to the measured entry, and a measured row
   is replaced only by a higher score (scores against different baselines:
   the best comparison the two rows allow);
ties keep the existing row. Every decision is reported (`Decision`):
nothing is overwritten silently.

Writing into a directory with no table for (algorithm, architecture) starts
from the shipped table of that architecture when there is one (its default,
rows, provenance and comments): the lookup takes the first table found per
architecture, so a user table holding only the tuned rows would hide every
other shipped row of that architecture.

The file is re-emitted whole (PyYAML keeps no comments): a generated header
(lines starting "# tilecore.tune:") saying who wrote it and where the schema
is, then the old file's leading comment block, then the table; the comment
lines directly above a kept row stay above it; other comments (inside
`default`, trailing) are dropped. Rows are ordered by specificity (fields in
`match`), keeping the file's order within one specificity (the first of
equally specific matching rows wins a lookup, so that order is meaning) and
adding new rows after, sorted by key. The text is checked with the loader
before it replaces the file (temporary file in the same directory, fsync,
os.replace, under an exclusive lock against a concurrent tuner), and the
lookup's cache is cleared, so the process that wrote the table uses it at once.
"""
from __future__ import annotations

import contextlib
import datetime
import math
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence

import yaml

from .. import config
from .._version import __version__
from ..tunings import lookup
from ..tunings.loader import parse_table
from ..tunings.schema import (OPTIONAL_PROVENANCE_FIELDS, PROVENANCE_FIELDS, SCHEMA_VERSION,
                              AlgorithmSchema, TuningError, schema_for, validate_params)

__all__ = ["TunedEntry", "Decision", "write_table", "merge", "environment_provenance",
           "default_directory", "key_text", "size_text", "atomic_write", "GENERATED_MARK"]

GENERATED_MARK = "# tilecore.tune:"
SIZE_FIELDS = ("old_gbs", "new_gbs", "speedup", "noise")
_ROW_ONLY = ("trials", "score", "sizes", "gain")  # provenance of one result, not of a run


@dataclass
class TunedEntry:
    """The result of one search (one algorithm, one tuning key).

    key: the tuning key, written as the row's `match`.
    params: the winning policy's tuned fields.
    old_params: the policy that was current for the key, complete (every
        field the policy hub sets): the search's baseline; the row written is
        old_params with params over it.
    sizes: input size (items) -> {"old_gbs", "new_gbs", "speedup", "noise"}:
        bandwidth of the old and the new policy (GB/s), speedup = old time /
        new time, noise = the half-width of the speedup's confidence interval,
        in the speedup's units (1.043 +- 0.004: noise 0.004; None: unknown).
    score: score.py's weighted speedup over the old policy (weights summing
        to 1: the old policy scores 1.0).
    trials: configurations the search measured.
    strategy: the search strategy (SearchResult.strategy), for `method`.
    """
    key: dict
    params: dict
    old_params: dict
    sizes: dict[int, dict]
    score: float
    trials: int
    strategy: str = ""


@dataclass(frozen=True)
class Decision:
    """What the merge did with one row: action is "added" (a new key),
    "replaced" (the entry took an existing row's place), "kept" (the existing
    row stays, the entry is dropped) or "seeded" (the table started from the
    shipped one; match is empty)."""
    action: str
    match: dict
    detail: str

    def __str__(self) -> str:
        what = key_text(self.match) if self.match else "table"
        return f"{self.action} {what}: {self.detail}"


def key_text(key: dict) -> str:
    """A tuning key as `k=v,...` sorted by field name (bools as true/false):
    the one spelling of a key in study names, logs and reports."""
    return ",".join(f"{k}={_scalar(v)}" for k, v in sorted(key.items()))


def size_text(n: int) -> str:
    """An input size: 2^k for a power of two, else the number."""
    return f"2^{n.bit_length() - 1}" if n > 0 and n & (n - 1) == 0 else str(n)


def _scalar(v) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


# -- provenance of the environment ----------------------------------------------------------------

def environment_provenance(device: Optional[int], cc: Optional[int] = None) -> dict:
    """Where results are measured: gpu (the device's name), cc (compute
    capability, e.g. 90), driver and nvrtc (versions "major.minor"), tilecore
    (version) and date (today, UTC, YYYY-MM-DD).

    device None (the interpreter, or no GPU): nothing is queried; gpu is
    "none", cc is `cc` (the architecture the interpreter stands in for) or
    None, driver None. With a device, its name and compute capability come
    from tilecore.runtime (NoDeviceError without a GPU), and `cc`, when
    given, must be the device's (ValueError otherwise). A version that cannot
    be read is None."""
    prov = {"gpu": "none", "cc": cc, "driver": None, "nvrtc": _nvrtc_version(),
            "tilecore": __version__, "date": _today()}
    if device is not None:
        from ..runtime import get_device
        dev = get_device(device)
        major, minor = dev.compute_capability
        found = major * 10 + minor
        if cc is not None and cc != found:
            raise ValueError(f"environment_provenance: argument cc={cc} is not device "
                             f"{device}'s compute capability {found} ({dev.name})")
        prov.update(gpu=dev.name, cc=found, driver=_driver_version())
    return prov


def _today() -> str:
    return datetime.datetime.now(datetime.timezone.utc).date().isoformat()


def _driver_version() -> Optional[str]:
    """The CUDA driver's version (cuDriverGetVersion through cuda.bindings,
    e.g. 13000 -> "13.0"), None when there is no driver."""
    try:
        from cuda.bindings import driver as drv
        err, version = drv.cuDriverGetVersion()
    except (ImportError, OSError, RuntimeError):  # RuntimeError: cuda.pathfinder's not-found
        return None
    if err:
        return None
    return f"{version // 1000}.{version % 1000 // 10}"


def _nvrtc_version() -> Optional[str]:
    try:
        from ..backend import nvrtc_version
        return nvrtc_version()
    except (ImportError, OSError, RuntimeError):
        return None


def default_directory() -> Path:
    """Where the tuner writes by default: the user's tuning directory, which
    the dispatch layer reads before the shipped tables
    (`config.user_tuning_dir()`). ValueError when TILECORE_TUNING_DIR turns it
    off (empty or an off-word) or there is no home directory."""
    d = config.user_tuning_dir()
    if d is None:
        raise ValueError("no user tuning directory: TILECORE_TUNING_DIR is set empty or off "
                         f"(got {os.environ.get('TILECORE_TUNING_DIR')!r}) or there is no home "
                         "directory; name the output directory (--out DIR)")
    return d


# -- the table as data ----------------------------------------------------------------------------

@dataclass
class _Row:
    match: dict
    params: dict
    provenance: Optional[dict]   # None: the table's
    comments: tuple[str, ...] = ()
    new: bool = False


@dataclass
class _Doc:
    provenance: dict
    default: dict
    rows: list[_Row]
    header: tuple[str, ...] = ()


def _read(path: Path, algorithm: str, cc: int) -> _Doc:
    """The table at `path` with its comments (see the module's docstring)."""
    text = path.read_text(encoding="utf-8")
    try:
        table = parse_table(text, str(path), algorithm, cc)
    except TuningError as e:
        raise TuningError(f"{e} (tilecore.tune merges into this table: fix it or move it "
                          f"away first)") from None
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines)
                  if line.strip() and not line.lstrip().startswith("#")), len(lines))
    header = [line for line in lines[:start]
              if line.strip() and not line.startswith(GENERATED_MARK)]
    rows = []
    for r in table.rows:
        above, i = [], r.line - 2   # the row's first line is r.line (1-based)
        while i >= start and lines[i].lstrip().startswith("#"):
            above.append(lines[i].strip())
            i -= 1
        own = None if r.provenance == table.provenance else dict(r.provenance)
        rows.append(_Row(dict(r.match), dict(r.params), own, tuple(reversed(above))))
    return _Doc(dict(table.provenance), dict(table.default), rows, tuple(header))


def _entry_row(schema: AlgorithmSchema, entry: TunedEntry, base: dict) -> _Row:
    """The row of a tuned entry (validated), with its provenance."""
    algorithm = schema.algorithm
    where = f"write_table({algorithm}): entry {key_text(entry.key)}"
    for k, v in entry.key.items():
        kf = schema.key_field(k)
        if kf is None or not kf.accepts(v):
            known = [f.name for f in schema.key_fields] if kf is None else list(kf.values)
            raise TuningError(f"{where}: key field {k!r}={v!r}: expected "
                              f"{'a field in ' if kf is None else 'one of '}{known}")
    validate_params(algorithm, entry.params, where)
    names = [p.name for p in schema.params]
    policy = {**entry.old_params, **entry.params}
    params = {n: policy[n] for n in names if n in policy}
    validate_params(algorithm, params, where)
    if isinstance(entry.score, bool) or not isinstance(entry.score, (int, float)) \
            or not math.isfinite(entry.score) or entry.score <= 0:
        raise TuningError(f"{where}: score: expected a positive finite number, got "
                          f"{entry.score!r}")
    if isinstance(entry.trials, bool) or not isinstance(entry.trials, int) or entry.trials < 0:
        raise TuningError(f"{where}: trials: expected a count >= 0, got {entry.trials!r}")
    prefix = base.get("method") or "tilecore.tune"
    method = ", ".join(x for x in (prefix, entry.strategy, f"{entry.trials} trials") if x)
    prov = {**{k: v for k, v in base.items() if k not in _ROW_ONLY}, "method": method,
            "gain": round(entry.score - 1.0, 4), "trials": entry.trials,
            "score": round(float(entry.score), 4), "sizes": _sizes(entry.sizes, where)}
    return _Row(dict(entry.key), params, prov, new=True)


def _sizes(sizes: dict, where: str) -> dict:
    out = {}
    for n, m in sizes.items():
        if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
            raise TuningError(f"{where}: sizes: expected positive integer sizes, got {n!r}")
        missing = [f for f in SIZE_FIELDS[:3] if f not in m]
        unknown = [f for f in m if f not in SIZE_FIELDS]
        if missing or unknown:
            raise TuningError(f"{where}: sizes[{n}]: expected the fields {list(SIZE_FIELDS)} "
                              f"(noise may be None), got {sorted(m)}")
        row = {}
        for f in SIZE_FIELDS:
            v = m.get(f)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise TuningError(f"{where}: sizes[{n}].{f}: expected a finite number, got {v!r}")
            row[f] = float(f"{v:.4g}") if f.endswith("gbs") else round(float(v), 4)
        out[n] = row
    return dict(sorted(out.items()))


def _match_id(match: dict) -> tuple:
    return tuple(sorted(match.items()))


def merge(current: Optional[_Doc], schema: AlgorithmSchema, entries: Sequence[TunedEntry],
          provenance: dict) -> tuple[_Doc, list[Decision]]:
    """The table after merging `entries` into `current` (None: a new table
    whose provenance is `provenance`), and what was done with each entry (the
    rule is in the module's docstring)."""
    doc = current or _Doc({**provenance, "gain": provenance.get("gain")}, {}, [])
    doc = _Doc(doc.provenance, doc.default, list(doc.rows), doc.header)
    decisions: list[Decision] = []
    seen: set = set()
    added: list[_Row] = []
    for entry in entries:
        new = _entry_row(schema, entry, provenance)
        ident = _match_id(new.match)
        if ident in seen:
            raise TuningError(f"write_table({schema.algorithm}): two entries for key "
                              f"{key_text(new.match)}")
        seen.add(ident)
        at = next((i for i, r in enumerate(doc.rows) if _match_id(r.match) == ident), None)
        if at is None:
            added.append(new)
            decisions.append(Decision("added", new.match, _summary(new)))
            continue
        old = doc.rows[at]
        replace, why = _better(old, new, entry, doc)
        if replace:
            doc.rows[at] = new
            decisions.append(Decision("replaced", new.match, f"{why}; {_summary(new)}"))
        else:
            decisions.append(Decision("kept", new.match, why))
    order = {f.name: i for i, f in enumerate(schema.key_fields)}
    # by key, fields in schema order (the values of one field share a type)
    added.sort(key=lambda r: tuple((order[k], v) for k, v in
                                   sorted(r.match.items(), key=lambda kv: order[kv[0]])))
    doc.rows = sorted(doc.rows + added, key=lambda r: len(r.match))
    return doc, decisions


def _better(old: _Row, new: _Row, entry: TunedEntry, doc: _Doc) -> tuple[bool, str]:
    """Whether `new` replaces `old` (same match), and why."""
    old_prov = old.provenance if old.provenance is not None else doc.provenance
    old_score = old_prov.get("score")
    row_policy = {**doc.default, **old.params}
    same_policy = all(new.params.get(k) == v for k, v in row_policy.items())
    if row_policy and all(entry.old_params.get(k) == v for k, v in row_policy.items()):
        if not same_policy:
            if entry.score > 1.0:
                return True, f"beat the row's policy head-to-head (score {entry.score:.4f})"
            return False, (f"the search found nothing faster than the row's policy (best "
                           f"score {entry.score:.4f} against it)")
        if old_score is None:
            return True, "the search confirmed the hand-set row's policy: measurements added"
        return False, "the search's best is the row's (measured) policy"
    if old_score is None:
        return True, "a measured row replaces a hand-set one"
    if entry.score > old_score:
        return True, f"higher score {entry.score:.4f} > {old_score:.4f}"
    return False, f"the row's measured score {old_score:.4f} >= the new {entry.score:.4f}"


def _summary(row: _Row) -> str:
    p = row.provenance or {}
    return f"{_flow(row.params)}, score {p.get('score')}, {p.get('trials')} trials"


def _flow(d: dict) -> str:
    return "{" + ", ".join(f"{k}: {_scalar(v)}" for k, v in d.items()) + "}"


# -- emitting YAML --------------------------------------------------------------------------------

class _Flow(dict):
    """A mapping emitted in flow style ({a: 1, b: 2})."""


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data) -> bool:   # rows may share provenance objects: no anchors
        return True


_Dumper.add_representer(_Flow, lambda d, m: d.represent_mapping("tag:yaml.org,2002:map",
                                                                 m.items(), flow_style=True))


def _dump(data) -> list[str]:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                     width=100, allow_unicode=True).splitlines()


def _ordered_provenance(prov: dict) -> dict:
    order = [*PROVENANCE_FIELDS, *OPTIONAL_PROVENANCE_FIELDS]
    out = {k: prov[k] for k in order if k in prov and k != "sizes"}
    out.update({k: v for k, v in prov.items() if k not in order})
    if "sizes" in prov:
        out["sizes"] = {n: _Flow((f, m[f]) for f in SIZE_FIELDS if f in m) if isinstance(m, dict)
                        else m for n, m in prov["sizes"].items()}
    return out


def render(doc: _Doc, schema: AlgorithmSchema, cc: int) -> str:
    """The YAML text of a table (see the module's docstring for its layout)."""
    keys = [f.name for f in schema.key_fields]
    names = [p.name for p in schema.params]

    def ordered(d: dict, order: list) -> _Flow:
        return _Flow([(k, d[k]) for k in order if k in d] + [(k, v) for k, v in d.items()
                                                              if k not in order])

    out = [f"{GENERATED_MARK} written by python -m tilecore.tune ({_today()}), merged with "
           f"the table that was here.",
           f"{GENERATED_MARK} schema: tilecore/tunings/schema.py; a row with a `score` in its "
           f"provenance was measured, one without is hand-set.",
           *doc.header]
    top: dict = {"schema": SCHEMA_VERSION, "algorithm": schema.algorithm, "arch": f"sm_{cc}",
                 "provenance": _ordered_provenance(doc.provenance)}
    if doc.default:
        top["default"] = dict(ordered(doc.default, names))
    out += _dump(top)
    if doc.rows:
        out.append("tunings:")
    for row in doc.rows:
        out += [f"  {c}" for c in row.comments]
        item: dict = {"match": ordered(row.match, keys), "params": ordered(row.params, names)}
        if row.provenance is not None:
            item["provenance"] = _ordered_provenance(row.provenance)
        out += [f"  {line}" for line in _dump([item])]
    return "\n".join(out) + "\n"


# -- writing --------------------------------------------------------------------------------------

def write_table(directory: Path, algorithm: str, cc: int, entries: Sequence[TunedEntry],
                provenance: dict, *, log: Optional[Callable[[str], None]] = None) -> Path:
    """Merge `entries` into `<directory>/<algorithm>/sm_<cc>.yaml` (created,
    or started from the shipped table of that architecture, when absent) and
    write it atomically; returns its path.

    provenance: the run's environment (`environment_provenance`, plus
    `method`, e.g. "tilecore.tune": the prefix of each row's method); it is
    the table's provenance when the table is new, and every new row carries
    it with its own trials, score, gain and sizes. log: receives one line per
    decision (default: standard error). Nothing is written when no entry is
    added or replaces a row. TuningError for an invalid entry,
    provenance or existing table."""
    schema = schema_for(algorithm)
    if isinstance(cc, bool) or not isinstance(cc, int) or cc <= 0:
        raise TuningError(f"write_table: argument cc: expected a compute capability like 90, "
                          f"got {cc!r}")
    known = {**PROVENANCE_FIELDS, **OPTIONAL_PROVENANCE_FIELDS}
    unknown = [k for k in provenance if k not in known]
    if unknown or "gpu" not in provenance:
        raise TuningError(f"write_table: argument provenance: expected 'gpu' and fields among "
                          f"{list(known)}, got {sorted(provenance)}")
    provenance = {"date": _today(), "method": "tilecore.tune", **provenance}
    emit = log or (lambda line: print(line, file=sys.stderr))
    path = Path(directory) / algorithm / f"sm_{cc}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        current, decisions = None, []
        if path.is_file():
            current = _read(path, algorithm, cc)
        else:
            seed = _shipped_table(path, algorithm, cc)
            if seed is not None:
                current = _read(seed, algorithm, cc)
                decisions.append(Decision("seeded", {}, f"started from {seed} (its default and "
                                          f"{len(current.rows)} rows), which this table would "
                                          f"otherwise hide"))
        doc, merged = merge(current, schema, entries, provenance)
        changed = any(d.action in ("added", "replaced") for d in merged)
        decisions = (decisions if changed else []) + merged
        if changed:
            text = render(doc, schema, cc)
            parse_table(text, str(path), algorithm, cc)  # never write what the loader rejects
            atomic_write(path, text.encode("utf-8"))
    if changed:
        lookup.clear_cache()
    for d in decisions:
        emit(f"{path}: {d}")
    return path


def _shipped_table(path: Path, algorithm: str, cc: int) -> Optional[Path]:
    shipped = lookup.shipped_dir()
    if shipped is None:
        return None
    seed = shipped / algorithm / f"sm_{cc}.yaml"
    if not seed.is_file() or seed.resolve() == path.resolve():
        return None
    return seed


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on `.<name>.lock` beside `path` (POSIX flock; none
    elsewhere) for a read-merge-write, so two tuners writing one table (two
    GPUs of one architecture) do not lose each other's rows."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    with open(path.parent / f".{path.name}.lock", "a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` by `data` atomically: a temporary file in the same
    directory, fsync, os.replace, then fsync of the directory (best effort),
    so a reader sees the old file or the new one, never a torn one. Keeps the
    mode of the file it replaces (new files: 0644)."""
    path = Path(path)
    try:
        mode = path.stat().st_mode & 0o777
    except OSError:
        mode = 0o644
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError, AttributeError):
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
