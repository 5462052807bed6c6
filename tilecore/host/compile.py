"""From a kernel specialization to a cubin: IR -> CUDA C++ -> NVRTC, through
the compiled-module cache; and `tilecore.compile`, the ahead-of-time API that
works without a GPU.

The cache key covers everything that changes the binary (the generated C++,
the exact architecture, the options, NVRTC and cuda-core versions, a hash of
tilecore's own sources and of the runtime headers), never compiler output.
"""
from __future__ import annotations

import functools
import hashlib
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from .. import config
from ..errors import TileValueError
from .._version import __version__
from ..backend.cuda import ArraySpec, CodegenOptions, GeneratedKernel, generate
from ..backend.cuda.arch import max_shared_per_block, supports_clusters, supports_pdl
from ..backend.cuda.cubin_info import Resources, kernel_resources
from ..backend.cuda.kernel import with_min_blocks
from ..backend.cuda import nvrtc
from ..backend.cuda.nvrtc import compile_cubin_report, header_fingerprint
from ..backend.cuda.occupancy import blocks_per_sm, tighter_min_blocks
from ..backend.cuda.toolchain import cuda_core_version, nvrtc_identity
from ..frontend.specialize import ArgKind, ArrayArg, needs_wide_index
from ..ir.core import Function
from ..ir.printer import format_function
from ..kernel import Kernel
from ..language.options import resolve
from ..runtime.cache import cache_key, default_cache
from .classify import check_arg_count, classify_non_array, host_array_kind, param_names
from .dump import dump_kernel

__all__ = ["CompiledKernel", "compile", "build", "codegen_options"]

_PACKAGE = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class CompiledKernel:
    """One compiled specialization: the generated CUDA C++ (`source`), the
    cubin bytes, the IR text, the entry name, the launch geometry and the
    registers and stack bytes per thread ptxas gave it (0 if the cubin did not
    say). `streams`: each block reads data of its own (ir/block_reuse.py)."""

    name: str
    arch: str
    source: str
    cubin: bytes
    ir: str
    entry: str
    block_threads: int
    smem_bytes: int
    param_format: str
    cluster_size: int
    registers: int = 0
    streams: bool = False
    stack_bytes: int = 0
    checks: tuple = ()  # run-time checks by index (backend rules_control.DeviceCheck)

    @property
    def small_l1(self) -> bool:
        """Whether the launch should ask for the smallest L1 (the largest
        shared-memory carveout): the kernel streams and does not spill, since
        L1 caches the stack."""
        return self.streams and not self.stack_bytes

    @property
    def pdl(self) -> bool:
        """Whether launches may use programmatic dependent launch: on sm_90 and
        newer the kernel's first statement waits until the stream's previous grid
        has finished and its writes are visible, so the driver may start the
        kernel's blocks while that grid drains."""
        return supports_pdl(self.arch)


@functools.lru_cache(maxsize=1)
def _sources_fingerprint() -> str:
    """Identity of tilecore's own Python sources (they decide the generated
    code): each file's path, size and modification time, which any edit or
    reinstall changes, read with stat() rather than by hashing the contents
    (that took 24 ms of a 45 ms warm start on the H100 machine)."""
    root = str(_PACKAGE)
    entries = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        rel = os.path.relpath(folder, root).replace(os.sep, "/")
        for name in files:
            if name.endswith(".py"):
                st = os.stat(os.path.join(folder, name))
                entries.append(f"{rel}/{name}:{st.st_size}:{st.st_mtime_ns}")
    h = hashlib.sha256(__version__.encode())
    h.update("\0".join(sorted(entries)).encode())
    return h.hexdigest()


def codegen_options(kernel: Kernel, arch: str) -> CodegenOptions:
    """The kernel's options resolved for `arch` (ByTarget values included)."""
    o = kernel.options
    warps = resolve(o.num_worker_warps, arch)
    threads = resolve(o.num_threads, arch) or (warps * 32 if warps else None)
    num_ctas = resolve(o.num_ctas, arch, 1)
    if not supports_clusters(arch):
        num_ctas = 1  # the hint is ignored where clusters do not exist
    return CodegenOptions(num_threads=threads, occupancy=resolve(o.occupancy, arch),
                          opt_level=resolve(o.opt_level, arch, 3), num_ctas=num_ctas, arch=arch,
                          vector_width=resolve(o.vector_width, arch),
                          early_start=o.early_start)


# Threads per SM that the launch bounds of a compact kernel ask to be resident
# (min-blocks = this / its block size; None: no launch-bounds minimum): a cap
# on registers (compact kernels took 102 and 131 at -Ofc=min, 1 block of 512
# threads or 15 of 32 per SM; 1024 caps them at 64) whose effect on launch time
# is to be measured on the GPU (bench_compile_length.py --runtime
# --compact-resident-threads 1024). Compile time does not change.
COMPACT_RESIDENT_THREADS: Optional[int] = None


