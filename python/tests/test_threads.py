"""Threads sharing one Segment (docs/python.md, "Threads"): every scheduling call may run
concurrently with any other; a Worker serves one thread; close waits for no one."""

from __future__ import annotations

import random
import threading

import pytest

import shmsched
from conftest import audit, until

TWO = {"standard": shmsched.ClassConfig(cells=2, queue=64)}


def thread_waits(t: threading.Thread) -> bool:
    """Whether thread t is asleep in a futex (where a wait outside the main thread sleeps)."""
    try:
        with open(f"/proc/self/task/{t.native_id}/syscall") as f:
            return f.read().split()[0] in ("202", "98")
    except (OSError, IndexError):
        return False


def test_threads_share_a_segment(make_segment):
    s = make_segment(TWO)
    with s.open() as seg:
        bad = []

        def churn(seed: int) -> None:
            rnd = random.Random(seed)
            for _ in range(400):
                tenant = rnd.choice("abc")
                op = rnd.randrange(4)
                try:
                    if op == 0:
                        with seg.lease("standard", tenant=tenant, priority=rnd.randrange(3)):
                            pass
                    elif op == 1:
                        lease = seg.try_acquire("standard", tenant=tenant)
                        if lease is not None:
                            lease.release()
                    else:
                        t = seg.enqueue("standard", tenant=tenant)
                        if op == 3:
                            t.cancel()
                        try:
                            t.wait().release()
                        except shmsched.Cancelled:
                            pass
                    seg.observe("standard")
                except Exception as e:  # noqa: BLE001 - collected, asserted below
                    bad.append(repr(e))

        threads = [threading.Thread(target=churn, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert bad == []
        assert seg.check() == []
        st = seg.observe("standard")
        assert (st.available, st.queue_depth, st.leased) == (2, 0, 0)
    audit(s.name)


def test_a_wait_in_a_thread_ends_when_another_cancels_it(make_segment):
    s = make_segment({"standard": shmsched.ClassConfig(cells=1, queue=8)})
    with s.open() as seg:
        holder = seg.try_acquire("standard", tenant="h")
        ticket = seg.enqueue("standard", tenant="w")
        got = []

        def wait() -> None:
            try:
                ticket.wait()
            except shmsched.Cancelled as e:
                got.append(e)

        th = threading.Thread(target=wait)
        th.start()
        until(lambda: thread_waits(th), "the thread waits")
        with pytest.raises(shmsched.InvalidArgument, match="calls on it are under way"):
            seg.close()  # refused, not a use-after-free in the waiting thread
        assert ticket.cancel() is True
        th.join()
        assert len(got) == 1 and got[0].reason == "cancelled"
        holder.release()
    audit(s.name)


def test_a_worker_serves_one_thread(make_segment):
    s = make_segment({"small": shmsched.ClassConfig(cells=1, queue=8, mode="worker",
                                                    payload=16)})
    with s.open() as seg:
        w = seg.worker("small")
        taken = []
        th = threading.Thread(target=lambda: taken.append(w.take(timeout=60)))
        th.start()
        until(lambda: thread_waits(th), "the thread waits in take()")
        with pytest.raises(shmsched.InvalidArgument, match="in use by another thread"):
            w.take(timeout=0)
        with pytest.raises(shmsched.InvalidArgument, match="in use by another thread"):
            w.close()
        job = seg.submit("small", b"hi", tenant="a")
        th.join()
        taken[0].complete(b"HI")
        assert job.result(timeout=30).data == b"HI"
        w.close()
    audit(s.name)
