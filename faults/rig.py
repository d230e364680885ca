#!/usr/bin/env python3
"""hotrow's fault rig (issue 11): runs a mixed workload against a whole
deployment on loopback while faults are injected on a schedule drawn from a
seed, records every operation's history, then checks the history and every
instance against the stores of record. Exits 1 on any violation, naming the
seed; --seed replays the schedule and the workload (not the interleaving).

  faults/rig.py cluster  [--seconds 120] [--seed N]   PostgreSQL, Redis, 3 instances, nginx
  faults/rig.py embedded [--seconds 120] [--seed N]   one instance on SQLite
  faults/rig.py crash    [--rounds 5] [--seed N]      kill -9 rounds on SQLite, then the failpoints

What each mode does, the rules the checks enforce and what the long runs
covered: docs/reliability.md.
"""

import argparse
import collections
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import checks  # noqa: E402
import procs  # noqa: E402
from history import History  # noqa: E402
from truth import PgTruth, SqliteTruth, check_pointcard  # noqa: E402
from workload import CARDS, EDIT_PLANS, HOT_PLANS, Workload  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ADMIN = "rig-admin-token"
HANDLER_MS = 4000
# docs/api.md: every request is answered within the handler timeout H, the
# backstop 500 ms past it; 1 s more for this Python client on 2 busy cores.
ANSWER_BOUND = HANDLER_MS / 1000 + 0.5 + 1.0
# docs/design.md: another instance's change is seen within 5 s plus one
# reload (well under a second here) while PostgreSQL is reachable.
STALENESS_BOUND = 8.0


class Fault:
    def __init__(self, kind, target, start):
        self.kind, self.target, self.start, self.end = kind, target, start, start
        self.note = ""


