"""Segment: this process attached to one shmsched segment, /dev/shm/NAME or a path."""

from __future__ import annotations

import collections.abc
import math
import os
import weakref
from types import TracebackType
from typing import TYPE_CHECKING, Any, List, Mapping, Optional, Sequence, Tuple, Type, Union

from . import _shmsched as _c
from .errors import Busy, IncompatibleSegment, InvalidArgument, StalePrepared, TimedOut
from .requests import (Job, Lease, Prepared, Ticket, quota_args, request_args, timeout_ns,
                       with_cells, withdrawn)
from .types import (CLASSES, ClassConfig, ClassStats, QuotaStats, SegmentConfig, SegmentInfo,
                    TenantRecord, TenantStats, class_index)

if TYPE_CHECKING:
    from .aio import AsyncLease
    from .worker import Worker

_MODES = ("lease", "worker")
_DEATH = ("quarantine", "release")
_CRASH = ("release", "quarantine")
_TENANT = ("any", "user", "group")
_FAIRNESS = (None, "grants", "time")  # shms_fairness_t: DEFAULT (0), GRANTS, TIME
_SEG_STATES = {1: "active", 2: "draining", 3: "destroying"}
_DEFAULT_PAYLOAD = 4096
_QUOTA_UNITS_MAX = 4095  # SHMS_QUOTA_UNITS_MAX
#: submit's supersede= values: the SHMS_SUBMIT_* flags each one sets
_SUPERSEDE = {"queued": _c.SUBMIT_SUPERSEDE,
              "running": _c.SUBMIT_SUPERSEDE | _c.SUBMIT_SUPERSEDE_RUNNING}


SegmentName = Union[str, "os.PathLike[str]"]


def _name(name: SegmentName) -> str:
    """A segment's name as the library takes it: a str, or a path object as its str."""
    if isinstance(name, os.PathLike):
        name = os.fspath(name)
    if not isinstance(name, str):
        raise TypeError(f"a segment name is a str or a path, not {type(name).__name__}")
    return name


def _choice(value: str, choices: Tuple[str, ...], what: str) -> int:
    if value not in choices:
        raise InvalidArgument(f"{what} must be one of {', '.join(choices)}, got {value!r}")
    return choices.index(value)


def _fairness(name: str, value: Optional[str]) -> int:
    if value is None:
        return 0
    if value not in _FAIRNESS:
        raise InvalidArgument(f"class {name}: fairness must be one of time, grants, got {value!r}")
    return _FAIRNESS.index(value)


_OVERTAKE_STRICT = (1 << 64) - 1  # SHMS_OVERTAKE_STRICT


def _overtake_ns(name: str, overtake: Optional[float]) -> int:
    """ClassConfig.overtake as shms_class_config.overtake_ns (0: the default)."""
    if overtake is None:
        return 0
    if isinstance(overtake, bool) or not isinstance(overtake, (int, float)):
        raise TypeError(f"class {name}: overtake must be a number of seconds or None, "
                        f"not {type(overtake).__name__}")
    if math.isnan(overtake) or math.isinf(overtake) or overtake < 0:
        raise InvalidArgument(f"class {name}: overtake must be 0 (strict) or 1e-6..1 seconds, "
                              f"got {overtake!r}")
    # Rounded to the nanosecond: 1e-6 * 1e9 is 999.99... in binary floating point.
    return _OVERTAKE_STRICT if overtake == 0 else int(round(overtake * 1e9))


def _class_tuple(name: str, k: ClassConfig) -> tuple:
    mode = _choice(k.mode, _MODES, f"class {name}: mode")
    grant = 0 if k.grant_timeout is None else timeout_ns(k.grant_timeout, "grant_timeout")
    payload = k.payload or (_DEFAULT_PAYLOAD if mode == 1 else 0)
    return (k.cells, k.queue, mode, payload, k.tenant_max_active,
            _choice(k.on_holder_death, _DEATH, f"class {name}: on_holder_death"),
            _choice(k.on_command_crash, _CRASH, f"class {name}: on_command_crash"),
            tuple(k.allow), grant, _choice(k.tenant, _TENANT, f"class {name}: tenant"),
            _overtake_ns(name, k.overtake),
            _fairness(name, k.fairness))


