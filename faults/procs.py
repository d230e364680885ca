"""The processes the rig starts on loopback, and the faults it does to them.

Every process is started in a session of its own, so a kill reaches its whole
group (PostgreSQL's backends with their postmaster) and nothing the rig did not
start. Each class records its own log file under the run's directory.
"""

import os
import random
import signal
import socket
import subprocess
import time
import urllib.request

PG_BIN = "/usr/lib/postgresql/15/bin"
FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"


def free_port():
    """A free port below the ephemeral range, so that no outgoing connection
    takes it while its server is down for a fault."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except OSError:
        low = 32768
    while True:
        port = random.randrange(10000, max(low, 10001))
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue


def wait_until(what, check, timeout=30.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception:
            pass
        time.sleep(interval)
    raise RuntimeError(f"{what} did not come up within {timeout:.0f} s")


def http_ok(port, path="/healthz"):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
        return r.status == 200


class Process:
    """One child process (and its process group)."""

    def __init__(self, name, log_path):
        self.name = name
        self.log_path = log_path
        self.proc = None
        self.expected_exit = True  # nothing running yet
        self.stopped = False
        self.deaths = []  # exits the rig did not ask for, before a restart

    def note_death(self):
        """Records an exit nobody asked for before the process is killed or
        restarted (a restart would hide it)."""
        if self.proc is not None and not self.expected_exit and self.proc.poll() is not None:
            self.deaths.append(self.proc.poll())
            self.expected_exit = True

    def spawn(self, argv, env=None, user=None):
        self.note_death()
        log = open(self.log_path, "ab")
        log.write(f"\n==== {time.strftime('%H:%M:%S')} start: {' '.join(argv)}\n".encode())
        log.flush()
        kwargs = {"user": user, "group": user} if user else {}
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True, **kwargs)
        log.close()
        self.expected_exit = False
        self.stopped = False

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def unexpected_exits(self):
        """Exit statuses of the times the process ended without the rig asking."""
        self.note_death()
        return list(self.deaths)

    def signal_group(self, sig):
        if self.alive():
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass

    def kill9(self):
        self.note_death()
        self.expected_exit = True
        self.signal_group(signal.SIGKILL)
        if self.proc:
            self.proc.wait()
        # The group may outlive its leader for a moment (PostgreSQL backends).
        for _ in range(200):
            try:
                os.killpg(self.proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.02)

    def term(self, timeout=30.0):
        """SIGTERM and wait; returns the exit status (None if it had to be killed)."""
        self.note_death()
        self.expected_exit = True
        if not self.alive():
            return self.proc.poll() if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill9()
            return None

    def stop(self):
        self.signal_group(signal.SIGSTOP)
        self.stopped = True

    def cont(self):
        self.signal_group(signal.SIGCONT)
        self.stopped = False


class Postgres(Process):
    def __init__(self, run_dir):
        super().__init__("postgres", os.path.join(run_dir, "postgres.log"))
        self.dir = os.path.join(run_dir, "pg")
        self.port = free_port()
        self.user = "postgres" if os.geteuid() == 0 else None
        os.makedirs(self.dir, exist_ok=True)
        if self.user:
            os.chown(run_dir, *_ids("postgres"))
            os.chown(self.dir, *_ids("postgres"))
        subprocess.run([f"{PG_BIN}/initdb", "-D", self.dir, "-A", "trust", "-U", "hotrow", "-E", "UTF8",
                        "--no-instructions"], check=True, stdout=subprocess.DEVNULL, user=self.user,
                       group=self.user)
        self.url = f"postgresql://hotrow@127.0.0.1:{self.port}/hotrow"

    def start(self):
        self.spawn([f"{PG_BIN}/postgres", "-D", self.dir, "-p", str(self.port), "-k", self.dir,
                    "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200", "-c", "fsync=on",
                    "-c", "track_commit_timestamp=on"], user=self.user)
        wait_until("postgres", lambda: self.psql("SELECT 1", db="postgres") == "1")
        if self.psql("SELECT count(*) FROM pg_database WHERE datname = 'hotrow'", db="postgres") == "0":
            self.psql("CREATE DATABASE hotrow", db="postgres")

    def psql(self, sql, db="hotrow"):
        out = subprocess.run(["psql", f"postgresql://hotrow@127.0.0.1:{self.port}/{db}", "-XAtq", "-v",
                              "ON_ERROR_STOP=1", "-c", sql], check=True, capture_output=True, text=True,
                             timeout=60)
        return out.stdout.strip()

    def rows(self, sql):
        text = self.psql(f"COPY ({sql}) TO STDOUT")
        return [line.split("\t") for line in text.splitlines() if line]

    def terminate_backends(self):
        """pg_terminate_backend of every hotrow connection (pool and listener)."""
        return self.psql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                         "WHERE datname = 'hotrow' AND pid <> pg_backend_pid()")


class Redis(Process):
    def __init__(self, run_dir, conf):
        super().__init__("redis", os.path.join(run_dir, "redis.log"))
        self.dir = os.path.join(run_dir, "redis")
        self.port = free_port()
        self.conf = conf
        os.makedirs(self.dir, exist_ok=True)
        self.url = f"redis://127.0.0.1:{self.port}"

    def start(self):
        self.spawn(["redis-server", self.conf, "--port", str(self.port), "--dir", self.dir, "--daemonize", "no",
                    "--enable-debug-command", "local", "--save", ""])
        wait_until("redis", lambda: self.cli("PING") == "PONG")

    def cli(self, *args, timeout=30):
        out = subprocess.run(["redis-cli", "-p", str(self.port), *args], capture_output=True, text=True,
                             timeout=timeout)
        return out.stdout.strip()


class Hotrow(Process):
    def __init__(self, name, run_dir, binary, db, args, env_extra=None, faketime_file=None):
        super().__init__(name, os.path.join(run_dir, f"{name}.log"))
        self.binary = binary
        self.port = free_port()
        self.db = db
        self.args = args
        # A short drain delay: SIGTERM faults exercise it (every route is
        # served while /readyz says 503) without stretching the schedule.
        self.env = dict(os.environ, HOTROW_LOG_LEVEL="warn", HOTROW_DRAIN_DELAY_MS="1000", **(env_extra or {}))
        if faketime_file:
            # The file is re-read at most once a second (a clock step takes
            # effect within 1 s), not on every clock read.
            self.env.update(LD_PRELOAD=FAKETIME_LIB, FAKETIME_TIMESTAMP_FILE=faketime_file,
                            FAKETIME_CACHE_DURATION="1", DONT_FAKE_MONOTONIC="1")

    def start(self, wait=True, env=None):
        self.spawn([self.binary, "serve", "--host", "127.0.0.1", "--port", str(self.port), "--db", self.db,
                    *self.args], env=dict(self.env, **(env or {})))
        if wait:
            wait_until(self.name, lambda: http_ok(self.port), timeout=60)


class Nginx(Process):
    def __init__(self, run_dir, upstream_ports):
        super().__init__("nginx", os.path.join(run_dir, "nginx.log"))
        self.dir = os.path.join(run_dir, "nginx")
        self.port = free_port()
        os.makedirs(self.dir, exist_ok=True)
        os.chmod(run_dir, 0o755)
        os.chmod(self.dir, 0o755)
        servers = "".join(f"    server 127.0.0.1:{p} max_fails=1 fail_timeout=1s;\n" for p in upstream_ports)
        # X-Upstream names the instance that answered, so the checks know
        # which instance's fault a response overlapped, and the upstream's
        # Server header passes through, so hotrow's own answers can be told
        # from nginx's (502, 504). POSTs are never
        # retried on another upstream (nginx's default for non-idempotent
        # methods): a retried write could apply twice.
        conf = f"""worker_processes 1;
pid {self.dir}/nginx.pid;
error_log {self.dir}/error.log warn;
daemon off;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {self.dir}/body;
  proxy_temp_path {self.dir}/proxy;
  upstream hotrow {{
{servers}    keepalive 64;
  }}
  server {{
    listen 127.0.0.1:{self.port};
    location / {{
      proxy_pass http://hotrow;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_connect_timeout 1s;
      proxy_read_timeout 12s;
      proxy_next_upstream error timeout;
      proxy_pass_header Server;
      add_header X-Upstream $upstream_addr always;
    }}
  }}
}}
"""
        self.conf = os.path.join(self.dir, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(conf)

    def start(self):
        self.spawn(["nginx", "-c", self.conf, "-p", self.dir])
        wait_until("nginx", lambda: http_ok(self.port))


def _ids(user):
    import pwd
    p = pwd.getpwnam(user)
    return p.pw_uid, p.pw_gid
