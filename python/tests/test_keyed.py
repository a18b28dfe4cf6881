"""Single-flight and supersede by key from Python: submitters of one key share one run and its
result; a superseding submit ends the key's queued job Superseded (and with "running" asks a
running one's worker to stop); joins are counted in ClassStats.joined."""

from __future__ import annotations

import threading

import pytest

import shmsched
from conftest import audit, read_line, spawn_python, until

WORK = {"small": shmsched.ClassConfig(cells=1, queue=8, mode="worker", payload=64),
        "standard": shmsched.ClassConfig(cells=1, queue=8)}

JOINER = """
import sys, shmsched
with shmsched.Segment(sys.argv[1]) as seg:
    job = seg.submit("small", b"not run", tenant="b", key="build-42")
    print(job.joined, job, flush=True)
    r = job.result(timeout=60)
    print(r.status, r.data.decode(), flush=True)
"""


def test_two_submitters_of_a_key_share_one_run(make_segment):
    s = make_segment(WORK)
    with s.open() as seg:
        first = seg.submit("small", b"payload", tenant="a", key="build-42")
        assert not first.joined
        joiner = spawn_python(JOINER, s.name)  # another process submits the same key
        assert read_line(joiner) == f"True {first}\n", joiner.stderr.read()
        st = seg.observe("small")
        assert (st.joined, st.queue_depth) == (1, 1)  # one job queued, two waiting for it
        runs = []

        def serve() -> None:
            with shmsched.Segment(s.name) as mine:
                with mine.worker("small") as w:
                    job = w.take(timeout=60)
                    runs.append(job.payload)
                    job.complete(job.payload.upper(), status=3)

        worker = threading.Thread(target=serve)
        worker.start()
        r = first.result(timeout=60)
        worker.join(60)
        assert (r.status, r.data) == (3, b"PAYLOAD")
        assert read_line(joiner) == "3 PAYLOAD\n"
        assert joiner.wait(timeout=30) == 0
        assert runs == [b"payload"]  # one run, with the first submitter's payload
        st = seg.observe("small")
        assert (st.granted, st.joined, st.queue_depth) == (1, 1, 0)
        assert seg.observe("standard").joined == 0
        # The key's job has ended: the next submit of it queues a new job.
        again = seg.submit("small", b"again", tenant="a", key="build-42")
        assert not again.joined and again != first
        again.cancel()
    audit(s.name)


def test_a_joiner_that_cancels_takes_only_its_share_back(make_segment):
    s = make_segment(WORK)
    with s.open() as seg, s.open() as other:
        first = seg.submit("small", b"x", tenant="a", key="k")
        joined = other.submit("small", b"y", tenant="b", key="k")
        assert joined.joined and joined == first
        assert joined.cancel()
        with pytest.raises(shmsched.Cancelled):
            joined.result(timeout=10)
        assert seg.observe("small").queue_depth == 1  # the job itself goes on
        with seg.worker("small") as w:
            job = w.take(timeout=10)
            job.complete(b"done")
        assert first.result(timeout=10).data == b"done"
    audit(s.name)


def test_supersede_ends_the_queued_job_superseded(make_segment):
    s = make_segment(WORK)
    with s.open() as seg, s.open() as other:
        old = seg.submit("small", b"old", tenant="a", key="deploy")
        old_joiner = other.submit("small", b"-", tenant="b", key="deploy")
        assert old_joiner.joined
        new = seg.submit("small", b"new", tenant="c", key="deploy", supersede="queued")
        assert not new.joined and new != old
        for job in (old, old_joiner):  # every waiter of the old job is told
            with pytest.raises(shmsched.Superseded, match="replaced it"):
                job.result(timeout=10)
        assert seg.observe("small").queue_depth == 1
        with seg.worker("small") as w:
            job = w.take(timeout=10)
            assert job.payload == b"new"
            job.complete(b"NEW")
        assert new.result(timeout=10).data == b"NEW"
        # True is "queued": with nothing of the key live it just queues.
        fresh = seg.submit("small", b"x", tenant="a", key="deploy", supersede=True)
        assert not fresh.joined
        fresh.cancel()
    audit(s.name)


def test_supersede_running_asks_the_worker_to_stop(make_segment):
    s = make_segment(WORK)
    with s.open() as seg:
        w = seg.worker("small")
        old = seg.submit("small", b"old", tenant="a", key="deploy")
        running = w.take(timeout=10)
        # Without "running", a running job of the key runs on: a plain supersede queues anew.
        queued = seg.submit("small", b"mid", tenant="a", key="deploy", supersede="queued")
        assert not running.cancelled
        new = seg.submit("small", b"new", tenant="a", key="deploy", supersede="running")
        until(lambda: running.cancelled, "the running job is flagged")
        with pytest.raises(shmsched.Superseded):
            queued.result(timeout=10)
        running.complete(b"stopped", status=143)
        assert old.result(timeout=10).status == 143
        job = w.take(timeout=10)
        assert job.payload == b"new"
        job.complete(b"NEW")
        assert new.result(timeout=10).data == b"NEW"
        w.close()
    audit(s.name)


def test_bad_keys_and_supersede_values_are_refused(make_segment):
    s = make_segment(WORK)
    with s.open() as seg:
        with pytest.raises(shmsched.InvalidArgument, match="supersede needs a key"):
            seg.submit("small", b"x", tenant="a", supersede="queued")
        with pytest.raises(shmsched.InvalidArgument, match="supersede must be"):
            seg.submit("small", b"x", tenant="a", key="k", supersede="all")
        with pytest.raises(shmsched.InvalidArgument, match="key"):
            seg.submit("small", b"x", tenant="a", key="a b")
        with pytest.raises(shmsched.InvalidArgument, match="key"):
            seg.submit("small", b"x", tenant="a", key="k" * 32)
        with pytest.raises(shmsched.InvalidArgument, match="NUL"):
            seg.submit("small", b"x", tenant="a", key="k\0")
        with pytest.raises(TypeError, match="key must be a str"):
            seg.submit("small", b"x", tenant="a", key=b"k")
        with pytest.raises(shmsched.InvalidArgument, match="activation"):
            seg.submit("small", b"x", tenant="a", key="k", activation="act")
        st = seg.observe("small")
        assert (st.queue_depth, st.joined) == (0, 0)
