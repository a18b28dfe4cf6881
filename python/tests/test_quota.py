"""Quotas from Python: leases naming a quota never hold more of it than its maximum, across
processes and classes; bad names and maxima are refused and change nothing; set_quota changes a
maximum (or adds a quota) at runtime, and the quota table reads back."""

from __future__ import annotations

import multiprocessing as mp

import pytest

import shmsched
from conftest import audit, cli, until

TWO = {"standard": shmsched.ClassConfig(cells=2, queue=16)}


def holder(name: str, tenant: str, holds: "mp.synchronize.Event",
           let_go: "mp.synchronize.Event", inside: "mp.sharedctypes.Synchronized",
           most: "mp.sharedctypes.Synchronized") -> None:
    """Take a lease naming gpu, count the holders of gpu while holding it, wait for let_go."""
    with shmsched.Segment(name) as seg:  # attached after the fork: its own handle
        with seg.lease("standard", tenant=tenant, quotas=["gpu"], timeout=60):
            with inside.get_lock():
                inside.value += 1
                most.value = max(most.value, inside.value)
            holds.set()
            let_go.wait(60)
            with inside.get_lock():
                inside.value -= 1


def test_two_processes_never_hold_a_quota_of_one_at_once(make_segment):
    s = make_segment(TWO, quotas={"gpu": 1})
    ctx = mp.get_context("fork")
    inside, most = ctx.Value("i", 0), ctx.Value("i", 0)
    holds = [ctx.Event(), ctx.Event()]
    let_go = [ctx.Event(), ctx.Event()]
    with s.open() as seg:
        first = ctx.Process(target=holder, args=(s.name, "a", holds[0], let_go[0], inside, most))
        first.start()
        assert holds[0].wait(60)
        second = ctx.Process(target=holder, args=(s.name, "b", holds[1], let_go[1], inside, most))
        second.start()
        # The second waits for the quota although a cell is free.
        until(lambda: seg.quotas()[0].waiters == 1, "the second request waits for gpu")
        assert seg.quotas() == [shmsched.QuotaStats("gpu", 1, 1, 1)]
        st = seg.observe("standard")
        assert (st.leased, st.available, st.queue_depth) == (1, 1, 1)
        assert not holds[1].is_set()
        let_go[0].set()  # the first lets go: the unit passes to the second
        assert holds[1].wait(60)
        first.join(60)
        assert first.exitcode == 0
        assert seg.quotas() == [shmsched.QuotaStats("gpu", 1, 1, 0)]
        let_go[1].set()
        second.join(60)
        assert second.exitcode == 0
        assert most.value == 1
        assert seg.quotas() == [shmsched.QuotaStats("gpu", 1, 0, 0)]
        assert seg.observe("standard").granted == 2
    audit(s.name)


def test_a_request_waiting_for_a_quota_says_so(make_segment):
    s = make_segment(TWO, quotas={"gpu": 1})
    with s.open() as seg:
        with seg.lease("standard", tenant="a", quotas=("gpu",)) as held:
            # Named by no request, the quota holds nothing back; named, it does.
            with seg.lease("standard", tenant="free", timeout=10):
                pass
            assert seg.try_acquire("standard", tenant="b", quotas=["gpu"]) is None
            t = seg.enqueue("standard", tenant="b", quotas=["gpu"])
            x = t.explain()
            assert (x.state, x.blocked_by, x.quota) == ("queued", ("quota",), "gpu")
            # Leaving the with releases the lease and its unit: the ticket is granted.
        assert not held.held
        with t.wait(timeout=10):
            assert seg.quotas()[0].used == 1
    audit(s.name)


