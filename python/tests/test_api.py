"""The shape of the API: leases, tickets, jobs, workers, records; and its exceptions."""

from __future__ import annotations

import os
import pwd
import threading

import pytest

import shmsched
from conftest import audit

STD = {"standard": shmsched.ClassConfig(cells=2, queue=8)}
WORK = {"small": shmsched.ClassConfig(cells=1, queue=8, mode="worker", payload=64)}


def test_lease_is_a_context_manager(make_segment):
    s = make_segment(STD)
    with s.open() as seg:
        with seg.lease("standard", tenant="ci", priority=0, deadline=10.0) as lease:
            assert (lease.cls, lease.held) == ("standard", True)
            st = seg.observe("standard")
            assert (st.leased, st.available, st.granted) == (1, 1, 1)
        assert not lease.held
        assert seg.observe("standard").available == 2
    assert seg.closed
    audit(s.name)


def test_try_acquire_returns_none_when_nothing_is_free(make_segment):
    s = make_segment(STD)
    with s.open() as seg:
        a = seg.try_acquire("standard", tenant="a")
        b = seg.try_acquire("standard", tenant="b")
        assert a is not None and b is not None and a.cell != b.cell
        assert seg.try_acquire("standard", tenant="c") is None
        a.release()
        b.release()
        with pytest.raises(shmsched.InvalidArgument, match="already released"):
            a.release()


def test_prepared_requests(make_segment):
    s = make_segment({"standard": shmsched.ClassConfig(cells=1, queue=8),
                      "large": shmsched.ClassConfig(cells=1, queue=8, allow=("ci",))})
    with s.open() as seg:
        p = seg.prepare("standard", tenant="ci", priority=3)
        assert (p.cls, p.tenant, p.priority) == ("standard", "ci", 3)
        with seg.lease_prepared(p) as lease:
            assert seg.try_acquire_prepared(p) is None  # the one cell is held
            assert seg.observe("standard").leased == 1
        assert not lease.held
        lease = seg.try_acquire_prepared(p)
        assert lease is not None
        lease.release()
        with pytest.raises(shmsched.ClassDenied, match="does not allow tenant 'web'"):
            seg.prepare("large", tenant="web")
        # Bytes not as preparing left them: refused, nothing taken.
        bad = bytearray(p._data)
        bad[20] ^= 1
        with pytest.raises(shmsched.StalePrepared, match="corrupt"):
            seg._h.try_acquire_prepared(bytes(bad))
        with pytest.raises(ValueError, match="bytes"):
            seg._h.try_acquire_prepared(b"short")
        assert seg.observe("standard").available == 1
        with s.open() as other:  # another Segment (handle) of the same segment
            with pytest.raises(shmsched.StalePrepared, match="another Segment"):
                other.lease_prepared(p)
            with pytest.raises(shmsched.StalePrepared, match="another handle"):
                other._h.try_acquire_prepared(p._data)
    audit(s.name)


def test_enqueue_gives_a_ticket_to_wait_cancel_explain(make_segment):
    s = make_segment(STD)
    with s.open() as seg:
        held = [seg.try_acquire("standard", tenant="h") for _ in range(2)]
        t = seg.enqueue("standard", tenant="bob", priority=3)
        assert str(t).startswith("standard.") and seg.ticket(str(t)) == t
        x = t.explain()
        assert (x.state, x.tenant, x.priority, x.tenants_ahead) == ("queued", "bob", 3, 0)
        assert "no-cell" in x.blocked_by
        with pytest.raises(shmsched.TimedOut) as e:
            t.wait(timeout=0)
        assert isinstance(e.value, TimeoutError) and e.value.reason == "timed-out"
        held[0].release()
        lease = t.wait(timeout=10)
        x = t.explain()
        assert (x.state, x.cell, x.holder_pid, x.holder_alive) == ("held", lease.cell,
                                                                   seg._h.pid, True)
        # Our own namespace: the same number there, its inode, not foreign.
        assert (x.holder_ns_pid, x.holder_foreign) == (seg._h.pid, False)
        assert x.holder_pidns == os.stat("/proc/self/ns/pid").st_ino
        lease.release()
        held[1].release()
        u = seg.enqueue("standard", tenant="carol")
        assert u.wait().cell in (0, 1)  # free cells: granted at once
        v = seg.enqueue("standard", tenant="dave")
        lease2 = v.wait()
        w = seg.enqueue("standard", tenant="erin")
        assert w.cancel() is True and w.cancel() is False
        with pytest.raises(shmsched.Cancelled) as e:
            w.wait()
        assert e.value.reason == "cancelled"
        with pytest.raises(shmsched.NotFound):  # retired: its outcome was collected
            w.wait()
        seg.ticket(str(u)).explain  # parses; explaining a retired ticket is not-found:
        for lease_ in (lease2,):
            lease_.release()
    audit(s.name)


