"""Cheap identities of the compiler toolchain for cache keys.

A warm start must find its cubin on disk without loading NVRTC (about 200 ms)
or importing cuda.core (about 250 ms). So the cache key names NVRTC by the
library file the loader would pick (path, size and modification time: a new
NVRTC is a new file) and cuda.core by the version file it ships, both read
without importing or loading anything. Only when no NVRTC file can be found
this way is NVRTC loaded and asked for its version.
"""
from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path
from typing import Optional

__all__ = ["nvrtc_identity", "cuda_core_version"]


def _nvrtc_candidates() -> list[Path]:
    """Where cuda.pathfinder looks for libnvrtc, in its order: the NVIDIA
    wheels first, then CUDA_HOME / CUDA_PATH, then the default toolkit."""
    dirs: list[Path] = []
    spec = importlib.util.find_spec("nvidia")
    if spec is not None and spec.submodule_search_locations:
        for root in spec.submodule_search_locations:
            for sub in ("cu13/lib", "cuda_nvrtc/lib", "cu12/lib"):
                dirs.append(Path(root) / sub)
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            dirs.append(Path(os.environ[var]) / "lib64")
    dirs.append(Path("/usr/local/cuda/lib64"))
    return dirs


def _file_identity(path: Path) -> str:
    real = path.resolve()
    st = real.stat()
    return f"{real}:{st.st_size}:{st.st_mtime_ns}"


@functools.lru_cache(maxsize=1)
def nvrtc_identity() -> str:
    """Identity of the NVRTC library compilations will use."""
    for d in _nvrtc_candidates():
        if d.is_dir():
            libs = sorted(p for p in d.glob("libnvrtc.so*") if "builtins" not in p.name)
            if libs:
                return _file_identity(libs[-1])
    from .nvrtc import nvrtc_version
    return "nvrtc " + nvrtc_version()


@functools.lru_cache(maxsize=1)
def cuda_core_version() -> Optional[str]:
    """cuda.core's version, read from its _version.py without importing it."""
    spec = importlib.util.find_spec("cuda.core")
    if spec is None or not spec.submodule_search_locations:
        return None
    version_file = Path(list(spec.submodule_search_locations)[0]) / "_version.py"
    try:
        return version_file.read_text()
    except OSError:
        return None
