#!/usr/bin/env python3
"""Checks docs/openapi.yaml against the server (issue 12).

(a) The routes: every (method, pattern) the router knows
    (`hotrow serve --print-routes`) is an operation of the document, and
    every operation is a route.
(b) The examples: each operation's `x-examples`, in document order, are sent
    to a seeded `hotrow serve` (SQLite, or --url for a running server); each
    answer must have the example's status, that status must be documented for
    the operation, its Content-Type must be the documented media type, and a
    JSON body must validate against the documented schema (JSON Schema
    2020-12, as OpenAPI 3.1 uses). Every response must carry X-Request-Id,
    and every error body name it.

    check_openapi.py BUILD/hotrow                 start a server of its own
    check_openapi.py BUILD/hotrow --url URL --admin-token T
                                                  a running server (the
                                                  compose stack; its data must
                                                  hold what the examples use:
                                                  plans 1..20, card 1, player
                                                  user-1 is posted first)
Python stdlib plus Debian's python3-yaml and python3-jsonschema.
"""
import argparse
import copy
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse

import yaml
from jsonschema import Draft202012Validator

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
METHODS = ["get", "put", "post", "delete", "patch", "head", "options"]


def inline_refs(node, doc, seen=()):
    """The schema with every local $ref replaced by its target."""
    if isinstance(node, dict):
        if "$ref" in node and len(node) == 1:
            ref = node["$ref"]
            assert ref.startswith("#/"), ref
            assert ref not in seen, f"recursive $ref {ref}"
            target = doc
            for part in ref[2:].split("/"):
                target = target[part]
            return inline_refs(target, doc, seen + (ref,))
        return {k: inline_refs(v, doc, seen) for k, v in node.items()}
    if isinstance(node, list):
        return [inline_refs(v, doc, seen) for v in node]
    return node


def operations(doc):
    for path, item in doc["paths"].items():
        for method in METHODS:
            if method in item:
                yield path, method, item[method]