def test_lease_timeout_withdraws_the_request(make_segment):
    s = make_segment({"standard": shmsched.ClassConfig(cells=1, queue=8)})
    with s.open() as seg:
        holder = seg.try_acquire("standard", tenant="h")
        prepared = seg.prepare("standard", tenant="w")
        for call in (lambda: seg.lease("standard", tenant="w", timeout=0.01),
                     lambda: seg.lease_prepared(prepared, timeout=0.01)):
            with pytest.raises(shmsched.TimedOut) as e:
                call()
            # What is true once the call returns: nothing is left queued.
            assert e.value.detail == ("no lease within the timeout (0.01 s): the request was "
                                      "withdrawn, nothing is left queued")
            assert "still queued" not in str(e.value) and e.value.__suppress_context__
        st = seg.observe("standard")
        assert (st.queue_depth, st.cancelled) == (0, 2)
        # A bare wait's timeout leaves its request queued, and says so.
        ticket = seg.enqueue("standard", tenant="w")
        with pytest.raises(shmsched.TimedOut, match="still queued"):
            ticket.wait(timeout=0)
        assert seg.observe("standard").queue_depth == 1
        ticket.cancel()
        holder.release()


def test_destroy_names_force_as_python_spells_it(make_segment):
    s = make_segment()
    with s.open():
        with pytest.raises(shmsched.Busy) as e:
            shmsched.destroy(s.name)
    assert e.value.detail.endswith(f"; destroy({s.name!r}, force=True) removes it anyway")
    assert "--force" not in str(e.value) and "SHMS_DESTROY_FORCE" not in str(e.value)
    # A segment that fails validation (its layout version): removed only with force=True.
    with open(f"/dev/shm/{s.name}", "r+b") as f:
        f.seek(8)
        f.write((99).to_bytes(4, "little"))
    with pytest.raises(shmsched.IncompatibleSegment) as e:
        shmsched.destroy(s.name)
    assert e.value.detail.endswith(f"; destroy({s.name!r}, force=True) removes it anyway")
    shmsched.destroy(s.name, force=True)
    with pytest.raises(shmsched.SegmentNotFound):
        shmsched.destroy(s.name)


def test_deadline_exceeded_is_a_timeout_error(make_segment):
    s = make_segment({"standard": shmsched.ClassConfig(cells=1, queue=8)})
    with s.open() as seg:
        holder = seg.try_acquire("standard", tenant="h")
        with pytest.raises(TimeoutError) as e:
            seg.lease("standard", tenant="w", deadline=0.01)
        assert type(e.value) is shmsched.DeadlineExceeded
        assert e.value.reason == "deadline-exceeded" and e.value.code < 0
        assert seg.observe("standard").expired == 1
        holder.release()


def test_a_class_overtake_bound_is_configured_and_read_back(make_segment):
    s = make_segment({"standard": shmsched.ClassConfig(cells=1, queue=8),
                      "large": shmsched.ClassConfig(cells=1, queue=8, overtake=0),
                      "extra-large": shmsched.ClassConfig(cells=1, queue=8, overtake=0.001),
                      "small": shmsched.ClassConfig(cells=1, queue=8, overtake=1e-6)})
    with s.open() as seg:
        got = {c: k.overtake for c, k in seg.config().classes.items()}
        assert got == {"standard": None, "large": 0, "extra-large": 0.001, "small": 1e-6}
        # Strict hand-off: a release with a request queued grants it, however young.
        held = seg.try_acquire("large", tenant="a")
        t = seg.enqueue("large", tenant="b")
        held.release()
        assert t.explain().state == "granted"
        assert seg.try_acquire("large", tenant="a") is None
        t.wait(0).release()
    bad = [({"overtake": 1e-9}, shmsched.InvalidArgument, "overtake: must be 0 (strict) or 1us..1s"),
           ({"overtake": 2.0}, shmsched.InvalidArgument, "overtake: must be 0 (strict) or 1us..1s"),
           ({"overtake": -1.0}, shmsched.InvalidArgument, "overtake must be 0 (strict)"),
           ({"overtake": float("inf")}, shmsched.InvalidArgument, "overtake must be 0 (strict)"),
           ({"overtake": "1ms"}, TypeError, "overtake must be a number of seconds"),
           ({"overtake": 0.001, "tenant_max_active": 1}, shmsched.InvalidArgument,
            "tenant-max-active always queues"),
           ({"overtake": 0.001, "mode": "worker"}, shmsched.InvalidArgument,
            "only a lease class")]
    for fields, exc, text in bad:
        with pytest.raises(exc) as e:
            shmsched.create("pyt-bad-overtake", {"standard": shmsched.ClassConfig(
                cells=1, queue=1, **fields)})
        assert text in str(e.value), (text, str(e.value))


