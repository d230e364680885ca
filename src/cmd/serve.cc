// hotrow serve: wires the stores, services and routes, then serves HTTP
// until SIGTERM/SIGINT.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include <systemd/sd-daemon.h>

#include "base/auth.h"
#include "base/crypto.h"
#include "base/domain.h"
#include "base/text.h"
#include "cmd/commands.h"
#include "cmd/config.h"
#include "cmd/operations.h"
#include "cmd/serve_flags.h"
#include "dateplan/postgres_store.h"
#include "dateplan/routes.h"
#include "dateplan/service.h"
#include "dateplan/sqlite_store.h"
#include "db/postgres.h"
#include "db/redis.h"
#include "db/sqlite_database.h"
#include "db/store_url.h"
#include "http/access_log.h"
#include "http/echo.h"
#include "http/errors.h"
#include "http/json.h"
#include "http/server.h"
#include "leaderboard/postgres_store.h"
#include "leaderboard/redis_store.h"
#include "leaderboard/routes.h"
#include "leaderboard/service.h"
#include "leaderboard/sqlite_store.h"
#include "ops/alloc_counter.h"
#include "ops/log.h"
#include "pointcard/postgres_store.h"
#include "pointcard/routes.h"
#include "pointcard/service.h"
#include "pointcard/sqlite_file.h"
#include "pointcard/sqlite_store.h"

namespace hotrow::cmd {

namespace {

// sd_notify(3) when systemd started us with Type=notify (NOTIFY_SOCKET
// set); nothing otherwise.
void Notify(const std::string& state) {
  int r = sd_notify(0, state.c_str());
  if (r < 0) log::Warn("sd_notify: {}", std::strerror(-r));
}

}  // namespace

namespace {

// The key of --secrets-key-file: 64 hex digits (a trailing newline allowed)
// or 32 raw bytes. A file others may read is refused: whoever reads it can
// open every board's secret from the database.
Result<std::string> ReadSecretsKey(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return Status::InvalidField("secrets-key-file", path + ": " + std::strerror(errno));
  if ((st.st_mode & 077) != 0)
    return Status::InvalidField("secrets-key-file", path + " may be read by others (chmod 600 it)");
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) return Status::InvalidField("secrets-key-file", path + ": " + std::strerror(errno));
  std::string text(256, '\0');
  text.resize(std::fread(text.data(), 1, text.size(), file));
  std::fclose(file);
  std::string line = text;
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  if (auto key = line.size() == 2 * kSealKeyBytes ? HexDecode(line) : std::nullopt) return *key;
  // 32 raw bytes, but not 32 characters of text (a short passphrase, or 16
  // bytes in hex, would pass for a key of far fewer bits).
  bool all_text = std::all_of(text.begin(), text.end(), [](char c) { return c >= 0x20 && c < 0x7F; });
  if (text.size() == kSealKeyBytes && !all_text) return text;
  return Status::InvalidField("secrets-key-file",
                              path + " must hold 64 hex digits (openssl rand -hex 32) or 32 random bytes");
}

// Every store the server uses, on whichever backend --db and --redis name,
// and the services over them: serve holds interfaces only.
//
// Start-up, written once (RunServe): open the backend and the stores
// (schemas, migrations), start the SQLite writer, Load every service,
// listen, then follow the other instances (last: the listener calls into
// the services).
//
// Teardown, written once (RunServe calls StopWorkSources from the server's
// before_stop, then everything is destroyed as it returns):
//   1. The HTTP server stops accepting and lets in-flight requests finish
//      for the grace period (http::Server::Run).
//   2. StopWorkSources, while the event loops still deliver responses:
//      stop following other instances (the listener calls into the
//      services); Stop every service, last started first (a running grant
//      answers: it needs the writer or the pool; queued PostgreSQL likes
//      commit; the Redis client fails what it holds); then stop the SQLite
//      writer or the PostgreSQL pool. Each answers or fails what it holds,
//      so no handler is left to answer later.
//   3. Server::Run waits for those last responses, then stops the loops.
//   4. RunServe returns: the server, then these members are destroyed
//      (bottom-up); nothing calls into a destroyed object because every
//      thread that could was stopped in step 2.
struct Backends {
  std::unique_ptr<db::sqlite::Database> sqlite;       // the main file, holding the lock
  std::unique_ptr<db::sqlite::Database> card_sqlite;  // PATH.pointcard.db (pointcard/sqlite_file.h)
  std::unique_ptr<db::pg::Pool> pool;
  std::unique_ptr<dateplan::DatePlanStore> plan_store;
  std::unique_ptr<leaderboard::LeaderboardStore> board_store;
  std::unique_ptr<pointcard::PointCardStore> card_store;
  std::unique_ptr<dateplan::DatePlanService> plans;
  std::unique_ptr<leaderboard::LeaderboardService> board;
  std::unique_ptr<pointcard::PointCardService> cards;
  std::unique_ptr<db::pg::Listener> listener;
  std::vector<std::unique_ptr<ReadModelMetrics>> models;  // one per service, in services() order
  db::redis::Client* redis = nullptr;                     // the leaderboard store's, when on Redis
  Operations* ops = nullptr;                              // clears its listener pointer before the listener goes
  bool stopped = false;

