"""Leases, tickets and jobs: what a Segment's scheduling calls hand back."""

from __future__ import annotations

import collections.abc
import math
from types import TracebackType
from typing import TYPE_CHECKING, Any, Optional, Sequence, Tuple, Type

from . import _shmsched as _c
from .errors import InvalidArgument, TimedOut
from .types import CLASSES, Explanation, JobResult, _explanation

if TYPE_CHECKING:
    from .segment import Segment

_FOREVER = (1 << 64) - 1
_INT32 = (-(1 << 31), (1 << 31) - 1)


def timeout_ns(timeout: Optional[float], what: str = "timeout") -> int:
    """Seconds (None: no limit) as the C API's nanoseconds."""
    if timeout is None:
        return _FOREVER
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"{what} must be a number of seconds or None, not {type(timeout).__name__}")
    if math.isnan(timeout) or timeout < 0:
        raise InvalidArgument(f"{what} must be at least 0 seconds, got {timeout!r}")
    if math.isinf(timeout):
        return _FOREVER
    return min(int(timeout * 1e9), _FOREVER - 1)


def withdrawn(handle: Any, ticket: Tuple[int, int, int, int], limit_ns: int) -> TimedOut:
    """The TimedOut of a lease whose timeout passed: its request withdrawn first, and the
    message saying so (the wait's own, "the request is still queued", is then untrue)."""
    handle.withdraw(ticket)
    return TimedOut(f"no lease within the timeout ({limit_ns / 1e9:g} s): the request was "
                    "withdrawn, nothing is left queued")


def request_args(cls_index: int, tenant: str, priority: int, deadline: Optional[float],
                 activation: Optional[str]) -> Tuple[int, str, int, int, Optional[str]]:
    """Check a request's arguments and give them in the form the C layer takes."""
    if not isinstance(tenant, str):
        raise TypeError(f"tenant must be a str, not {type(tenant).__name__}")
    try:
        _c.tenant_check(tenant)
    except InvalidArgument as e:
        raise InvalidArgument(f"tenant {tenant!r}: {e.detail}") from None
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise TypeError(f"priority must be an int, not {type(priority).__name__}")
    if not _INT32[0] <= priority <= _INT32[1]:
        raise InvalidArgument(f"priority must be in {_INT32[0]}..{_INT32[1]}, got {priority}")
    deadline_ns = 0
    if deadline is not None:
        if isinstance(deadline, bool) or not isinstance(deadline, (int, float)):
            raise TypeError(f"deadline must be a number of seconds or None, "
                            f"not {type(deadline).__name__}")
        if math.isnan(deadline) or math.isinf(deadline) or deadline <= 0:
            raise InvalidArgument(f"deadline must be a positive number of seconds from now, "
                                  f"got {deadline!r}")
        deadline_ns = _c.monotonic_ns() + int(deadline * 1e9)
    if activation is not None and not isinstance(activation, str):
        raise TypeError(f"activation must be a str or None, not {type(activation).__name__}")
    return cls_index, tenant, priority, deadline_ns, activation


def quota_args(quotas: Sequence[str], what: str = "quotas") -> Tuple[str, ...]:
    """Check the quotas a request names and give them as the C layer takes them: a tuple of
    names, at most eight (the library judges the names: each must be in the segment's table,
    none twice)."""
    if isinstance(quotas, (str, bytes)) or not isinstance(quotas, collections.abc.Sequence):
        raise TypeError(f"{what} must be a sequence of quota names (a list or tuple of str), "
                        f"not {type(quotas).__name__}")
    for q in quotas:
        if not isinstance(q, str):
            raise TypeError(f"{what}: a quota name is a str, not {type(q).__name__}")
    if len(quotas) > _c.REQUEST_QUOTAS_MAX:
        raise InvalidArgument(f"{what}: a request names at most {_c.REQUEST_QUOTAS_MAX} quotas, "
                              f"got {len(quotas)}")
    return tuple(quotas)


def with_cells(args: Tuple[int, str, int, int, Optional[str]], cells: int,
               quotas: Sequence[str] = ()) -> Tuple[Any, ...]:
    """A request's arguments asking for ``cells`` cells at once and naming ``quotas``."""
    if isinstance(cells, bool) or not isinstance(cells, int):
        raise TypeError(f"cells must be an int, not {type(cells).__name__}")
    if cells < 1:
        raise InvalidArgument(f"cells must be at least 1, got {cells}")
    return (*args, cells, quota_args(quotas))


class Prepared:
    """A request validated once (``shms_request_prepare``) for many leases from the Segment
    that prepared it: :meth:`Segment.try_acquire_prepared`, :meth:`Segment.lease_prepared`.

    Another Segment (even of the same name), or the segment made again, refuses it with
    :class:`StalePrepared`. A class whose rules name users or groups still checks the
    process's credentials on every lease.
    """

    __slots__ = ("segment", "cls", "tenant", "priority", "_data", "_args", "_unlimited")

    def __init__(self, segment: "Segment", args: Tuple[int, str, int, int, Optional[str]],
                 data: bytes, unlimited: bool) -> None:
        self.segment = segment
        self.cls = CLASSES[args[0]]
        self.tenant = args[1]
        self.priority = args[2]
        self._args = args
        self._data = data
        self._unlimited = unlimited

    def __repr__(self) -> str:
        return f"<shmsched.Prepared {self.cls} tenant={self.tenant!r} priority={self.priority}>"