def test_observe_tenants_config_info_are_dataclasses(make_segment):
    s = make_segment({**STD, **WORK}, max_tenants=16, starvation_after=2.5)
    with s.open() as seg:
        cfg = seg.config()
        assert seg.classes == ("small", "standard")
        assert cfg.classes["small"] == shmsched.ClassConfig(cells=1, queue=8, mode="worker",
                                                            payload=64)
        assert (cfg.max_tenants, cfg.starvation_after, cfg.mode) == (16, 2.5, 0o600)
        info = seg.info()
        assert (info.state, info.live_processes, info.layout_version) == ("active", 1, 16)
        held = [seg.try_acquire("standard", tenant="h") for _ in range(2)]
        ts = [seg.enqueue("standard", tenant=n) for n in ("a", "a", "b")]
        rows = {t.name: t for t in seg.tenants("standard")}
        assert (rows["a"].queued, rows["b"].queued, rows["a"].in_ring) == (2, 1, True)
        st = seg.observe("standard")
        assert (st.queue_depth, st.queued_tenants, st.leased) == (3, 2, 2)
        for t in ts:
            t.cancel()
        for h in held:
            h.release()


def test_submit_and_worker(make_segment):
    s = make_segment(WORK)
    with s.open() as seg:
        results = {}

        def serve() -> None:
            with shmsched.Segment(s.name) as wseg:
                for n, job in enumerate(wseg.worker("small")):
                    job.complete(job.payload.upper() + job.tenant.encode(), status=n)
                    if n == 2:
                        break

        th = threading.Thread(target=serve)
        th.start()
        jobs = [seg.submit("small", p, tenant=t) for p, t in ((b"one", "a"), (b"two", "b"),
                                                              (b"three", "a"))]
        for j in jobs:
            r = j.result(timeout=30)
            results[str(j)] = r
            assert j.result() is r  # kept
        th.join()
        assert sorted(r.data for r in results.values()) == [b"ONEa", b"THREEa", b"TWOb"]
        assert seg.observe("small").offline == 1  # the worker closed: its cell offline


def test_worker_job_left_uncompleted_ends_with_status_1(make_segment):
    s = make_segment(WORK)
    with s.open() as seg:
        job = seg.submit("small", b"x", tenant="a")
        w = seg.worker("small")
        wj = w.take(timeout=10)
        assert (wj.payload, wj.tenant, wj.ticket, wj.cancelled) == (b"x", "a", str(job), False)
        with pytest.raises(shmsched.InvalidArgument, match="holds a job"):
            w.take(timeout=0)
        w.close()
        assert job.result(timeout=10) == shmsched.JobResult(1, b"")
        with pytest.raises(shmsched.InvalidArgument, match="closed"):
            wj.complete(b"late")
    audit(s.name)


def test_exceptions_carry_reason_detail_and_builtins():
    for cls, base in ((shmsched.InvalidArgument, ValueError), (shmsched.TimedOut, TimeoutError),
                      (shmsched.DeadlineExceeded, TimeoutError),
                      (shmsched.NotFound, LookupError),
                      (shmsched.SegmentNotFound, FileNotFoundError),
                      (shmsched.SegmentNotFound, LookupError),
                      (shmsched.AlreadyExists, FileExistsError),
                      (shmsched.ClassDenied, PermissionError),
                      (shmsched.PermissionDenied, PermissionError),
                      (shmsched.OutOfMemory, MemoryError),
                      (shmsched.HandleForked, RuntimeError)):
        assert issubclass(cls, base) and issubclass(cls, shmsched.ShmschedError)
    assert shmsched.error_for("queue-full") is shmsched.QueueFull
    e = shmsched.QueueFull("class standard: all 8 request slots are in use")
    assert str(e) == "queue-full: class standard: all 8 request slots are in use"
    assert shmsched.Cancelled().detail == "request was cancelled"
    # Every reason word of the C library has its class.
    for code in range(-1, -26, -1):
        word = shmsched._shmsched.err_name(code)[0]
        assert shmsched.error_for(word).code == code


