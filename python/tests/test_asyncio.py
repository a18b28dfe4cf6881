"""asyncio: `async with seg.lease_async(...)`; cancelling the task cancels the request, and a
lease that raced in is released."""

from __future__ import annotations

import asyncio
import threading

import pytest

import shmsched
from conftest import audit, until

ONE = {"standard": shmsched.ClassConfig(cells=1, queue=8)}


def test_async_with_lease(make_segment):
    s = make_segment(ONE)

    async def main(seg: shmsched.Segment) -> None:
        async with seg.lease_async("standard", tenant="a") as lease:  # the fast path
            assert lease.held and seg.observe("standard").leased == 1
            # A second task queues behind it without blocking the loop.
            task = asyncio.create_task(_hold(seg, "b"))
            while seg.observe("standard").queue_depth != 1:
                await asyncio.sleep(0)  # lets the task run; the loop is never blocked
        cell = await task
        assert cell == lease.cell
        lease2 = await seg.lease_async("standard", tenant="c")
        lease2.release()

    with s.open() as seg:
        asyncio.run(main(seg))
        st = seg.observe("standard")
        assert (st.granted, st.available, st.leased) == (3, 1, 0)
    audit(s.name)


async def _hold(seg: shmsched.Segment, tenant: str) -> int:
    async with seg.lease_async("standard", tenant=tenant) as lease:
        return lease.cell


def test_cancelling_the_task_cancels_the_request(make_segment):
    s = make_segment(ONE)

    async def main(seg: shmsched.Segment) -> None:
        holder = seg.try_acquire("standard", tenant="h")
        task = asyncio.create_task(_hold(seg, "w"))
        while seg.observe("standard").queue_depth != 1:
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        st = seg.observe("standard")
        assert (st.queue_depth, st.cancelled, st.leased) == (0, 1, 1)
        holder.release()
        # A timeout of the caller's cancels it the same way.
        holder = seg.try_acquire("standard", tenant="h")
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(_hold(seg, "w2"), timeout=0.05)
        st = seg.observe("standard")
        assert (st.queue_depth, st.cancelled) == (0, 2)
        holder.release()

    with s.open() as seg:
        asyncio.run(main(seg))
    audit(s.name)


def test_a_lease_that_raced_the_cancel_is_released(make_segment):
    s = make_segment(ONE)

    async def main(seg: shmsched.Segment) -> None:
        holder = seg.try_acquire("standard", tenant="h")
        task = asyncio.create_task(_hold(seg, "w"))
        waiting = [t for t in threading.enumerate() if t.name.startswith("shmsched-wait")]
        while seg.observe("standard").queue_depth != 1 or not waiting:
            await asyncio.sleep(0)
            waiting = [t for t in threading.enumerate() if t.name.startswith("shmsched-wait")]
        holder.release()  # grants the cell; the waiting thread accepts it ...
        until(lambda: seg.observe("standard").leased == 1, "the thread accepted the lease")
        task.cancel()  # ... before the task hears of it
        with pytest.raises(asyncio.CancelledError):
            await task
        st = seg.observe("standard")
        assert (st.leased, st.available, st.cancelled) == (0, 1, 0)

    with s.open() as seg:
        asyncio.run(main(seg))
    audit(s.name)


def test_async_errors_are_the_same_exceptions(make_segment):
    s = make_segment(ONE)

    async def main(seg: shmsched.Segment) -> None:
        with pytest.raises(shmsched.InvalidArgument, match="unknown class"):
            await seg.lease_async("nope", tenant="a")
        holder = seg.try_acquire("standard", tenant="h")
        with pytest.raises(shmsched.TimedOut, match="the request was withdrawn, nothing is "
                           "left queued"):
            await seg.lease_async("standard", tenant="a", timeout=0.01)
        with pytest.raises(shmsched.DeadlineExceeded):
            await seg.lease_async("standard", tenant="a", deadline=0.01)
        st = seg.observe("standard")
        assert (st.queue_depth, st.leased) == (0, 1)
        holder.release()

    with s.open() as seg:
        asyncio.run(main(seg))
    audit(s.name)