def create(name: SegmentName, classes: Mapping[str, Union[ClassConfig, Mapping[str, object]]], *,
           starvation_after: float = 5.0, max_tenants: int = 1024, max_processes: int = 1024,
           mode: int = 0o600, group: Optional[int] = None,
           admin_group: Optional[int] = None, quotas: Optional[Mapping[str, int]] = None) -> None:
    """Create the segment NAME, as ``shmsched create`` does (docs/config.md).

    A plain name is the file /dev/shm/NAME, or $SHMSCHED_DIR/NAME when that is set; a name
    with a '/' (or a path object) is the path of the segment file, on any local filesystem that
    supports shared mappings (relative paths against the working directory: give processes
    that share a segment an absolute one).

    ``classes`` maps class names to :class:`ClassConfig` (or to dicts of its fields):
    ``create("jobs", {"standard": ClassConfig(cells=4, queue=256)})``. ``quotas`` maps quota
    names to their maximum (``{"gpu": 2}``: at most 16 quotas, each 1..4095), as
    ``create --quota NAME=MAX``; :meth:`Segment.set_quota` changes or adds one later. Raises
    :class:`AlreadyExists` (the existing segment untouched) or :class:`InvalidArgument`
    naming the field at fault, :class:`SegmentNotFound` when the path's directory does not
    exist; nothing is created on error.
    """
    name = _name(name)
    if not isinstance(classes, collections.abc.Mapping):
        raise TypeError("classes must be a mapping of class names to ClassConfig, as "
                        "{'standard': ClassConfig(cells=4, queue=256)}, not "
                        f"{type(classes).__name__}")
    if not classes:
        raise InvalidArgument("configure at least one class")
    table = {}
    for cname, k in classes.items():
        if not isinstance(k, (ClassConfig, collections.abc.Mapping)):
            raise TypeError(f"class {cname}: a ClassConfig or a dict of its fields, not "
                            f"{type(k).__name__}")
        if not isinstance(k, ClassConfig):
            k = ClassConfig(**k)  # type: ignore[arg-type]
        table[class_index(cname)] = _class_tuple(cname, k)
    _c.create(name, table, timeout_ns(starvation_after, "starvation_after"), max_tenants,
              max_processes, mode, -1 if group is None else group,
              -1 if admin_group is None else admin_group, _quota_table(quotas))


def _quota_max(quota: str, maximum: int) -> int:
    if isinstance(maximum, bool) or not isinstance(maximum, int):
        raise TypeError(f"quota {quota}: max must be an int, not {type(maximum).__name__}")
    if not 1 <= maximum <= _QUOTA_UNITS_MAX:
        raise InvalidArgument(f"quota {quota}: max: must be 1..{_QUOTA_UNITS_MAX}, got {maximum}")
    return maximum


def _quota_table(quotas: Optional[Mapping[str, int]]) -> Tuple[Tuple[str, int], ...]:
    """create's quotas as the C layer takes them: ((name, max), ...)."""
    if quotas is None:
        return ()
    if not isinstance(quotas, collections.abc.Mapping):
        raise TypeError("quotas must be a mapping of quota names to their maximum, as "
                        f"{{'gpu': 2}}, not {type(quotas).__name__}")
    table = []
    for q, m in quotas.items():
        if not isinstance(q, str):
            raise TypeError(f"a quota name is a str, not {type(q).__name__}")
        table.append((q, _quota_max(q, m)))
    return tuple(table)


def destroy(name: SegmentName, *, force: bool = False) -> None:
    """Remove the segment NAME (its file: /dev/shm/NAME, $SHMSCHED_DIR/NAME, or the path).
    :class:`Busy` while live processes are attached, unless ``force``; :class:`SegmentNotFound`
    if there is none; :class:`IncompatibleSegment` for one that fails validation, unless
    ``force``, and for a file that is not a segment at all (or not a regular file: a directory,
    FIFO, device or symbolic link)."""
    name = _name(name)
    try:
        _c.destroy(name, force)
    except (Busy, IncompatibleSegment) as e:
        # A refusal that forcing would overcome names the C flag: here it is force=True.
        if "SHMS_DESTROY_FORCE" not in e.detail:
            raise
        raise type(e)(e.detail.replace("SHMS_DESTROY_FORCE",
                                       f"destroy({name!r}, force=True)")) from None


