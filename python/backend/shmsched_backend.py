"""The build backend of the shmsched Python package (PEP 517): ``pip install ./python``.

pip imports this module from the checkout (pyproject.toml's ``backend-path``) and needs nothing
else to build: no setuptools, no wheel, nothing from a package index, with whichever
interpreter runs pip (Debian's, pyenv's, any other CPython with its headers). It uses only the
standard library and does what ``python/CMakeLists.txt`` does, with that interpreter's compiler
and flags (``sysconfig``, as setuptools would use them):

- compiles the library's sources (the ``SHMS_LIB_SOURCES`` list of the top-level
  ``CMakeLists.txt``, so the two builds cannot drift) into a static ``libshmsched.a``,
- compiles the extension (``python/src/*.c``) and links it with that archive, the library's
  symbols kept inside the module (``--exclude-libs``): it exports ``PyInit__shmsched`` alone,
- writes the wheel: the package, the module, and ``*.dist-info`` (METADATA, WHEEL, RECORD) as
  the binary distribution format specifies.

Everything is built in a temporary directory, removed afterwards: the checkout is left as it
was (``git status --ignored`` shows nothing new). ``build_sdist`` makes a self-contained source
archive (the library's sources under ``lib/``), from which ``build_wheel`` builds the same way.

Environment: ``CC``, ``CFLAGS``, ``CPPFLAGS``, ``LDFLAGS`` and ``LDSHARED`` adjust the
compiler as they do for setuptools; ``SOURCE_DATE_EPOCH`` fixes the archives' timestamps.
"""

from __future__ import annotations

import base64
import csv
import functools
import glob
import hashlib
import io
import os
import re
import shlex
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Optional, Tuple

# pip imports this module from the checkout, and Python caches a module's bytecode beside it
# (__pycache__/) as it imports it, before the module runs: remove that copy, so that a build
# leaves no file behind in the source tree.
sys.dont_write_bytecode = True
_CACHED = globals().get("__cached__")
if _CACHED:
    for _remove, _path in ((os.remove, _CACHED), (os.rmdir, os.path.dirname(_CACHED))):
        try:
            _remove(_path)  # the directory only if nothing else is cached there
        except OSError:
            pass

NAME = "shmsched"
SUMMARY = "A fair, crash-safe scheduler for processes on one machine (Python binding)"
REQUIRES_PYTHON = ">=3.9"
CLASSIFIERS = ("Operating System :: POSIX :: Linux", "Programming Language :: C",
               "Programming Language :: Python :: 3", "Typing :: Typed")

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.dirname(HERE)  # python/ in a checkout; the top directory of an sdist
# The directories of the library's sources, as in a checkout: an sdist carries them in lib/.
LIB_PARTS = ("include", "shm", "core", "client", "worker")


class BuildError(Exception):
    """The build cannot go on: what is missing, and what to do."""


def _library_root() -> str:
    """Where the library's CMakeLists.txt is: the checkout's top, or an sdist's lib/."""
    for root in (os.path.join(PYDIR, "lib"), os.path.dirname(PYDIR)):
        if os.path.isfile(os.path.join(root, "CMakeLists.txt")):
            return root
    raise BuildError(f"no CMakeLists.txt above {PYDIR}: build the package from a checkout of "
                     "shmsched (pip install ./python in its top directory) or from its sdist")


def _library() -> Tuple[str, str, List[str]]:
    """The library's root, version and sources (relative to the root), from CMakeLists.txt."""
    root = _library_root()
    cmake = os.path.join(root, "CMakeLists.txt")
    with open(cmake, encoding="utf-8") as f:
        text = f.read()
    version = re.search(r"project\(\s*shmsched\s+VERSION\s+([0-9][0-9.]*)", text)
    sources = re.search(r"set\(SHMS_LIB_SOURCES\s+([^)]*)\)", text)
    if version is None or sources is None:
        raise BuildError(f"{cmake} has no project(shmsched VERSION ...) or SHMS_LIB_SOURCES")
    return root, version.group(1), sources.group(1).split()


