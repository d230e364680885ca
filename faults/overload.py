#!/usr/bin/env python3
"""Overload cases against one hotrow instance on SQLite (make faults, not
make test): while each runs, a probe client sends GET /healthz every 100 ms
on a connection of its own and must keep being answered within PROBE_BOUND;
the server's RSS (VmRSS, sampled every 100 ms) must stay under RSS_BOUND_MB;
each case gets its documented answer (docs/api.md "Limits").

  faults/overload.py [--connections 10000] [--case NAME ...]

  connections  N keep-alive connections at once, each with a request
               answered; one more beyond --max-connections gets 503
  slowloris    2,000 connections that send their header a byte a second:
               closed at the request timeout, and the probe is not slowed
  slow-bodies  2,000 clients each sending a 60 KB body slowly: the body
               budget (64 MiB) admits what fits, the rest get 503 at once
  burst        100,000 pipelined reads on one connection, each answered in
               order with the plan it asked for; then 10,000 pipelined likes,
               counted one by one
"""

import argparse
import asyncio
import http.client
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import procs  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBE_BOUND = 0.5  # seconds
RSS_BOUND_MB = 400
REQUEST_TIMEOUT_MS = 5000
GET = b"GET /healthz HTTP/1.1\r\nHost: o\r\n\r\n"


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def read_response(reader):
    """One HTTP/1.1 response (Content-Length framed): (status, body)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for line in lines[1:]:
        if line.lower().startswith("content-length:"):
            length = int(line.split(":", 1)[1])
    body = await reader.readexactly(length) if length else b""
    return status, body


class Watch:
    """The probe and the RSS sampler, in a thread of their own beside a case
    (so the probe's latency is the server's, not this event loop's)."""

    def __init__(self, port, pid, fresh=False):
        self.port, self.pid, self.fresh = port, pid, fresh  # fresh: a new connection per probe
        self.latencies, self.failures, self.rss = [], [], [0.0]
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self.thread.start()

    def stop(self):
        self.done.set()
        self.thread.join()

    def _run(self):
        conn = None
        while not self.done.is_set():
            self.rss.append(rss_mb(self.pid))
            start = time.monotonic()
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                conn.request("GET", "/healthz", headers={"Host": "o"})
                r = conn.getresponse()
                r.read()
                if r.status != 200:
                    self.failures.append(f"probe got {r.status}")
                if self.fresh:
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException) as e:
                self.failures.append(f"probe: {type(e).__name__}: {e}")
                conn = None
            self.latencies.append(time.monotonic() - start)
            self.done.wait(0.1)

    def verdict(self, name):
        lat = sorted(self.latencies) or [0.0]
        p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
        out = [f"{name}: probe {len(lat)} requests, p99 {p99 * 1000:.1f} ms, max {lat[-1] * 1000:.1f} ms; "
               f"RSS max {max(self.rss):.0f} MiB"]
        problems = list(self.failures[:3])
        if lat[-1] > PROBE_BOUND:
            problems.append(f"the probe waited {lat[-1]:.2f} s (bound {PROBE_BOUND} s)")
        if max(self.rss) > RSS_BOUND_MB:
            problems.append(f"RSS reached {max(self.rss):.0f} MiB (bound {RSS_BOUND_MB} MiB)")
        return out, problems


async def case_connections(port, n):
    conns, statuses = [], {}
    for i in range(0, n, 500):  # open in waves, as real clients arrive
        batch = await asyncio.gather(*(asyncio.open_connection("127.0.0.1", port) for _ in range(min(500, n - i))),
                                     return_exceptions=True)
        conns += [c for c in batch if not isinstance(c, Exception)]
    for r, w in conns:
        w.write(GET)

    async def one(r):
        try:
            s, _ = await asyncio.wait_for(read_response(r), 30)
        except Exception as e:
            s = type(e).__name__
        statuses[s] = statuses.get(s, 0) + 1

    await asyncio.gather(*(one(r) for r, _ in conns))
    # One more than the limit: 503 overloaded, then closed.
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(GET)
    try:
        extra, _ = await asyncio.wait_for(read_response(r), 10)
    except Exception as e:
        extra = type(e).__name__
    problems = []
    if statuses.get(200, 0) != n:
        problems.append(f"{n} connections: answers {statuses}, want {n} x 200")
    if extra != 503:
        problems.append(f"connection {n + 1} (past --max-connections {n}) got {extra}, want 503")
    for _, wr in conns + [(r, w)]:
        wr.close()
    return f"{len(conns)} connections open at once: {statuses}; the one past the limit: {extra}", problems


async def case_slowloris(port, n=2000):
    conns = await asyncio.gather(*(asyncio.open_connection("127.0.0.1", port) for _ in range(n)),
                                 return_exceptions=True)
    refused = sum(1 for c in conns if isinstance(c, Exception))
    conns = [c for c in conns if not isinstance(c, Exception)]
    start = time.monotonic()
    header = b"GET /healthz HTTP/1.1\r\nHost: o\r\nX-Slow: " + b"a" * 100
    closed_at = {}

    async def drip(i, r, w):
        for b in header:
            if r.at_eof():
                break
            try:
                w.write(bytes([b]))
                await w.drain()
            except (ConnectionError, OSError):
                break
            try:
                data = await asyncio.wait_for(r.read(1024), 1.0)
                if not data or b"HTTP/1.1" in data:
                    break
            except asyncio.TimeoutError:
                pass
            except (ConnectionError, OSError):
                break
        closed_at[i] = time.monotonic() - start

    await asyncio.gather(*(drip(i, r, w) for i, (r, w) in enumerate(conns)))
    for _, w in conns:
        w.close()
    latest = max(closed_at.values())
    problems = [f"slowloris: {refused} of {n} connections could not be opened"] if refused else []
    if latest > REQUEST_TIMEOUT_MS / 1000 + 3:
        problems.append(f"a slowloris connection lived {latest:.1f} s (request timeout {REQUEST_TIMEOUT_MS} ms)")
    return f"{len(conns)} slowloris connections, all closed by {latest:.1f} s", problems


