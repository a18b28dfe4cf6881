"""Worker: this process serving the jobs of one cell of a worker class."""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Iterator, Optional, Type, Union

from . import _shmsched as _c
from .errors import Shutdown
from .requests import timeout_ns
from .types import class_index

if TYPE_CHECKING:
    from .segment import Segment


class WorkerJob:
    """A job this worker runs: its payload, tenant and priority; end it with
    :meth:`complete` (or :meth:`quarantine`)."""

    __slots__ = ("worker", "payload", "tenant", "priority", "ticket", "_lease")

    def __init__(self, worker: "Worker", t: tuple) -> None:
        ticket, lease, payload, tenant, priority = t
        self.worker = worker
        self.payload: bytes = payload
        self.tenant: str = tenant
        self.priority: int = priority
        self.ticket: str = _c.ticket_format(ticket)  #: its text form
        self._lease = lease

    @property
    def cancelled(self) -> bool:
        """Whether its client asked to cancel it: the worker decides what to do."""
        return bool(self.worker._w.cancelled())

    def complete(self, result: Union[bytes, bytearray, memoryview] = b"", status: int = 0) -> None:
        """End the job with ``status`` and ``result`` (at most the class's payload size) and
        wake its client; the worker is idle again."""
        self.worker._w.complete(status, result)

    def quarantine(self, reason: int = 1) -> None:
        """End the job with status ``reason`` and no result, and take the worker's cell out
        of service (its cleanup could not be proven); ``shmsched repair`` returns it offline.
        The worker can take no more jobs: close it."""
        self.worker._w.quarantine(reason)

    def __repr__(self) -> str:
        return f"<shmsched.WorkerJob {self.ticket} tenant {self.tenant} {len(self.payload)} bytes>"


class Worker:
    """This process bound to one cell of a worker class (:meth:`Segment.worker`).

    Iterate over it for jobs until the segment drains: ``for job in seg.worker("small"):
    job.complete(...)``. One thread at a time uses a worker. A job left uncompleted when the
    worker closes (the loop left by an exception or ``break``) ends with status 1 and no
    result. ^C while waiting for a job raises KeyboardInterrupt within a second (the wait
    runs in one-second slices: an idle worker's sleep cannot be cut short), and a job that
    arrived meanwhile ends the same way.
    """

    def __init__(self, segment: "Segment", cls: str, payload_max: int) -> None:
        self.segment = segment
        self.cls = cls
        self._w = segment._h.worker_open(class_index(cls), payload_max)

    @property
    def cell(self) -> int:
        """The cell this worker is bound to."""
        return int(self._w.cell)

    def take(self, timeout: Optional[float] = None) -> WorkerJob:
        """Wait for the next job granted to this worker, and start it. Raises
        :class:`TimedOut`, :class:`Shutdown` once the segment drains,
        :class:`AllCellsQuarantined` if the cell was quarantined."""
        return WorkerJob(self, self._w.take(timeout_ns(timeout)))

    def __iter__(self) -> Iterator[WorkerJob]:
        while True:
            try:
                job = self.take()
            except Shutdown:
                return
            yield job

    def close(self) -> None:
        """Unbind: the cell goes offline (a job still held first ends with status 1)."""
        self._w.close()
        self.segment._workers.discard(self)

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<shmsched.Worker {self.segment.name!r} {self.cls}>"


__all__ = ["Worker", "WorkerJob"]
