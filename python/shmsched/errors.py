"""The exceptions: one class per stable reason word of the C library.

Every exception shmsched raises for a failed call is a :class:`ShmschedError` carrying
``reason`` (the stable reason word, e.g. ``"queue-full"``), ``detail`` (what failed and
where, from the library) and ``code`` (the negative ``SHMS_E*`` number). Each class also
subclasses the built-in exception that matches it, so code that knows nothing of shmsched
still catches it sensibly: a timeout is a :class:`TimeoutError`, a bad argument a
:class:`ValueError`, a missing segment a :class:`FileNotFoundError`. Where no built-in
matches, :class:`ShmschedError` (an :class:`Exception`) is the only base.
"""

from __future__ import annotations

from typing import ClassVar, Dict, Type

from . import _shmsched as _c


class ShmschedError(Exception):
    """A shmsched call failed; ``str(e)`` is ``"REASON: DETAIL"``."""

    reason: ClassVar[str] = "unknown-error"
    code: ClassVar[int] = 0

    def __init__(self, detail: str = "") -> None:
        super().__init__(detail)
        #: What failed and where, in the library's words ("" when it gave none).
        self.detail: str = detail or _c.err_name(self.code)[1]

    def __str__(self) -> str:
        return f"{self.reason}: {self.detail}"


class InvalidArgument(ShmschedError, ValueError):
    """invalid-argument: a bad argument, or a closed segment or worker (a ValueError)."""

    code = _c.EINVAL


class QueueFull(ShmschedError):
    """queue-full: every request slot of the class, or its tenant table, is taken."""

    code = _c.EQUEUEFULL


class ClassDenied(ShmschedError, PermissionError):
    """class-denied: the class is closed (queue=0) or the tenant not allowed (a PermissionError)."""

    code = _c.EDENIED


class DuplicateActivation(ShmschedError):
    """duplicate-activation: a live request of the class already has that activation id."""

    code = _c.EDUPACT


class Cancelled(ShmschedError):
    """cancelled: the request was cancelled, by anyone, from any process.

    Not :class:`asyncio.CancelledError`, which is how a task is cancelled."""

    code = _c.ECANCELLED


class DeadlineExceeded(ShmschedError, TimeoutError):
    """deadline-exceeded: the deadline passed before the request was granted (a TimeoutError)."""

    code = _c.EDEADLINE


class AllCellsQuarantined(ShmschedError):
    """all-cells-quarantined: every cell of the class is out of service."""

    code = _c.EQUARANTINED


class Shutdown(ShmschedError):
    """shutdown: the segment is draining or being destroyed."""

    code = _c.ESHUTDOWN


class SequenceExhausted(ShmschedError):
    """sequence-exhausted: a cell's token sequence ran out."""

    code = _c.ESEQEXHAUSTED


class LeaseMismatch(ShmschedError):
    """lease-mismatch: the lease is stale, forged or already returned."""

    code = _c.ELEASE


class NotFound(ShmschedError, LookupError):
    """not-found: no such ticket (stale, or its outcome collected) or segment (a LookupError)."""

    code = _c.ENOTFOUND


class SegmentNotFound(NotFound, FileNotFoundError):
    """not-found for a segment: there is no such segment file, or no directory for it (also a
    FileNotFoundError)."""


class OwnerLost(ShmschedError):
    """owner-lost: the process that queued the request died."""

    code = _c.EOWNERLOST


class WorkerLost(ShmschedError):
    """worker-lost: the worker running the job died."""

    code = _c.EWORKERLOST


class IncompatibleSegment(ShmschedError):
    """incompatible-segment: a segment of another layout version, size or magic, or a path that
    names no segment file (a directory, FIFO, device or symbolic link)."""

    code = _c.EINCOMPAT


class PermissionDenied(ShmschedError, PermissionError):
    """permission-denied: the segment's permissions forbid this (a PermissionError)."""

    code = _c.EPERM


class AlreadyExists(ShmschedError, FileExistsError):
    """already-exists: a segment of that name exists (a FileExistsError)."""

    code = _c.EEXISTS


class Busy(ShmschedError):
    """busy: live processes are attached, or every cell already has a worker."""

    code = _c.EBUSY


class OutOfMemory(ShmschedError, MemoryError):
    """out-of-memory (a MemoryError)."""

    code = _c.ENOMEM


class NoSpace(ShmschedError, OSError):
    """no-space: no room for the segment in its filesystem, /dev/shm or another (an OSError)."""

    code = _c.ENOSPACE


class TimedOut(ShmschedError, TimeoutError):
    """timed-out: the wait's timeout passed (a TimeoutError)."""

    code = _c.ETIMEDOUT


class SystemFailure(ShmschedError, OSError):
    """system-error: an unexpected operating-system error (an OSError)."""

    code = _c.ESYSTEM


class WouldBlock(ShmschedError, BlockingIOError):
    """would-block: no cell is free now (try_acquire returns None instead)."""

    code = _c.EWOULDBLOCK


class InvariantViolated(ShmschedError):
    """invariant-violated: an invariant of the segment does not hold."""

    code = _c.EVIOLATION


class StalePrepared(ShmschedError):
    """stale-prepared: a prepared request of another handle, segment or incarnation, or corrupt."""

    code = _c.ESTALE


class Superseded(ShmschedError):
    """superseded: a newer job of the same key replaced this one before it started."""

    code = _c.ESUPERSEDED


class HandleForked(InvalidArgument, RuntimeError):
    """invalid-argument: a Segment used in a child forked from the process that opened it.

    The lock that proves a process alive is not inherited across fork(), so a handle belongs
    to the process that opened it: open the segment again in the child. Also a RuntimeError.
    """


_BY_CODE: Dict[int, Type[ShmschedError]] = {
    cls.code: cls
    for cls in (InvalidArgument, QueueFull, ClassDenied, DuplicateActivation, Cancelled,
                DeadlineExceeded, AllCellsQuarantined, Shutdown, SequenceExhausted,
                LeaseMismatch, NotFound, OwnerLost, WorkerLost, IncompatibleSegment,
                PermissionDenied, AlreadyExists, Busy, OutOfMemory, NoSpace, TimedOut,
                SystemFailure, WouldBlock, InvariantViolated, StalePrepared, Superseded)
}
_c._register_errors({**_BY_CODE, _c.SEGMENT_NOT_FOUND: SegmentNotFound,
                     _c.FORKED: HandleForked})


def error_for(reason: str) -> Type[ShmschedError]:
    """The exception class of a reason word: ``error_for("queue-full") is QueueFull``."""
    for cls in _BY_CODE.values():
        if cls.reason == reason:
            return cls
    raise KeyError(reason)


for _cls in _BY_CODE.values():
    _cls.reason = _c.err_name(_cls.code)[0]
SegmentNotFound.reason = NotFound.reason
HandleForked.reason = InvalidArgument.reason
del _cls