class Rig:
    def __init__(self, args, run_dir):
        self.args = args
        self.dir = run_dir
        self.rng = random.Random(f"{args.seed}/faults")
        self.history = History()
        self.faults = []
        self.violations = []
        self.instances = {}
        self.results = {}  # check name -> violations found
        self.read_model_seconds = 0.0
        self.lot_counts = None  # (made, taken from, expiry rows) after the checks
        self.lock = threading.Lock()  # one fault at a time, and the final restore

    # -- the deployment --------------------------------------------------

    def board_flags(self):
        """The signed board needs a secrets key; the seasonal one, seasons of
        seconds (--test-hooks)."""
        key_file = os.path.join(self.dir, "secrets.key")
        if not os.path.exists(key_file):
            fd = os.open(key_file, os.O_WRONLY | os.O_CREAT, 0o600)
            os.write(fd, os.urandom(32).hex().encode() + b"\n")
            os.close(fd)
        return ["--secrets-key-file", key_file, "--test-hooks"]

    def start_cluster(self):
        self.pg = procs.Postgres(self.dir)
        self.pg.start()
        self.redis = procs.Redis(self.dir, os.path.join(ROOT, "scripts/redis-durable.conf"))
        self.redis.start()
        binary = self.args.binary
        subprocess.run([binary, "seed", "dateplans", "--count", "200", "--db", self.pg.url], check=True,
                       capture_output=True)
        subprocess.run([binary, "seed", "pointcard", "--cards", "200", "--stores", "10", "--history", "2000", "--db",
                        self.pg.url], check=True, capture_output=True)
        common = ["--redis", self.redis.url, "--db-pool", "3", "--admin-token", ADMIN, "--handler-timeout-ms",
                  str(HANDLER_MS), "--shutdown-grace-ms", "2000", *self.board_flags()]
        for i in range(1, 4):
            h = procs.Hotrow(f"hotrow-{i}", self.dir, binary, self.pg.url, common)
            h.start()
            self.instances[h.name] = h
        self.nginx = procs.Nginx(self.dir, [h.port for h in self.instances.values()])
        self.nginx.start()
        self.truth = PgTruth(self.pg, self.redis)
        self.sqlite = False
        self.others = [self.pg, self.redis, self.nginx]

    def start_embedded(self):
        self.data = os.path.join(self.dir, "data")
        os.makedirs(self.data, exist_ok=True)
        self.tmpfs = False
        if os.geteuid() == 0 and not self.args.no_tmpfs:
            # A small file system of its own, so that "disk full" is real.
            r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", self.data], capture_output=True)
            self.tmpfs = r.returncode == 0
        path = os.path.join(self.data, "hotrow.db")
        binary = self.args.binary
        db = f"sqlite:{path}"
        subprocess.run([binary, "seed", "dateplans", "--count", "200", "--if-empty", "--db", db], check=True,
                       capture_output=True)
        subprocess.run([binary, "seed", "pointcard", "--cards", "200", "--stores", "10", "--history", "2000",
                        "--if-empty", "--db", db], check=True, capture_output=True)
        self.clock_file = os.path.join(self.dir, "faketime")
        with open(self.clock_file, "w") as f:
            f.write("+0\n")
        args = ["--admin-token", ADMIN, "--handler-timeout-ms", str(HANDLER_MS), "--shutdown-grace-ms", "2000",
                *self.board_flags()]
        h = procs.Hotrow("hotrow-1", self.dir, binary, db, args,
                         faketime_file=self.clock_file if os.path.exists(procs.FAKETIME_LIB) else None)
        h.start()
        self.instances[h.name] = h
        self.truth = SqliteTruth(path)
        self.sqlite = True
        self.others = []

    def stop_all(self, keep_data=False):
        for h in self.instances.values():
            if h.stopped:
                h.cont()
            h.term(10)
        for p in getattr(self, "others", []):
            if p.stopped:
                p.cont()
            p.term(30)
        if getattr(self, "tmpfs", False):
            if keep_data:  # the evidence of a failed run outlives the tmpfs
                shutil.copytree(self.data, os.path.join(self.dir, "data-copy"), dirs_exist_ok=True)
            subprocess.run(["umount", "-l", self.data], capture_output=True)

    def targets(self):
        t = {"nginx": self.nginx.port} if not self.sqlite else {}
        t.update({name: h.port for name, h in self.instances.items()})
        return t

    def by_port(self):
        return {str(h.port): name for name, h in self.instances.items()}

    # -- faults ------------------------------------------------------------

    def fault_kinds(self):
        if self.sqlite:
            kinds = ["kill9", "term", "stop"]
            if self.tmpfs:
                kinds.append("disk_full")
            if os.path.exists(procs.FAKETIME_LIB):
                kinds.append("clock_step")
            return kinds
        return ["kill9", "term", "stop", "pg_kill9", "redis_kill9", "pg_terminate", "redis_client_kill",
                "redis_sleep"]

    def inject(self, kind):
        rng = self.rng
        name = rng.choice(sorted(self.instances))
        h = self.instances[name]
        target = {"pg_kill9": "postgres", "pg_terminate": "postgres"}.get(kind, name)
        if kind.startswith("redis"):
            target = "redis"
        f = Fault(kind, target, time.monotonic())
        hold = rng.uniform(0.5, 3.0)
        if kind == "kill9":
            h.kill9()
            time.sleep(hold)
            h.start()
        elif kind == "term":
            status = h.term(30)
            if status != 0:
                self.violations.append(f"{name} exited {status} after SIGTERM (want 0: a clean drain)")
            f.note = f"exit {status}"
            h.start()
        elif kind == "stop":
            h.stop()
            time.sleep(hold)
            h.cont()
        elif kind == "pg_kill9":
            self.pg.kill9()
            time.sleep(hold)
            self.pg.start()
        elif kind == "redis_kill9":
            self.redis.kill9()
            time.sleep(hold)
            self.redis.start()
        elif kind == "pg_terminate":
            f.note = f"{self.pg.terminate_backends()} backends"
        elif kind == "redis_client_kill":
            f.note = f"{self.redis.cli('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes')} clients"
        elif kind == "redis_sleep":
            secs = round(rng.uniform(0.5, 2.0), 1)
            self.redis.cli("DEBUG", "SLEEP", str(secs))
            f.note = f"{secs} s"
        elif kind == "disk_full":
            filler = os.path.join(self.data, "filler")
            subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=1M"], capture_output=True)
            time.sleep(hold)
            os.unlink(filler)
            # hotrow keeps answering, with 503 and Retry-After ("the disk
            # holding the database is full"): not an exemption.
            f.target = "disk"
        elif kind == "clock_step":
            step = rng.choice([-1, 1]) * rng.randrange(60, 7200)
            with open(self.clock_file, "w") as fh:
                fh.write(f"{step:+d}\n")
            f.note = f"{step:+d} s"
            f.target = "clock"  # the instance keeps running: not an exemption
        # The fault's window runs until the instance (or the backend) answers again.
        if kind in ("kill9", "term", "stop"):
            procs.wait_until(name, lambda: procs.http_ok(h.port), timeout=60)
        f.end = time.monotonic() + 0.5
        self.faults.append(f)

    def schedule(self, stop, gap):
        kinds = self.fault_kinds()
        while not stop.wait(self.rng.uniform(*gap)):
            kind = self.rng.choice(kinds)
            with self.lock:
                try:
                    self.inject(kind)
                except Exception as e:  # a fault that could not be injected or undone is a finding
                    self.violations.append(f"fault {kind}: {type(e).__name__}: {e}")
                    return

    def restore(self):
        for p in self.others:
            if p.stopped:
                p.cont()
            if not p.alive():
                p.start()
        for h in self.instances.values():
            if h.stopped:
                h.cont()
            if not h.alive():
                h.start()
            procs.wait_until(h.name, lambda: procs.http_ok(h.port), timeout=60)
        if self.sqlite and os.path.exists(self.clock_file):
            with open(self.clock_file, "w") as fh:
                fh.write("+0\n")

    def unexpected_deaths(self):
        out = []
        for p in list(self.instances.values()) + self.others:
            for code in p.unexpected_exits():
                out.append(f"{p.name} died unasked (exit {code}); its log: {p.log_path}")
        return out

    # -- the run -----------------------------------------------------------

    def baseline(self):
        self.initial = self.truth.plans(HOT_PLANS + EDIT_PLANS)
        self.payments_before = self.truth.payments(CARDS)
        self.refunds_before = self.truth.refunds(CARDS)
        self.holds_before = set(self.truth.holds(CARDS))
        self.grants_before = self.truth.grants()

    def sabotage(self):
        """Takes one like from plan 1 in the store of record, behind hotrow's back."""
        sql = 'UPDATE datePlans SET "like" = "like" - 1 WHERE id = 1 AND "like" > 0'
        if self.sqlite:
            import sqlite3
            conn = sqlite3.connect(self.truth.path, timeout=30)
            conn.execute(sql)
            conn.commit()
            conn.close()
        else:
            self.pg.psql(sql)

    def run_check(self, name, fn, *args):
        """Runs one check, recording its name and how many violations it found."""
        found = fn(*args)
        self.results[name] = self.results.get(name, 0) + len(found)
        return found

    def pointcard_invariants(self):
        passed, report = check_pointcard(self.args.binary, self.truth.url)
        return [] if passed else [f"hotrow check pointcard: {report}"]

    def check_stores(self):
        """What the stores hold against the history (the checks that need no instance)."""
        h, t = self.history, self.truth
        v = self.run_check("processes", self.unexpected_deaths)
        v += self.run_check("likes", checks.check_likes, h, t, self.initial)
        v += self.run_check("edits", checks.check_edits, h, t, self.initial)
        v += self.run_check("creates", checks.check_creates, h, t)
        v += self.run_check("scores", checks.check_scores, h, t)
        v += self.run_check("keyed scores", checks.check_keyed_scores, h, t)
        v += self.run_check("named scores", checks.check_named_scores, h, t)
        v += self.run_check("signed scores", checks.check_signed_scores, h, t)
        v += self.run_check("season scores", checks.check_season_scores, h, t)
        v += self.run_check("payments", checks.check_payments, h, t, self.payments_before, CARDS)
        v += self.run_check("refunds", checks.check_refunds, h, t, self.refunds_before, CARDS)
        v += self.run_check("holds", checks.check_holds, h, t, self.holds_before, CARDS)
        v += self.run_check("grants", checks.check_grants, h, t, self.grants_before)
        v += self.run_check("pointcard", self.pointcard_invariants)
        try:  # for the summary: that the run made lots, spent and expired them
            self.lot_counts = self.truth.lots()
        except Exception as e:  # noqa: BLE001 (a summary line only)
            print(f"lots not counted: {e}")
        return v

    def created_ids(self):
        return [o.value["id"] for o in self.history.of("create") if o.outcome == "ok"]

    def read_models(self, instances, bound):
        models, took = checks.read_models(self.truth, instances, self.created_ids(), bound)
        self.read_model_seconds = max(self.read_model_seconds, took)
        return models

    def check(self):
        v = self.check_stores()
        v += self.run_check("read models", self.read_models, {n: h.port for n, h in self.instances.items()},
                            STALENESS_BOUND)
        v += self.run_check("answers", checks.check_answers, self.history, self.faults, self.by_port(), ANSWER_BOUND)
        return v

    def summary(self, label, extra=""):
        ops = collections.Counter((o.kind, o.outcome) for o in self.history.ops)
        kinds = sorted({k for k, _ in ops})
        lines = [f"{label}: seed {self.args.seed}{extra}", f"  {'operation':<12}{'ok':>8}{'fail':>8}{'info':>8}"]
        for k in kinds:
            lines.append(f"  {k:<12}{ops[(k, 'ok')]:>8}{ops[(k, 'fail')]:>8}{ops[(k, 'info')]:>8}")
        total = collections.Counter(o.outcome for o in self.history.ops)
        lines.append(f"  {'all':<12}{total['ok']:>8}{total['fail']:>8}{total['info']:>8}")
        fk = collections.Counter(f.kind for f in self.faults)
        lines.append("  faults: " + (", ".join(f"{k} {n}" for k, n in sorted(fk.items())) or "none"))
        if self.lot_counts:
            lines.append("  lots: {} made, {} taken from, {} expiry row(s)".format(*self.lot_counts))
        lines.append("  checks: " + ", ".join(f"{name} {'passed' if n == 0 else f'FAILED ({n})'}"
                                              for name, n in self.results.items()))
        return "\n".join(lines)


