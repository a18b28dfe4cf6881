"""Fixtures of the Python suite: a fresh segment per test, the CLI, helpers to wait on a
condition another process brings about (a pipe, a state of the segment, a syscall)."""

from __future__ import annotations

import itertools
import os
import queue
import subprocess
import sys
import threading
import time
from typing import Callable, Dict, Iterator, List, Optional

import pytest

import shmsched

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
_counter = itertools.count()


def cli_path() -> str:
    path = os.environ.get("SHMSCHED_CLI", os.path.join(ROOT, "build", "bin", "shmsched"))
    if not os.access(path, os.X_OK):
        pytest.fail(f"no shmsched CLI at {path} (set SHMSCHED_CLI)")
    return path


def cli(*args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run the CLI; its output as text."""
    p = subprocess.run([cli_path(), *args], capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        pytest.fail(f"shmsched {' '.join(args)}: exit {p.returncode}: {p.stderr}")
    return p


def until(cond: Callable[[], bool], what: str, limit: float = 30.0) -> None:
    """Return once cond() holds (it is brought about by another process or thread): the
    synchronisation is the condition; `limit` only turns a hang into a failure."""
    end = time.monotonic() + limit
    while not cond():
        if time.monotonic() > end:
            pytest.fail(f"timed out waiting until {what}")
        time.sleep(0.0005)


def in_wait(pid: int) -> bool:
    """Whether pid's main thread is asleep in poll() (where Python's waits sleep) or a futex
    (where the library's own sleep; what a wait that is not interruptible shows)."""
    try:
        with open(f"/proc/{pid}/syscall") as f:
            nr = f.read().split()[0]
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    # x86_64: poll 7, ppoll 271, futex 202; aarch64: ppoll 73, futex 98.
    return state == "S" and nr in ("7", "271", "202", "73", "98")


def read_line(proc: subprocess.Popen, limit: float = 30.0) -> str:
    """The child's next line of output; a failure, not a hang, if none comes within limit."""
    box: "queue.Queue[str]" = queue.Queue()
    threading.Thread(target=lambda: box.put(proc.stdout.readline()), daemon=True).start()
    try:
        return box.get(timeout=limit)
    except queue.Empty:
        proc.kill()
        pytest.fail(f"no line from child {proc.pid} within {limit} s")


class Seg:
    """A segment made for one test (destroyed after it, even if processes are left)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def open(self, **kw: object) -> shmsched.Segment:
        return shmsched.Segment(self.name, **kw)  # type: ignore[arg-type]


@pytest.fixture
def make_segment(request: pytest.FixtureRequest) -> Iterator[Callable[..., Seg]]:
    made: List[str] = []

    def make(classes: Optional[Dict[str, object]] = None, **kw: object) -> Seg:
        name = f"pyt-{os.getpid()}-{next(_counter)}"
        shmsched.create(name, classes or {"standard": shmsched.ClassConfig(cells=1, queue=64)},
                        **kw)  # type: ignore[arg-type]
        made.append(name)
        return Seg(name)

    yield make
    for name in made:
        try:
            shmsched.destroy(name, force=True)
        except shmsched.SegmentNotFound:
            pass


def spawn_python(code: str, *args: str) -> subprocess.Popen:
    """A Python child running code (with this suite's PYTHONPATH), talking over pipes."""
    return subprocess.Popen([sys.executable, "-c", code, *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)


def audit(name: str) -> None:
    """shmsched check reports no violation."""
    p = cli("check", name, check=False)
    assert p.returncode == 0, f"check {name}: {p.stdout}{p.stderr}"