# ---------------------------------------------------------------------------------------------
# Metadata

def _readme() -> str:
    with open(os.path.join(PYDIR, "README.md"), encoding="utf-8") as f:
        return f.read()


def _metadata(version: str) -> str:
    """Core metadata 2.1: the wheel's METADATA, the sdist's PKG-INFO."""
    lines = ["Metadata-Version: 2.1", f"Name: {NAME}", f"Version: {version}",
             f"Summary: {SUMMARY}", "License: see the shmsched repository",
             f"Requires-Python: {REQUIRES_PYTHON}"]
    lines += [f"Classifier: {c}" for c in CLASSIFIERS]
    lines.append("Description-Content-Type: text/markdown")
    return "\n".join(lines) + "\n\n" + _readme()


def _tag() -> str:
    """The wheel's compatibility tag for this interpreter (cp311-cp311-linux_x86_64)."""
    impl = sys.implementation.name
    ver = f"{sys.version_info[0]}{sys.version_info[1]}"
    soabi = sysconfig.get_config_var("SOABI") or ""
    if impl == "cpython":
        # cpython-311-x86_64-linux-gnu -> cp311; a debug or free-threaded build's flags follow.
        m = re.match(r"cpython-(\d+)([a-z]*)", soabi)
        interp = f"cp{ver}"
        abi = f"cp{m.group(1)}{m.group(2)}" if m else interp
    else:
        interp = {"pypy": "pp"}.get(impl, impl) + ver
        abi = re.sub(r"[-.]", "_", soabi) or "none"
    plat = re.sub(r"[-.]", "_", sysconfig.get_platform())
    if plat == "linux_x86_64" and sys.maxsize <= 2**32:  # a 32-bit interpreter on a 64-bit kernel
        plat = "linux_i686"
    return f"{interp}-{abi}-{plat}"


def _wheel_file(tag: str, version: str) -> str:
    return (f"Wheel-Version: 1.0\nGenerator: shmsched_backend {version}\n"
            f"Root-Is-Purelib: false\nTag: {tag}\n")


def _dist_info(version: str) -> str:
    return f"{NAME}-{version}.dist-info"


# ---------------------------------------------------------------------------------------------
# Compiling

def _split(value: Optional[str]) -> List[str]:
    return shlex.split(value) if value else []


def _toolchain() -> Tuple[List[str], List[str], List[str]]:
    """The compiler (with the interpreter's flags, for position-independent code), the
    shared-object linker and ar: sysconfig's, adjusted by the environment as setuptools does."""
    cfg = sysconfig.get_config_var
    cc, cflags, ldshared = cfg("CC") or "cc", cfg("CFLAGS") or "", cfg("LDSHARED") or ""
    env = os.environ
    if env.get("CC"):
        if not env.get("LDSHARED") and ldshared.startswith(cc):
            ldshared = env["CC"] + ldshared[len(cc):]
        cc = env["CC"]
    if env.get("LDSHARED"):
        ldshared = env["LDSHARED"]
    if not ldshared:
        ldshared = cc + " -shared"
    for var in ("CFLAGS", "CPPFLAGS"):
        if env.get(var):
            cflags += " " + env[var]
            ldshared += " " + env[var]
    if env.get("LDFLAGS"):
        ldshared += " " + env["LDFLAGS"]
    compile_ = _split(cc) + _split(cfg("CCSHARED") or "-fPIC") + _split(cflags)
    return compile_, _split(ldshared), _split(env.get("AR") or cfg("AR") or "ar")


def _ck_cflags() -> List[str]:
    """Concurrency Kit's compiler flags (Debian's libck-dev: none beyond /usr/include)."""
    try:
        out = subprocess.run(["pkg-config", "--cflags", "ck"], check=True, capture_output=True,
                             text=True)
    except (OSError, subprocess.CalledProcessError):
        return []
    return out.stdout.split()


