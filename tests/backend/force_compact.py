"""A pytest plugin that makes every kernel compact (backend/cuda/emit.Ctx.compact),
outlined in segments of at most 6 ops, so that any test suite exercises fused
loops and outlined functions at every kind of op; with a GPU, the suite's
conftest then checks each compact kernel's results against the interpreter's.

    PYTHONPATH=tests/backend python -m pytest -p force_compact tests/frontend tests/interpreter

Tests that inspect the fully unrolled source (e.g. block-reduction call sites)
fail under it by design."""
import tilecore.backend.cuda.emit as emit
import tilecore.backend.cuda.outline as outline

emit.COMPACT_BUDGET = 0
outline.SEGMENT_OPS = 6
outline.MIN_SEGMENT = 2