def run_faults(args, mode):
    run_dir = args.dir or tempfile.mkdtemp(prefix=f"hotrow-rig-{mode}-")
    os.makedirs(run_dir, exist_ok=True)
    rig = Rig(args, run_dir)
    print(f"{mode}: seed {args.seed}, {args.seconds} s of faults, logs in {run_dir}", flush=True)
    try:
        rig.start_cluster() if mode == "cluster" else rig.start_embedded()
        rig.baseline()
        w = Workload(rig.history, rig.targets(), ADMIN, args.seed, sqlite=rig.sqlite, workers=args.workers)
        w.start()
        stop = threading.Event()
        sched = threading.Thread(target=rig.schedule, args=(stop, (1.0, 4.0)), daemon=True)
        time.sleep(1.0)  # some history before the first fault
        sched.start()
        time.sleep(args.seconds)
        stop.set()
        sched.join()
        with rig.lock:
            rig.restore()
        time.sleep(2.0)  # the workload continues on a healthy deployment for a moment
        w.finish()
        if args.sabotage:
            rig.sabotage()
        violations = rig.violations + rig.check()
    except BaseException:  # Ctrl-C too: stop what the rig started
        rig.history.dump(os.path.join(run_dir, "history.jsonl"))
        rig.stop_all(keep_data=True)
        raise
    rig.history.dump(os.path.join(run_dir, "history.jsonl"))
    rig.stop_all(keep_data=bool(violations) and not args.sabotage)
    with open(os.path.join(run_dir, "faults.json"), "w") as f:
        json.dump([vars(x) for x in rig.faults], f, indent=1)
    print(rig.summary(mode, f", read models settled in {rig.read_model_seconds:.1f} s"))
    if args.sabotage:
        # The rig's own test: one like taken away behind hotrow's back must
        # be found, by the like check and by the read-model check.
        found = [v for v in violations if "likes on plan 1" in v]
        stale = [v for v in violations if "hotrow-1: plan 1:" in v]
        print("\n".join(f"  - {v}" for v in violations[:10]))
        if found and stale:
            print(f"{mode} --sabotage: the checks found the lost like (as they must)")
            shutil.rmtree(run_dir, ignore_errors=True)
            return 0
        print(f"{mode} --sabotage: the checks did NOT find the like taken away behind hotrow's back")
        return 1
    return report(violations, args, mode, run_dir)