def _run(argv: List[str], what: str) -> None:
    try:
        p = subprocess.run(argv, capture_output=True, text=True)
    except OSError as e:
        raise BuildError(f"{what}: cannot run {argv[0]}: {e.strerror} (Debian: gcc)") from None
    if p.stdout or p.stderr:
        sys.stderr.write(p.stdout + p.stderr)
    if p.returncode != 0:
        hint = ""
        if "ck_pr.h" in p.stderr or "ck_sequence.h" in p.stderr:
            hint = "\nConcurrency Kit's headers are missing (Debian: libck-dev)"
        raise BuildError(f"{what} failed (exit {p.returncode}):\n  {shlex.join(argv)}{hint}")


def _jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _build_module(tmp: str) -> str:
    """Compile and link the extension module in tmp; its path."""
    root, _, lib_sources = _library()
    include = sysconfig.get_paths()["include"]
    plat_include = sysconfig.get_paths()["platinclude"]
    if not os.path.isfile(os.path.join(include, "Python.h")):
        raise BuildError(f"no Python.h in {include}: the headers of {sys.executable} are not "
                         "installed (Debian's /usr/bin/python3: python3-dev)")
    cc, ldshared, ar = _toolchain()
    common = ["-std=gnu11", "-fvisibility=hidden", "-D_GNU_SOURCE",
              "-I" + os.path.join(root, "include"), *_ck_cflags()]
    src_dir = os.path.join(PYDIR, "src")
    binding = sorted(f for f in os.listdir(src_dir) if f.endswith(".c"))
    units = [(os.path.join(root, s), ["-DSHMS_BUILDING_LIBRARY"], "lib") for s in lib_sources]
    units += [(os.path.join(src_dir, f), ["-I" + include, "-I" + plat_include], "py")
              for f in binding]
    objects: Dict[str, List[str]] = {"lib": [], "py": []}
    jobs = []
    for path, flags, part in units:
        rel = os.path.relpath(path, root if part == "lib" else src_dir)
        obj = os.path.join(tmp, part + "_" + re.sub(r"[/\\]", "_", rel)[:-2] + ".o")
        objects[part].append(obj)
        jobs.append(([*cc, *common, *flags, "-c", path, "-o", obj], f"compiling {rel}"))
    n = _jobs()
    print(f"shmsched: compiling {len(jobs)} C files with {cc[0]} ({n} at a time)",
          file=sys.stderr)
    with ThreadPoolExecutor(max_workers=n) as pool:
        for f in [pool.submit(_run, argv, what) for argv, what in jobs]:
            f.result()
    archive = os.path.join(tmp, "libshmsched.a")
    _run([*ar, "rcs", archive, *objects["lib"]], "making libshmsched.a")
    module = os.path.join(tmp, "_shmsched" + sysconfig.get_config_var("EXT_SUFFIX"))
    # The library's own symbols stay inside the module: it exports PyInit__shmsched alone.
    _run([*ldshared, *objects["py"], archive, "-Wl,--exclude-libs,ALL", "-lpthread", "-lrt",
          "-o", module], "linking the module")
    return module


# ---------------------------------------------------------------------------------------------
# Archives

def _epoch() -> Tuple[int, Tuple[int, int, int, int, int, int]]:
    """The archives' timestamp: SOURCE_DATE_EPOCH's, else now (zip cannot go before 1980)."""
    t = int(os.environ.get("SOURCE_DATE_EPOCH", time.time()))
    t = max(t, 315532800)
    return t, time.gmtime(t)[:6]


def _package_files() -> List[str]:
    """The pure-Python package's files, relative to PYDIR (no caches, nothing else)."""
    pkg = os.path.join(PYDIR, NAME)
    names = [n for n in os.listdir(pkg) if n.endswith((".py", ".pyi")) or n == "py.typed"]
    return [os.path.join(NAME, n) for n in sorted(names)]


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode("ascii")


