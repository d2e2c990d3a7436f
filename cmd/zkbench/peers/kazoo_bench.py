"""zkbench driver for kazoo's Lock (Debian package python3-kazoo).

Started by zkbench as: python3 -u kazoo_bench.py --servers host:port,... --spread=true|false
It prints {"ready": true}, then for every line "run kind=... clients=...
waiters=... shared=... duration_ms=... cycles=... path=..." on stdin runs
the workload and prints one JSON line with ops, seconds, acq_per_s, p50_us,
p99_us, heap_per_waiter, overlaps, for waiters cycles and capped (and error
on failure). At the start and the end of each measured phase (a loop
workload has one, a waiters workload one per cycle: its hand-offs) it
prints {"mark": "start"} or {"mark": "end"} and waits for a line from
zkbench, which samples the server's packets and the CPU time of this
process and of the server meanwhile, and adds the phases up.
The workloads are those of cmd/zkbench/gopeers.go; see there.
"""
import gc
import itertools
import json
import math
import socket
import sys
import threading
import time
import tracemalloc

from kazoo.client import KazooClient
from kazoo.handlers import utils
from kazoo.handlers.threading import SequentialThreadingHandler

SESSION_TIMEOUT = 10.0
SERVERS = ""
SPREAD = False
_seq = itertools.count(1)
_seq_lock = threading.Lock()


