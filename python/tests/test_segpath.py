"""Segments at a path: a name with a '/' is the segment file's path; SHMSCHED_DIR holds plain
names; what a path names that is not a segment file is refused, and left as it was."""

from __future__ import annotations

import os
import stat

import pytest

import shmsched
from conftest import cli, spawn_python

STD = {"standard": shmsched.ClassConfig(cells=1, queue=8)}


def test_a_segment_at_a_path(tmp_path):
    path = str(tmp_path / "jobs")
    shmsched.create(path, STD)
    assert stat.S_ISREG(os.lstat(path).st_mode)
    with shmsched.Segment(path) as seg, shmsched.Segment(tmp_path / "jobs") as again:
        assert seg.name == path and again.name == path  # a path object is its str
        with seg.lease("standard", tenant="ci") as lease:
            assert lease.held
            assert seg.observe("standard").leased == 1
    # Another process, and the CLI, reach the same file by the same path.
    child = spawn_python("import shmsched, sys\n"
                         "with shmsched.Segment(sys.argv[1]) as s:\n"
                         "    with s.lease('standard', tenant='child'):\n"
                         "        print('held', flush=True)\n", path)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    assert out == "held\n"
    assert "standard" in cli("status", path).stdout
    with pytest.raises(shmsched.AlreadyExists):
        shmsched.create(path, STD)
    shmsched.destroy(path)
    assert not os.path.exists(path)
    with pytest.raises(shmsched.SegmentNotFound):
        shmsched.Segment(path)


def test_shmsched_dir_holds_plain_names(tmp_path, monkeypatch):
    monkeypatch.setenv("SHMSCHED_DIR", str(tmp_path))
    name = f"pyt-dir-{os.getpid()}"
    shmsched.create(name, STD)
    assert os.path.exists(tmp_path / name)
    assert not os.path.exists(f"/dev/shm/{name}")
    with shmsched.Segment(name) as seg:
        assert seg.try_acquire("standard", tenant="a") is not None
    shmsched.destroy(name)
    assert not os.path.exists(tmp_path / name)
    monkeypatch.setenv("SHMSCHED_DIR", "relative")
    with pytest.raises(shmsched.InvalidArgument, match="SHMSCHED_DIR must be an absolute path"):
        shmsched.Segment(name)


def test_what_is_not_a_segment_file_is_refused_and_left_alone(tmp_path):
    d = tmp_path / "dir"
    d.mkdir()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "link"
    link.symlink_to(d)
    for path, what in ((d, "a directory"), (fifo, "a FIFO"), (link, "a symbolic link")):
        before = os.lstat(path)
        with pytest.raises(shmsched.IncompatibleSegment, match=what):
            shmsched.Segment(str(path))
        with pytest.raises(shmsched.IncompatibleSegment, match=what):
            shmsched.destroy(str(path), force=True)
        with pytest.raises(shmsched.AlreadyExists, match=what):
            shmsched.create(str(path), STD)
        after = os.lstat(path)
        assert (after.st_ino, after.st_mode, after.st_mtime_ns) == \
            (before.st_ino, before.st_mode, before.st_mtime_ns)
    missing = tmp_path / "missing" / "seg"
    with pytest.raises(shmsched.SegmentNotFound,
                       match=f"directory '{tmp_path / 'missing'}' does not exist"):
        shmsched.create(str(missing), STD)
    assert not os.path.exists(tmp_path / "missing")
    with pytest.raises(shmsched.InvalidArgument, match="ends in '/'"):
        shmsched.Segment(f"{d}/")
    with pytest.raises(shmsched.InvalidArgument, match="longer than 200 bytes"):
        shmsched.Segment("/" + "x" * 200)
