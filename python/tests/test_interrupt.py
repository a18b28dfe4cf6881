"""Signals during waits: ^C ends a blocked wait at once, cancels the request and releases a
lease that raced in; a handler that returns normally leaves the request in its place."""

from __future__ import annotations

import signal
import time

import shmsched
from conftest import audit, in_wait, read_line, spawn_python, until

ONE = {"standard": shmsched.ClassConfig(cells=1, queue=8)}
WORK = {"small": shmsched.ClassConfig(cells=1, queue=8, mode="worker", payload=64)}

LEASE_CHILD = """
import sys, shmsched
seg = shmsched.Segment(sys.argv[1])
print("ready", flush=True)
try:
    lease = seg.lease("standard", tenant="waiter")
    print("leased", lease.cell, flush=True)
    lease.release()
except KeyboardInterrupt:
    st = seg.observe("standard")
    print("interrupted", st.queue_depth, st.cancelled, st.leased, flush=True)
seg.close()
"""


def test_sigint_during_a_lease_wait_cancels_the_request(make_segment):
    s = make_segment(ONE)
    with s.open() as seg:
        holder = seg.try_acquire("standard", tenant="holder")
        child = spawn_python(LEASE_CHILD, s.name)
        assert read_line(child) == "ready\n"
        until(lambda: seg.observe("standard").queue_depth == 1 and in_wait(child.pid),
              "the child waits in lease()")
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        line = read_line(child)
        took = time.monotonic() - sent
        # Its request was cancelled before KeyboardInterrupt reached the child's code.
        assert line == "interrupted 0 1 1\n", line + child.stderr.read()
        assert child.wait(timeout=30) == 0
        print(f"^C to KeyboardInterrupt handled in the child: {took * 1000:.1f} ms")
        st = seg.observe("standard")
        assert (st.queue_depth, st.cancelled, st.leased, st.granted) == (0, 1, 1, 1)
        holder.release()
    audit(s.name)


RACE_CHILD = """
import signal, sys, shmsched
seg = shmsched.Segment(sys.argv[1])
held = seg.try_acquire("standard", tenant="first")

def handler(signo, frame):
    # The lease races in: releasing ours grants the cell to the queued request, and the
    # waiting thread accepts it before the handler raises.
    held.release()
    while seg.observe("standard").leased != 1:
        pass
    raise KeyboardInterrupt

signal.signal(signal.SIGUSR1, handler)
print("ready", flush=True)
try:
    seg.lease("standard", tenant="second")
    print("leased", flush=True)
except KeyboardInterrupt:
    st = seg.observe("standard")
    print("interrupted", st.leased, st.available, st.queue_depth, flush=True)
seg.close()
"""


def test_a_lease_that_raced_in_is_released(make_segment):
    s = make_segment(ONE)
    with s.open() as seg:
        child = spawn_python(RACE_CHILD, s.name)
        assert read_line(child) == "ready\n"
        until(lambda: seg.observe("standard").queue_depth == 1 and in_wait(child.pid),
              "the child waits in lease()")
        child.send_signal(signal.SIGUSR1)
        assert read_line(child) == "interrupted 0 1 0\n", child.stderr.read()
        assert child.wait(timeout=30) == 0
        st = seg.observe("standard")
        assert (st.leased, st.available, st.granted) == (0, 1, 2)
    audit(s.name)


QUIET_CHILD = """
import signal, sys, shmsched
seg = shmsched.Segment(sys.argv[1])
signal.signal(signal.SIGUSR1, lambda signo, frame: print("handled", flush=True))
print("ready", flush=True)
t = seg.enqueue("standard", tenant="waiter")
print(t, flush=True)
lease = t.wait()
print("leased", lease.cell, flush=True)
lease.release()
seg.close()
"""


def test_a_handler_that_returns_leaves_the_request_in_place(make_segment):
    s = make_segment(ONE)
    with s.open() as seg:
        holder = seg.try_acquire("standard", tenant="holder")
        child = spawn_python(QUIET_CHILD, s.name)
        assert read_line(child) == "ready\n"
        ticket = seg.ticket(read_line(child).strip())
        until(lambda: in_wait(child.pid), "the child waits in Ticket.wait()")
        child.send_signal(signal.SIGUSR1)
        assert read_line(child) == "handled\n"
        x = ticket.explain()
        assert (x.state, x.tenant) == ("queued", "waiter")
        holder.release()
        assert read_line(child) == "leased 0\n", child.stderr.read()
        assert child.wait(timeout=30) == 0
        assert seg.observe("standard").cancelled == 0
    audit(s.name)


RESULT_CHILD = """
import sys, shmsched
seg = shmsched.Segment(sys.argv[1])
job = seg.submit("small", b"payload", tenant="client")
print(job, flush=True)
try:
    job.result()
except KeyboardInterrupt:
    print("interrupted", flush=True)
print(sys.stdin.readline().strip(), flush=True)  # the worker has decided
r = job.result(timeout=30)
print("result", r.status, r.data.decode(), flush=True)
seg.close()
"""


def test_sigint_while_a_job_runs_flags_it_and_the_result_can_be_collected(make_segment):
    s = make_segment(WORK)
    with s.open() as seg:
        w = seg.worker("small")
        child = spawn_python(RESULT_CHILD, s.name)
        ticket = read_line(child).strip()
        job = w.take(timeout=30)
        assert job.ticket == ticket and not job.cancelled
        until(lambda: in_wait(child.pid), "the client waits in result()")
        child.send_signal(signal.SIGINT)
        assert read_line(child) == "interrupted\n", child.stderr.read()
        assert job.cancelled  # flagged: the worker decides
        job.complete(b"stopped early", status=2)
        child.stdin.write("go\n")
        child.stdin.flush()
        assert read_line(child) == "go\n"
        assert read_line(child) == "result 2 stopped early\n", child.stderr.read()
        assert child.wait(timeout=30) == 0
        w.close()
    audit(s.name)


QUEUED_JOB_CHILD = """
import sys, shmsched
seg = shmsched.Segment(sys.argv[1])
job = seg.submit("small", b"payload", tenant="client")
print(job, flush=True)
try:
    job.result()
except KeyboardInterrupt:
    print("interrupted", seg.observe("small").queue_depth, flush=True)
seg.close()
"""


def test_sigint_while_a_job_is_queued_cancels_it(make_segment):
    s = make_segment(WORK)  # no worker: the job stays queued
    with s.open() as seg:
        child = spawn_python(QUEUED_JOB_CHILD, s.name)
        read_line(child)
        until(lambda: in_wait(child.pid), "the client waits in result()")
        child.send_signal(signal.SIGINT)
        assert read_line(child) == "interrupted 0\n", child.stderr.read()
        assert child.wait(timeout=30) == 0
        assert seg.observe("small").cancelled == 1
    audit(s.name)


WORKER_CHILD = """
import sys, shmsched
seg = shmsched.Segment(sys.argv[1])
try:
    for job in seg.worker("small"):
        print("job", flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
seg.close()
"""


def test_sigint_stops_an_idle_worker(make_segment):
    s = make_segment(WORK)
    with s.open() as seg:
        child = spawn_python(WORKER_CHILD, s.name)
        until(lambda: seg.observe("small").offline == 0 and in_wait(child.pid),
              "the worker waits for a job")
        child.send_signal(signal.SIGINT)
        assert read_line(child) == "interrupted\n", child.stderr.read()
        assert child.wait(timeout=30) == 0
        assert seg.observe("small").offline == 1  # unbound
    audit(s.name)