  ~Backends() {
    StopWorkSources();
    models.clear();
    cards.reset();
    board.reset();
    plans.reset();
    card_store.reset();
    board_store.reset();
    plan_store.reset();
    pool.reset();
    card_sqlite.reset();
    sqlite.reset();  // last: it holds the lock over both files
  }

  // In start-up order.
  std::vector<DomainService*> services() const { return {plans.get(), board.get(), cards.get()}; }

  void StopWorkSources() {
    if (stopped) return;
    stopped = true;
    if (ops) {
      std::lock_guard lock(ops->listener_mutex);
      ops->listener = nullptr;
    }
    listener.reset();
    auto all = services();
    for (auto it = all.rbegin(); it != all.rend(); ++it)
      if (*it) (*it)->Stop();
    for (db::sqlite::Database* d : {sqlite.get(), card_sqlite.get()}) {
      if (!d) continue;
      d->writer().Stop();
      auto stats = d->writer().stats();
      log::Info("writer flushed: {} op(s) in {} batch(es), largest batch {} ({})", stats.ops, stats.batches,
                stats.batch_ops_largest, d->writer().name());
    }
    if (pool) pool->Stop();
  }
};

// Whether a failed connection attempt may succeed later without anyone
// changing the settings: the server is not up yet (compose starts every
// container at once), or not resolvable yet. A refused password or an
// unknown database is not worth waiting for.
bool MayComeUp(const Status& s) {
  if (s.code() != ErrorCode::kUnavailable) return false;
  static const char* const kTransient[] = {"Connection refused",
                                           "No such file or directory",
                                           "could not translate host name",
                                           "Name or service not known",
                                           "Temporary failure in name resolution",
                                           "the database system is starting up",
                                           "the database system is shutting down",
                                           "the database system is in recovery mode",
                                           "the database system is not yet accepting connections",
                                           "too many clients already",
                                           "Server closed the connection",
                                           "timeout expired",
                                           "Connection timed out",
                                           "No route to host",
                                           "Network is unreachable",
                                           "server closed the connection unexpectedly",
                                           "Connection reset by peer",
                                           "LOADING"};
  std::string text = s.message() + " " + s.detail();
  for (const char* t : kTransient)
    if (text.find(t) != std::string::npos) return true;
  return false;
}

// Calls `open` until it succeeds, fails for good, or --db-connect-timeout
// passes (hotrow waits for its dependencies instead of exiting: Debian's
// podman-compose ignores depends_on's service_healthy).
template <typename T>
Result<T> WaitFor(const ServeFlags& f, const char* what, const std::function<Result<T>()>& open) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(f.db_connect_timeout_s);
  auto pause = std::chrono::milliseconds(250);
  bool said = false;
  for (;;) {
    Result<T> r = open();
    if (r.ok() || !MayComeUp(r.status()) || std::chrono::steady_clock::now() + pause > deadline) return r;
    if (!said)
      log::Warn("{} is not reachable yet; waiting up to {} s (--db-connect-timeout): {}", what, f.db_connect_timeout_s,
                r.status().ToString());
    said = true;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(2000));
  }
}

