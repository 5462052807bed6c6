"""generate(): a typed IR Function -> one complete CUDA C++ translation unit.

Kernel ABI: `extern "C" __global__ void tc_<name>(...)` with, per Python
parameter in order, for an array of rank N: the data pointer, N int32 dims
(int64 for an array specialized with 64-bit indices), N int64 strides (in
elements); for a scalar: its value in its exact dtype (16-bit floats and
8/4-bit formats as raw bits). Dynamic shared memory of
`smem_bytes` must be passed at launch; the block is 1-D of `block_threads`.
The body starts with `tc::wait_for_prior_grid()`, which makes every kernel safe
to launch with programmatic dependent launch (runtime/launch.py); only a kernel
launched for early start (`programmatic_dependent_launch=True`) that waits
itself (grid_dependency_control_wait) leaves it out, and may run the code
before its own wait while the previous grid still runs.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Sequence

from ...ir.block_reuse import streams
from ...ir.core import Function
from ...ir.effects import orders_memory, prefetched_params, written_params
from ...ir.types import ArrayType
from ...language.dtypes import DType
from .cnames import scalar_format
from .codegen import emit_block
from .emit import ArrayArg, Ctx
from .layout import choose_threads, kernel_vector_width

__all__ = ["ArraySpec", "array_facts", "CodegenOptions", "ParamSlot", "GeneratedKernel", "generate",
           "with_min_blocks"]


@dataclass(frozen=True)
class ArraySpec:
    """Launch-checked facts about an array argument (part of the specialization
    key): aligned16 = data pointer 16-byte aligned and every non-last
    stride * itemsize % 16 == 0; unit_stride = last stride == 1;
    whole_vectors = the last dimension spans a multiple of 16 bytes, so an
    aligned vector access is either wholly inside the array or wholly outside
    (no per-element bounds checks)."""

    aligned16: bool
    unit_stride: bool
    whole_vectors: bool = False

    @classmethod
    def of(cls, ptr: int, shape: tuple, strides: tuple, itemsize: int) -> "ArraySpec":
        """The facts of an array at `ptr` with `shape` and `strides` in elements."""
        return cls(*array_facts(ptr, shape, strides, itemsize))


def array_facts(ptr: int, shape: Sequence[int], strides: Sequence[int],
                itemsize: int) -> tuple[bool, bool, bool]:
    """(aligned16, unit_stride, whole_vectors) of an array, as ArraySpec defines
    them (shapes and strides in elements)."""
    aligned = not ptr & 15 and all(not (s * itemsize) & 15 for s in strides[:-1])
    return (aligned, not strides or strides[-1] == 1,
            not shape or not (shape[-1] * itemsize) & 15)


@dataclass(frozen=True)
class CodegenOptions:
    """Code generation knobs. num_ctas > 1 is not emitted in the source (no
    __cluster_dims__): the launch sets the cluster size. line_directives
    emits `#line` directives pointing at the kernel's Python source."""

    num_threads: int | None = None
    occupancy: int | None = None
    opt_level: int = 3
    num_ctas: int = 1
    arch: str = "sm_90"
    line_directives: bool = False
    vector_width: int | None = None     # chunk elements (layout.Layout.vk); None: the kernel's
    early_start: bool = False   # launched for early start: an explicit grid_wait replaces the first


@dataclass(frozen=True)
class ParamSlot:
    """How one Python parameter maps to flat kernel parameters."""

    index: int       # position in the Python signature
    name: str
    kind: str        # "array" or "scalar"
    dtype: DType
    ndim: int        # 0 for scalars
    format: str      # struct format of its flat parameters, e.g. "Qiiqq"


@dataclass(frozen=True)
class GeneratedKernel:
    source: str
    entry: str
    block_threads: int
    smem_bytes: int
    param_format: str
    params: list[ParamSlot]
    streams: bool = False  # each block reads its own data (ir/block_reuse.py)
    checks: tuple = ()  # run-time checks by index (rules_control.DeviceCheck)
    compact: bool = False  # emitted compactly (emit.Ctx.compact): long kernels


_RAW_BITS = {"float16": "__ushort_as_half", "bfloat16": "__ushort_as_bfloat16"}


