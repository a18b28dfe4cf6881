"""Plain records: configurations, statistics and explanations, as dataclasses.

Durations are in seconds (floats) like the rest of Python's standard library; the exact
nanosecond figures are kept alongside where the C API has them (``..._ns``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

CLASSES: Tuple[str, ...] = ("tiny", "small", "standard", "large", "extra-large")
"""The class names, in the C enum's order."""

_BLOCKS = ("no-cell", "tenant-limit", "no-worker", "draining", "turn", "gather", "quota")
_STATES = {1: "queued", 2: "granted", 3: "ended", 4: "running", 5: "held"}


def class_index(cls: str) -> int:
    """The C enum value of a class name; :class:`InvalidArgument` for anything else."""
    try:
        return CLASSES.index(cls)
    except ValueError:
        from .errors import InvalidArgument

        raise InvalidArgument(f"unknown class {cls!r}: one of {', '.join(CLASSES)}") from None


@dataclass(frozen=True)
class ClassConfig:
    """One class of a segment, as ``shmsched create --class`` takes it (docs/config.md)."""

    cells: int
    queue: int
    mode: str = "lease"  #: "lease" or "worker"
    payload: int = 0  #: worker classes: bytes of payload and result (0: 4096)
    tenant_max_active: int = 0  #: 0: no limit
    on_holder_death: str = "quarantine"  #: or "release"
    on_command_crash: str = "release"  #: or "quarantine"
    allow: Tuple[str, ...] = ()  #: only these tenants (empty: any; extra-large: none)
    grant_timeout: Optional[float] = None  #: seconds; None: the default (2 s); lease classes
    #: whom tenant names belong to: "any", "user" (the caller's login name) or "group"
    #: (a group the caller is in); docs/security.md
    tenant: str = "any"
    #: seconds a queued request may be overtaken by acquires that find a cell free; None: the
    #: default (300 us); 0: strict hand-off; else 1e-6..1; lease classes without
    #: tenant_max_active only (docs/protocol.md, "Bounded overtaking")
    overtake: Optional[float] = None
    #: what tenants with queued work share: "time" (cell-time, by weight; lease classes) or
    #: "grants" (turns); None: the default, "time" for a lease class and "grants" for a worker
    #: class; docs/contract.md, "Fairness"
    fairness: Optional[str] = None


@dataclass(frozen=True)
class SegmentConfig:
    """What a segment was created with (:meth:`Segment.config`)."""

    classes: Dict[str, ClassConfig]
    starvation_after: float
    max_tenants: int
    max_processes: int
    mode: int  #: the file's permission bits, e.g. 0o600
    group: Optional[int]  #: the gid given at creation, None if left as it was
    admin_group: Optional[int] = None  #: its members are admins too (docs/security.md)


@dataclass(frozen=True)
class SegmentInfo:
    """Facts about the segment now (:meth:`Segment.info`)."""

    incarnation: int
    created_unix_ns: int
    size: int
    layout_version: int
    state: str  #: "active", "draining" or "destroying"
    live_processes: int
    max_processes: int
    file_mode: int
    file_gid: int


@dataclass(frozen=True)
class ClassStats:
    """One class's live figures, read as one coherent snapshot (:meth:`Segment.observe`)."""

    cells: int
    available: int
    leased: int  #: accepted leases (worker classes: jobs a worker runs)
    quarantined: int
    offline: int
    queue_capacity: int
    queue_depth: int
    queued_tenants: int
    granted: int
    rejected: int
    cancelled: int
    expired: int
    total_wait_ns: int
    max_wait_ns: int
    oldest_lease_age_ns: int
    granted_unaccepted: int  #: granted, not yet accepted by its waiter (or taken by its worker)
    oldest_grant_age_ns: int
    revoked: int
    reserved: int  #: cells held for a request of several cells gathering them
    #: worker classes: keyed submits that joined the live job of their key (Segment.submit's key)
    joined: int = 0


@dataclass(frozen=True)
class TenantStats:
    """One tenant's figures in one class (:meth:`Segment.tenants`)."""

    name: str
    queued: int
    active: int  #: leases counted against tenant-max-active (0 when unlimited)
    in_ring: bool
    granted: int
    total_wait_ns: int
    max_wait_ns: int
    weight: int = 1  #: its weight (:meth:`Segment.set_weight`)
    team: Optional[str] = None  #: its team (:meth:`Segment.set_team`)
    cell_seconds: float = 0.0  #: cell-time its leases held in the class (fair by time)
    #: its part of the class now by the fairness rule, among the tenants taking turns
    entitled_share: float = 0.0