class Segment:
    """This process attached to the segment NAME (/dev/shm/NAME, $SHMSCHED_DIR/NAME, or the
    path NAME when it has a '/'; :func:`create` says more).

    ``with shmsched.Segment("jobs") as seg:`` detaches on the way out. Detaching ends this
    process's queued requests, and settles its leases still held as its death would (the
    class's on-holder-death: quarantined by default), so release leases first (``with
    seg.lease(...)`` does). ``observer=True`` maps it read-only for status tools.

    The handle belongs to this process: in a child forked from it every call raises
    :class:`HandleForked`; open the segment again there. Threads may share a Segment
    (docs/python.md, "Threads").
    """

    def __init__(self, name: SegmentName, *, observer: bool = False) -> None:
        name = _name(name)
        self._h = _c.Handle(name, observer)
        self.name = name
        self.observer = observer
        self._config: Optional[SegmentConfig] = None
        self._workers: "weakref.WeakSet[Worker]" = weakref.WeakSet()

    # ---- lifetime -------------------------------------------------------------------------

    def close(self) -> None:
        """Close this segment's workers, then detach. Closing twice does nothing."""
        for w in list(self._workers):
            w.close()
        self._h.detach()

    @property
    def closed(self) -> bool:
        return bool(self._h.closed)

    def __enter__(self) -> "Segment":
        return self

    def __exit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"attached by {self._h.pid}"
        return f"<shmsched.Segment {self.name!r} {state}>"

    # ---- what the segment is --------------------------------------------------------------

    def config(self) -> SegmentConfig:
        """The configuration the segment was created with."""
        if self._config is None:
            classes, starve, tenants, procs, mode, group, admin = self._h.config()
            self._config = SegmentConfig(
                classes={CLASSES[c]: ClassConfig(
                    cells=t[0], queue=t[1], mode=_MODES[t[2]], payload=t[3],
                    tenant_max_active=t[4], on_holder_death=_DEATH[t[5]],
                    on_command_crash=_CRASH[t[6]], allow=tuple(t[7]),
                    grant_timeout=t[8] / 1e9 if t[8] else None, tenant=_TENANT[t[9]],
                    overtake=(None if t[10] == 0 else 0 if t[10] == _OVERTAKE_STRICT
                              else t[10] / 1e9),
                    fairness=_FAIRNESS[t[11]] if t[11] < len(_FAIRNESS) else None)
                    for c, t in sorted(classes.items())},
                starvation_after=starve / 1e9, max_tenants=tenants, max_processes=procs,
                mode=mode, group=None if group < 0 else group,
                admin_group=None if admin < 0 else admin)
        else:
            self._h.usable()
        return self._config

    @property
    def classes(self) -> Tuple[str, ...]:
        """The names of the classes the segment configures."""
        return tuple(self.config().classes)

    def info(self) -> SegmentInfo:
        """Facts about the segment now: its state, size, live processes."""
        t = self._h.info()
        return SegmentInfo(t[0], t[1], t[2], t[3], _SEG_STATES.get(t[4], f"unknown-{t[4]}"),
                           t[5], t[6], t[7], t[8])

    def observe(self, cls: str) -> ClassStats:
        """A class's live figures (what ``shmsched status`` shows)."""
        return ClassStats(*self._h.observe(class_index(cls)))

    def tenants(self, cls: str) -> List[TenantStats]:
        """The tenants with queued work (or counted leases) in a class."""
        return [TenantStats(n, q, a, bool(r), g, tw, mw, w, team or None, cell / 1e9, share)
                for n, q, a, r, g, tw, mw, w, team, cell, share
                in self._h.tenants(class_index(cls))]

    def check(self) -> List[str]:
        """Audit every invariant of the segment: the violations found, one line each
        (empty when clean), as ``shmsched check`` prints them."""
        n, report = self._h.check()
        return [line for line in report.splitlines() if line][:n] if n else []

    def drain(self) -> None:
        """Stop taking work: new requests fail :class:`Shutdown`, queued ones end so."""
        self._h.drain()

    def resume(self) -> bool:
        """Lift a drain: True if the segment was draining, False if it was active. What the
        drain settled stays settled. Admins only (:class:`PermissionDenied` otherwise)."""
        return self._h.resume()

    def repair(self, cls: str, cell: Optional[int] = None) -> int:
        """Return quarantined cells of a class to service (one, or all): how many."""
        return self._h.repair(class_index(cls), -1 if cell is None else cell)

    # ---- fair share -----------------------------------------------------------------------

    def set_weight(self, tenant: str, weight: int) -> None:
        """Set a tenant's weight (1..1000) in classes fair by time, as ``shmsched policy NAME
        --tenant T --weight N``: the segment's owner's, root's and its admin group's right."""
        if isinstance(weight, bool) or not isinstance(weight, int):
            raise TypeError(f"weight must be an int, not {type(weight).__name__}")
        if not 1 <= weight <= 1000:
            raise InvalidArgument(f"tenant {tenant}: weight: must be 1..1000, got {weight}")
        self._h.policy_tenant(tenant, weight)

    def set_team(self, tenant: str, team: Optional[str]) -> None:
        """Put a tenant in a team (made with weight 1 if new), or in none (``None``), as
        ``shmsched policy NAME --tenant T --team X``: classes fair by time share between teams
        by their weights, then within a team between its tenants by theirs."""
        self._h.policy_tenant_team(tenant, team)

    def set_team_weight(self, team: str, weight: int) -> None:
        """Set a team's weight (1..1000), making the team if new, as ``shmsched policy NAME
        --team X --weight N``."""
        if isinstance(weight, bool) or not isinstance(weight, int):
            raise TypeError(f"weight must be an int, not {type(weight).__name__}")
        if not 1 <= weight <= 1000:
            raise InvalidArgument(f"team {team}: weight: must be 1..1000, got {weight}")
        self._h.policy_team(team, weight)

    def tenant_table(self) -> List[TenantRecord]:
        """The segment's tenant table (``shmsched policy NAME``): each tenant with a weight or
        team set or whose requests were queued, and each team; its weight, its team, and the
        cell-time it held in each class fair by time."""
        return [TenantRecord(name=n, weight=w, policy=bool(f & 1), other=bool(f & 4),
                             cell_seconds={CLASSES[c]: ns / 1e9 for c, ns in enumerate(cells)
                                           if CLASSES[c] in self.config().classes},
                             team=team or None, kind="team" if f & 8 else "tenant")
                for n, w, f, cells, team in self._h.policy_list()]

    def set_quota(self, quota: str, maximum: int) -> None:
        """Set a quota's maximum (1..4095), adding the quota if new (at most 16), as ``shmsched
        policy NAME --quota Q --max N``: an admin's right, recorded in the event ring. It takes
        effect at the next grant: a lower maximum takes no unit back from leases holding one."""
        if not isinstance(quota, str):
            raise TypeError(f"a quota name is a str, not {type(quota).__name__}")
        self._h.policy_quota(quota, _quota_max(quota, maximum))

    def quotas(self) -> List[QuotaStats]:
        """The segment's quotas (``shmsched status``'s ``quota.NAME.*``): each one's maximum
        now, the units held, and the requests set aside waiting for one of theirs."""
        return [QuotaStats(n, m, u, w) for n, m, u, w in self._h.quota_list()]

    # ---- leases ---------------------------------------------------------------------------

    def _unlimited(self, c: int) -> bool:
        k = self.config().classes.get(CLASSES[c])
        return k is not None and k.tenant_max_active == 0

    def try_acquire(self, cls: str, *, tenant: str, priority: int = 0,
                    deadline: Optional[float] = None, activation: Optional[str] = None,
                    cells: int = 1, quotas: Sequence[str] = ()) -> Optional[Lease]:
        """A lease now if a cell (``cells`` cells) is free, nobody is queued and every quota
        named has a unit free, else None. Leaves nothing queued."""
        t = self._h.try_acquire(*with_cells(request_args(class_index(cls), tenant, priority,
                                                         deadline, activation), cells, quotas))
        return None if t is None else Lease(self, t)

    def enqueue(self, cls: str, *, tenant: str, priority: int = 0,
                deadline: Optional[float] = None, activation: Optional[str] = None,
                cells: int = 1, quotas: Sequence[str] = ()) -> Ticket:
        """Queue a request; :meth:`Ticket.wait` takes its lease.

        ``priority``: higher first within its tenant's turn; ``deadline``: seconds from now
        after which it gives up unless granted; ``activation``: an id unique among the
        class's live requests; ``cells``: how many cells the lease holds at once (all or
        none; up to the class's cells, in a class without tenant-max-active); ``quotas``: names
        of the segment's quotas (at most 8, lease classes, one cell): granted only while each
        has a unit free, the lease holds one unit of each until it ends. Raises
        :class:`QueueFull`, :class:`ClassDenied`, :class:`DuplicateActivation`,
        :class:`Shutdown`, :class:`InvalidArgument` (a quota the segment does not have)...; on
        error nothing was queued.
        """
        args = with_cells(request_args(class_index(cls), tenant, priority, deadline, activation),
                          cells, quotas)
        return Ticket(self, self._h.enqueue(*args))

    def lease(self, cls: str, *, tenant: str, priority: int = 0, deadline: Optional[float] = None,
              activation: Optional[str] = None, timeout: Optional[float] = None,
              cells: int = 1, quotas: Sequence[str] = ()) -> Lease:
        """Wait for a lease on a cell of ``cls``: at once if one is free and nobody is
        queued, else in line (tenants take turns). Use it as ``with seg.lease(...) as lease:``.

        ``timeout`` (seconds) raises :class:`TimedOut` and withdraws the request; ^C raises
        KeyboardInterrupt at once, with the request cancelled and any lease that raced in
        released. ``cells=K`` holds K cells at once (:attr:`Lease.cells`), always through the
        queue. ``quotas=("gpu",)`` waits also for a unit of each quota named, and holds it
        until the lease ends (``shmsched run --quota``). Other arguments and errors as
        :meth:`enqueue` and :meth:`Ticket.wait`.
        """
        args = with_cells(request_args(class_index(cls), tenant, priority, deadline, activation),
                          cells, quotas)
        limit = timeout_ns(timeout)
        if self._unlimited(args[0]) and cells == 1:
            t = self._h.try_acquire(*args)
            if t is not None:
                return Lease(self, t)
        ticket = self._h.enqueue(*args)
        try:
            return Lease(self, self._h.wait(ticket, limit))
        except TimedOut:  # still queued: it must not outlive the call
            raise withdrawn(self._h, ticket, limit) from None

    def prepare(self, cls: str, *, tenant: str, priority: int = 0) -> Prepared:
        """Validate a request once (class, tenant, allow list, tenant binding) for many leases:
        :meth:`try_acquire_prepared`, :meth:`lease_prepared`. Errors as :meth:`try_acquire`'s
        checks (:class:`ClassDenied`, :class:`PermissionDenied`, :class:`InvalidArgument`...)."""
        args = request_args(class_index(cls), tenant, priority, None, None)
        return Prepared(self, args, self._h.prepare(*args), self._unlimited(args[0]))

    def _prepared_data(self, prepared: Prepared) -> bytes:
        if not isinstance(prepared, Prepared):
            raise TypeError(f"prepared must be a Prepared, not {type(prepared).__name__}")
        if prepared.segment is not self:  # the queued path would not ask the library
            raise StalePrepared("the request was prepared with another Segment: prepare it "
                                "with this one")
        return prepared._data

    def try_acquire_prepared(self, prepared: Prepared) -> Optional[Lease]:
        """:meth:`try_acquire` for a prepared request: a lease now, or None. Raises
        :class:`StalePrepared` for one prepared by another Segment or for another segment."""
        t = self._h.try_acquire_prepared(self._prepared_data(prepared))
        return None if t is None else Lease(self, t)

    def lease_prepared(self, prepared: Prepared, *, timeout: Optional[float] = None) -> Lease:
        """:meth:`lease` for a prepared request (its class, tenant and priority): at once if a
        cell is free, else in line. ``timeout`` and ^C as :meth:`lease`'s."""
        data = self._prepared_data(prepared)
        limit = timeout_ns(timeout)
        if prepared._unlimited:
            t = self._h.try_acquire_prepared(data)
            if t is not None:
                return Lease(self, t)
        ticket = self._h.enqueue(*prepared._args)
        try:
            return Lease(self, self._h.wait(ticket, limit))
        except TimedOut:  # still queued: it must not outlive the call
            raise withdrawn(self._h, ticket, limit) from None

    def lease_async(self, cls: str, *, tenant: str, priority: int = 0,
                    deadline: Optional[float] = None, activation: Optional[str] = None,
                    timeout: Optional[float] = None, cells: int = 1,
                    quotas: Sequence[str] = ()) -> "AsyncLease":
        """:meth:`lease` for asyncio: ``async with seg.lease_async(...) as lease:`` (or
        ``lease = await seg.lease_async(...)``). Cancelling the task cancels the request
        (and releases a lease that raced in). The wait runs in a thread of its own."""
        from .aio import AsyncLease

        return AsyncLease(self, with_cells(request_args(class_index(cls), tenant, priority,
                                                        deadline, activation), cells,
                                                   quotas),
                          timeout_ns(timeout))

    def ticket(self, text: str) -> Ticket:
        """The request named by a ticket's text form (from ``str(ticket)`` or ``shmsched run
        --print-ticket``), to cancel or explain it."""
        if not isinstance(text, str):
            raise TypeError(f"a ticket's text form is a str, not {type(text).__name__}")
        return Ticket(self, _c.ticket_parse(text))

    # ---- jobs -----------------------------------------------------------------------------

    def _payload_max(self, cls: str) -> int:
        k = self.config().classes.get(cls)
        if k is None:
            raise InvalidArgument(f"class {cls} is not configured in segment {self.name!r}")
        if k.mode != "worker":
            raise InvalidArgument(f"class {cls} is a lease class: jobs go to worker classes")
        return k.payload

    def submit(self, cls: str, payload: bytes, *, tenant: str, priority: int = 0,
               deadline: Optional[float] = None, activation: Optional[str] = None,
               retry_once: bool = False, quotas: Sequence[str] = (), key: Optional[str] = None,
               supersede: Union[bool, str] = False) -> Job:
        """Queue a job for the workers of a worker class; :meth:`Job.result` waits for it.

        ``payload``: bytes (at most the class's payload size). ``retry_once``: if its worker
        dies mid-job, queue it once more instead of ending it :class:`WorkerLost`.
        ``quotas``: quota names, as :meth:`enqueue`'s.

        ``key`` (1..31 graphic ASCII bytes) makes the job single-flight: while a job of the same
        key is queued or running in the class, this submit joins it instead of queueing another
        (:attr:`Job.joined` is True; the job runs once, with its first submitter's payload,
        priority and deadline, and every waiter gets its result). ``supersede`` (with ``key``):
        ``"queued"`` (or True) ends the key's queued jobs :class:`Superseded` and queues this
        one; ``"running"`` also asks the worker of the key's running job to stop it; False
        (the default) joins.
        """
        args = request_args(class_index(cls), tenant, priority, deadline, activation)
        flags = 1 if retry_once else 0
        if key is not None and not isinstance(key, str):
            raise TypeError(f"key must be a str or None, not {type(key).__name__}")
        if key is not None and "\0" in key:
            raise InvalidArgument(f"key {key!r} contains a NUL byte")
        if supersede is not False and supersede is not None:
            if supersede is True:
                supersede = "queued"
            if supersede not in _SUPERSEDE:
                raise InvalidArgument(f"supersede must be False, True, 'queued' or 'running', "
                                      f"got {supersede!r}")
            if key is None:
                raise InvalidArgument("supersede needs a key: it replaces the jobs of that key")
            flags |= _SUPERSEDE[supersede]  # type: ignore[index]
        q = quota_args(quotas)
        cap = self._payload_max(cls)
        if not isinstance(payload, (bytes, bytearray, memoryview)):
            raise TypeError(f"payload must be bytes, not {type(payload).__name__}")
        if len(payload) > cap:
            raise InvalidArgument(f"a payload of {len(payload)} bytes is larger than class "
                                  f"{cls}'s payload size ({cap})")
        t, joined = self._h.submit(*args, payload, flags, q, key)
        return Job(self, t, cap, joined)

    def submit_batch(self, cls: str, jobs: Sequence[Union[Mapping[str, Any], Tuple[str, bytes]]],
                     *, tenant: Optional[str] = None, retry_once: bool = False) -> List[Job]:
        """Queue jobs for the workers of a worker class, all or none; one :class:`Job` each,
        in order.

        Each job is a dict with ``payload`` (bytes) and optionally ``tenant``, ``priority`` and
        ``deadline`` (seconds), ``quotas`` (as :meth:`submit`'s) and ``key`` (single-flight, as ``shmsched submit --key`` without
        supersede: the job joins the key's live job, or the one an earlier job of the batch
        with that key queues, and its :class:`Job` gets that job's result), or a
        ``(tenant, payload)`` tuple; ``tenant`` is the default for dicts without one. A refusal
        (a full queue, a bad job, a denied tenant, more joins than a process may hold) raises,
        names the job (``job 2: ...``), and queues or joins nothing. :meth:`cancel_batch`
        cancels the jobs that have not started (a joined job: this batch's share of it).
        """
        cap = self._payload_max(cls)
        ci = class_index(cls)
        rows = []
        for n, j in enumerate(jobs):
            if isinstance(j, tuple) and len(j) == 2:
                j = {"tenant": j[0], "payload": j[1]}
            if not isinstance(j, Mapping):
                raise TypeError(f"job {n}: a dict or a (tenant, payload) tuple, "
                                f"not {type(j).__name__}")
            unknown = set(j) - {"tenant", "payload", "priority", "deadline", "quotas", "key"}
            if unknown:
                raise InvalidArgument(f"job {n}: unknown field {sorted(unknown)[0]!r}")
            try:
                quotas = quota_args(j.get("quotas", ()), "quotas")
            except (InvalidArgument, TypeError) as e:
                raise type(e)(f"job {n}: {e.detail if isinstance(e, InvalidArgument) else e}") \
                    from None
            payload = j.get("payload", b"")
            if not isinstance(payload, (bytes, bytearray, memoryview)):
                raise TypeError(f"job {n}: payload must be bytes, not {type(payload).__name__}")
            if len(payload) > cap:
                raise InvalidArgument(f"job {n}: a payload of {len(payload)} bytes is larger "
                                      f"than class {cls}'s payload size ({cap})")
            t = j.get("tenant", tenant)
            if t is None:
                raise InvalidArgument(f"job {n}: no tenant, and no default tenant")
            try:
                _, t, priority, deadline_ns, _ = request_args(ci, t, j.get("priority", 0),
                                                              j.get("deadline"), None)
            except (InvalidArgument, TypeError) as e:
                raise type(e)(f"job {n}: {e}") from None
            key = j.get("key")
            if key is not None and not isinstance(key, str):
                raise TypeError(f"job {n}: key must be a str, not {type(key).__name__}")
            rows.append((t, priority, deadline_ns, bytes(payload), key, quotas))
        tickets = self._h.submit_batch(ci, rows, 1 if retry_once else 0)
        return [Job(self, t, cap) for t in tickets]

    def cancel_batch(self, jobs: Sequence[Job]) -> int:
        """Cancel the jobs of a batch that have not started; running ones go on. Returns how
        many this call cancelled."""
        return self._h.cancel_batch([j._t for j in jobs])

    def job(self, text: str) -> Job:
        """A job this process submitted, named by its ticket's text form."""
        t = self.ticket(text)
        return Job(self, t._t, self._payload_max(t.cls))

    def worker(self, cls: str) -> "Worker":
        """Bind this process to an offline cell of a worker class: ``for job in
        seg.worker("small"): job.complete(result)``. :class:`Busy` if every cell has one."""
        from .worker import Worker

        w = Worker(self, cls, self._payload_max(cls))
        self._workers.add(w)
        return w

