"""CUDA backend: typed tile IR -> CUDA C++ (generate) -> cubin (compile_cubin)."""
from .kernel import ArraySpec, CodegenOptions, GeneratedKernel, ParamSlot, generate
from .nvrtc import compile_cubin, header_fingerprint, nvrtc_version

__all__ = ["ArraySpec", "CodegenOptions", "GeneratedKernel", "ParamSlot", "generate",
           "compile_cubin", "header_fingerprint", "nvrtc_version"]