def test_bad_arguments_get_clear_exceptions(make_segment):
    s = make_segment({**STD, **WORK})
    with s.open() as seg:
        cases = [
            (lambda: seg.lease("huge", tenant="a"), shmsched.InvalidArgument, "unknown class 'huge'"),
            (lambda: seg.lease("standard", tenant=""), shmsched.InvalidArgument, "tenant ''"),
            (lambda: seg.lease("standard", tenant="a" * 32), shmsched.InvalidArgument, "tenant"),
            (lambda: seg.lease("standard", tenant="a b"), shmsched.InvalidArgument,
             "tenant 'a b': tenant name has a space (0x20) at 1 (no spaces,"),
            (lambda: seg.lease("standard", tenant="a\tb"), shmsched.InvalidArgument,
             "tenant name has a control byte 0x09 at 1"),
            (lambda: seg.lease("standard", tenant="caf\u00e9"), shmsched.InvalidArgument,
             "tenant name has a non-ASCII byte 0xc3 at 3"),
            (lambda: shmsched.create("a b", STD), shmsched.InvalidArgument,
             "segment name has a space (0x20) at 1"),
            (lambda: seg.lease("standard", tenant=7), TypeError, "tenant must be a str"),
            (lambda: seg.lease("standard", tenant="a", priority=2**31), shmsched.InvalidArgument,
             "priority must be in"),
            (lambda: seg.lease("standard", tenant="a", priority=1.5), TypeError, "priority"),
            (lambda: seg.lease("standard", tenant="a", deadline=-1), shmsched.InvalidArgument,
             "deadline must be a positive"),
            (lambda: seg.lease("standard", tenant="a", deadline=float("nan")),
             shmsched.InvalidArgument, "deadline"),
            (lambda: seg.lease("standard", tenant="a", timeout=-2), shmsched.InvalidArgument,
             "timeout must be at least 0"),
            (lambda: seg.lease("standard", tenant="a", timeout="1"), TypeError, "timeout"),
            (lambda: seg.lease("tiny", tenant="a"), shmsched.InvalidArgument, "tiny"),
            (lambda: seg.submit("small", "text", tenant="a"), TypeError, "payload must be bytes"),
            (lambda: seg.submit("small", b"x" * 65, tenant="a"), shmsched.InvalidArgument,
             "65 bytes is larger than class small's payload size (64)"),
            (lambda: seg.submit("standard", b"x", tenant="a"), shmsched.InvalidArgument,
             "lease class"),
            (lambda: seg.worker("standard"), shmsched.InvalidArgument, "lease class"),
            (lambda: seg.ticket("standard.x"), shmsched.InvalidArgument, ""),
            (lambda: seg.observe("large"), shmsched.InvalidArgument, "not configured"),
            (lambda: shmsched.Segment("no/such"), shmsched.ShmschedError, ""),
            (lambda: shmsched.create("x", {}), shmsched.InvalidArgument, "at least one class"),
            (lambda: shmsched.create("x", [shmsched.ClassConfig(cells=1, queue=1)]), TypeError,
             "classes must be a mapping of class names to ClassConfig, as {'standard': "
             "ClassConfig(cells=4, queue=256)}, not list"),
            (lambda: shmsched.create("x", []), TypeError, "not list"),
            (lambda: shmsched.create("x", {"standard": [1, 2]}), TypeError,
             "class standard: a ClassConfig or a dict of its fields, not list"),
            (lambda: shmsched.create("x", {"standard": shmsched.ClassConfig(cells=0, queue=1)}),
             shmsched.InvalidArgument, "cells"),
            (lambda: shmsched.create("x", {"standard": shmsched.ClassConfig(cells=1, queue=1,
                                                                            mode="batch")}),
             shmsched.InvalidArgument, "mode must be one of lease, worker"),
        ]
        for call, exc, text in cases:
            with pytest.raises(exc) as e:
                call()
            assert text in str(e.value), (text, str(e.value))
            if isinstance(e.value, shmsched.ShmschedError):
                assert e.value.detail and str(e.value).startswith(e.value.reason + ": ")
        held = [seg.try_acquire("standard", tenant="h") for _ in range(2)]
        a = seg.enqueue("standard", tenant="a", activation="job-1")
        with pytest.raises(shmsched.DuplicateActivation, match="duplicate-activation"):
            seg.enqueue("standard", tenant="b", activation="job-1")
        a.cancel()
        for h in held:
            h.release()
        with pytest.raises(shmsched.SegmentNotFound, match="not-found"):
            shmsched.Segment(s.name + "-none")
        # Nothing was queued or taken by any of it.
        st = seg.observe("standard")
        assert (st.queue_depth, st.leased, st.available) == (0, 0, 2)
    with pytest.raises(shmsched.InvalidArgument, match="is closed"):
        seg.lease("standard", tenant="a")
    with pytest.raises(shmsched.InvalidArgument, match="observer"):
        with s.open(observer=True) as obs:
            assert obs.observe("standard").cells == 2
            obs.lease("standard", tenant="a")
    audit(s.name)


