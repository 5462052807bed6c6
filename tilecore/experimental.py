"""cuTile's `cuda.tile_experimental` for tilecore: `import tilecore.experimental
as ct_experimental` where cuTile code says `import cuda.tile_experimental as
ct_experimental`.

`autotune_launch` and `clear_autotune_cache` have cuTile's signatures and
semantics (see tilecore.tune.autotune); cuTile deprecated both in favour of
`cuda.tile.tune.exhaustive_search` (here `tilecore.tune.exhaustive_search`),
and they warn as cuTile's do."""
from .tune.autotune import autotune_launch, clear_autotune_cache

__all__ = ["autotune_launch", "clear_autotune_cache"]
