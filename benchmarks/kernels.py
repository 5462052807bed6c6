"""The element-wise add in Triton, shared by the benchmarks (tilecore's is
tilecore.samples.vec_add)."""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def triton_add(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr, PDL: tl.constexpr = False):
    if PDL:  # launched with launch_pdl=True: wait for the previous kernel first
        tl.extra.cuda.gdc_wait()
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(c_ptr + offs, tl.load(a_ptr + offs, mask=mask) + tl.load(b_ptr + offs, mask=mask),
             mask=mask)