async def case_slow_bodies(port, n=2000, size=60000):
    statuses = {}

    async def one():
        try:
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(f"POST /api/v1/echo HTTP/1.1\r\nHost: o\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {size}\r\n\r\n".encode())
            await w.drain()
            sent = 0
            while sent < size:
                try:
                    s, body = await asyncio.wait_for(read_response(r), 0.2)
                    k = f"{s} {'overloaded' if b'overloaded' in body else 'other'} before the body"
                    statuses[k] = statuses.get(k, 0) + 1
                    w.close()
                    return
                except asyncio.TimeoutError:
                    pass
                chunk = min(4000, size - sent)
                w.write(b" " * chunk)
                sent += chunk
                await w.drain()
            s, _ = await asyncio.wait_for(read_response(r), 10)
            statuses[s] = statuses.get(s, 0) + 1
            w.close()
        except Exception as e:
            k = type(e).__name__
            statuses[k] = statuses.get(k, 0) + 1

    await asyncio.gather(*(one() for _ in range(n)))
    problems = []
    # Each body is admitted whole (then it is read and is not JSON: 400) or
    # refused with 503 overloaded when its header arrives, before any of it.
    unexpected = {k: v for k, v in statuses.items() if k not in (400, "503 overloaded before the body")}
    if unexpected:
        problems.append(f"slow bodies: unexpected answers {unexpected} (want 400 for the blank body, or 503 "
                        "overloaded before the body)")
    if not statuses.get("503 overloaded before the body"):
        problems.append("slow bodies: none refused, so the 64 MiB body budget was never reached")
    return f"{n} slow {size // 1000} KB bodies: {statuses}", problems


async def case_burst(port, n=100000, likes=10000):
    """n pipelined reads of 10 plans in turn, each answer checked to be the
    plan asked for (so order is seen), then `likes` pipelined likes of one
    plan, whose counts must rise by one each time."""
    r, w = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
    problems = []

    async def send(requests):
        for i in range(0, len(requests), 1000):
            w.write(b"".join(requests[i:i + 1000]))
            await w.drain()

    reads = [f"GET /datePlan/{i % 10 + 1} HTTP/1.1\r\nHost: o\r\n\r\n".encode() for i in range(n)]
    sender = asyncio.ensure_future(send(reads))
    ok = liked = 0
    try:
        for i in range(n):
            s, body = await asyncio.wait_for(read_response(r), 30)
            if s == 200 and json.loads(body)["id"] == i % 10 + 1:
                ok += 1
            elif len(problems) < 3:
                problems.append(f"burst: read {i} answered {s} {body[:80]!r}, want plan {i % 10 + 1}")
        await sender
        before = None
        sender = asyncio.ensure_future(send([b"POST /datePlan/1/like HTTP/1.1\r\nHost: o\r\n\r\n"] * likes))
        for i in range(likes):
            s, body = await asyncio.wait_for(read_response(r), 60)
            count = json.loads(body).get("like") if s == 200 else None
            if count is not None and (before is None or count == before + 1):
                liked += 1
            elif len(problems) < 6:
                problems.append(f"burst: like {i} answered {s} {body[:80]!r} after count {before}")
            before = count if count is not None else before
        await sender
    except Exception as e:
        problems.append(f"burst: stopped: {type(e).__name__}: {e}")
    w.close()
    return (f"burst: {ok} of {n} pipelined reads answered in order, then {liked} of {likes} pipelined likes "
            "counted one by one"), problems


async def run(args):
    resource.setrlimit(resource.RLIMIT_NOFILE, (20000, 20000))
    run_dir = tempfile.mkdtemp(prefix="hotrow-overload-")
    subprocess.run([args.binary, "seed", "dateplans", "--count", "10", "--db", f"sqlite:{run_dir}/hotrow.db"],
                   check=True, capture_output=True)
    h = procs.Hotrow("hotrow-1", run_dir, args.binary, f"sqlite:{run_dir}/hotrow.db",
                     ["--max-connections", str(args.connections), "--request-timeout-ms", str(REQUEST_TIMEOUT_MS)])
    h.start()
    cases = {
        "connections": lambda: case_connections(h.port, args.connections - 1),  # the probe holds one
        "slowloris": lambda: case_slowloris(h.port),
        "slow-bodies": lambda: case_slow_bodies(h.port),
        "burst": lambda: case_burst(h.port),
    }
    failed = []
    try:
        for name in args.case or list(cases):
            watch = Watch(h.port, h.pid, fresh=name in ("slowloris", "slow-bodies"))
            watch.start()
            await asyncio.sleep(0.3)
            summary, problems = await cases[name]()
            watch.stop()
            lines, more = watch.verdict(name)
            print(f"{summary}\n  {lines[0]}", flush=True)
            for p in problems + more:
                print(f"  - {p}")
            failed += problems + more
            if not h.alive():
                failed.append(f"the server died during {name}")
                break
            await asyncio.sleep(REQUEST_TIMEOUT_MS / 1000 + 1)  # what the case left open times out
    finally:
        h.term(30)
    print("overload: every case passed" if not failed else f"overload: {len(failed)} problem(s); logs in {run_dir}")
    return 1 if failed else 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--connections", type=int, default=10000)
    p.add_argument("--case", action="append", choices=["connections", "slowloris", "slow-bodies", "burst"])
    p.add_argument("--binary", default=os.path.join(ROOT, "build/hotrow"))
    args = p.parse_args()
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
