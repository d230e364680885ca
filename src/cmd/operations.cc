#include "cmd/operations.h"

#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>

#include "base/version.h"
#include "cmd/openapi.h"
#include "db/postgres.h"
#include "db/redis.h"
#include "db/sqlite_database.h"
#include "http/errors.h"
#include "http/json.h"
#include "http/router.h"
#include "http/server.h"
#include "ops/alloc_counter.h"

namespace hotrow::cmd {

namespace {

int64_t SteadyNs() { return std::chrono::steady_clock::now().time_since_epoch().count(); }

struct Part {
  const char* name;
  bool instance;  // true: a problem of this instance (503); false: a shared dependency (named, 200)
  bool ok;
  std::string state;
  std::string detail;
};

std::string SqliteProblem(const Operations::SqliteFile& file) {
  struct stat st {};
  const std::string& path = file.db->path();
  if (::stat(path.c_str(), &st) != 0) return "the database file " + path + " is gone";
  if (st.st_ino != file.inode) return "the database file " + path + " was replaced under the server";
  if (::access(path.c_str(), R_OK | W_OK) != 0) return "the database file " + path + " is not writable";
  std::string failure = file.db->writer().last_failure();
  if (!failure.empty()) return "the last write to " + path + " failed: " + failure;
  return "";
}

void WriteReadyz(Operations& ops, http::Response& r) {
  Readiness ready = CheckReadiness(ops);
  r.status = ready.ready ? 200 : 503;
  r.body = std::move(ready.body);
  if (!ready.ready) r.AddHeader("Retry-After", "1");
  r.AddHeader("Cache-Control", "no-store");
}

// /proc/self/statm's second field, in pages.
double ResidentBytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "re");
  if (!f) return 0;
  long pages = 0, resident = 0;
  int n = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return n == 2 ? static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) : 0;
}

double OpenFds() {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return 0;
  double n = 0;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n - 1;  // the directory's own descriptor
}

double CpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

}  // namespace