def _write_wheel(path: str, files: List[Tuple[str, bytes, int]], dist_info: str) -> None:
    """A wheel: files (archive name, contents, mode), then RECORD listing them with their
    hashes and sizes, and itself without."""
    _, date = _epoch()
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data, mode in files:
            info = zipfile.ZipInfo(name, date)
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
            writer.writerow((name, _record_hash(data), len(data)))
        name = f"{dist_info}/RECORD"
        writer.writerow((name, "", ""))
        info = zipfile.ZipInfo(name, date)
        info.external_attr = 0o100644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        z.writestr(info, record.getvalue())


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


# ---------------------------------------------------------------------------------------------
# The PEP 517 hooks

def _reported(hook: Callable[..., str]) -> Callable[..., str]:
    """A hook whose BuildError ends the build with its message alone, not a traceback."""
    @functools.wraps(hook)
    def run(*args: Any, **kwargs: Any) -> str:
        try:
            return hook(*args, **kwargs)
        except BuildError as e:
            sys.exit(f"shmsched: {e}")
    return run


def get_requires_for_build_wheel(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[dict] = None) -> List[str]:
    return []


@_reported
def prepare_metadata_for_build_wheel(metadata_directory: str,
                                     config_settings: Optional[dict] = None) -> str:
    _, version, _ = _library()
    dist_info = _dist_info(version)
    out = os.path.join(metadata_directory, dist_info)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata(version))
    with open(os.path.join(out, "WHEEL"), "w", encoding="utf-8") as f:
        f.write(_wheel_file(_tag(), version))
    return dist_info


@_reported
def build_wheel(wheel_directory: str, config_settings: Optional[dict] = None,
                metadata_directory: Optional[str] = None) -> str:
    _, version, _ = _library()
    tag = _tag()
    dist_info = _dist_info(version)
    with tempfile.TemporaryDirectory(prefix="shmsched-build-") as tmp:
        module = _build_module(tmp)
        files = [(rel, _read(os.path.join(PYDIR, rel)), 0o644) for rel in _package_files()]
        files.append((f"{NAME}/{os.path.basename(module)}", _read(module), 0o755))
    files.append((f"{dist_info}/METADATA", _metadata(version).encode("utf-8"), 0o644))
    files.append((f"{dist_info}/WHEEL", _wheel_file(tag, version).encode("utf-8"), 0o644))
    wheel = f"{NAME}-{version}-{tag}.whl"
    os.makedirs(wheel_directory, exist_ok=True)
    _write_wheel(os.path.join(wheel_directory, wheel), files, dist_info)
    return wheel


@_reported
def build_sdist(sdist_directory: str, config_settings: Optional[dict] = None) -> str:
    """A source archive that builds without the checkout: python/'s build files, package and
    extension sources, and the library's (its CMakeLists.txt, for the source list and the
    version, and its headers and sources) under lib/."""
    root, version, _ = _library()
    base = f"{NAME}-{version}"
    src = sorted(n for n in os.listdir(os.path.join(PYDIR, "src")) if n.endswith((".c", ".h")))
    members = [(rel, os.path.join(PYDIR, rel)) for rel in
               ("pyproject.toml", "README.md", os.path.join("backend", "shmsched_backend.py"),
                *_package_files(), *(os.path.join("src", n) for n in src))]
    members.append((os.path.join("lib", "CMakeLists.txt"), os.path.join(root, "CMakeLists.txt")))
    for part in LIB_PARTS:
        for path in sorted(glob.glob(os.path.join(root, part, "*.[ch]"))):
            members.append((os.path.join("lib", part, os.path.basename(path)), path))
    t, _ = _epoch()

    def add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
        info = tarfile.TarInfo(f"{base}/{name}")
        info.size, info.mtime, info.mode = len(data), t, 0o644
        tar.addfile(info, io.BytesIO(data))

    sdist = f"{base}.tar.gz"
    os.makedirs(sdist_directory, exist_ok=True)
    with tarfile.open(os.path.join(sdist_directory, sdist), "w:gz",
                      format=tarfile.PAX_FORMAT) as tar:
        add(tar, "PKG-INFO", _metadata(version).encode("utf-8"))
        for name, path in members:
            add(tar, name, _read(path))
    return sdist
