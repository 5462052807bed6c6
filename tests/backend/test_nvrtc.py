"""compile_cubin error reporting, #line handling and cache-key facts."""
import re

import pytest

from tilecore.backend import (CodegenOptions, compile_cubin, generate,
                              header_fingerprint, nvrtc_version)
from tilecore.errors import Loc, TileCompileError
from tilecore.language import dtypes as D

from kernels import dtype_kernel

BROKEN = """#include "tilecore/core.cuh"
extern "C" __global__ void tc_broken(float* x) {
  float a = 1.0f;
  float b = 2.0f;
  x[0] = a + undefined_name;
  x[1] = b;
}
"""


def test_compile_error_shows_log_and_source_lines():
    loc = Loc("user_kernel.py", 12, 4, function="broken")
    with pytest.raises(TileCompileError) as info:
        compile_cubin(BROKEN, "sm_90", kernel_name="tc_broken", loc=loc)
    text = str(info.value)
    assert 'identifier "undefined_name" is undefined' in text
    assert "generated source around line 5:" in text
    assert "> 5 |   x[0] = a + undefined_name;" in text
    assert "  2 | extern" in text and "  7 | }" in text
    assert 'File "user_kernel.py", line 12' in text


def test_line_directives_map_back_on_error():
    g = generate(dtype_kernel(D.float32).fn, {}, CodegenOptions(line_directives=True))
    assert re.search(r'^#line \d+ "kernel.py"$', g.source, re.M)
    assert compile_cubin(g.source, "sm_90", kernel_name=g.entry)[:4] == b"\x7fELF"
    broken = g.source.replace("tc::op_add(", "tc::op_nope(", 1)
    with pytest.raises(TileCompileError) as info:
        compile_cubin(broken, "sm_90", kernel_name=g.entry)
    assert "op_nope" in str(info.value) and "generated source around line" in str(info.value)


def test_cache_key_facts():
    assert re.fullmatch(r"\d+\.\d+", nvrtc_version())
    assert re.fullmatch(r"[0-9a-f]{64}", header_fingerprint())
