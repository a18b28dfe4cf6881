"""shmsched: a fair, crash-safe scheduler for processes on one machine, from Python.

A thin layer over the C library (``include/shmsched.h``) through the extension module
``shmsched._shmsched``. See docs/python.md::

    import shmsched

    with shmsched.Segment("jobs") as seg:
        with seg.lease("standard", tenant="ci", priority=0, deadline=10.0) as lease:
            ...  # run on lease.cell
"""

from . import _shmsched
from .aio import AsyncLease
from .errors import (AllCellsQuarantined, AlreadyExists, Busy, Cancelled, ClassDenied,
                     DeadlineExceeded, DuplicateActivation, HandleForked, IncompatibleSegment,
                     InvalidArgument, InvariantViolated, LeaseMismatch, NoSpace, NotFound,
                     OutOfMemory, OwnerLost, PermissionDenied, QueueFull, SegmentNotFound,
                     SequenceExhausted, ShmschedError, Shutdown, StalePrepared, Superseded,
                     SystemFailure, TimedOut, WorkerLost, WouldBlock, error_for)
from .requests import Job, Lease, Prepared, Ticket
from .segment import Segment, create, destroy
from .types import (CLASSES, ClassConfig, ClassStats, Explanation, JobResult, QuotaStats,
                    SegmentConfig, SegmentInfo, TenantRecord, TenantStats)
from .worker import Worker, WorkerJob

__version__ = _shmsched.LIBRARY_VERSION

__all__ = [
    "AllCellsQuarantined", "AlreadyExists", "AsyncLease", "Busy", "CLASSES", "Cancelled",
    "ClassConfig", "ClassDenied", "ClassStats", "DeadlineExceeded", "DuplicateActivation",
    "Explanation", "HandleForked", "IncompatibleSegment", "InvalidArgument", "InvariantViolated",
    "Job", "JobResult", "Lease", "LeaseMismatch", "NoSpace", "NotFound", "OutOfMemory",
    "OwnerLost", "PermissionDenied", "Prepared", "QueueFull", "QuotaStats", "Segment",
    "SegmentConfig", "SegmentInfo",
    "SegmentNotFound", "SequenceExhausted", "ShmschedError", "Shutdown", "StalePrepared",
    "Superseded", "SystemFailure",
    "TenantRecord", "TenantStats", "Ticket", "TimedOut", "Worker", "WorkerJob", "WorkerLost", "WouldBlock",
    "create", "destroy", "error_for",
]
