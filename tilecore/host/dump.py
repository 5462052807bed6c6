"""TILECORE_DUMP_DIR: the IR and generated CUDA C++ of each compiled kernel,
written as ``<kernel>_<key[:12]>.ir`` and ``.cu`` for reading and diffing.

Dumping is asked for explicitly, so a directory that cannot be created or
written is an error (a ValueError naming the variable, its value and the
OS's reason), not a warning that leaves the user without the files."""
from __future__ import annotations

from .. import config
from ..backend.cuda import GeneratedKernel
from ..ir.core import Function
from ..ir.printer import format_function

__all__ = ["dump_kernel"]


def dump_kernel(name: str, key: str, fn: Function, gen: GeneratedKernel) -> None:
    """Write `fn`'s IR and `gen`'s source under TILECORE_DUMP_DIR, if set."""
    root = config.dump_dir()
    if root is None:
        return
    stem = f"{name}_{key[:12]}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        (root / f"{stem}.ir").write_text(format_function(fn) + "\n", encoding="utf-8")
        (root / f"{stem}.cu").write_text(gen.source, encoding="utf-8")
    except OSError as e:
        raise config.invalid_value("TILECORE_DUMP_DIR", "a directory that tilecore can create "
                                   "and write", str(e)) from None
