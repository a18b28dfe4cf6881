"""The documented install, exactly, from the top of this checkout:

    python3 -m venv --system-site-packages venv
    venv/bin/pip install ./python

with the first python3 on PATH and with Debian's /usr/bin/python3 when that is another one,
offline (PIP_NO_INDEX=1 and no proxy: an attempt to download anything fails at once); then a
lease through the package installed in the virtual environment. The build must leave the
checkout as it found it, ignored files included. (CFLAGS=-O0 -g0 only makes the compile quicker;
the interpreter's other flags still apply.)

And the source archive the build backend makes builds on its own, offline, into a wheel whose
RECORD, WHEEL and METADATA are right."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from typing import Dict, List, Optional, Tuple

import pytest

from conftest import ROOT

DEBIAN = "/usr/bin/python3"
PYDIR = os.path.join(ROOT, "python")
OFFLINE = {"PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "CFLAGS": "-O0 -g0"}


def offline_env() -> Dict[str, str]:
    """The environment a user has, offline: no proxy, no index, none of the suite's settings
    (its PYTHONPATH would import the build tree's package; PYTHONDONTWRITEBYTECODE would hide
    bytecode written into the checkout)."""
    env = {k: v for k, v in os.environ.items()
           if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
           and k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "PYTHONHOME", "CFLAGS")
           and not k.startswith("PIP_")}
    env.update(OFFLINE)
    return env


def describe(python: str) -> Optional[Tuple[str, bool]]:
    """The interpreter python runs (its prefix, real) and whether its headers are installed."""
    try:
        p = subprocess.run([python, "-c", (
            "import os, sys, sysconfig\n"
            "print(os.path.realpath(sys.prefix))\n"
            "print(os.path.isfile(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))")],
            capture_output=True, text=True, timeout=60, env=offline_env())
    except OSError:
        return None
    if p.returncode != 0:
        return None
    prefix, headers = p.stdout.split()
    return prefix, headers == "True"


def checkout_state() -> Tuple[str, List[str]]:
    """What is in the checkout: git's account (untracked and ignored files too) and every path
    under python/."""
    git = subprocess.run(["git", "status", "--porcelain", "--ignored", "--untracked-files=all",
                          "--", "python"], cwd=ROOT, capture_output=True, text=True)
    paths = []
    for top, dirs, files in os.walk(PYDIR):
        paths += [os.path.relpath(os.path.join(top, n), ROOT) for n in dirs + files]
    return (git.stdout if git.returncode == 0 else ""), sorted(paths)


@pytest.mark.parametrize("which", ["first python3 on PATH", DEBIAN])
def test_documented_install_offline(which, tmp_path, make_segment):
    first = shutil.which("python3")
    python = first if which != DEBIAN else DEBIAN
    if python is None or not os.access(python, os.X_OK):
        if which == DEBIAN:
            pytest.fail(f"no {DEBIAN}: Debian's python3 (scripts/setup.sh installs it)")
        pytest.skip("no python3 on PATH")
    me = describe(python)
    if me is None:
        pytest.fail(f"{python} does not run")
    if which == DEBIAN and first is not None:
        other = describe(first)
        if other is not None and other[0] == me[0]:
            pytest.skip(f"the first python3 on PATH is {DEBIAN}: tested once")
    if not me[1]:
        if which == DEBIAN:
            pytest.fail(f"{DEBIAN} has no headers: python3-dev (scripts/setup.sh installs it)")
        pytest.skip(f"{python} ({me[0]}) has no headers: nothing can be compiled for it")

    venv = tmp_path / "venv"
    env = offline_env()
    r = subprocess.run([python, "-m", "venv", "--system-site-packages", str(venv)], cwd=ROOT,
                       capture_output=True, text=True, env=env, timeout=120)
    if r.returncode != 0:
        if which == DEBIAN:
            pytest.fail(f"python3 -m venv (Debian's python3-venv): {r.stdout}{r.stderr}")
        pytest.skip(f"{python} cannot make a virtual environment: {r.stderr.strip()}")
    before = checkout_state()
    pip = subprocess.run([str(venv / "bin" / "pip"), "install", "./python"], cwd=ROOT,
                         capture_output=True, text=True, env=env, timeout=600)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    assert checkout_state() == before, "pip install ./python left files in the checkout"

    s = make_segment()
    use = subprocess.run([str(venv / "bin" / "python"), "-c", (
        "import os, sys, shmsched\n"
        "assert shmsched.__file__.startswith(sys.prefix), shmsched.__file__\n"
        "assert os.path.realpath(sys.base_prefix) == sys.argv[2], sys.base_prefix\n"
        "with shmsched.Segment(sys.argv[1]) as seg:\n"
        "    with seg.lease('standard', tenant='installed') as lease:\n"
        "        print(lease.cls, lease.cell)\n"), s.name, me[0]],
        capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path)  # not the checkout
    assert (use.returncode, use.stdout) == (0, "standard 0\n"), use.stderr


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(
        b"=").decode("ascii")


def check_wheel(path: str, version: str) -> None:
    """The wheel is as the binary distribution format says: RECORD lists every other file with
    its hash and size; WHEEL and METADATA name this package and this interpreter."""
    dist_info = f"shmsched-{version}.dist-info"
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
        rows = list(csv.reader(io.StringIO(z.read(f"{dist_info}/RECORD").decode("utf-8"))))
        listed = {row[0] for row in rows}
        assert listed == names, (sorted(names - listed), sorted(listed - names))
        for name, digest, size in rows:
            if name == f"{dist_info}/RECORD":
                assert (digest, size) == ("", "")
                continue
            data = z.read(name)
            assert (digest, size) == (record_hash(data), str(len(data))), name
        wheel = z.read(f"{dist_info}/WHEEL").decode("utf-8")
        metadata = z.read(f"{dist_info}/METADATA").decode("utf-8")
    assert "Wheel-Version: 1.0\n" in wheel and "Root-Is-Purelib: false\n" in wheel
    ver = f"{sys.version_info[0]}{sys.version_info[1]}"
    tag = os.path.basename(path)[:-len(".whl")].split("-", 2)[2]
    assert f"Tag: {tag}\n" in wheel and tag.startswith(f"cp{ver}-cp{ver}-linux_"), wheel
    assert metadata.startswith(f"Metadata-Version: 2.1\nName: shmsched\nVersion: {version}\n")
    ext = f"shmsched/_shmsched.cpython-{ver}"
    assert {"shmsched/__init__.py", "shmsched/py.typed"} <= names
    assert any(n.startswith(ext) and n.endswith(".so") for n in names), sorted(names)


def test_sdist_builds_on_its_own(tmp_path):
    before = checkout_state()
    env = offline_env()
    hooks = subprocess.run([sys.executable, "-c", (
        "import sys\n"
        "sys.path.insert(0, 'backend')\n"  # as pip imports it: pyproject.toml's backend-path
        "import shmsched_backend as b\n"
        "print(b.build_sdist(sys.argv[1]))\n"
        "print(b.prepare_metadata_for_build_wheel(sys.argv[1]))\n"), str(tmp_path)],
        cwd=PYDIR, capture_output=True, text=True, env=env, timeout=60)
    assert hooks.returncode == 0, hooks.stderr
    sdist, dist_info = hooks.stdout.split()
    version = dist_info[len("shmsched-"):-len(".dist-info")]
    assert sdist == f"shmsched-{version}.tar.gz"
    with tarfile.open(tmp_path / sdist) as tar:
        names = tar.getnames()
        assert all(n.startswith(f"shmsched-{version}/") for n in names), names
        assert f"shmsched-{version}/PKG-INFO" in names
        if hasattr(tarfile, "data_filter"):  # Python 3.12, and security updates of older ones
            tar.extractall(tmp_path / "unpacked", filter="data")
        else:
            tar.extractall(tmp_path / "unpacked")
    assert checkout_state() == before, "building the sdist left files in the checkout"

    # The unpacked sdist alone (the checkout is not above it), offline.
    pip = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-cache-dir",
                          "-w", str(tmp_path / "wheels"),
                          str(tmp_path / "unpacked" / f"shmsched-{version}")],
                         cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    wheels = os.listdir(tmp_path / "wheels")
    assert len(wheels) == 1, wheels
    check_wheel(str(tmp_path / "wheels" / wheels[0]), version)
