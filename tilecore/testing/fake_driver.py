"""A stand-in for libcuda, for tests without a GPU: the driver calls every test
needs (one device of compute capability 9.0 and 132 SMs, a primary context,
modules and functions that load) as C source, and a builder that compiles them
with a test's own launch, memory and context calls into a shared library that
tilecore's C driver can be pointed at (`tilecore.runtime.driver.LIBCUDA`)."""
from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["COMMON", "build_fake_libcuda"]

COMMON = r"""
#include <stdlib.h>
#include <string.h>
typedef unsigned long long u64;
int cuInit(unsigned f) { return 0; }
int cuDeviceGetCount(int *n) { *n = 1; return 0; }
int cuDeviceGet(int *d, int i) { *d = 0; return 0; }
int cuDeviceGetAttribute(int *v, int attr, int d) {
    *v = attr == 75 ? 9 : attr == 76 ? 0 : attr == 16 ? 132 : attr == 97 ? 232448 : 1;
    return 0;
}
int cuDeviceGetName(char *s, int n, int d) { strncpy(s, "FakeGPU", n); return 0; }
int cuDevicePrimaryCtxRetain(void **c, int d) { *c = (void *)0xC0; return 0; }
int cuCtxGetDevice(int *d) { *d = 0; return 0; }
int cuPointerGetAttribute(void *out, int attr, u64 p) { *(int *)out = 0; return 0; }
int cuModuleLoadData(void **m, const void *image) { *m = (void *)0x30D; return 0; }
int cuModuleGetFunction(void **f, void *m, const char *name) { *f = (void *)0xF00; return 0; }
int cuFuncSetAttribute(void *f, int a, int v) { return 0; }
int cuGetErrorString(int e, const char **s) { *s = "fake"; return 0; }
"""


def build_fake_libcuda(directory: Path, calls: str) -> Path:
    """Compile COMMON and a test's `calls` (C: the context, launch, memory and
    synchronization calls, with whatever globals the test reads back) into
    `directory`/libcuda_fake.so; returns its path."""
    src, lib = Path(directory) / "fake_libcuda.c", Path(directory) / "libcuda_fake.so"
    src.write_text(COMMON + calls)
    subprocess.run(["cc", "-shared", "-fPIC", "-w", "-o", str(lib), str(src)], check=True)
    return lib
