"""Code generation backends. CUDA is the only one: see backend.cuda."""
from .cuda import (ArraySpec, CodegenOptions, GeneratedKernel, ParamSlot, compile_cubin,
                   generate, header_fingerprint, nvrtc_version)

__all__ = ["ArraySpec", "CodegenOptions", "GeneratedKernel", "ParamSlot", "generate",
           "compile_cubin", "header_fingerprint", "nvrtc_version"]
