"""Build script for the optional C extension and the tuning tables; all
metadata is in pyproject.toml.

`tilecore.runtime._cudriver` calls the CUDA driver from C (launch overhead and
warm start; see the module's header). It is optional: where it cannot be built
(no C compiler) the install still succeeds and tilecore uses cuda.bindings.

The tuning tables live once, in `tuning_db/` at the root of the checkout (the
layout of DESIGN.md); the build copies them into the package as
`tilecore/tuning_db/`, where `tilecore.tunings.lookup` finds them in an
installed copy (a wheel, `pip install .`). An editable install reads them from
the checkout.
"""
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

TABLES = Path(__file__).resolve().parent / "tuning_db"


class BuildWithTables(build_py):
    """build_py, plus tuning_db/<algorithm>/sm_XY.yaml -> tilecore/tuning_db/."""

    def run(self):
        super().run()
        for src in sorted(TABLES.glob("*/*.yaml")):
            dst = Path(self.build_lib, "tilecore", "tuning_db", src.relative_to(TABLES))
            self.mkpath(str(dst.parent))
            self.copy_file(str(src), str(dst))

    def get_outputs(self, include_bytecode=True):
        tables = [str(Path(self.build_lib, "tilecore", "tuning_db", src.relative_to(TABLES)))
                  for src in sorted(TABLES.glob("*/*.yaml"))]
        return super().get_outputs(include_bytecode) + tables

ext_modules = []
if sys.platform.startswith("linux"):
    ext_modules.append(Extension(
        "tilecore.runtime._cudriver",
        sources=["tilecore/runtime/_cudriver.c", "tilecore/runtime/_fastlaunch.c"],
        depends=["tilecore/runtime/_cudriver.h"],
        libraries=["dl"],
        extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter",
                            "-Wno-missing-field-initializers", "-Wno-cast-function-type"],
        optional=True,
    ))

setup(ext_modules=ext_modules, cmdclass={"build_py": BuildWithTables})