class SpreadHandler(SequentialThreadingHandler):
    """Binds each connection to a source address 127.0.1.x, 40 per address,
    to stay under ZooKeeper's maxClientCnxns per address (as the Go peers)."""

    def create_connection(self, address, timeout=None, **kwargs):
        with _seq_lock:
            n = next(_seq)
        src = ("127.0.1.%d" % (1 + (n // 40) % 250), 0)
        sock = socket.create_connection(address, timeout, source_address=src)
        utils._set_default_tcpsock_options(socket, sock)
        return sock


def connect():
    handler = SpreadHandler() if SPREAD else SequentialThreadingHandler()
    c = KazooClient(hosts=SERVERS, timeout=SESSION_TIMEOUT, handler=handler)
    c.start(timeout=60)
    return c


def connect_n(n):
    out = [None] * n
    errs = []
    sem = threading.Semaphore(16)

    def one(i):
        try:
            out[i] = connect()
        except Exception as e:  # noqa: BLE001
            errs.append(e)
        finally:
            sem.release()

    ts = []
    for i in range(n):
        sem.acquire()
        t = threading.Thread(target=one, args=(i,))
        t.start()
        ts.append(t)
    for t in ts:
        t.join()
    if errs:
        close_all(out)
        raise errs[0]
    return out


def close_all(clients):
    for c in clients:
        if c is not None:
            try:
                c.stop()
                c.close()
            except Exception:  # noqa: BLE001
                pass


def mark(name):
    """Marks an edge of a measured phase and waits until zkbench has
    sampled it (see the module's doc); one thread at a time."""
    print(json.dumps({"mark": name}), flush=True)
    sys.stdin.readline()


def pct(lat, q):
    if not lat:
        return 0.0
    lat = sorted(lat)
    i = max(0, min(len(lat) - 1, int(math.ceil(q * len(lat))) - 1))
    return lat[i] * 1e6


def result(lat, elapsed, heap=-1.0, overlaps=0):
    n = len(lat)
    return {
        "ops": n, "seconds": elapsed,
        "acq_per_s": n / elapsed if elapsed > 0 else 0,
        "p50_us": pct(lat, 0.5), "p99_us": pct(lat, 0.99),
        "heap_per_waiter": heap, "overlaps": overlaps,
    }


def loop(spec):
    clients = connect_n(int(spec["clients"]))
    try:
        path = spec["path"]
        dur = int(spec["duration_ms"]) / 1000.0
        locks = [c.Lock(path) for c in clients]
        state = {"holders": 0, "overlaps": 0}
        mu = threading.Lock()
        lats = []
        errs = []
        mark("start")
        start = time.monotonic()
        deadline = start + dur

        def worker(lk):
            mine = []
            try:
                while time.monotonic() < deadline:
                    t0 = time.monotonic()
                    lk.acquire()
                    mine.append(time.monotonic() - t0)
                    with mu:  # the critical section
                        state["holders"] += 1
                        if state["holders"] > 1:
                            state["overlaps"] += 1
                        state["holders"] -= 1
                    lk.release()
            except Exception as e:  # noqa: BLE001
                errs.append(e)
            with mu:
                lats.extend(mine)

        ts = [threading.Thread(target=worker, args=(lk,)) for lk in locks]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        elapsed = time.monotonic() - start
        mark("end")
        r = result(lats, elapsed, overlaps=state["overlaps"])
        if errs:
            r["error"] = repr(errs[0])
        return r
    finally:
        close_all(clients)


def waiters(spec):
    """Runs the cycles of a waiters workload on the same sessions, as
    goPeer.waiters: each cycle the holder acquires, n waiters (new Lock
    objects, new threads) queue behind it, then the hand-offs; the last
    waiter to hold marks the phase's end before it releases."""
    t0 = time.monotonic()
    n = int(spec["waiters"])
    shared = spec["shared"] == "true"
    path = spec["path"]
    cycles = max(1, int(spec.get("cycles", "1")))
    cap = int(spec["duration_ms"]) / 1000.0
    holder_c = connect()
    clients = []
    try:
        lats = []
        errs = []
        mu = threading.Lock()
        state = {"holders": 0, "overlaps": 0}
        handoff = 0.0
        heap = -1.0
        done = 0
        capped = False
        for c in range(cycles):
            if errs:
                break
            if c > 0 and cap > 0 and time.monotonic() - t0 >= cap:
                capped = True
                break
            holder = holder_c.Lock(path)
            holder.acquire()
            if c == 0:
                gc.collect()
                tracemalloc.start()
                base = tracemalloc.get_traced_memory()[0]
                clients = connect_n(1 if shared else n)
            locks = [clients[i % len(clients)].Lock(path) for i in range(n)]
            last = [0.0]  # when the previous holder began releasing
            last_acq = [0.0]
            acquired = [0]

            def waiter(lk):
                try:
                    lk.acquire()
                    now = time.monotonic()
                    with mu:  # the critical section, and the bookkeeping
                        state["holders"] += 1
                        if state["holders"] > 1:
                            state["overlaps"] += 1
                        state["holders"] -= 1
                        lats.append(now - last[0])
                        acquired[0] += 1
                        is_last = acquired[0] == n
                    if is_last:
                        last_acq[0] = now
                        mark("end")
                    last[0] = time.monotonic()
                    lk.release()
                except Exception as e:  # noqa: BLE001
                    errs.append(e)

            ts = [threading.Thread(target=waiter, args=(lk,)) for lk in locks]
            for t in ts:
                t.start()
            deadline = time.monotonic() + 600
            while len(holder_c.get_children(path)) < n + 1:
                if time.monotonic() > deadline or errs:
                    raise RuntimeError("waiters did not queue: %r" % (errs[:1],))
                time.sleep(0.01)
            if c == 0:
                gc.collect()
                heap = (tracemalloc.get_traced_memory()[0] - base) / n
                tracemalloc.stop()
            mark("start")
            start = time.monotonic()
            last[0] = start
            holder.release()
            for t in ts:
                t.join()
            if not errs:
                handoff += last_acq[0] - start
                done += 1
        r = result(lats, handoff, heap=heap, overlaps=state["overlaps"])
        r["cycles"], r["capped"] = done, capped
        if errs:
            r["error"] = repr(errs[0])
        return r
    finally:
        if tracemalloc.is_tracing():
            tracemalloc.stop()
        close_all(clients)
        close_all([holder_c])


def main():
    global SERVERS, SPREAD
    args = sys.argv[1:]
    for i, a in enumerate(args):
        if a == "--servers":
            SERVERS = args[i + 1]
        elif a.startswith("--spread="):
            SPREAD = a.split("=", 1)[1] == "true"
    threading.stack_size(512 * 1024)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        fields = line.split()
        if not fields or fields[0] != "run":
            continue
        spec = dict(f.split("=", 1) for f in fields[1:])
        try:
            r = loop(spec) if spec["kind"] == "loop" else waiters(spec)
        except Exception as e:  # noqa: BLE001
            r = {"error": repr(e)}
        print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
