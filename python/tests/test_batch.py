"""Batches of jobs from Python: Segment.submit_batch (all or none) and cancel_batch."""

from __future__ import annotations

import pytest

import shmsched

WORK = {"small": shmsched.ClassConfig(cells=1, queue=4, mode="worker", payload=16)}


def test_a_batch_runs_every_job_and_keeps_its_order(make_segment):
    s = make_segment(WORK)
    with s.open() as seg:
        jobs = seg.submit_batch("small", [{"tenant": "a", "payload": b"one"}, ("b", b"two"),
                                          {"payload": b"three", "priority": 3}], tenant="c")
        assert len(jobs) == 3
        assert seg.observe("small").queue_depth == 3
        w = seg.worker("small")
        for _ in range(3):
            j = w.take(timeout=10)
            j.complete(j.payload.upper() + j.tenant.encode())
        w.close()
        assert [j.result(timeout=10).data for j in jobs] == [b"ONEa", b"TWOb", b"THREEc"]


def test_a_refused_batch_queues_nothing(make_segment):
    s = make_segment(WORK)
    with s.open() as seg:
        seg.submit("small", b"x", tenant="a")
        with pytest.raises(shmsched.QueueFull, match="do not fit"):
            seg.submit_batch("small", [("a", b"1"), ("a", b"2"), ("a", b"3"), ("a", b"4")])
        with pytest.raises(shmsched.InvalidArgument, match="job 1: "):
            seg.submit_batch("small", [("a", b"1"), ("bad tenant", b"2")])
        with pytest.raises(shmsched.InvalidArgument, match="job 0: unknown field"):
            seg.submit_batch("small", [{"tenant": "a", "colour": "red"}])
        with pytest.raises(shmsched.InvalidArgument, match="job 0: no tenant"):
            seg.submit_batch("small", [{"payload": b"x"}])
        assert seg.observe("small").queue_depth == 1


def test_cancel_batch_cancels_only_the_unstarted(make_segment):
    s = make_segment(WORK)
    with s.open() as seg:
        w = seg.worker("small")
        jobs = seg.submit_batch("small", [("a", b"1"), ("a", b"2"), ("a", b"3")])
        running = w.take(timeout=10)
        assert seg.cancel_batch(jobs) == 2
        assert not running.cancelled
        running.complete(b"done")
        w.close()
        outcomes = []
        for j in jobs:
            try:
                outcomes.append(j.result(timeout=10).data)
            except shmsched.Cancelled:
                outcomes.append(None)
        assert sorted(outcomes, key=lambda o: o is None) == [b"done", None, None]


def test_jobs_of_one_key_run_once_and_share_the_result(make_segment):
    s = make_segment(WORK)
    with s.open() as seg:
        jobs = seg.submit_batch("small", [{"payload": b"one", "key": "k"},
                                          {"payload": b"two", "key": "k"},
                                          {"payload": b"three"}], tenant="a")
        assert seg.observe("small").queue_depth == 2
        w = seg.worker("small")
        for _ in range(2):
            j = w.take(timeout=10)
            j.complete(j.payload.upper())
        w.close()
        assert [j.result(timeout=10).data for j in jobs] == [b"ONE", b"ONE", b"THREE"]
        with pytest.raises(TypeError, match="job 0: key must be a str"):
            seg.submit_batch("small", [{"payload": b"x", "key": 7}], tenant="a")
        with pytest.raises(shmsched.InvalidArgument, match="job 0: key"):
            seg.submit_batch("small", [{"payload": b"x", "key": "has space"}], tenant="a")
        assert seg.observe("small").queue_depth == 0
