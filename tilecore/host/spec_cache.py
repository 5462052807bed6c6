"""A second disk-cache key for a kernel specialization, computable without
lowering the kernel (the *spec key*), so that a warm process's first launch of
tilecore's own kernels (the device-scope algorithms) skips the front end and
code generation: about 10 ms per kernel, two kernels in a first reduction.

The regular key (host/compile.py: a hash of the generated C++ and the
toolchain) stays what every build is checked against and the fallback for
anything this module does not vouch for. The spec key hashes what decides the
generated code before it is generated:

- the kernel function, only when it is a module-level function of tilecore's
  own package (its code, and everything it calls there, is covered by the
  sources fingerprint: every .py file's size and mtime and tilecore's version);
- each argument kind (dtype, rank, wide indices) and array fact (alignment,
  unit stride, whole vectors), and each Constant's value, only when that value
  is plain (None, bool, int, float, str, a NumPy scalar, a DType, an enum
  member, a tuple of those) or again a module-level function of tilecore's
  package without a closure;
- the architecture, the resolved codegen options, NVRTC's and cuda.core's
  identities, the runtime headers' fingerprint, the compact-kernel switches
  and every TILECORE_* environment variable but the cache directory.

Anything else (a user kernel or operator, a lambda, an object constant), or
a dump directory set (TILECORE_DUMP_DIR: the regular build writes the dumps):
`spec_key` is None and the regular path runs, as before.

An entry (the DiskCache's checksummed file) holds a JSON header with every
CompiledKernel field but the cubin, plus the positions of the arrays the
kernel writes (what gpu.py otherwise reads from the IR), then the regular
entry's bytes (min-blocks, registers, stack, cubin), validated as the regular
entry is (`compile._entry_is_valid`). A damaged or invalid entry is ignored.
`lowered` counts the specializations whose IR this process had to build
because no entry was found (tests check a warm process builds none).
"""
from __future__ import annotations

import enum
import json
import os
import types
from typing import Any, Optional, Sequence

import numpy as np

from .. import config
from ..errors import Loc
from ..language.dtypes import DType

__all__ = ["spec_key", "lookup", "remember", "lowered"]

_FORMAT = 1
_SEP = b"\n\0"
lowered = [0]


def _function_id(fn: Any) -> Optional[str]:
    pyfunc = getattr(fn, "pyfunc", fn)  # a @tilecore.function
    if not isinstance(pyfunc, types.FunctionType):
        return None
    mod = pyfunc.__module__ or ""
    if not (mod == "tilecore" or mod.startswith("tilecore.")) or pyfunc.__closure__ or \
            "<" in pyfunc.__qualname__:
        return None
    return f"fn:{mod}:{pyfunc.__qualname__}:{type(fn).__name__}"


def _value_id(v: Any) -> Optional[str]:
    t = type(v)
    if v is None or t in (bool, int, float, str):
        return f"{t.__name__}:{v!r}"
    if isinstance(v, DType):
        return "dtype:" + v.name
    if isinstance(v, np.generic):
        return f"np:{v.dtype.str}:{v.tobytes().hex()}"
    if isinstance(v, enum.Enum):
        return f"enum:{t.__module__}.{t.__qualname__}.{v.name}"
    if t is tuple:
        parts = [_value_id(x) for x in v]
        return None if None in parts else "(" + ",".join(parts) + ")"
    return _function_id(v)


def _kind_id(kind: Any) -> Optional[str]:
    from ..frontend.specialize import ArrayArg, ConstArg, ScalarArg
    if isinstance(kind, ArrayArg):
        return f"array:{kind.dtype.name}:{kind.ndim}:{int(kind.wide)}"
    if isinstance(kind, ScalarArg):
        return "scalar:" + kind.dtype.name
    if isinstance(kind, ConstArg):
        v = _value_id(kind.value)
        return None if v is None else "const:" + v
    return None


def _environment() -> str:
    return "\0".join(f"{k}={v}" for k, v in sorted(os.environ.items())
                     if k.startswith("TILECORE_") and k != "TILECORE_CACHE_DIR")


