"""Python and the CLI on one segment: a Python worker serves `shmsched submit --wait`; a lease
held in Python shows in `shmsched status`; `explain` and `cancel` work on Python's tickets."""

from __future__ import annotations

import json
import os
import signal
import threading

import shmsched
from conftest import audit, cli, cli_path, in_wait, read_line, spawn_python, until

WORKER = """
import sys, shmsched
with shmsched.Segment(sys.argv[1]) as seg:
    print("ready", flush=True)
    try:
        for job in seg.worker("small"):
            job.complete(job.payload.upper(), status=7 if job.tenant == "seven" else 0)
    except KeyboardInterrupt:
        print("stopped", flush=True)
"""


def test_a_python_worker_serves_cli_submit(make_segment):
    s = make_segment({"small": shmsched.ClassConfig(cells=1, queue=8, mode="worker",
                                                    payload=256)})
    with s.open() as seg:
        worker = spawn_python(WORKER, s.name)
        assert read_line(worker) == "ready\n"
        p = cli("submit", s.name, "--class", "small", "--tenant", "alice", "--payload",
                "hello from the cli", "--wait")
        assert p.stdout == "HELLO FROM THE CLI"
        p = cli("submit", s.name, "--class", "small", "--tenant", "seven", "--payload", "x",
                "--wait", check=False)
        assert (p.returncode, p.stdout) == (7, "X")
        until(lambda: in_wait(worker.pid), "the worker waits for the next job")
        worker.send_signal(signal.SIGINT)
        assert read_line(worker) == "stopped\n", worker.stderr.read()
        assert worker.wait(timeout=30) == 0
        st = seg.observe("small")
        assert (st.granted, st.offline) == (2, 1)
    audit(s.name)


def status(name: str) -> dict:
    return json.loads(cli("status", name, "--json").stdout)


def test_a_python_lease_shows_in_status_and_explain(make_segment):
    s = make_segment({"standard": shmsched.ClassConfig(cells=2, queue=8)})
    with s.open() as seg:
        with seg.lease("standard", tenant="py") as lease:
            st = status(s.name)
            assert st["segment"]["live_processes"] == 1
            k = st["classes"]["standard"]
            assert (k["cells_leased"], k["cells_available"]) == (1, 1)
            other = seg.try_acquire("standard", tenant="py2")
            ticket = seg.enqueue("standard", tenant="queued")
            k = status(s.name)["classes"]["standard"]
            assert (k["cells_leased"], k["queue_depth"], k["queued_tenants"]) == (2, 1, 1)
            x = json.loads(cli("explain", s.name, str(ticket), "--json").stdout)
            assert (x["state"], x["tenant"]) == ("queued", "queued"), x
            # The CLI cancels a request this process waits for.
            got = []
            th = threading.Thread(target=lambda: got.append(
                __import__("pytest").raises(shmsched.Cancelled, ticket.wait)))
            th.start()
            cli("cancel", s.name, str(ticket))
            th.join()
            assert len(got) == 1
            other.release()
            assert lease.held
        k = status(s.name)["classes"]["standard"]
        assert (k["cells_leased"], k["cells_available"], k["cancelled"]) == (0, 2, 1)
        # A ticket of a held lease, explained by the CLI: held, by this process.
        t = seg.enqueue("standard", tenant="held")
        held = t.wait()
        x = json.loads(cli("explain", s.name, str(t), "--json").stdout)
        assert (x["state"], x["holder_pid"], x["holder_alive"]) == ("held", os.getpid(), True), x
        held.release()
    audit(s.name)


def test_cli_run_and_python_share_a_class(make_segment):
    s = make_segment({"standard": shmsched.ClassConfig(cells=1, queue=8)})
    with s.open() as seg:
        with seg.lease("standard", tenant="py"):
            run = spawn_python(
                "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)",
                cli_path(), "run", s.name, "--class", "standard", "--tenant", "sh", "--",
                "echo", "ran")
            until(lambda: seg.observe("standard").queue_depth == 1, "run queues")
            assert seg.observe("standard").leased == 1
        assert read_line(run) == "ran\n"
        assert run.wait(timeout=30) == 0
    audit(s.name)