template <typename T, typename Base>
bool Take(Result<std::unique_ptr<T>> r, std::unique_ptr<Base>* out, const char* what) {
  if (!r.ok()) {
    log::Error("{}: {}", what, r.status().ToString());
    return false;
  }
  *out = std::move(r).value();
  return true;
}

// The embedded store: the main SQLite file and the point card's beside it,
// each with its own writer (pointcard/sqlite_file.h).
bool OpenSqlite(const ServeFlags& f, const std::string& path, Backends& b) {
  db::sqlite::DatabaseOptions options;
  // Every allowed connection may have one write waiting, plus headroom.
  options.writer.queue_ops_max = static_cast<size_t>(f.max_connections) + 1024;
  // Half the handler bound in the queue at most: a batch takes milliseconds,
  // so the answer (written, or definitely not) comes well inside it.
  options.writer.op_wait_max = std::chrono::milliseconds(f.handler_timeout_ms / 2);
  db::sqlite::ScaleWal(options, f.sqlite_wal_mb << 20);
  if (!Take(db::sqlite::Database::Open(path, options), &b.sqlite, "database")) return false;
  // First: it moves the point card out of a file an older release wrote.
  if (!Take(pointcard::OpenPointCardDatabase(*b.sqlite, options), &b.card_sqlite, "point card")) return false;
  if (!Take(dateplan::SqliteDatePlanStore::Open(*b.sqlite), &b.plan_store, "date plans")) return false;
  pointcard::SqlitePointCardOptions card_options;
  if (f.grant_fold_chunk > 0) card_options.fold_chunk = f.grant_fold_chunk;
  if (!Take(pointcard::SqlitePointCardStore::Open(*b.card_sqlite, card_options), &b.card_store, "point card"))
    return false;
  if (f.redis.empty() && !Take(leaderboard::SqliteLeaderboardStore::Open(*b.sqlite), &b.board_store, "leaderboard"))
    return false;
  b.sqlite->writer().Start();
  b.card_sqlite->writer().Start();
  return true;
}

// PostgreSQL: a bounded pool shared by every store.
bool OpenPostgres(const ServeFlags& f, const std::string& url, Backends& b) {
  db::pg::PoolOptions options;
  options.url = url;
  options.size = f.db_pool;
  options.queue_max = static_cast<size_t>(f.max_connections) + 1024;
  // The bounds under --handler-timeout-ms (H): at most 0.3 H waiting for a
  // connection, 0.7 H for a statement (lock waits included: a payment may
  // wait for a fold chunk's row locks, milliseconds). PostgreSQL aborts first, so the
  // 503 is definite; grants lift it (SET LOCAL), and so do start-up and
  // reloads (Pool::Run).
  int64_t h = f.handler_timeout_ms;
  options.queue_wait_max = std::chrono::milliseconds(h * 3 / 10);
  options.statement_timeout = std::chrono::milliseconds(h * 7 / 10);
  options.on_connect = [](db::pg::Connection& c) { return c.Exec("SET application_name = 'hotrow'"); };
  if (!Take(WaitFor<std::unique_ptr<db::pg::Pool>>(f, "PostgreSQL", [&] { return db::pg::Pool::Open(options); }),
            &b.pool, "PostgreSQL"))
    return false;
  if (!Take(dateplan::PostgresDatePlanStore::Open(*b.pool, options.queue_max), &b.plan_store, "date plans"))
    return false;
  pointcard::PostgresPointCardOptions card_options;
  if (f.grant_fold_chunk > 0) card_options.fold_chunk = f.grant_fold_chunk;
  card_options.fold_workers = card_options.stage_workers = f.grant_workers;
  card_options.lane = options;  // the grant's own connections
  if (!Take(pointcard::PostgresPointCardStore::Open(*b.pool, card_options), &b.card_store, "point card")) return false;
  if (f.redis.empty() && !Take(leaderboard::PostgresLeaderboardStore::Open(*b.pool), &b.board_store, "leaderboard"))
    return false;
  log::Info("PostgreSQL: pool of {} connection(s), and {} for grants", f.db_pool, pointcard::LaneSize(card_options));
  return true;
}

