"""Build and install the shmsched Python package: ``pip install ./python`` from a checkout.

The extension module is compiled from the checkout's C sources (the library's, as the
top-level CMakeLists.txt lists them in SHMS_LIB_SOURCES, and python/src/), so nothing needs to
be built or installed first and nothing is downloaded: the build uses the setuptools of the
interpreter it runs under (Debian's python3-setuptools; there is deliberately no
pyproject.toml, so pip does not try to fetch a build environment). It needs Debian's
python3-dev and libck-dev.
"""

import os
import re
import subprocess
import sys

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def library_sources():
    """The library's sources, as CMake builds them: one list, so the two builds never drift."""
    cmake = os.path.join(ROOT, "CMakeLists.txt")
    try:
        with open(cmake, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        sys.exit(f"shmsched: {cmake} not found: install from a checkout of shmsched "
                 "(pip install ./python in its top directory)")
    m = re.search(r"set\(SHMS_LIB_SOURCES\s+([^)]*)\)", text)
    if m is None:
        sys.exit(f"shmsched: no SHMS_LIB_SOURCES list in {cmake}")
    return [os.path.relpath(os.path.join(ROOT, s), HERE) for s in m.group(1).split()]


def pkg_config(*args):
    try:
        out = subprocess.run(["pkg-config", *args], check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError):
        return []
    return out.stdout.split()


ck_flags = pkg_config("--cflags", "ck")
extension = Extension(
    "shmsched._shmsched",
    sources=sorted(os.path.join("src", f) for f in os.listdir(os.path.join(HERE, "src"))
                   if f.endswith(".c")) + library_sources(),
    include_dirs=[os.path.join(ROOT, "include")],
    define_macros=[("_GNU_SOURCE", None), ("SHMS_BUILDING_LIBRARY", None)],
    extra_compile_args=["-std=gnu11", "-fvisibility=hidden", "-Wall", *ck_flags],
    libraries=["pthread", "rt"],
)

setup(
    name="shmsched",
    version="0.1.0",
    description="A fair, crash-safe scheduler for processes on one machine (Python binding)",
    long_description=open(os.path.join(HERE, "README.md"), encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="see the shmsched repository",
    python_requires=">=3.9",
    packages=["shmsched"],
    package_data={"shmsched": ["py.typed", "*.pyi"]},
    ext_modules=[extension],
    zip_safe=False,
    classifiers=["Operating System :: POSIX :: Linux", "Programming Language :: C",
                 "Programming Language :: Python :: 3", "Typing :: Typed"],
)