def run_crash(args):
    """kill -9 at a random moment of a workload on SQLite, restart, check the
    whole history so far; then one round at each failpoint."""
    run_dir = args.dir or tempfile.mkdtemp(prefix="hotrow-rig-crash-")
    args.no_tmpfs = True
    rig = Rig(args, run_dir)
    rng = random.Random(f"{args.seed}/crash")
    print(f"crash: seed {args.seed}, {args.rounds} rounds, logs in {run_dir}", flush=True)
    failpoints = ["grant.write:2", "grant.commit", "writer.commit:20"]
    violations = []
    try:
        rig.start_embedded()
        rig.baseline()
        h = rig.instances["hotrow-1"]
        rounds = [None] * args.rounds + failpoints
        for i, failpoint in enumerate(rounds):
            if failpoint:
                h.term(10)
                h.start(env={"HOTROW_FAILPOINT": failpoint})
            w = Workload(rig.history, rig.targets(), ADMIN, f"{args.seed}/{i}", sqlite=True, workers=args.workers)
            w.start(grant_every=(0.2, 0.8))
            if failpoint:
                try:
                    code = h.proc.wait(30)
                    h.expected_exit = True
                    if code != -6:
                        violations.append(f"failpoint {failpoint}: exit {code}, want SIGABRT")
                except subprocess.TimeoutExpired:
                    violations.append(f"failpoint {failpoint}: not reached in 30 s")
                    h.kill9()
            else:
                time.sleep(rng.uniform(0.3, 3.0))
                h.kill9()
            w.finish()
            h.start()
            v = rig.check_stores()
            v += rig.run_check("read models", rig.read_models, {"hotrow-1": h.port}, 2.0)
            violations += [f"round {i + 1}{' (' + failpoint + ')' if failpoint else ''}: {x}" for x in v]
            if v:
                break
    finally:
        rig.history.dump(os.path.join(run_dir, "history.jsonl"))
        rig.stop_all(keep_data=bool(violations))
    print(rig.summary("crash", f", {len(rounds)} rounds ({args.rounds} kill -9, {len(failpoints)} failpoints)"))
    return report(violations, args, "crash", run_dir)


