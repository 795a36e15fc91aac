"""Builds the C tree walks of the JATS parser (``ray_jobs/pmc/_ctext.pyx``); the rest of the
package is declared in pyproject.toml. lxml's headers come from the lxml of the build, which
pyproject.toml pins to the runtime's version: the module reads lxml's C structures.

The extension is optional: without a C compiler the package installs and parses with the
Python walks (a warning says so). The pipeline image checks that it is there, and so do the
tests (``tests/test_ctext.py``)."""

import lxml
from Cython.Build import cythonize
from setuptools import Extension, setup

setup(
    ext_modules=cythonize(
        [
            Extension(
                "ray_jobs.pmc._ctext",
                ["ray_jobs/pmc/_ctext.pyx"],
                include_dirs=lxml.get_include(),
                optional=True,
            )
        ],
        compiler_directives={"language_level": 3},
    )
)