def check_routes(binary, doc, work):
    db = os.path.join(work, "routes.db")
    out = subprocess.run([binary, "serve", "--db", "sqlite:" + db, "--print-routes"], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    routes = {tuple(line.split(" ", 1)) for line in out.splitlines() if line.strip()}
    documented = {(m.upper(), p) for p, m, _ in operations(doc)}
    problems = [f"the router has {m} {p}, the document does not" for m, p in sorted(routes - documented)]
    problems += [f"the document has {m} {p}, the router does not" for m, p in sorted(documented - routes)]
    return problems, len(routes)


class Server:
    def __init__(self, binary, work):
        self.work = work
        db = "sqlite:" + os.path.join(work, "api.db")
        for args in (["seed", "dateplans", "--count", "20"], ["seed", "pointcard", "--cards", "20", "--stores", "30",
                                                              "--history", "200"]):
            subprocess.run([binary, *args, "--db", db], capture_output=True, timeout=120, check=True)
        self.token = "openapi-admin"
        self.log = open(os.path.join(work, "server.log"), "w")
        self.proc = subprocess.Popen([binary, "serve", "--host", "127.0.0.1", "--port", "0", "--db", db,
                                      "--admin-token", self.token, "--drain-delay-ms", "0"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        self.port = None
        while time.time() < deadline and self.port is None:
            time.sleep(0.05)
            with open(os.path.join(work, "server.log")) as f:
                for line in f:
                    if "listening on http://127.0.0.1:" in line:
                        self.port = int(line.split("127.0.0.1:")[1].split()[0])
        if self.port is None:
            raise SystemExit("check_openapi: the server did not start")
        self.host = "127.0.0.1"

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)
        self.log.close()


def send(host, port, method, path, headers, body):
    conn = http.client.HTTPConnection(host, port, timeout=30)
    conn.request(method.upper(), path, body=body, headers=headers)
    r = conn.getresponse()
    data = r.read()
    result = (r.status, {k.lower(): v for k, v in r.getheaders()}, data)
    conn.close()
    return result


def check_examples(doc, host, port, token):
    problems, sent = [], 0
    validators = {}
    for path, method, op in operations(doc):
        examples = op.get("x-examples", [])
        if not examples:
            problems.append(f"{method.upper()} {path} has no x-examples")
        for ex in examples:
            where = f"{method.upper()} {ex['path']} (want {ex['status']})"
            headers = dict(ex.get("headers", {}))
            headers = {k: str(v) for k, v in headers.items()}
            if ex.get("admin"):
                headers["Authorization"] = "Bearer " + token
            body = None
            if "body" in ex:
                body = json.dumps(ex["body"], ensure_ascii=False).encode()
                headers.setdefault("Content-Type", "application/json")
            elif "raw" in ex:
                body = ex["raw"].encode()
                headers.setdefault("Content-Type", "application/json")
            status, rh, data = send(host, port, method, ex["path"], headers, body)
            sent += 1
            if status != ex["status"]:
                problems.append(f"{where}: got {status}: {data[:300]!r}")
                continue
            if not rh.get("x-request-id"):
                problems.append(f"{where}: no X-Request-Id")
            documented = op["responses"].get(str(status))
            if documented is None:
                problems.append(f"{where}: status {status} is not documented for the operation")
                continue
            documented = inline_refs(documented, doc)
            content = documented.get("content")
            if not content:
                if data:
                    problems.append(f"{where}: documented without a body, got {data[:100]!r}")
                continue
            ctype = rh.get("content-type", "").split(";")[0].strip()
            if ctype not in content:
                problems.append(f"{where}: Content-Type {ctype}, documented {list(content)}")
                continue
            if ctype != "application/json":
                continue
            try:
                value = json.loads(data)
            except ValueError as e:
                problems.append(f"{where}: not JSON ({e}): {data[:200]!r}")
                continue
            key = (path, method, str(status))
            if key not in validators:
                schema = content[ctype].get("schema", {})
                Draft202012Validator.check_schema(schema)
                validators[key] = Draft202012Validator(schema)
            for err in validators[key].iter_errors(value):
                problems.append(f"{where}: {'/'.join(map(str, err.path)) or 'body'}: {err.message}")
            if status >= 400 and value.get("error", {}).get("requestId") != rh.get("x-request-id"):
                problems.append(f"{where}: the error body's requestId is not the X-Request-Id")
            for name, spec in (documented.get("headers") or {}).items():
                if name.lower() == "retry-after" and status == 503 and name.lower() not in rh:
                    problems.append(f"{where}: no {name}")
    return problems, sent


def check_document(doc):
    """The document's own shape: examples in schemas validate too."""
    problems = []
    for path, method, op in operations(doc):
        body = op.get("requestBody", {}).get("content", {}).get("application/json")
        if body and "example" in body:
            schema = inline_refs(body["schema"], doc)
            for err in Draft202012Validator(schema).iter_errors(body["example"]):
                problems.append(f"{method.upper()} {path}: the request example: {err.message}")
        for status, resp in op["responses"].items():
            resp = inline_refs(resp, doc)
            if "description" not in resp:
                problems.append(f"{method.upper()} {path} {status}: no description")
            for media in (resp.get("content") or {}).values():
                if "schema" in media:
                    Draft202012Validator.check_schema(media["schema"])
                    if "example" in media:
                        for err in Draft202012Validator(media["schema"]).iter_errors(media["example"]):
                            problems.append(f"{method.upper()} {path} {status}: the example: {err.message}")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("--doc", default=os.path.join(ROOT, "docs", "openapi.yaml"))
    ap.add_argument("--url", help="a running server instead of one of its own (its routes are still the binary's)")
    ap.add_argument("--admin-token", default="")
    args = ap.parse_args()
    with open(args.doc, encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    assert doc["openapi"].startswith("3.1"), doc["openapi"]
    work = tempfile.mkdtemp(prefix="hotrow-openapi.")
    server = None
    try:
        problems = check_document(doc)
        route_problems, routes = check_routes(args.binary, doc, work)
        problems += route_problems
        if args.url:
            u = urllib.parse.urlparse(args.url)
            host, port, token = u.hostname, u.port or 80, args.admin_token
        else:
            server = Server(args.binary, work)
            host, port, token = server.host, server.port, server.token
        # The served document is this document.
        status, _, data = send(host, port, "get", "/openapi.json", {}, None)
        if status != 200 or json.loads(data) != json.loads(json.dumps(doc)):
            problems.append("GET /openapi.json is not docs/openapi.yaml (rebuild?)")
        example_problems, sent = check_examples(doc, host, port, token)
        problems += example_problems
    finally:
        if server:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)
    for p in problems:
        print("FAIL", p)
    ops = sum(1 for _ in operations(doc))
    print(f"check_openapi: {routes} routes, {ops} operations, {sent} example requests: "
          f"{'OK' if not problems else str(len(problems)) + ' problem(s)'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