def report(violations, args, mode, run_dir):
    if violations:
        print(f"\n{mode}: {len(violations)} violation(s); replay with: faults/rig.py {mode} --seed {args.seed}")
        for x in violations[:40]:
            print(f"  - {x}")
        print(f"  history and logs: {run_dir}")
        return 1
    print(f"{mode}: every check passed (seed {args.seed})")
    if not args.keep:
        shutil.rmtree(run_dir, ignore_errors=True)
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["cluster", "embedded", "crash"])
    p.add_argument("--seconds", type=float, default=120, help="how long faults are injected (cluster, embedded)")
    p.add_argument("--rounds", type=int, default=5, help="kill -9 rounds (crash); the failpoint rounds follow")
    p.add_argument("--seed", type=int, default=None, help="replay a run (default: a random seed, printed)")
    p.add_argument("--workers", type=int, default=8, help="client threads")
    p.add_argument("--binary", default=os.path.join(ROOT, "build/hotrow"))
    p.add_argument("--dir", help="where the run keeps its processes' files (default: a new temporary directory)")
    p.add_argument("--keep", action="store_true", help="keep the run's directory even when every check passes")
    p.add_argument("--sabotage", action="store_true",
                   help="the rig's self-test: lose one like behind hotrow's back; exit 0 only if the checks find it")
    p.add_argument("--no-tmpfs", action="store_true", help="embedded: no tmpfs of its own (so no disk-full fault)")
    args = p.parse_args()
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 2**31)
    if args.mode == "crash":
        return run_crash(args)
    return run_faults(args, args.mode)


if __name__ == "__main__":
    sys.exit(main())