bool OpenRedisBoard(const ServeFlags& f, Backends& b) {
  db::redis::Options options;
  options.queue_commands_max = static_cast<size_t>(f.max_connections) + 1024;
  leaderboard::RedisReads reads{
      .replicas = {.urls = ReplicaUrls(f.redis_replicas).value(), .max_lag_ms = f.redis_max_lag_ms},
      .cache_ms = f.redis_cache_ms};
  if (!f.redis_replica_split.empty()) {
    char slash = 0;
    std::istringstream(f.redis_replica_split) >> reads.replicas.split >> slash >> reads.replicas.split_of;
    log::Warn("--redis-replica-split {}: reads go to replicas whatever their lag; a client may not see its own write",
              f.redis_replica_split);
  }
  auto store = WaitFor<std::unique_ptr<leaderboard::RedisLeaderboardStore>>(
      f, "Redis", [&] { return leaderboard::RedisLeaderboardStore::Open(f.redis, options, reads); });
  if (!store.ok()) {
    log::Error("leaderboard: {}", store.status().ToString());
    return false;
  }
  auto count = (*store)->Count();
  log::Info("leaderboard: on Redis at {} ({} player(s)); {} replica(s) for reads", db::RedactUrl(f.redis),
            count.ok() ? *count : -1, f.redis_replicas.size());
  b.redis = &(*store)->client();
  b.board_store = std::move(store).value();
  return true;
}

// Follows the changes other instances make on PostgreSQL: every service
// whose store has a change feed, on its channel.
void FollowPostgres(const std::string& url, Backends& b) {
  std::vector<std::string> channels;
  for (DomainService* s : b.services())
    if (s->channel()) channels.push_back(s->channel());
  if (channels.empty()) return;
  // A change that cannot be applied (say, its re-read failed) is not
  // dropped: the listener reconnects and reloads (db/postgres.h, Listener).
  auto on_notify = [&b](const std::string& channel, const std::string& payload) -> Status {
    auto all = b.services();
    for (size_t i = 0; i < all.size(); ++i) {
      if (!all[i]->channel() || channel != all[i]->channel()) continue;
      Status s = all[i]->Follow(payload);
      if (s.ok()) b.models[i]->Changed();
      return s;
    }
    return Status::Ok();
  };
  // Notifications sent while the listener was away are lost: reload, and
  // the listener retries until the reload succeeds.
  auto on_connect = [&b]() -> Status {
    auto all = b.services();
    for (size_t i = 0; i < all.size(); ++i)
      if (all[i]->channel()) {
        if (Status st = all[i]->Load(); !st.ok()) return st;
        b.models[i]->Reloaded();
      }
    return Status::Ok();
  };
  auto listener = db::pg::Listener::Start(url, channels, on_notify, on_connect);
  if (listener.ok()) {
    b.listener = std::move(listener).value();
    std::lock_guard lock(b.ops->listener_mutex);
    b.ops->listener = b.listener.get();
  } else
    log::Warn("cannot follow other instances: {}", listener.status().ToString());
}

}  // namespace

