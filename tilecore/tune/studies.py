"""The sweep's Optuna studies (sweep.py has the flow): where they are stored
(`default_storage`, `open_storage`), how they are named (`study_base_name`:
one study per run of a workload, `#<run>` counting runs), resumed (`open_study`,
`prior_run`) and how a finished study keeps its result (TunedEntry as JSON);
and the sizes a sweep measures (`parse_sizes`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional, Sequence

import optuna

from .output import TunedEntry, key_text, size_text
from .strategies import ATTR_DUPLICATE, ATTR_STATUS, INFEASIBLE

__all__ = ["default_storage", "open_storage", "parse_sizes", "study_base_name", "open_study",
           "prior_run", "entry_json", "entry_from_json", "STUDY_PREFIX"]

STUDY_PREFIX = "tilecore.tune"


def default_storage() -> Optional[str]:
    """The default study storage: SQLite at `<cache_dir>/tune/studies.db`,
    None when the disk cache is disabled."""
    from .. import config
    try:
        root = config.cache_dir()
    except RuntimeError:
        return None
    if root is None:
        return None
    return f"sqlite:///{root / 'tune' / 'studies.db'}"


def open_storage(url: Optional[str]) -> optuna.storages.BaseStorage:
    """The Optuna storage at `url` (None: in memory). An SQLite file is put
    in write-ahead-log mode first (persistent, in the file): each trial's
    commits then append to the log instead of rewriting the database with an
    fsync each (20x faster on a slow disk), and optuna-dashboard can read the
    study while the sweep writes it."""
    if url is None:
        return optuna.storages.InMemoryStorage()
    prefix = "sqlite:///"
    if url.startswith(prefix) and url != prefix + ":memory:":
        import sqlite3
        path = Path(url[len(prefix):])
        path.parent.mkdir(parents=True, exist_ok=True)

        def connect() -> sqlite3.Connection:
            db = sqlite3.connect(path, timeout=60, check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            return db
        return optuna.storages.RDBStorage(url, engine_kwargs={"creator": connect})
    return optuna.storages.RDBStorage(url)


def parse_sizes(text: str) -> tuple[int, ...]:
    """Sizes from `A:B[:S]` (powers of two from A to B, A and B written 2^k
    or as numbers, exponent step S, default 4: 2^16:2^28 is 2^16, 2^20,
    2^24, 2^28) or a comma list of sizes (2^k or numbers). ValueError naming
    what is wrong."""
    def number(s: str) -> int:
        s = s.strip()
        if s.startswith("2^") and s[2:].isdigit():
            return 1 << int(s[2:])
        if s.isdigit():
            return int(s)
        raise ValueError(f"expected a size like 2^20 or 1048576, got {s!r}")
    if ":" in text:
        parts = text.split(":")
        if len(parts) not in (2, 3):
            raise ValueError(f"expected A:B or A:B:STEP, got {text!r}")
        lo, hi = number(parts[0]), number(parts[1])
        step = 4 if len(parts) == 2 else int(parts[2]) if parts[2].strip().isdigit() else 0
        if step < 1:
            raise ValueError(f"expected a positive exponent step, got {parts[2]!r}")
        for v in (lo, hi):
            if v < 1 or v & (v - 1):
                raise ValueError(f"a range's ends must be powers of two, got {v}")
        if lo > hi:
            raise ValueError(f"expected A <= B in A:B, got {text!r}")
        out = tuple(1 << e for e in range(lo.bit_length() - 1, hi.bit_length(), step))
    else:
        out = tuple(sorted({number(s) for s in text.split(",")}))
    if not out or out[0] < 1:
        raise ValueError(f"expected positive sizes, got {text!r}")
    if out[-1] >= 1 << 31:
        raise ValueError(f"sizes must be below 2^31 (the tuning keys assume int32 offsets), "
                         f"got {size_text(out[-1])}")
    return out


def study_base_name(algorithm: str, cc: int, key: dict, sizes: Sequence[int],
                    fields: Optional[Sequence[str]] = None) -> str:
    """The study name of a workload's runs, without the `#run` suffix."""
    name = (f"{STUDY_PREFIX}/{algorithm}/sm_{cc}/{key_text(key)}/"
            f"{','.join(size_text(n) for n in sizes)}")
    return name + (f"/{','.join(fields)}" if fields else "")


def open_study(storage, base: str, resume: bool, log: Callable[[str], None]) -> optuna.Study:
    runs = []
    for name in optuna.get_all_study_names(storage):
        head, _, run = name.rpartition("#")
        if head == base and run.isdigit():
            runs.append(int(run))
    if resume and runs:
        return optuna.load_study(study_name=f"{base}#{max(runs)}", storage=storage)
    if resume:
        log(f"{base}: no study to resume; starting one")
    return optuna.create_study(study_name=f"{base}#{max(runs, default=0) + 1}",
                               storage=storage, direction="maximize")


def prior_run(study: optuna.Study) -> tuple[int, Optional[float]]:
    """(evaluations a study holds, the best "ok" score among them)."""
    count, best = 0, None
    for t in study.get_trials(deepcopy=False):
        status = t.user_attrs.get(ATTR_STATUS)
        if status is None or status == INFEASIBLE or ATTR_DUPLICATE in t.user_attrs:
            continue
        count += 1
        if status == "ok" and t.value is not None and (best is None or t.value > best):
            best = t.value
    return count, best


def entry_json(e: TunedEntry) -> dict:
    return {"key": e.key, "params": e.params, "old_params": e.old_params,
            "sizes": {str(n): m for n, m in e.sizes.items()}, "score": e.score,
            "trials": e.trials, "strategy": e.strategy}


def entry_from_json(d: dict) -> TunedEntry:
    return TunedEntry(d["key"], d["params"], d["old_params"],
                      {int(n): m for n, m in d["sizes"].items()}, d["score"], d["trials"],
                      d["strategy"])
