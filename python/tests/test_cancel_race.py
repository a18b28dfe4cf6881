"""Cancel races the grant, 1,000 rounds each way: a waiter sleeps in wait() while one thread
releases the only cell (granting it to the waiter's request) and another cancels that request
at the same moment. Every round ends either with the lease (released again) or cancelled,
never both, never neither; afterwards `shmsched check` finds nothing."""

from __future__ import annotations

import collections
import queue
import threading
from typing import Callable

import shmsched
from conftest import audit, in_wait, read_line, spawn_python, until

ROUNDS = 1000
ONE = {"standard": shmsched.ClassConfig(cells=1, queue=8)}


def thread_waits(t: threading.Thread) -> bool:
    try:
        with open(f"/proc/self/task/{t.native_id}/syscall") as f:
            return f.read().split()[0] in ("202", "98")  # futex
    except (OSError, IndexError):
        return False


def race(release: Callable[[], None], ticket: shmsched.Ticket) -> None:
    """Release and cancel at once, from two threads. The cancel may find the request already
    retired (accepted and its lease released): not-found, as the C API says."""
    go = threading.Barrier(2)
    errors: list = []

    def cancel() -> None:
        go.wait()
        try:
            ticket.cancel()
        except shmsched.NotFound:
            pass
        except BaseException as e:  # noqa: BLE001 - re-raised in the test's thread
            errors.append(e)

    th = threading.Thread(target=cancel)
    th.start()
    go.wait()
    release()
    th.join()
    if errors:
        raise errors[0]


def check_round(seg: shmsched.Segment) -> None:
    st = seg.observe("standard")
    assert (st.available, st.leased, st.queue_depth, st.granted_unaccepted) == (1, 0, 0, 0)


def test_cancel_races_a_grant_in_this_process(make_segment):
    s = make_segment(ONE)
    with s.open() as seg:
        tickets: "queue.Queue[shmsched.Ticket]" = queue.Queue()
        ends: "queue.Queue[str]" = queue.Queue()

        def waiter() -> None:
            for _ in range(ROUNDS):
                t = tickets.get()
                try:
                    t.wait(timeout=60).release()
                    ends.put("leased")
                except shmsched.Cancelled:
                    ends.put("cancelled")

        w = threading.Thread(target=waiter)
        w.start()
        outcomes: collections.Counter = collections.Counter()
        for _ in range(ROUNDS):
            holder = seg.try_acquire("standard", tenant="holder")
            t = seg.enqueue("standard", tenant="waiter")
            tickets.put(t)
            until(lambda: thread_waits(w), "the waiter sleeps in wait()")
            race(holder.release, t)
            outcomes[ends.get(timeout=60)] += 1
            check_round(seg)
        w.join()
        assert sum(outcomes.values()) == ROUNDS
        print(dict(outcomes))
    audit(s.name)


WAITER = """
import sys, shmsched
seg = shmsched.Segment(sys.argv[1])
for line in sys.stdin:  # "go": the parent holds the cell
    t = seg.enqueue("standard", tenant="waiter")
    print(t, flush=True)
    try:
        t.wait(timeout=60).release()
        print("leased", flush=True)
    except shmsched.Cancelled:
        print("cancelled", flush=True)
seg.close()
"""


def test_cancel_from_another_process_races_a_python_waiter(make_segment):
    s = make_segment(ONE)
    with s.open() as seg:
        child = spawn_python(WAITER, s.name)
        outcomes: collections.Counter = collections.Counter()
        for _ in range(ROUNDS):
            holder = seg.try_acquire("standard", tenant="holder")
            assert holder is not None  # the child's last lease was released
            child.stdin.write("go\n")
            child.stdin.flush()
            ticket = seg.ticket(read_line(child).strip())
            until(lambda: seg.observe("standard").queue_depth == 1 and in_wait(child.pid),
                  "the child sleeps in wait()")
            race(holder.release, ticket)
            end = read_line(child)
            assert end in ("leased\n", "cancelled\n"), end + child.stderr.read()
            outcomes[end.strip()] += 1
        child.stdin.close()
        assert child.wait(timeout=60) == 0
        check_round(seg)
        assert sum(outcomes.values()) == ROUNDS
        print(dict(outcomes))
    audit(s.name)
