"""`pip install ./python` works offline: in a scratch copy of the checkout (so the source
tree is left as it was), into a virtual environment made by Debian's venv, with --no-index
(no package index is asked for anything), and the installed package works."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

# What the build reads: the library's sources and their list, the header, the binding.
TREE = ("CMakeLists.txt", "include", "shm", "core", "client", "worker", "python")


def test_pip_install_offline(tmp_path, make_segment):
    src = tmp_path / "src"
    src.mkdir()
    for part in TREE:
        s = os.path.join(ROOT, part)
        if os.path.isdir(s):
            shutil.copytree(s, src / part, ignore=shutil.ignore_patterns(
                "build", "*.egg-info", "__pycache__", "tests"))
        else:
            shutil.copy(s, src / part)
    venv = tmp_path / "venv"
    r = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(f"python3 -m venv (Debian's python3-venv): {r.stderr}")
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PYTHONPATH", None)  # the venv's own package, not the build tree's
    pip = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-index",
                          str(src / "python")], capture_output=True, text=True, env=env,
                         timeout=600)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    s = make_segment()
    use = subprocess.run([str(venv / "bin" / "python"), "-c", (
        "import sys, shmsched\n"
        "assert shmsched.__file__.startswith(sys.prefix), shmsched.__file__\n"
        "with shmsched.Segment(sys.argv[1]) as seg:\n"
        "    with seg.lease('standard', tenant='installed') as lease:\n"
        "        print(lease.cls, lease.cell)\n"), s.name],
        capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path)  # not a build dir
    assert (use.returncode, use.stdout) == (0, "standard 0\n"), use.stderr
