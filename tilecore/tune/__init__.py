"""tilecore's tuner: cuTile's autotuning API for users' own kernels
(`exhaustive_search`, `search`; cuTile's `cuda.tile.tune`) and the policy
sweeps of `python -m tilecore.tune` that write the `tuning_db` tables.

Everything here is imported on first use (`import tilecore` does not load
Optuna); the sweep's parts live in their own modules (space, strategies, measure,
workloads, compile_pool, score, output, report, replay)."""
from .autotune import (Measurement, TileLaunchTimeoutError, TuningResult, exhaustive_search,
                       replace_hints, search)

__all__ = ["Measurement", "TuningResult", "TileLaunchTimeoutError", "exhaustive_search",
           "search", "replace_hints"]