def _signature(fn: Function, arrays: dict[int, ArraySpec], ctx: Ctx):
    """C++ parameters, body prologue lines and the ParamSlots."""
    decls, prologue, slots = [], [], []
    written = written_params(fn)
    shared = written if orders_memory(fn) else frozenset()  # written by other blocks, too
    # a prefetched array's address goes into inline asm, after which NVVM no longer
    # proves its `const __restrict__` loads read-only: they take __ldg (emit.ArrayArg)
    ldg = prefetched_params(fn) - written
    for p in fn.params:
        t = p.value.type
        base = f"arg{p.index}"
        if isinstance(t, ArrayType):
            spec = arrays.get(p.index, ArraySpec(False, False))
            ct = ctx.uses(t.dtype)
            arr = ArrayArg(base, tuple(f"{base}_dim{d}" for d in range(t.ndim)),
                           tuple(f"{base}_stride{d}" for d in range(t.ndim)),
                           t.dtype, spec.aligned16, spec.unit_stride, spec.whole_vectors,
                           ldg=p.index in ldg)
            ctx.arrays[p.value.id] = arr
            # Array arguments never overlap (checked at launch), so every pointer is
            # __restrict__ (but those a kernel that orders accesses writes: see
            # ir/effects.py); one the kernel never writes is also const, which lets the
            # compiler use the read-only data path (ld.global.nc).
            const = "" if p.index in written else "const "
            wide = t.index_dtype.bits == 64
            dim_type, dim_code = ("long long", "q") if wide else ("int", "i")
            restrict = "" if p.index in shared else " __restrict__"
            decls += [f"{const}{ct}*{restrict} {arr.ptr}"]
            decls += [f"{dim_type} {d}" for d in arr.dims]
            decls += [f"long long {s}" for s in arr.strides]
            ctx.array_params[p.value.id] = decls[-(1 + 2 * t.ndim):]  # for outline.py
            slots.append(ParamSlot(p.index, p.name, "array", t.dtype, t.ndim,
                                   "Q" + dim_code * t.ndim + "q" * t.ndim))
            continue
        ct = ctx.uses(t.dtype)
        fmt = scalar_format(t.dtype)
        name = ctx.name(p.value)
        if t.dtype.name in _RAW_BITS:
            decls.append(f"unsigned short {base}")
            value = f"{_RAW_BITS[t.dtype.name]}({base})"
        elif fmt == "B" and t.dtype.is_float:
            decls.append(f"unsigned char {base}")
            value = f"{ct}{{{base}}}"
        elif t.dtype.name == "tfloat32":
            decls.append(f"float {base}")
            value = f"{ct}{{{base}}}"
        else:
            decls.append(f"{ct} {base}")
            value = base
        prologue.append(f"const tc::Frag<{ct}, 1> {name} = {{{{{value}}}}};  // {p.name}")
        slots.append(ParamSlot(p.index, p.name, "scalar", t.dtype, 0, fmt))
    return decls, prologue, slots


def generate(fn: Function, arrays: dict[int, ArraySpec], options: CodegenOptions) -> GeneratedKernel:
    """Generate the CUDA C++ kernel for `fn`; `arrays` maps the Python index of
    each array parameter to its ArraySpec. Byte-identical for equal inputs."""
    vk = options.vector_width or kernel_vector_width(fn)
    threads = choose_threads(fn, options.num_threads, vk)
    ctx = Ctx(fn=fn, threads=threads, vk=vk,
              line_directives=options.line_directives, arch=options.arch)
    ctx.emit_block = emit_block
    decls, prologue, slots = _signature(fn, arrays, ctx)
    for line in prologue:
        ctx.line(line)
    emit_block(ctx, fn.body)

    entry = f"tc_{fn.name}"
    bounds = f"{threads}" + (f", {options.occupancy}" if options.occupancy else "")
    headers = ["tilecore/core.cuh"] + sorted(ctx.headers)
    src = [f"// tilecore kernel {fn.name}: {threads} threads, {ctx.smem_bytes} bytes smem"]
    src += [f'#include "{h}"' for h in headers]
    src += [""] + ctx.functions if ctx.functions else []  # a compact kernel's (outline.py)
    src += ["", f'extern "C" __global__ void __launch_bounds__({bounds})']
    params = (",\n" + " " * (len(entry) + 1)).join(decls)
    src += [f"{entry}({params}) {{"]
    if not (options.early_start and any(op.name == "grid_wait" for op in fn.walk())):
        src += ["  tc::wait_for_prior_grid();"]
    if ctx.smem_bytes:
        src += ["  extern __shared__ __align__(16) unsigned char tc_smem[];"]
    src += ctx.lines + ["}", ""]
    return GeneratedKernel(
        source="\n".join(src), entry=entry, block_threads=threads,
        smem_bytes=ctx.smem_bytes, param_format="@" + "".join(s.format for s in slots),
        params=slots, streams=streams(fn), checks=tuple(ctx.checks), compact=ctx.compact)


def with_min_blocks(gen: GeneratedKernel, min_blocks: int) -> GeneratedKernel:
    """`gen` with `__launch_bounds__(threads, min_blocks)`: ptxas then fits its
    registers so that `min_blocks` blocks are resident per SM."""
    plain = f"__launch_bounds__({gen.block_threads})"
    if plain not in gen.source:
        raise ValueError(f"the kernel already has other launch bounds than {plain}")
    tight = f"__launch_bounds__({gen.block_threads}, {min_blocks})"
    return dataclasses.replace(gen, source=gen.source.replace(plain, tight, 1))
