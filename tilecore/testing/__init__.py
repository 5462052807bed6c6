"""Testing tools for tilecore; `tilecore.testing.fuzz` is the differential fuzzer
of the tile language (random well-typed kernels run in the interpreter and
compiled, results compared)."""
