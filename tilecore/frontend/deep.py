"""Room for expressions nested as deeply as Python itself compiles them.

CPython compiles expressions nested about 3 x `sys.getrecursionlimit()` deep
(CPython 3.11 at the default limit of 1000: 2,990 levels for `a + a + ...`,
`- - a`, `a if c else a if c else ...`, attribute, subscript and call chains;
2,984 for `a ** a ** ...`; 200 parenthesised levels). The front end lowers
left-deep `+`/`*`/... chains in a loop, but every other nesting recursively,
a few Python frames per level. So `run_deep` runs the lowering in a thread of
its own with a large stack, under a recursion limit raised to match: what
Python accepted, tile code accepts.
"""
from __future__ import annotations

import contextvars
import sys
import threading
from typing import Callable, TypeVar

__all__ = ["run_deep", "FRAMES_PER_LEVEL", "CPYTHON_312_LEVELS", "STACK_BYTES"]

T = TypeVar("T")

# Python frames the lowering spends per level of nesting, with room (measured:
# 4 for subscripts, 3 for tuple displays, 2 for unary operators, conditional
# expressions, powers, calls and attributes; 0 for left-deep chains).
FRAMES_PER_LEVEL = 8
# CPython 3.12 bounds the compiler's nesting by its C recursion limit instead
# (3 x 8000 levels), whatever the recursion limit: room for that many levels too.
CPYTHON_312_LEVELS = 24000
# The lowering thread's stack (CPython 3.11+ uses no C stack for most
# Python-to-Python calls); reserved, not committed.
STACK_BYTES = 512 * 2**20

_lock = threading.Lock()
_local = threading.local()


def run_deep(fn: Callable[[], T]) -> T:
    """`fn()`, run where the recursion limit allows `FRAMES_PER_LEVEL` frames per
    level of the deepest expression Python compiles. Lowerings run one at a
    time (the recursion limit is global); exceptions propagate to the caller."""
    if getattr(_local, "deep", False):
        return fn()
    limit = sys.getrecursionlimit()
    deep_limit = max(limit * (3 * FRAMES_PER_LEVEL + 1), CPYTHON_312_LEVELS * FRAMES_PER_LEVEL)
    outcome: dict = {}
    context = contextvars.copy_context()

    def target() -> None:
        _local.deep = True
        try:
            outcome["value"] = context.run(fn)
        except BaseException as e:   # re-raised in the calling thread
            outcome["error"] = e

    with _lock:
        sys.setrecursionlimit(deep_limit)
        try:
            thread = _start(target)
            if thread is not None:
                thread.join()
        finally:
            sys.setrecursionlimit(limit)
    if thread is None:   # no thread with such a stack here: lower in place, as deep as it goes
        return fn()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _start(target: Callable[[], None]):
    old = threading.stack_size()
    try:
        threading.stack_size(STACK_BYTES)
        thread = threading.Thread(target=target, name="tilecore-lowering", daemon=True)
        thread.start()
        return thread
    except (RuntimeError, ValueError, MemoryError):
        return None
    finally:
        threading.stack_size(old)