def _compile_fitted(gen: GeneratedKernel, arch: str, options: CodegenOptions, fn: Function
                    ) -> tuple[int, Resources, bytes]:
    """(min_blocks, resources, cubin): the cubin of `gen`, rebuilt with tighter
    launch bounds when its registers miss one more resident block per SM by a
    few (see backend/cuda/occupancy.py), or with the bound of its own occupancy
    when it spills (kept only with less stack); min_blocks is 0 when it was not, the
    resources 0 when the cubin does not say. A compact kernel (a long one,
    emitted compactly: backend/cuda/emit.py) is compiled once, with ptxas's
    fast-compile level (nvrtc.COMPACT_FAST_COMPILE): a rebuild would double
    its compile time, seconds, for a kernel whose tiles live in local memory
    anyway."""
    fast = nvrtc.COMPACT_FAST_COMPILE if gen.compact else None

    def report(source: str):
        return compile_cubin_report(source, arch, opt_level=options.opt_level,
                                    kernel_name=fn.name, loc=fn.loc, fast_compile=fast)
    if gen.compact and COMPACT_RESIDENT_THREADS and not options.occupancy:
        blocks = min(max(1, COMPACT_RESIDENT_THREADS // gen.block_threads),
                     blocks_per_sm(gen.block_threads, 1, arch))
        cubin, used = report(with_min_blocks(gen, blocks).source)
        return blocks, used or Resources(0, 0), cubin
    cubin, used = report(gen.source)
    if used is None:
        return 0, Resources(0, 0), cubin
    if options.occupancy or gen.compact:
        return 0, used, cubin
    blocks = tighter_min_blocks(gen.block_threads, used.registers, arch)
    if blocks is not None:
        tight_cubin, tight_used = report(with_min_blocks(gen, blocks).source)
        if tight_used is not None and not tight_used.uses_more_stack_than(used):
            return blocks, tight_used, tight_cubin
    elif used.stack_bytes:
        # ptxas capped the registers for an occupancy of its own choosing and spilled:
        # asked for that occupancy, it allocates anew and may fit (NVRTC 13.5, sm_90: a
        # stand-in of DeviceScan's int32 exclusive user-operator scan on broadcast views,
        # 168 registers and 8 bytes of stack unbounded, none at __launch_bounds__(128, 3))
        blocks = blocks_per_sm(gen.block_threads, used.registers, arch)
        bound_cubin, bound_used = report(with_min_blocks(gen, blocks).source)
        if bound_used is not None and bound_used.stack_bytes < used.stack_bytes:
            return blocks, bound_used, bound_cubin
    return 0, used, cubin


# a cache entry: min_blocks, registers, stack bytes, then the cubin
_ENTRY_HEADER = struct.Struct("<HHI")
_ELF64_LE = b"\x7fELF\x02\x01"  # magic, 64-bit, little-endian
_EM_CUDA = 190                   # ELF e_machine of NVIDIA cubins
_ELF64_HEADER_BYTES = 64


def _entry_is_valid(block_threads: int, arch: str, entry: bytes) -> bool:
    """Whether a disk-cache entry could have been written by `build` for a
    kernel of `block_threads` threads on `arch` (its checksum only says that
    it was not damaged): a whole ELF64 cubin header for NVIDIA's e_machine,
    registers and stack equal to those the cubin records, and min-blocks
    within what an SM of `arch` holds. Costs one parse of the cubin's
    sections, on the first load of an entry only."""
    if len(entry) < _ENTRY_HEADER.size + _ELF64_HEADER_BYTES:
        return False
    blocks, registers, stack = _ENTRY_HEADER.unpack_from(entry)
    cubin = entry[_ENTRY_HEADER.size:]
    if cubin[:6] != _ELF64_LE or struct.unpack_from("<H", cubin, 18)[0] != _EM_CUDA:
        return False
    if blocks > blocks_per_sm(block_threads, 1, arch):
        return False
    return (kernel_resources(cubin) or Resources(0, 0)) == Resources(registers, stack)


def _check_shared_memory(fn: Function, gen: GeneratedKernel, arch: str) -> None:
    """TileValueError before NVRTC runs when the kernel's tiles staged through
    shared memory (permutes, reductions, broadcasts) need more than a block of
    `arch` may have."""
    limit = max_shared_per_block(arch)
    if limit is not None and gen.smem_bytes > limit:
        raise TileValueError(f'Kernel "{fn.name}" needs {gen.smem_bytes} bytes of shared memory '
                             f"per block to stage its tiles (permutes, reductions, broadcasts), "
                             f"more than a block of {arch} may use ({limit}); use smaller tiles",
                             fn.loc)


def build(kernel: Kernel, kinds: Sequence[ArgKind], arrays: dict[int, ArraySpec],
          arch: str) -> CompiledKernel:
    """Compile one specialization for `arch`, through the memory and disk caches.
    A cache entry holds the launch bounds' min-blocks the cubin was built with
    (0 for none, so that `source` is what was compiled), its registers and
    stack, then the cubin."""
    config.validate_environment()
    fn = kernel.ir_for(list(kinds))
    options = codegen_options(kernel, arch)
    gen = generate(fn, arrays, options)
    _check_shared_memory(fn, gen, arch)
    key = cache_key({
        "source": gen.source, "arch": arch, "options": repr(options),
        "nvrtc": nvrtc_identity(), "cuda_core": str(cuda_core_version()),
        "tilecore": _sources_fingerprint(), "headers": header_fingerprint(),
        **({"fast_compile": nvrtc.COMPACT_FAST_COMPILE or ""} if gen.compact else {}),
        **({"resident_threads": COMPACT_RESIDENT_THREADS}
           if gen.compact and COMPACT_RESIDENT_THREADS else {}),
    })
    dump_kernel(fn.name, key, fn, gen)

    def build_entry() -> bytes:
        blocks, used, cubin = _compile_fitted(gen, arch, options, fn)
        return _ENTRY_HEADER.pack(blocks, used.registers, used.stack_bytes) + cubin

    entry = default_cache().get_or_build(
        key, build_entry, functools.partial(_entry_is_valid, gen.block_threads, arch))
    blocks, registers, stack = _ENTRY_HEADER.unpack_from(entry)
    if blocks:
        gen = with_min_blocks(gen, blocks)
    return CompiledKernel(fn.name, arch, gen.source, entry[_ENTRY_HEADER.size:],
                          format_function(fn), gen.entry, gen.block_threads, gen.smem_bytes,
                          gen.param_format, options.num_ctas, registers, gen.streams, stack,
                          gen.checks)


def numpy_array_spec(a: np.ndarray) -> ArraySpec:
    """Alignment facts of a NumPy array used as a stand-in for a device array."""
    item = a.itemsize
    return ArraySpec.of(a.__array_interface__["data"][0], a.shape,
                        tuple(s // item for s in a.strides), item)


def compile(kernel: Kernel, args: Sequence[Any], *, arch: Optional[str] = None,
            programmatic_dependent_launch: bool = False) -> CompiledKernel:
    """Compile `kernel` ahead of time for `arch` without a GPU.

    `args` are what a launch takes: NumPy arrays (stand-ins for device arrays:
    their dtype, rank, shape, strides and alignment count), device arrays,
    numbers (for their dtype) and the values of Constant parameters. `arch`
    defaults to TILECORE_ARCH, else "sm_90". `programmatic_dependent_launch`:
    the kernel as a launch with that option runs it (see launch)."""
    if not isinstance(kernel, Kernel):
        raise TypeError(f'Invalid argument "kernel" of compile(): expected a @tilecore.kernel, '
                        f"got {type(kernel).__name__}")
    kernel = kernel.launched_with(programmatic_dependent_launch, "compile")
    if arch is None:
        arch = config.arch() or "sm_90"
    if not (isinstance(arch, str) and arch.startswith("sm_") and arch[3:].rstrip("af").isdigit()):
        raise ValueError(f'Invalid argument "arch" of compile(): expected a string like "sm_90", '
                         f"got {arch!r}")
    args = check_arg_count(kernel, args)
    kinds: list[ArgKind] = []
    arrays: dict[int, ArraySpec] = {}
    for i, (name, value) in enumerate(zip(param_names(kernel), args)):
        kind = classify_non_array(kernel, name, value)
        if kind is None:
            if isinstance(value, np.ndarray):
                kind = host_array_kind(name, value)
                arrays[i] = numpy_array_spec(value)
            else:
                from ..runtime.arrays import as_device_array
                d = as_device_array(value, name)
                kind = ArrayArg(d.dtype, len(d.shape), needs_wide_index(d.shape, d.strides))
                arrays[i] = device_array_spec(d)
        kinds.append(kind)
    return build(kernel, kinds, arrays, arch)


def device_array_spec(d) -> ArraySpec:
    """Alignment facts of a runtime DeviceArray (checked at every launch)."""
    return ArraySpec.of(d.ptr, d.shape, d.strides, d.dtype.itemsize)