Readiness CheckReadiness(Operations& ops) {
  std::vector<Part> parts;
  bool draining = ops.server && !ops.server->ready();
  parts.push_back({"server", true, !draining, draining ? "draining" : "serving", ""});
  if (!ops.sqlite.empty()) {
    std::string problem;  // the first file's; both files are one part
    for (const auto& file : ops.sqlite)
      if (problem.empty()) problem = SqliteProblem(file);
    parts.push_back({"sqlite", true, problem.empty(), problem.empty() ? "ok" : "unusable", problem});
  }
  if (ops.pool) {
    bool reachable = ops.pool->reachable();
    db::pg::Listener::State listener_state = db::pg::Listener::State::kConnecting;
    bool have_listener = false;
    std::chrono::steady_clock::duration silence{};
    {
      std::lock_guard lock(ops.listener_mutex);
      if (ops.listener) {
        have_listener = true;
        listener_state = ops.listener->state();
        silence = ops.listener->silence();
      }
    }
    using State = db::pg::Listener::State;
    // The listener cannot connect: from here PostgreSQL is down, for every
    // instance alike (a shared dependency, 200). Connected but not yet
    // reloaded, or silent past its heartbeat bound: this instance's own
    // read models may be stale (503).
    if (have_listener && listener_state == State::kUnreachable) reachable = false;
    // The listener connected and follows: PostgreSQL answers, whatever the
    // pool saw last (it learns only when a request needs a connection).
    if (have_listener && listener_state == State::kListening) reachable = true;
    parts.push_back(
        {"postgresql", false, reachable, reachable ? "up" : "down", reachable ? "" : ops.pool->last_error()});
    if (ops.follows) {
      auto bound = db::pg::Listener::kHeartbeatInterval + db::pg::Listener::kHeartbeatTimeout;
      bool ok = false;
      std::string state, detail;
      if (!have_listener) {
        state = "not started";
      } else if (listener_state == State::kListening && silence > bound) {
        state = "silent";
        detail = "no heartbeat for " +
                 std::to_string(std::chrono::duration_cast<std::chrono::seconds>(silence).count()) + " s";
      } else if (listener_state == State::kListening) {
        ok = true;
        state = "listening";
      } else if (listener_state == State::kReloading) {
        state = "reloading";
        detail = "connected; the reload after the reconnect is not done";
      } else if (listener_state == State::kUnreachable) {
        ok = true;  // PostgreSQL is down: named above, not this instance's fault
        state = "waiting for postgresql";
      } else {
        state = "connecting";
      }
      parts.push_back({"listener", true, ok, state, detail});
    }
  }
  if (ops.redis) {
    bool up = ops.redis->connected();
    parts.push_back({"redis", false, up, up ? "up" : "down", ""});
  }
  Readiness out;
  for (const auto& p : parts) out.ready = out.ready && (p.ok || !p.instance);
  http::JsonWriter w(out.body);
  w.StartObject();
  w.Field("status", out.ready ? "ready" : "not ready");
  w.Key("parts");
  w.StartArray();
  for (const auto& p : parts) {
    w.StartObject();
    w.Field("name", p.name);
    w.Field("scope", p.instance ? "instance" : "shared");
    w.Field("state", p.state);
    w.Key("ok");
    w.Bool(p.ok);
    if (!p.detail.empty()) w.Field("detail", p.detail);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return out;
}

void AddOperationsRoutes(http::Router& router, Operations& ops) {
  using http::Method;
  using http::Request;
  using http::Responder;
  using http::Response;
  // Liveness: the process serves requests. Nothing else: a dependency that
  // is down must not get the instance restarted.
  router.Add(Method::kGet, "/healthz", [](Request&, Responder responder) {
    Response r;
    r.body = R"({"status":"ok"})";
    r.AddHeader("Cache-Control", "no-store");
    responder.Send(std::move(r));
  });
  router.Add(Method::kGet, "/readyz", [&ops](Request&, Responder responder) {
    Response r;
    WriteReadyz(ops, r);
    responder.Send(std::move(r));
  });
  router.Add(Method::kGet, "/metrics", [&ops](Request& req, Responder responder) {
    if (ops.metrics_auth && ops.metrics_auth->enabled()) {
      if (Status s = ops.metrics_auth->Check(http::BearerToken(req)); !s.ok())
        return responder.Send(http::ErrorResponse(s));
    }
    Response r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = metrics::Registry::Default().Expose();
    r.AddHeader("Cache-Control", "no-store");
    responder.Send(std::move(r));
  });
  router.Add(Method::kGet, "/openapi.json", [](Request&, Responder responder) {
    Response r;
    r.body = std::string(OpenApiJson());
    responder.Send(std::move(r));
  });
  // Heap allocations so far (ops/alloc_counter.h), for measuring
  // allocations per request over loopback; admin only.
  router.Add(Method::kGet, "/debug/allocations", [&ops](Request& req, Responder responder) {
    if (Status s = ops.admin->Check(http::BearerToken(req)); !s.ok()) return responder.Send(http::ErrorResponse(s));
    Response r;
    http::JsonWriter w(r.body);
    w.StartObject();
    w.Key("counting");
    w.Bool(alloc::Counting());
    w.Field("total", static_cast<int64_t>(alloc::Total()));
    w.Field("sqlite", static_cast<int64_t>(alloc::Sqlite()));
    w.Field("own", static_cast<int64_t>(alloc::Own()));
    w.EndObject();
    responder.Send(std::move(r));
  });
}

ReadModelMetrics::ReadModelMetrics(const DomainService& service) {
  auto& r = metrics::Registry::Default();
  metrics::Labels l = {{"model", std::string(service.name())}};
  reloads_ = &r.GetCounter("hotrow_read_model_reloads_total",
                           "Loads of a read model from its store (at start, and after the change listener "
                           "reconnected).",
                           l);
  changed_ns_.store(SteadyNs());
  registrations_.push_back(r.AddCallback("hotrow_read_model_entries",
                                         "Entries in a read model (plans, players, stores).", "gauge", l,
                                         [&service] { return static_cast<double>(service.entries()); }));
  registrations_.push_back(r.AddCallback(
      "hotrow_read_model_last_change_age_seconds",
      "Seconds since a read model last applied a change from another instance, or was loaded.", "gauge", l,
      [this] { return static_cast<double>(SteadyNs() - changed_ns_.load(std::memory_order_relaxed)) / 1e9; }));
}

void ReadModelMetrics::Changed() { changed_ns_.store(SteadyNs(), std::memory_order_relaxed); }

void ReadModelMetrics::Reloaded() {
  reloads_->Add();
  Changed();
}

std::vector<metrics::Registration> RegisterProcessMetrics(const http::Server& server) {
  auto& r = metrics::Registry::Default();
  std::vector<metrics::Registration> out;
  static const double start_time = static_cast<double>(std::time(nullptr));
  out.push_back(
      r.AddCallback("process_resident_memory_bytes", "Resident memory size in bytes.", "gauge", {}, ResidentBytes));
  out.push_back(r.AddCallback("process_open_fds", "Open file descriptors.", "gauge", {}, OpenFds));
  out.push_back(r.AddCallback("process_max_fds", "The open file descriptor limit.", "gauge", {}, [] {
    rlimit rl{};
    getrlimit(RLIMIT_NOFILE, &rl);
    return static_cast<double>(rl.rlim_cur);
  }));
  out.push_back(r.AddCallback("process_start_time_seconds", "Start time of the process since the epoch, in seconds.",
                              "gauge", {}, [] { return start_time; }));
  out.push_back(
      r.AddCallback("process_cpu_seconds_total", "User and system CPU time, in seconds.", "counter", {}, CpuSeconds));
  out.push_back(r.AddCallback("hotrow_build_info", "The release and commit this binary was built from.", "gauge",
                              {{"version", std::string(Version())}, {"commit", std::string(Commit())}},
                              [] { return 1.0; }));
  out.push_back(r.AddCallback("hotrow_http_connections", "Open HTTP connections.", "gauge", {},
                              [&server] { return static_cast<double>(server.connections()); }));
  out.push_back(r.AddCallback("hotrow_http_connections_refused_total", "Connections refused past --max-connections.",
                              "counter", {}, [&server] { return static_cast<double>(server.refused()); }));
  out.push_back(r.AddCallback("hotrow_http_request_body_bytes_in_flight",
                              "Request-body bytes reserved by connections (bounded by --body-memory-mb).", "gauge", {},
                              [&server] { return static_cast<double>(server.body_bytes_in_flight()); }));
  return out;
}

}  // namespace hotrow::cmd