def test_bad_quotas_are_refused_and_change_nothing(make_segment):
    s = make_segment(TWO, quotas={"gpu": 1})
    work = {"small": shmsched.ClassConfig(cells=1, queue=4, mode="worker", payload=16)}
    w = make_segment(work)
    with s.open() as seg:
        with pytest.raises(shmsched.InvalidArgument, match="no quota 'nope' in the segment"):
            seg.lease("standard", tenant="a", quotas=["nope"])
        with pytest.raises(shmsched.InvalidArgument, match="quota 'gpu' is named twice"):
            seg.enqueue("standard", tenant="a", quotas=["gpu", "gpu"])
        with pytest.raises(shmsched.InvalidArgument, match="at most 8 quotas, got 9"):
            seg.lease("standard", tenant="a", quotas=[f"q{i}" for i in range(9)])
        with pytest.raises(shmsched.InvalidArgument, match="quota 1: name"):
            seg.try_acquire("standard", tenant="a", quotas=["a b"])
        with pytest.raises(shmsched.InvalidArgument, match="names no quotas"):
            seg.enqueue("standard", tenant="a", cells=2, quotas=["gpu"])
        with pytest.raises(TypeError, match="sequence of quota names"):
            seg.lease("standard", tenant="a", quotas="gpu")  # one name, not its letters
        with pytest.raises(TypeError, match="a quota name is a str, not int"):
            seg.lease("standard", tenant="a", quotas=[1])
        st = seg.observe("standard")
        assert (st.granted, st.queue_depth, st.available) == (0, 0, 2)
        assert seg.quotas() == [shmsched.QuotaStats("gpu", 1, 0, 0)]
    with w.open() as seg:
        # Worker classes: a job's quotas are checked as a lease's; nothing is queued.
        with pytest.raises(shmsched.InvalidArgument, match="no quota 'gpu' in the segment"):
            seg.submit("small", b"x", tenant="a", quotas=["gpu"])
        with pytest.raises(shmsched.InvalidArgument, match="job 1: no quota 'gpu'"):
            seg.submit_batch("small", [("a", b"1"), {"tenant": "a", "quotas": ["gpu"]}])
        with pytest.raises(TypeError, match="job 0: quotas must be a sequence"):
            seg.submit_batch("small", [{"tenant": "a", "quotas": "gpu"}])
        assert seg.observe("small").queue_depth == 0
    with pytest.raises(shmsched.InvalidArgument, match="quota gpu: max: must be 1..4095, got 0"):
        shmsched.create("pyt-never-made", TWO, quotas={"gpu": 0})
    with pytest.raises(TypeError, match="mapping of quota names"):
        shmsched.create("pyt-never-made", TWO, quotas=["gpu"])
    with pytest.raises(shmsched.SegmentNotFound):
        shmsched.Segment("pyt-never-made")


def test_set_quota_changes_a_maximum_and_adds_quotas(make_segment):
    s = make_segment(TWO, quotas={"gpu": 1})
    with s.open() as seg:
        held = seg.lease("standard", tenant="a", quotas=["gpu"])
        t = seg.enqueue("standard", tenant="b", quotas=["gpu"])
        until(lambda: seg.quotas()[0].waiters == 1, "the request waits for gpu")
        seg.set_quota("gpu", 2)  # a second unit: the waiting request is granted
        second = t.wait(timeout=10)
        assert seg.quotas() == [shmsched.QuotaStats("gpu", 2, 2, 0)]
        seg.set_quota("gpu", 1)  # lower: no unit is taken back
        assert seg.quotas() == [shmsched.QuotaStats("gpu", 1, 2, 0)]
        held.release()
        second.release()
        seg.set_quota("licence", 3)
        assert seg.quotas() == [shmsched.QuotaStats("gpu", 1, 0, 0),
                                shmsched.QuotaStats("licence", 3, 0, 0)]
        with pytest.raises(shmsched.InvalidArgument, match="must be 1..4095, got 4096"):
            seg.set_quota("gpu", 4096)
        with pytest.raises(shmsched.InvalidArgument, match="quota name"):
            seg.set_quota("a b", 1)
        with pytest.raises(TypeError, match="max must be an int"):
            seg.set_quota("gpu", "2")
        assert [q.max for q in seg.quotas()] == [1, 3]
        with seg.lease("standard", tenant="a", quotas=["gpu", "licence"], timeout=10):
            assert [q.used for q in seg.quotas()] == [1, 1]
    # The CLI reads what Python set.
    out = cli("status", s.name).stdout
    assert "quota.gpu.max: 1\n" in out and "quota.licence.max: 3\n" in out
    audit(s.name)


def test_a_batch_s_jobs_name_quotas(make_segment):
    work = {"small": shmsched.ClassConfig(cells=1, queue=4, mode="worker", payload=16)}
    s = make_segment(work, quotas={"gpu": 1})
    with s.open() as seg:
        jobs = seg.submit_batch("small", [{"tenant": "a", "payload": b"1", "quotas": ["gpu"]},
                                          {"tenant": "b", "payload": b"2", "quotas": ("gpu",)}])
        assert seg.observe("small").queue_depth == 2
        assert seg.quotas() == [shmsched.QuotaStats("gpu", 1, 0, 0)]  # no unit before a grant
        assert seg.cancel_batch(jobs) == 2