int RunServe(const ServeFlags& f) {
  if (!log::SetLevel(f.log_level)) {
    log::Error("--log-level must be one of trace, debug, info, warn, error, off");
    return 2;
  }
  if (f.log_format == "json") log::UseJson();
  if (f.redis.empty() && (!f.redis_replicas.empty() || !f.redis_replica_split.empty())) {
    log::Error("--redis-replica and --redis-replica-split need --redis (the master)");
    return 2;
  }
  if (!f.redis_replica_split.empty() && f.redis_replicas.empty()) {
    log::Error("--redis-replica-split needs at least one --redis-replica");
    return 2;
  }
  if (auto urls = ReplicaUrls(f.redis_replicas, f.redis); !urls.ok()) {
    log::Error("{}", urls.status().message());
    return 2;
  }
  auto url = db::ParseStoreUrl(f.db);
  if (!url.ok()) {
    log::Error("{}", url.status().message());
    return 2;
  }
  // Declared first, destroyed last: requests write to it until the event
  // loops stop.
  std::unique_ptr<http::AccessLog> access_log;
  if (f.access_log != "off") {
    auto opened = http::AccessLog::Open(
        f.access_log, f.log_format == "json" ? http::AccessLog::Format::kJson : http::AccessLog::Format::kText);
    if (!opened.ok()) {
      log::Error("{}", opened.status().message());
      return 2;
    }
    access_log = std::move(opened).value();
  }
  if (NamedCredentialId(f.admin_token) || NamedCredentialId(f.metrics_token)) {
    // The throttle counts such a credential apart, with a larger limit
    // (http::AuthThrottleClient): a token of that shape could be guessed
    // faster.
    log::Error("--admin-token and --metrics-token must not have a store key's shape (<16 hex>.<64 hex>)");
    return 2;
  }
  AdminAuth admin(f.admin_token);  // before b: the services keep a reference
  AdminAuth metrics_auth(f.metrics_token, "metrics token");
  Operations ops;  // before b: b clears its listener pointer
  ops.admin = &admin;
  ops.metrics_auth = &metrics_auth;
  Backends b;
  b.ops = &ops;
  bool postgres = url->kind == db::StoreUrl::Kind::kPostgres;
  if (!(postgres ? OpenPostgres(f, url->postgres_url, b) : OpenSqlite(f, url->sqlite_path, b))) return 1;
  if (!f.redis.empty() && !OpenRedisBoard(f, b)) return 1;
  for (db::sqlite::Database* d : {b.sqlite.get(), b.card_sqlite.get()}) {
    if (!d) continue;
    struct stat st {};
    ops.sqlite.push_back({d, ::stat(d->path().c_str(), &st) == 0 ? st.st_ino : 0});
  }
  ops.pool = b.pool.get();
  ops.redis = b.redis;
  ops.follows = postgres;

  b.plans = std::make_unique<dateplan::DatePlanService>(*b.plan_store, admin);
  std::string secrets_key;
  if (!f.secrets_key_file.empty()) {
    auto key = ReadSecretsKey(f.secrets_key_file);
    if (!key.ok()) {
      log::Error("--secrets-key-file: {}", key.status().message());
      return 1;
    }
    secrets_key = std::move(*key);
  }
  b.board = std::make_unique<leaderboard::LeaderboardService>(
      *b.board_store, leaderboard::LeaderboardOptions{.test_hooks = f.test_hooks,
                                                      .score_rate = leaderboard::ParseScoreRate(f.score_rate).value(),
                                                      .secrets_key = std::move(secrets_key)});
  b.cards = std::make_unique<pointcard::PointCardService>(*b.card_store);
  b.cards->set_as_of_settle_us(int64_t{f.handler_timeout_ms} * 1000);
  for (DomainService* s : b.services()) {
    if (Status st = s->Load(); !st.ok()) {
      log::Error("{}: cannot load: {}", s->name(), st.ToString());
      return 1;
    }
    b.models.push_back(std::make_unique<ReadModelMetrics>(*s));
  }

  http::Router router;
  AddOperationsRoutes(router, ops);
  http::AddEchoRoute(router);
  dateplan::AddRoutes(router, *b.plans);
  leaderboard::AddRoutes(router, *b.board, admin);
  pointcard::AddRoutes(router, *b.cards, admin, {.require_store_keys = f.require_store_keys});
  if (postgres && !f.require_store_keys)
    log::Warn(
        "--require-store-keys is off: anyone who reaches this server can spend from any card; give each store "
        "terminal a key (POST /api/v1/stores/{{id}}/keys) and turn it on");
  if (f.print_routes) {
    for (const auto& [method, pattern] : router.Routes())
      std::printf("%s %s\n", std::string(http::MethodName(method)).c_str(), pattern.c_str());
    return 0;
  }

  // Guessing credentials, on every route (http/server.h): outlives the server.
  AuthFailureThrottle auth_throttle(f.auth_failures_max, std::chrono::minutes(1));
  http::ServerOptions options;
  if (f.auth_failures_max > 0) options.auth_throttle = &auth_throttle;
  options.host = f.host;
  options.port = static_cast<uint16_t>(f.port);
  options.threads = f.threads;
  options.connections_max = f.max_connections;
  options.request_timeout = std::chrono::milliseconds(f.request_timeout_ms);
  options.cors_origins = f.cors_origins;
  options.shutdown_timeout_max = std::chrono::milliseconds(f.shutdown_grace_ms);
  options.drain_delay = std::chrono::milliseconds(f.drain_delay_ms);
  options.on_drain = [] { Notify("STOPPING=1\nSTATUS=draining"); };
  // The stores are loaded, the port is open and SIGTERM drains: systemd may
  // send traffic. (Sent before Run installed its signal handling, a SIGTERM
  // right after READY=1 killed the process undrained: the systemd test saw
  // it once under make test's load.)
  std::string ready_status;  // the port, once Listen has bound it
  options.on_ready = [&ready_status] { Notify("READY=1\nSTATUS=serving on port " + ready_status); };
  options.handler_timeout = std::chrono::milliseconds(f.handler_timeout_ms);
  options.body_bytes_in_flight_max = static_cast<size_t>(f.body_memory_mb) * 1024 * 1024;
  http::Server server(options,
                      [&router](http::Request& req, http::Responder res) { router.Dispatch(req, std::move(res)); });
  ops.server = &server;
  auto process_metrics = RegisterProcessMetrics(server);
  if (Status s = server.Listen(); !s.ok()) {
    log::Error("{}", s.message());
    return 1;
  }
  // Last before serving: from here on only StopWorkSources ends the
  // listener, before the services it calls are destroyed.
  if (postgres) FollowPostgres(url->postgres_url, b);
  http::AccessLog::SetActive(access_log.get());
  ready_status = std::to_string(server.port());
  log::Info("hotrow listening on http://{}:{} (threads={}, db={}, admin={}, access log={})", f.host, server.port(),
            server.threads(), postgres ? "postgresql" : f.db, admin.enabled() ? "on" : "off", f.access_log);
  if (!server.Run([&b] { b.StopWorkSources(); })) {
    // Some handler still holds a connection whose worker would be freed
    // under it. Everything acknowledged is committed (the writer and the
    // pool stopped in StopWorkSources): leave without destructors.
    log::Error("hotrow stopped with requests still held; exiting without cleanup");
    log::Flush();
    std::_Exit(1);
  }
  http::AccessLog::SetActive(nullptr);
  if (access_log && !access_log->Close(std::chrono::seconds(2))) {
    // Its destination does not take lines (a pipe nobody reads): exit
    // without waiting for it; everything acknowledged is committed.
    log::Warn("the access log could not be written out within 2 s; its last lines are lost");
    (void)access_log.release();
    // Not through exit(): it would flush stdout, whose lock the stuck
    // writer holds.
    log::Info("hotrow stopped");
    log::Flush();
    std::_Exit(0);
  }
  log::Info("hotrow stopped");
  return 0;
}

}  // namespace hotrow::cmd
