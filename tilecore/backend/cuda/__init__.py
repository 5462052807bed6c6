"""CUDA backend: typed tile IR -> CUDA C++ (generate) -> cubin (compile_cubin)."""
from .kernel import ArraySpec, CodegenOptions, array_facts, GeneratedKernel, ParamSlot, generate
from .nvrtc import compile_cubin, header_fingerprint, nvrtc_version

__all__ = ["ArraySpec", "array_facts", "CodegenOptions", "GeneratedKernel", "ParamSlot", "generate",
           "compile_cubin", "header_fingerprint", "nvrtc_version"]
