"""Host side of kernels: argument checking, target choice, launch and
ahead-of-time compilation (glue between front end, interpreter, backend and
runtime)."""
