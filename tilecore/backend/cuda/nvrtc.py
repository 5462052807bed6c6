"""Compile generated CUDA C++ to a cubin for one exact architecture with NVRTC
(through cuda.core.Program), and the version facts cache keys need."""
from __future__ import annotations

import functools
import hashlib
import os
import re
import threading
from pathlib import Path
from typing import Optional

from ...errors import Loc, TileCompileError
from .cubin_info import Resources, kernel_resources

__all__ = ["compile_cubin", "compile_cubin_report", "nvrtc_version", "header_fingerprint",
           "INCLUDE_DIR", "COMPACT_FAST_COMPILE"]

INCLUDE_DIR = Path(__file__).parent / "include"
_ERROR_LINE = re.compile(r"^(?P<file>[^\s()]+)\((?P<line>\d+)\): (?:catastrophic )?error", re.M)
_CONTEXT = 3


@functools.lru_cache(maxsize=1)
def _cuda_include_dir() -> str:
    try:
        from cuda.pathfinder import find_nvidia_header_directory
        found = find_nvidia_header_directory("cudart")
        if found:
            return str(found)
    except ImportError:
        pass
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    return os.path.join(home, "include")


def _excerpt(source: str, line: int) -> str:
    lines = source.splitlines()
    lo, hi = max(1, line - _CONTEXT), min(len(lines), line + _CONTEXT)
    width = len(str(hi))
    return "\n".join(f"{'>' if n == line else ' '} {n:>{width}} | {lines[n - 1]}"
                     for n in range(lo, hi + 1))


# ptxas's fast-compile level (-Ofc) for compact kernels (emit.Ctx.compact): "min"
# turns off the ptxas optimizations whose time grows faster than the code, a
# whole-program step over the calls of the outlined functions (NVRTC 13.5, 2 cores,
# a 2,000-line kernel of (64, 64) tiles: ptxas took 7-10 s at -O3, 1.6 s at min,
# the same PTX). NVVM still optimizes fully: NVRTC's own -Ofc=min (NVVM too) cost
# 1.6-1.9x the launch time of compact kernels on the H100. None: ptxas's -O level.
COMPACT_FAST_COMPILE: Optional[str] = "min"


_IMPORT_LOCK = threading.Lock()


def _program_api() -> tuple:
    """cuda.core's (Program, ProgramOptions), imported on first use (not with
    tilecore) under a lock: cuda.core resolves them lazily, and two threads
    importing them at once (compiles in several threads, which NVRTC allows:
    it releases the GIL) found the module half-initialized on the H100 host."""
    with _IMPORT_LOCK:
        from cuda.core import Program, ProgramOptions
    return Program, ProgramOptions


def _compile(source: str, arch: str, opt_level: int, name: str,
             fast_compile: Optional[str] = None) -> bytes:
    """The cubin (cuda.core raises NVRTCError, with the log, on failure).
    `fast_compile` is ptxas's -Ofc level ("min", "mid", "max"), in place of its
    -O level."""
    Program, ProgramOptions = _program_api()
    opts = ProgramOptions(name=name, arch=arch, std="c++17",
                          include_path=[str(INCLUDE_DIR), _cuda_include_dir()],
                          device_code_optimize=opt_level > 0,
                          ptxas_options=[f"-Ofc={fast_compile}" if fast_compile
                                         else f"-O{opt_level}"])
    return bytes(Program(source, "c++", opts).compile("cubin").code)


def _strip_line_directives(source: str) -> str:
    """Blank `#line` directives (keeping line numbers) so that compiler errors
    refer to generated lines."""
    return "\n".join("" if ln.startswith("#line ") else ln for ln in source.split("\n"))


def compile_cubin(source: str, arch: str, *, opt_level: int = 3, kernel_name: str = "",
                  loc: Loc | None = None, fast_compile: Optional[str] = None) -> bytes:
    """Compile `source` to a cubin for exactly `arch` (e.g. "sm_90"); never PTX.
    See compile_cubin_report."""
    return compile_cubin_report(source, arch, opt_level=opt_level, kernel_name=kernel_name,
                                loc=loc, fast_compile=fast_compile)[0]


def compile_cubin_report(source: str, arch: str, *, opt_level: int = 3, kernel_name: str = "",
                         loc: Loc | None = None, fast_compile: Optional[str] = None
                         ) -> tuple[bytes, Optional[Resources]]:
    """The cubin of `source` for exactly `arch` and its kernel's registers and
    stack, read from the cubin (None if it does not say; see cubin_info.py).
    `fast_compile`: ptxas's -Ofc level, or None (see COMPACT_FAST_COMPILE).

    Raises TileCompileError with the NVRTC log and the generated lines around
    each error (and the kernel's Python location if `loc` is given). A source
    with `#line` directives is recompiled without them to locate the errors."""
    name = f"{kernel_name or 'tilecore_kernel'}.cu"
    try:
        cubin = _compile(source, arch, opt_level, name, fast_compile)
    except Exception as exc:  # cuda.core raises NVRTCError with the log in its text
        log = str(exc)
        shown = source
        if "#line " in source:
            shown = _strip_line_directives(source)
            try:
                _compile(shown, arch, opt_level, name, fast_compile)
            except Exception as again:
                log = str(again)
        parts = [f"NVRTC failed to compile kernel {kernel_name or '<unnamed>'} for {arch}:", log.strip()]
        seen = set()
        for m in _ERROR_LINE.finditer(log):
            line = int(m.group("line"))
            if m.group("file") == name and line not in seen:
                seen.add(line)
                parts.append(f"generated source around line {line}:\n{_excerpt(shown, line)}")
        raise TileCompileError("\n\n".join(parts), loc) from None
    return cubin, kernel_resources(cubin)


@functools.lru_cache(maxsize=1)
def nvrtc_version() -> str:
    """NVRTC version as "major.minor"."""
    from cuda.bindings import nvrtc

    err, major, minor = nvrtc.nvrtcVersion()
    return f"{major}.{minor}"


@functools.lru_cache(maxsize=1)
def header_fingerprint() -> str:
    """sha256 over our include/ files (names and contents), for cache keys."""
    h = hashlib.sha256()
    for path in sorted(INCLUDE_DIR.rglob("*")):
        if path.is_file():
            h.update(path.relative_to(INCLUDE_DIR).as_posix().encode() + b"\0")
            h.update(path.read_bytes() + b"\0")
    return h.hexdigest()