def test_queue_full_and_denied(make_segment):
    s = make_segment({"standard": shmsched.ClassConfig(cells=1, queue=1),
                      "large": shmsched.ClassConfig(cells=1, queue=4, allow=("ops",))})
    with s.open() as seg:
        h = seg.try_acquire("standard", tenant="h")
        t = seg.enqueue("standard", tenant="a")
        with pytest.raises(shmsched.QueueFull) as e:
            seg.enqueue("standard", tenant="b")
        assert "request slots" in e.value.detail
        with pytest.raises(PermissionError) as e:
            seg.lease("large", tenant="dev")
        assert e.value.reason == "class-denied"
        with seg.lease("large", tenant="ops"):
            pass
        t.cancel()
        h.release()


def test_drain_and_resume(make_segment):
    s = make_segment({"standard": shmsched.ClassConfig(cells=1, queue=4)})
    with s.open() as seg:
        seg.drain()
        assert seg.info().state == "draining"
        with pytest.raises(shmsched.Shutdown):
            seg.try_acquire("standard", tenant="a")
        assert seg.resume() is True
        assert seg.resume() is False  # already active
        assert seg.info().state == "active"
        seg.try_acquire("standard", tenant="a").release()


def test_tenant_binding_and_admin_group(make_segment):
    s = make_segment({"standard": shmsched.ClassConfig(cells=1, queue=4, tenant="user",
                                                       allow=("@root",))},
                     admin_group=0)
    with s.open() as seg:
        cfg = seg.config()
        assert cfg.classes["standard"].tenant == "user"
        assert cfg.classes["standard"].allow == ("@root",)
        assert cfg.admin_group == 0
        login = pwd.getpwuid(os.geteuid()).pw_name
        with pytest.raises(shmsched.PermissionDenied) as e:
            seg.try_acquire("standard", tenant=login + "x")
        assert e.value.reason == "permission-denied"
        assert "tenant=user" in e.value.detail
        if os.geteuid() == 0:  # root is in group root: the allow list admits it
            seg.try_acquire("standard", tenant=login).release()
    with pytest.raises(shmsched.InvalidArgument):
        shmsched.create("pyt-bad-tenant", {"standard": shmsched.ClassConfig(cells=1, queue=1,
                                                                          tenant="everyone")})


def test_a_lease_of_several_cells(make_segment):
    s = make_segment({"standard": shmsched.ClassConfig(cells=3, queue=8)})
    with s.open() as seg:
        with seg.lease("standard", tenant="gpu", cells=2) as lease:
            assert lease.cells == (0, 1) and lease.cell == 0
            st = seg.observe("standard")
            assert (st.leased, st.available, st.reserved) == (2, 1, 0)
            # The third cell is not enough for another pair: it is reserved for it.
            ticket = seg.enqueue("standard", tenant="other", cells=2)
            with pytest.raises(shmsched.TimedOut):
                ticket.wait(timeout=0)
            assert seg.observe("standard").reserved == 1
            assert seg.try_acquire("standard", tenant="one") is None
        pair = ticket.wait(timeout=0)
        assert len(pair.cells) == 2
        pair.release()
        assert seg.observe("standard").available == 3
        with pytest.raises(shmsched.InvalidArgument, match="has 3 cells"):
            seg.lease("standard", tenant="gpu", cells=4)
        with pytest.raises(shmsched.InvalidArgument, match="at least 1"):
            seg.lease("standard", tenant="gpu", cells=0)
    audit(s.name)