class Lease:
    """The right to run on one cell, or on several at once (``cells=K``), until
    :meth:`release` (or :meth:`quarantine`), which returns them all.

    A context manager: ``with seg.lease(...) as lease:`` releases it on the way out, unless
    it was already released or quarantined.
    """

    __slots__ = ("segment", "_t", "_held", "_cells")

    def __init__(self, segment: "Segment", t: Tuple[int, int, int, int, int]) -> None:
        self.segment = segment
        self._t = t
        self._held = True
        self._cells: Optional[Tuple[int, ...]] = None

    @property
    def cls(self) -> str:
        """The class's name."""
        return CLASSES[self._t[0]]

    @property
    def cell(self) -> int:
        """The cell's index in its class (a lease of several cells: its lead, the lowest)."""
        return self._t[1]

    @property
    def cells(self) -> Tuple[int, ...]:
        """Every cell the lease holds, ascending: ``(cell,)`` for a lease of one. Read from
        the segment the first time, while the lease is held."""
        if self._cells is None:
            self._cells = tuple(self.segment._h.lease_cells(self._t))
        return self._cells

    @property
    def generation(self) -> int:
        """The cell's generation when granted: a stale lease is told apart by it."""
        return self._t[2]

    @property
    def token(self) -> int:
        return self._t[3]

    @property
    def held(self) -> bool:
        """True until released or quarantined through this object."""
        return self._held

    def release(self) -> None:
        """Return the cell to service. :class:`LeaseMismatch` if it is not current."""
        self._done()
        self.segment._h.release(self._t)

    def quarantine(self, reason: int = 1) -> None:
        """Take the cell out of service (its cleanup could not be proven); ``reason`` is
        recorded for operators. ``shmsched repair`` returns it."""
        self._done()
        self.segment._h.quarantine(self._t, reason)

    def _done(self) -> None:
        if not self._held:
            raise InvalidArgument(f"{self!r} was already released or quarantined")
        self._held = False

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        if self._held:
            self.release()

    def __repr__(self) -> str:
        state = "held" if self._held else "returned"
        return f"<shmsched.Lease {self.cls} cell {self.cell} gen {self.generation} {state}>"


class _Request:
    """A queued request, named by its ticket: common to Ticket and Job."""

    __slots__ = ("segment", "_t")

    def __init__(self, segment: "Segment", t: Tuple[int, int, int, int]) -> None:
        self.segment = segment
        self._t = t

    @property
    def cls(self) -> str:
        return CLASSES[self._t[0]]

    def cancel(self) -> bool:
        """Cancel the request (any process may). True if this call cancelled it; False if it
        had already been cancelled or had ended (a held lease is never revoked; a running job
        is only flagged, and its worker decides). :class:`NotFound` for a stale ticket."""
        return self.segment._h.cancel(self._t)

    def explain(self) -> Explanation:
        """Why the request waits, how it ended, or where its lease is held."""
        return _explanation(self.segment._h.explain(self._t))

    def __str__(self) -> str:
        """The ticket's text form, ``CLASS.SLOT.SEQ.INCARNATION``, for ``shmsched explain``."""
        return _c.ticket_format(self._t)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Request) and other._t == self._t

    def __hash__(self) -> int:
        return hash(self._t)

    def __repr__(self) -> str:
        return f"<shmsched.{type(self).__name__} {self}>"


class Ticket(_Request):
    """A request queued by :meth:`Segment.enqueue` (or parsed by :meth:`Segment.ticket`)."""

    __slots__ = ()

    def wait(self, timeout: Optional[float] = None) -> Lease:
        """Wait for the grant and accept it. Only the process that queued the request may.

        ``timeout`` (seconds; None: no limit) raises :class:`TimedOut` with the request still
        queued: wait again or cancel. ^C (any signal handler that raises) cancels the request,
        releases a lease that raced in, and raises. Every other outcome retires the ticket:
        :class:`Cancelled`, :class:`DeadlineExceeded`, :class:`Shutdown`, ...
        """
        return Lease(self.segment, self.segment._h.wait(self._t, timeout_ns(timeout)))


class Job(_Request):
    """A job submitted by :meth:`Segment.submit`: its worker's result comes from :meth:`result`.

    ``joined`` is True when a keyed submit (``submit(..., key=K)``) joined the live job of its
    key instead of queueing one: the ticket is that job's, and :meth:`result` gives this
    submitter the same status and bytes as every other waiter; :meth:`cancel` then only takes
    this submitter's share back (the job is cancelled when its last waiter leaves)."""

    __slots__ = ("_result", "_cap", "joined")

    def __init__(self, segment: "Segment", t: Tuple[int, int, int, int], cap: int,
                 joined: bool = False) -> None:
        super().__init__(segment, t)
        self._result: Optional[JobResult] = None
        self._cap = cap
        self.joined = joined

    def result(self, timeout: Optional[float] = None) -> JobResult:
        """Wait for the job to end and return the worker's status and result bytes.

        ``timeout`` raises :class:`TimedOut` with the job still queued or running. ^C cancels
        the job: a queued one ends at once; a running one is flagged for its worker, and the
        wait stops within a second (call :meth:`result` again to collect its end). Other
        outcomes raise: :class:`Cancelled`, :class:`WorkerLost`, :class:`DeadlineExceeded`,
        :class:`Superseded` (a keyed job a newer submit of its key replaced)...
        The result is kept: later calls return it again.
        """
        if self._result is None:
            status, data = self.segment._h.wait_result(self._t, timeout_ns(timeout), self._cap)
            self._result = JobResult(status, data)
        return self._result
