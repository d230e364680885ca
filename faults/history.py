"""The recorded history: every operation with its invocation and completion
times and its outcome, in the manner of Jepsen.

Outcomes:
  ok    the write took effect (a 2xx)
  fail  it definitely did not (every 4xx, and the 503s and 500s that
        docs/api.md "Which errors are definite" lists)
  info  indeterminate: a timeout, a lost connection, a proxy's 502/504, or a
        503 whose message says the outcome is unknown
Reads get ok or fail too; the checks only look at their status and latency.
"""

import http.client
import itertools
import json
import threading
import time

_ids = itertools.count(1)
_ids_lock = threading.Lock()


def next_id():
    with _ids_lock:
        return next(_ids)


class Op:
    __slots__ = ("id", "kind", "target", "args", "invoke", "complete", "status", "outcome", "value", "server",
                 "upstream", "retry_after", "error", "write", "conn_since")

    def __init__(self, kind, target, args, write=True):
        self.id = next_id()
        self.kind = kind
        self.target = target  # "nginx" or an instance name
        self.args = args
        self.write = write
        self.invoke = self.complete = 0.0
        self.status = 0
        self.outcome = None
        self.value = None  # the parsed body of a 2xx
        self.server = ""
        self.upstream = ""
        self.retry_after = False
        self.error = ""
        self.conn_since = 0.0  # when the connection the request went on was opened

    def answered_by(self, instances_by_port):
        """The instance that answered: the target itself, or nginx's upstream."""
        if self.target != "nginx":
            return self.target
        port = self.upstream.rsplit(":", 1)[-1] if self.upstream else ""
        return instances_by_port.get(port, "")

    def to_json(self):
        return {k: getattr(self, k) for k in self.__slots__}


class History:
    def __init__(self):
        self.ops = []
        self.lock = threading.Lock()

    def add(self, op):
        with self.lock:
            self.ops.append(op)

    def of(self, *kinds):
        with self.lock:
            return [o for o in self.ops if o.kind in kinds]

    def dump(self, path):
        with open(path, "w") as f:
            with self.lock:
                for o in self.ops:
                    f.write(json.dumps(o.to_json(), ensure_ascii=False) + "\n")


class Client:
    """One keep-alive connection to one port; reconnects after any failure."""

    def __init__(self, port, timeout):
        self.port = port
        self.timeout = timeout
        self.conn = None
        self.since = 0.0

    def close(self):
        if self.conn:
            self.conn.close()
            self.conn = None

    def call(self, op, method, path, body=None, headers=None, sqlite=False):
        hdrs = {"Host": "rig"}
        if body is not None:
            hdrs["Content-Type"] = "application/json"
        hdrs.update(headers or {})
        data = json.dumps(body).encode() if body is not None else None
        op.invoke = time.monotonic()
        sent = False
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
                self.since = time.monotonic()
                self.conn.connect()
            op.conn_since = self.since
            sent = True
            self.conn.request(method, path, body=data, headers=hdrs)
            r = self.conn.getresponse()
            raw = r.read()
            op.complete = time.monotonic()
            op.status = r.status
            op.server = r.getheader("Server", "")
            op.upstream = r.getheader("X-Upstream", "")
            op.retry_after = r.getheader("Retry-After") is not None
            if r.getheader("Connection", "").lower() == "close" or r.will_close:
                self.close()
            try:
                parsed = json.loads(raw) if raw else None
            except ValueError:
                parsed = None
            op.outcome = classify(op, parsed, sqlite)
            if op.outcome == "ok":
                op.value = parsed
            elif isinstance(parsed, dict) and "error" in parsed:
                op.error = parsed["error"].get("message", "")
        except ConnectionRefusedError as e:
            op.complete = time.monotonic()
            op.error = f"refused: {e}"
            op.outcome = "fail"  # nothing was sent
            self.close()
        except (OSError, http.client.HTTPException) as e:
            op.complete = time.monotonic()
            op.error = f"{type(e).__name__}: {e}"
            # A connection that failed before the request went out sent
            # nothing; after it, the write may have happened.
            op.outcome = "info" if sent and op.write else "fail"
            self.close()
        return op


# docs/api.md "Which errors are definite": the answers whose outcome is
# unknown, by their exact wording. Any other 503 from hotrow is definite.
INDETERMINATE = (
    "the outcome of a write is unknown",  # PostgreSQL connection lost; SQLite COMMIT
    "whether it took effect is unknown",  # the handler-timeout backstop
    "Redis connection lost",              # a score in flight
)


def classify(op, body, sqlite):
    s = op.status
    if 200 <= s < 300:
        return "ok"
    if not op.write:
        return "fail"
    if op.server != "hotrow":
        return "info"  # nginx's 502/504: the upstream may have applied it
    if "," in op.upstream:
        # nginx passed the request on after an error: the first instance
        # may have applied it (nginx resends PUT and DELETE), so the answer
        # of the second says nothing definite.
        return "info"
    if 400 <= s < 500:
        return "fail"
    message = body["error"].get("message", "") if isinstance(body, dict) and "error" in body else ""
    if s == 503:
        return "info" if any(p in message for p in INDETERMINATE) else "fail"
    if s == 500 and sqlite:
        return "fail"  # the batch's transaction rolled back
    return "info"