@dataclass(frozen=True)
class QuotaStats:
    """One quota of the segment's table (:meth:`Segment.quotas`)."""

    name: str
    max: int  #: its maximum now (:meth:`Segment.set_quota`)
    used: int  #: units held: by leases, and by quarantined cells until repaired
    waiters: int  #: queued requests naming it that are set aside waiting for a quota


@dataclass(frozen=True)
class TenantRecord:
    """One record of the segment's tenant table (:meth:`Segment.tenant_table`)."""

    name: str
    weight: int  #: 1..1000; 1 unless set (:meth:`Segment.set_weight`)
    policy: bool  #: set by policy: kept for good
    other: bool  #: ``_other``: what records folded out of a full table held
    #: cell-time (s) held in each class fair by time, counted as each lease ends
    cell_seconds: Dict[str, float]
    team: Optional[str] = None  #: a tenant's team (:meth:`Segment.set_team`); None: none
    kind: str = "tenant"  #: "tenant", or "team" for a team's own record


@dataclass(frozen=True)
class Explanation:
    """Why a request waits, how it ended, or where its lease is held (:meth:`Ticket.explain`)."""

    state: str  #: "queued", "granted", "ended", "running" or "held"
    outcome: Optional[str]  #: "ended": None if accepted or completed, else the reason word
    tenant: str
    priority: int
    waited: float  #: seconds since it was queued
    aged: bool  #: it has waited starvation-after, and goes before its tenant's newer requests
    tenants_ahead: Optional[int]  #: tenants whose turn comes first; None if not in the ring yet
    ring_length: int
    ahead_in_tenant: int
    tenant_queued: int
    blocked_by: Tuple[str, ...] = field(default=())  #: "no-cell", "tenant-limit", "no-worker", ...
    cell: Optional[int] = None  #: "held": the cell the lease holds
    #: "held": the holder by its pid here; None if its process entry is gone, or if it runs in a
    #: pid namespace this one cannot number (holder_foreign)
    holder_pid: Optional[int] = None
    holder_alive: Optional[bool] = None
    held: Optional[float] = None  #: "held": seconds since the grant
    cells: int = 1  #: the cells it asks for at once
    gathered: int = 0  #: "queued": cells reserved for it while it gathers them ("gather")
    #: "held": the holder's pid as its own pid namespace numbers it, and that namespace's inode
    holder_ns_pid: Optional[int] = None
    holder_pidns: Optional[int] = None
    #: "held": the holder's pid namespace is not this one's nor one below it: holder_pid is None
    holder_foreign: Optional[bool] = None
    #: "queued", blocked by "quota": the first quota it names that has no unit free
    quota: Optional[str] = None


@dataclass(frozen=True)
class JobResult:
    """What a worker returned for a job (:meth:`Job.result`)."""

    status: int
    data: bytes


def _explanation(t: tuple) -> Explanation:
    from . import _shmsched as _c

    (state, outcome, tenant, priority, waited_ns, aged, ahead, ring, ahead_t, tq, blocked, cell,
     pid, alive, held_ns, cells, gathered, ns_pid, foreign, pidns, quota) = t
    held = _STATES.get(state) == "held"
    return Explanation(
        state=_STATES.get(state, f"unknown-{state}"),
        outcome=None if outcome == 0 else _c.err_name(outcome)[0],
        tenant=tenant,
        priority=priority,
        waited=waited_ns / 1e9,
        aged=bool(aged),
        tenants_ahead=None if ahead == 0xFFFFFFFF else ahead,
        ring_length=ring,
        ahead_in_tenant=ahead_t,
        tenant_queued=tq,
        blocked_by=tuple(b for i, b in enumerate(_BLOCKS) if blocked & (1 << i)),
        cell=cell if held else None,
        holder_pid=(pid or None) if held else None,
        holder_alive=bool(alive) if held else None,
        held=held_ns / 1e9 if held else None,
        cells=max(cells, 1),
        gathered=gathered,
        holder_ns_pid=(ns_pid or None) if held else None,
        holder_pidns=(pidns or None) if held else None,
        holder_foreign=bool(foreign) if held else None,
        quota=quota or None,
    )