def spec_key(kernel: Any, kinds: Sequence[Any], arrays: dict, arch: str) -> Optional[str]:
    """The spec key of this specialization, or None when it cannot be vouched for."""
    fn = _function_id(kernel.pyfunc)
    if fn is None or config.dump_dir() is not None:  # dumps are written by the regular build
        return None
    parts = []
    for kind in kinds:
        k = _kind_id(kind)
        if k is None:
            return None
        parts.append(k)
    from . import compile as C
    from ..backend.cuda import nvrtc
    from ..backend.cuda.nvrtc import header_fingerprint
    from ..backend.cuda.toolchain import cuda_core_version, nvrtc_identity
    from ..runtime.cache import cache_key
    specs = ";".join(f"{i}:{int(s.aligned16)}{int(s.unit_stride)}{int(s.whole_vectors)}"
                     for i, s in sorted(arrays.items()))
    return cache_key({
        "spec_format": _FORMAT, "kernel": fn, "kinds": "\0".join(parts), "arrays": specs,
        "arch": arch, "options": repr(C.codegen_options(kernel, arch)),
        "kernel_options": repr(kernel.options),
        "nvrtc": nvrtc_identity(), "cuda_core": str(cuda_core_version()),
        "tilecore": C._sources_fingerprint(), "headers": header_fingerprint(),
        "compact": f"{nvrtc.COMPACT_FAST_COMPILE}:{C.COMPACT_RESIDENT_THREADS}",
        "environment": _environment(),
    })


def _loc_json(loc: Optional[Loc]) -> Optional[dict]:
    if loc is None:
        return None
    return {"filename": loc.filename, "line": loc.line, "col": loc.col, "end_col": loc.end_col,
            "function": loc.function, "caller": _loc_json(loc.caller)}


def _loc(d: Optional[dict]) -> Optional[Loc]:
    if d is None:
        return None
    return Loc(d["filename"], d["line"], d["col"], d["end_col"], d["function"],
               _loc(d["caller"]))


def _disk():
    from ..runtime.cache import default_cache
    return default_cache().disk


def lookup(kernel: Any, kinds: Sequence[Any], arrays: dict, arch: str):
    """(CompiledKernel, written positions) from this specialization's entry, or
    None (no spec key, no disk cache, no entry, or an entry that fails
    validation): then the caller lowers and builds as before."""
    config.validate_environment()
    disk = _disk()
    key = spec_key(kernel, kinds, arrays, arch) if disk is not None else None
    if key is None:
        return None
    payload = disk.get(key)
    if payload is None:
        return None
    try:
        return _decode(payload, arch)
    except (ValueError, KeyError, TypeError, IndexError):
        return None


def _decode(payload: bytes, arch: str):
    from ..backend.cuda.rules_control import DeviceCheck
    from .compile import _ENTRY_HEADER, CompiledKernel, _entry_is_valid
    head, sep, entry = payload.partition(_SEP)
    if not sep:
        return None
    d = json.loads(head)
    if d.get("format") != _FORMAT or d["arch"] != arch or \
            not _entry_is_valid(d["block_threads"], arch, entry):
        return None
    _, registers, stack = _ENTRY_HEADER.unpack_from(entry)
    checks = tuple(DeviceCheck(c["message"], _loc(c["loc"])) for c in d["checks"])
    compiled = CompiledKernel(d["name"], arch, d["source"], entry[_ENTRY_HEADER.size:], d["ir"],
                              d["entry"], d["block_threads"], d["smem_bytes"], d["param_format"],
                              d["cluster_size"], registers, d["streams"], stack, checks)
    return compiled, frozenset(d["written_at"])


def remember(kernel: Any, kinds: Sequence[Any], arrays: dict, arch: str, compiled: Any,
             written_at: frozenset) -> None:
    """Store the entry of a specialization just built (when it has a spec key)."""
    lowered[0] += 1
    disk = _disk()
    if disk is None:
        return
    key = spec_key(kernel, kinds, arrays, arch)
    if key is None:
        return
    from ..backend.cuda.cubin_info import Resources, kernel_resources
    from .compile import _ENTRY_HEADER
    try:
        checks = [{"message": c.message, "loc": _loc_json(c.loc)} for c in compiled.checks]
        head = json.dumps({
            "format": _FORMAT, "name": compiled.name, "arch": compiled.arch,
            "source": compiled.source, "ir": compiled.ir, "entry": compiled.entry,
            "block_threads": compiled.block_threads, "smem_bytes": compiled.smem_bytes,
            "param_format": compiled.param_format, "cluster_size": compiled.cluster_size,
            "streams": compiled.streams, "checks": checks, "written_at": sorted(written_at),
        }).encode()
    except (TypeError, ValueError, AttributeError):
        return
    # min-blocks: whatever fits the launch bounds in `source` (0: none recorded); the
    # registers and stack must be what the cubin says (the entry's validation checks them)
    used = kernel_resources(compiled.cubin) or Resources(0, 0)
    if (used.registers, used.stack_bytes) != (compiled.registers, compiled.stack_bytes):
        return
    entry = _ENTRY_HEADER.pack(0, compiled.registers, compiled.stack_bytes) + compiled.cubin
    disk.put(key, head + _SEP + entry)
