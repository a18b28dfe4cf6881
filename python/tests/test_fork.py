"""After fork(), the parent's handle fails in the child with a clear message; the child
attaches again; the parent's registration and lease are untouched by the child."""

from __future__ import annotations

import os

import shmsched
from conftest import audit

TWO = {"standard": shmsched.ClassConfig(cells=2, queue=8),
       "small": shmsched.ClassConfig(cells=1, queue=8, mode="worker", payload=16)}


def child_checks(seg: shmsched.Segment, lease: shmsched.Lease, name: str) -> str:
    """In the child: every use of the parent's handle raises HandleForked; a new one works."""
    calls = {
        "lease": lambda: seg.lease("standard", tenant="child"),
        "try_acquire": lambda: seg.try_acquire("standard", tenant="child"),
        "enqueue": lambda: seg.enqueue("standard", tenant="child"),
        "observe": lambda: seg.observe("standard"),
        "config": lambda: seg.config(),
        "release": lambda: lease.release(),
        "submit": lambda: seg.submit("small", b"x", tenant="child"),
        "worker": lambda: seg.worker("small"),
    }
    for what, call in calls.items():
        try:
            call()
            return f"{what}: no error"
        except shmsched.HandleForked as e:
            msg = str(e)
            if not (isinstance(e, RuntimeError) and isinstance(e, ValueError)
                    and e.reason == "invalid-argument"
                    and f"attached by process {os.getppid()}" in msg
                    and f"this is process {os.getpid()}" in msg and "fork()" in msg
                    and f"shmsched.Segment({name!r})" in msg):
                return f"{what}: unclear: {msg}"
    seg.close()  # forgets the parent's handle; detaches nothing of the parent's
    with shmsched.Segment(name) as mine:
        with mine.lease("standard", tenant="child", timeout=30) as own:
            if own.cell == lease.cell:
                return "the child got the parent's cell"
    return "ok " + msg


def test_parent_handle_in_a_forked_child(make_segment):
    s = make_segment(TWO)
    with s.open() as seg:
        lease = seg.lease("standard", tenant="parent")
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report, never return into pytest
            try:
                os.write(w, child_checks(seg, lease, s.name).encode())
            except BaseException as e:  # noqa: BLE001 - reported to the parent
                os.write(w, f"child raised {e!r}".encode())
            finally:
                os._exit(0)
        os.close(w)
        with os.fdopen(r) as f:
            report = f.read()
        assert os.waitpid(pid, 0)[1] == 0
        assert report.startswith("ok "), report
        print(report)
        # The parent is still registered and still holds its lease.
        st = seg.observe("standard")
        assert (st.leased, seg.info().live_processes) == (1, 1)
        lease.release()
        assert seg.observe("standard").available == 2
    audit(s.name)
