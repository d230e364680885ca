#!/usr/bin/env python3
"""Mixed point-card load on a few cards for bench/lots-conflicts.sh: threads
alternating between the instances send payments, holds, captures, voids,
refunds and charges for a fixed time; prints each operation's answers by
status, one line per operation: `op 201=n 409=n 503=n ...`.

  lots_load.py --ports 8080,8081 --cards 40 --threads 8 --seconds 15
"""

import argparse
import collections
import http.client
import json
import random
import threading
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ports", required=True)
    p.add_argument("--cards", type=int, default=40)
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--seconds", type=float, default=15)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    ports = [int(x) for x in a.ports.split(",")]
    counts = collections.Counter()
    lock = threading.Lock()
    stop = time.monotonic() + a.seconds

    def worker(n):
        rng = random.Random(f"{a.seed}/{n}")
        conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=30) for port in ports]
        paid, holds, serial = [], [], 0
        while time.monotonic() < stop:
            conn = conns[serial % len(conns)]
            serial += 1
            card = rng.randint(1, a.cards)
            draw = rng.random()
            headers = {"Content-Type": "application/json", "Idempotency-Key": f"{a.seed}-{n}-{serial}"}
            if draw < 0.40:
                op, path, body = "pay", f"/api/v1/cards/{card}/transactions", {"storeId": 1,
                                                                                  "amount": -rng.randint(1, 50)}
            elif draw < 0.50:
                op, path, body = "charge", f"/api/v1/cards/{card}/transactions", {"storeId": 1,
                                                                                     "amount": rng.randint(1, 50)}
            elif draw < 0.70:
                op, path, body = "hold", f"/api/v1/cards/{card}/holds", {
                    "storeId": 1, "amount": -rng.randint(1, 50), "expiresInSeconds": rng.randint(1, 5)}
            elif draw < 0.85 and holds:
                card, hold = holds.pop(rng.randrange(len(holds)))
                end = rng.choice(["capture", "void"])
                op, path, body = end, f"/api/v1/cards/{card}/holds/{hold}/{end}", None
            elif paid:
                card, tx = paid.pop(rng.randrange(len(paid)))
                op, path, body = "refund", f"/api/v1/cards/{card}/transactions/{tx}/refund", None
            else:
                continue
            try:
                conn.request("POST", path, json.dumps(body) if body is not None else "", headers)
                r = conn.getresponse()
                data = r.read()
                status = r.status
            except (OSError, http.client.HTTPException):
                status = "error"
                conns[(serial - 1) % len(conns)] = http.client.HTTPConnection(
                    "127.0.0.1", ports[(serial - 1) % len(ports)], timeout=30)
                data = b""
            if status == 201 and op == "pay":
                paid.append((card, json.loads(data)["transactionId"]))
            elif status == 201 and op == "hold":
                holds.append((card, json.loads(data)["holdId"]))
            with lock:
                counts[(op, status)] += 1

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(a.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for op in ["pay", "charge", "hold", "capture", "void", "refund"]:
        answers = sorted(((s, c) for (o, s), c in counts.items() if o == op), key=lambda x: str(x[0]))
        total = sum(c for _, c in answers)
        failed = sum(c for s, c in answers if s == 503 or s == "error")
        print(f"{op:8} {total:6} answers, 503 {failed:5} ({100.0 * failed / max(total, 1):.1f}%)  " +
              " ".join(f"{s}={c}" for s, c in answers))


if __name__ == "__main__":
    main()
