// What an operator reads from a running server: GET /healthz, /readyz,
// /metrics, /openapi.json (and the admin-only /debug/allocations), plus the
// process metrics. hotrow serve fills Operations as it opens the stores and
// starts the server; the handlers only read it.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "base/auth.h"
#include "base/domain.h"
#include "ops/metrics.h"

namespace hotrow::db::sqlite {
class Database;
}
namespace hotrow::db::pg {
class Pool;
class Listener;
}  // namespace hotrow::db::pg
namespace hotrow::db::redis {
class Client;
}
namespace hotrow::http {
class Router;
class Server;
}  // namespace hotrow::http

namespace hotrow::cmd {

struct Operations {
  const AdminAuth* admin = nullptr;
  const AdminAuth* metrics_auth = nullptr;  // --metrics-token; disabled: /metrics is public
  const http::Server* server = nullptr;     // set once the server exists (before it serves)
  // The SQLite files (the main one, the point card's), each with the inode
  // it had when opened: another one at its path means it was replaced.
  struct SqliteFile {
    db::sqlite::Database* db;
    ino_t inode;
  };
  std::vector<SqliteFile> sqlite;
  db::pg::Pool* pool = nullptr;
  db::redis::Client* redis = nullptr;
  // The change listener (PostgreSQL), set after the server listens and
  // cleared under the mutex before it is destroyed.
  std::mutex listener_mutex;
  db::pg::Listener* listener = nullptr;  // guarded by listener_mutex
  bool follows = false;                  // a listener is expected (PostgreSQL)
};

void AddOperationsRoutes(http::Router& router, Operations& ops);

// The readiness of this instance and the state of what it depends on: the
// body of GET /readyz; `ready` false means 503.
struct Readiness {
  bool ready = true;
  std::string body;
};
Readiness CheckReadiness(Operations& ops);

// A read model's metrics (hotrow_read_model_*{model}): entries, seconds
// since it last applied a change or reload, reloads.
class ReadModelMetrics {
 public:
  explicit ReadModelMetrics(const DomainService& service);
  void Changed();
  void Reloaded();

 private:
  std::atomic<int64_t> changed_ns_{0};
  metrics::Counter* reloads_;
  std::vector<metrics::Registration> registrations_;
};

// process_* and hotrow_build_info, and the server's connection gauges.
std::vector<metrics::Registration> RegisterProcessMetrics(const http::Server& server);

}  // namespace hotrow::cmd
