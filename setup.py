"""Build script for the optional C extension; all metadata is in pyproject.toml.

`tilecore.runtime._cudriver` calls the CUDA driver from C (launch overhead and
warm start; see the module's header). It is optional: where it cannot be built
(no C compiler) the install still succeeds and tilecore uses cuda.bindings.
"""
import sys

from setuptools import Extension, setup

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

setup(ext_modules=ext_modules)
