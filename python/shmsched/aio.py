"""asyncio: a lease waited for without blocking the event loop.

The library's wait sleeps on a futex, which an event loop cannot watch, so each waiting
request has a thread of its own (the wait releases the GIL); the fast path — a free cell
and nobody queued — takes no thread. Cancelling the task cancels the request, which wakes
that thread at once; a lease that raced in is released before the CancelledError goes on.
"""

from __future__ import annotations

import asyncio
import threading
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generator, Optional, Tuple, Type

from .errors import ShmschedError, TimedOut
from .requests import Lease, withdrawn

if TYPE_CHECKING:
    from .segment import Segment


class AsyncLease:
    """``async with seg.lease_async(...) as lease:``, or ``lease = await seg.lease_async(...)``."""

    def __init__(self, segment: "Segment", args: Tuple[Any, ...], timeout_ns: int) -> None:
        self._segment = segment
        self._args = args
        self._timeout_ns = timeout_ns
        self._lease: Optional[Lease] = None

    def __await__(self) -> Generator[Any, None, Lease]:
        return self._acquire().__await__()

    async def __aenter__(self) -> Lease:
        self._lease = await self._acquire()
        return self._lease

    async def __aexit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException],
                        tb: Optional[TracebackType]) -> None:
        if self._lease is not None and self._lease.held:
            self._lease.release()

    async def _acquire(self) -> Lease:
        seg = self._segment
        if seg._unlimited(self._args[0]) and self._args[5] == 1:  # one cell
            t = seg._h.try_acquire(*self._args)
            if t is not None:
                return Lease(seg, t)
        ticket = seg._h.enqueue(*self._args)
        loop = asyncio.get_running_loop()
        done: "asyncio.Future[Tuple[int, ...]]" = loop.create_future()
        thread = threading.Thread(target=self._wait, args=(loop, done, ticket),
                                  name=f"shmsched-wait {seg.name}", daemon=True)
        thread.start()
        try:
            return Lease(seg, await asyncio.shield(done))
        except asyncio.CancelledError:
            try:
                seg._h.cancel(ticket)  # wakes the thread: it ends cancelled, or with a lease
            except ShmschedError:
                pass  # the thread has collected the outcome already
            await self._settle(done)
            self._undo(done, ticket)
            raise
        except TimedOut:  # still queued: it must not outlive the call
            raise withdrawn(seg._h, ticket, self._timeout_ns) from None

    @staticmethod
    async def _settle(done: "asyncio.Future[Tuple[int, ...]]") -> None:
        """Wait for the thread's outcome, however often the task is cancelled meanwhile."""
        while not done.done():
            try:
                await asyncio.shield(done)
            except BaseException:
                continue

    def _undo(self, done: "asyncio.Future[Tuple[int, ...]]",
              ticket: Tuple[int, int, int, int]) -> None:
        """The task was cancelled: give back what the thread got."""
        exc = done.exception()
        if exc is None:  # accepted before the cancel landed: not the caller's to keep
            self._segment._h.release(done.result())
        elif isinstance(exc, TimedOut):  # timed out as the cancel came: collect its end
            self._segment._h.withdraw(ticket)

    def _wait(self, loop: asyncio.AbstractEventLoop, done: "asyncio.Future[Tuple[int, ...]]",
              ticket: Tuple[int, int, int, int]) -> None:
        seg = self._segment
        try:
            result: Any = seg._h.wait(ticket, self._timeout_ns)
            ok = True
        except BaseException as e:  # handed to the task, which raises it
            result, ok = e, False

        def deliver() -> None:
            if done.done():  # nobody will take it
                if ok:
                    seg._h.release(result)
                return
            if ok:
                done.set_result(result)
            else:
                done.set_exception(result)

        try:
            loop.call_soon_threadsafe(deliver)
        except RuntimeError:  # the loop is closed: the lease is nobody's
            if ok:
                seg._h.release(result)
