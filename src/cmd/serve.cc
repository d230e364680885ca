// hotrow serve: wires the stores, services and routes, then serves HTTP
// until SIGTERM/SIGINT.
#include <memory>

#include "cmd/commands.h"
#include "dateplan/routes.h"
#include "dateplan/service.h"
#include "dateplan/sqlite_store.h"
#include "db/sqlite_database.h"
#include "db/store_url.h"
#include "http/json.h"
#include "http/server.h"
#include "leaderboard/redis_store.h"
#include "leaderboard/routes.h"
#include "leaderboard/sqlite_store.h"
#include "pointcard/routes.h"
#include "pointcard/sqlite_store.h"
#include "ops/auth.h"
#include "ops/log.h"

namespace hotrow::cmd {

CLI::App* AddServe(CLI::App& app, ServeFlags& f) {
  CLI::App* c = app.add_subcommand("serve", "Serve the HTTP API");
  c->add_option("--host", f.host, "Address to listen on")->envname("HOTROW_HOST")->capture_default_str();
  c->add_option("--port", f.port, "TCP port (0 picks a free one)")
      ->envname("HOTROW_PORT")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  c->add_option("--db", f.db, "Store URL: sqlite:PATH")->envname("HOTROW_DB")->capture_default_str();
  c->add_option("--redis", f.redis,
                "Keep the leaderboard in Redis (redis://host:port), shared by every instance; "
                "run Redis with appendonly yes, appendfsync always")
      ->envname("HOTROW_REDIS");
  c->add_option("--threads", f.threads, "Event-loop threads (0: one per core)")
      ->envname("HOTROW_THREADS")
      ->check(CLI::Range(0, 256))
      ->capture_default_str();
  c->add_option("--max-connections", f.max_connections, "Open connections at most; past it new ones get 503")
      ->envname("HOTROW_MAX_CONNECTIONS")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  c->add_option("--admin-token", f.admin_token, "Bearer token for admin actions (none: admin actions answer 403)")
      ->envname("HOTROW_ADMIN_TOKEN");
  c->add_option("--request-timeout-ms", f.request_timeout_ms,
                "A request must arrive within this time, and an idle connection is closed after it")
      ->envname("HOTROW_REQUEST_TIMEOUT_MS")
      ->check(CLI::Range(100, 3600000))
      ->capture_default_str();
  c->add_option("--log-level", f.log_level, "trace, debug, info, warn, error or off")
      ->envname("HOTROW_LOG_LEVEL")
      ->capture_default_str();
  return c;
}

namespace {

void AddHealth(http::Router& router) {
  router.Add(http::Method::kGet, "/healthz", [](http::Request&, http::Responder responder) {
    http::Response r;
    r.body = R"({"status":"ok"})";
    responder.Send(std::move(r));
  });
}

}  // namespace

int RunServe(const ServeFlags& f) {
  if (!log::SetLevel(f.log_level)) {
    log::Error("--log-level must be one of trace, debug, info, warn, error, off");
    return 2;
  }
  auto url = db::ParseStoreUrl(f.db);
  if (!url.ok()) {
    log::Error("{}", url.status().message());
    return 2;
  }
  if (url->kind != db::StoreUrl::Kind::kSqlite) {
    log::Error("--db {}: the PostgreSQL backend is not available in this build yet; use sqlite:PATH", f.db);
    return 2;
  }

  db::DatabaseOptions db_options;
  // Every allowed connection may have one write waiting, plus headroom.
  db_options.writer.queue_ops_max = static_cast<size_t>(f.max_connections) + 1024;
  auto database = db::SqliteDatabase::Open(url->sqlite_path, db_options);
  if (!database.ok()) {
    log::Error("{}", database.status().message());
    return 1;
  }
  db::SqliteDatabase& sqlite_db = **database;

  AdminAuth admin(f.admin_token);
  auto plan_store = dateplan::SqliteDatePlanStore::Open(sqlite_db);
  if (!plan_store.ok()) {
    log::Error("date plans: {}", plan_store.status().ToString());
    return 1;
  }
  auto card_store = pointcard::SqlitePointCardStore::Open(sqlite_db);
  if (!card_store.ok()) {
    log::Error("point card: {}", card_store.status().ToString());
    return 1;
  }

  std::unique_ptr<leaderboard::LeaderboardStore> board;
  leaderboard::SqliteLeaderboardStore* sqlite_board = nullptr;
  if (f.redis.empty()) {
    auto store = leaderboard::SqliteLeaderboardStore::Open(sqlite_db);
    if (!store.ok()) {
      log::Error("leaderboard: {}", store.status().ToString());
      return 1;
    }
    sqlite_board = store->get();
    board = std::move(store).value();
  } else {
    db::RedisOptions redis_options;
    redis_options.queue_commands_max = static_cast<size_t>(f.max_connections) + 1024;
    auto store = leaderboard::RedisLeaderboardStore::Open(f.redis, redis_options);
    if (!store.ok()) {
      log::Error("leaderboard: {}", store.status().message());
      return 1;
    }
    auto count = (*store)->Count();
    log::Info("leaderboard: on Redis at {} ({} player(s))", f.redis, count.ok() ? *count : -1);
    board = std::move(store).value();
  }

  sqlite_db.writer().Start();
  dateplan::DatePlanService plans(**plan_store, admin);
  if (Status s = plans.Load(); !s.ok()) {
    log::Error("date plans: cannot load: {}", s.ToString());
    return 1;
  }
  pointcard::PointCardService cards(**card_store);
  if (Status s = cards.Load(); !s.ok()) {
    log::Error("point card: cannot load: {}", s.ToString());
    return 1;
  }
  if (sqlite_board) {
    if (Status s = sqlite_board->Load(); !s.ok()) {
      log::Error("leaderboard: cannot load: {}", s.ToString());
      return 1;
    }
  }

  http::Router router;
  AddHealth(router);
  dateplan::AddRoutes(router, plans);
  leaderboard::AddRoutes(router, *board, admin);
  pointcard::AddRoutes(router, cards, admin);

  http::ServerOptions options;
  options.host = f.host;
  options.port = static_cast<uint16_t>(f.port);
  options.threads = f.threads;
  options.connections_max = f.max_connections;
  options.request_timeout = std::chrono::milliseconds(f.request_timeout_ms);
  http::Server server(options, [&router](http::Request& req, http::Responder res) {
    router.Dispatch(req, std::move(res));
  });
  if (Status s = server.Listen(); !s.ok()) {
    log::Error("{}", s.message());
    return 1;
  }
  log::Info("hotrow listening on http://{}:{} (threads={}, db={}, admin={})", f.host, server.port(),
            server.threads(), f.db, admin.enabled() ? "on" : "off");
  server.Run([&] {
    sqlite_db.writer().Stop();
    auto stats = sqlite_db.writer().stats();
    log::Info("writer flushed: {} op(s) in {} batch(es), largest batch {}", stats.ops, stats.batches,
              stats.batch_ops_largest);
  });
  log::Info("hotrow stopped");
  return 0;
}

}  // namespace hotrow::cmd
