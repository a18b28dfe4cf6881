"""Figures quoted in docs/python.md: what a call costs from Python, and how often an idle
Python waiter wakes. Usage: PYTHONPATH=build/python python3 python/tools/measure.py"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import shmsched

N = 20000


def per_call(fn, n: int = N) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


def ctxt_switches(pid: int) -> int:
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/status") as f:
            for line in f:
                if line.startswith("voluntary_ctxt_switches"):
                    total += int(line.split()[1])
    return total


def main() -> None:
    name = f"pymeasure-{os.getpid()}"
    shmsched.create(name, {"standard": shmsched.ClassConfig(cells=1, queue=64)})
    try:
        with shmsched.Segment(name) as seg:
            def fast() -> None:
                with seg.lease("standard", tenant="a"):
                    pass

            def queued() -> None:  # enqueue, then a wait that finds the grant made
                seg.enqueue("standard", tenant="a").wait().release()

            print(f"lease+release, free cell (fast path): {per_call(fast):.2f} us")
            print(f"enqueue+wait+release, granted at once: {per_call(queued, 5000):.2f} us")
            holder = seg.try_acquire("standard", tenant="h")
            ticket = seg.enqueue("standard", tenant="w")

            def slept() -> None:  # a wait that must sleep (for 1 us): the helper thread's cost
                try:
                    ticket.wait(timeout=1e-6)
                except shmsched.TimedOut:
                    pass

            print(f"a wait that sleeps, main thread (helper thread): {per_call(slept, 5000):.1f} us")
            out = []
            th = threading.Thread(target=lambda: out.append(per_call(slept, 5000)))
            th.start()
            th.join()
            print(f"a wait that sleeps, another thread (inline): {out[0]:.1f} us")
            ticket.cancel()
            holder.release()

            holder = seg.try_acquire("standard", tenant="h")
            child = subprocess.Popen([sys.executable, "-c", (
                "import sys, shmsched\n"
                "seg = shmsched.Segment(sys.argv[1])\n"
                "print('ready', flush=True)\n"
                "try:\n    seg.lease('standard', tenant='w')\n"
                "except KeyboardInterrupt:\n    print('interrupted', flush=True)\n"), name],
                stdout=subprocess.PIPE, text=True)
            child.stdout.readline()
            while seg.observe("standard").queue_depth != 1:
                time.sleep(0.001)
            time.sleep(0.5)  # measuring, not synchronising: let it settle into its sleep
            before = ctxt_switches(child.pid)
            time.sleep(10)
            woke = ctxt_switches(child.pid) - before
            print(f"idle waiter: {woke / 10:.2f} wake-ups a second (all its threads)")
            t0 = time.monotonic()
            child.send_signal(signal.SIGINT)
            child.stdout.readline()
            print(f"^C to KeyboardInterrupt handled: {(time.monotonic() - t0) * 1e3:.2f} ms")
            child.wait()
            holder.release()
    finally:
        shmsched.destroy(name, force=True)


if __name__ == "__main__":
    main()
