#include "cmd/serve_flags.h"

#include <sstream>

#include "cmd/commands.h"
#include "cmd/config.h"
#include "db/redis.h"
#include "db/store_url.h"
#include "leaderboard/rate_limit.h"

namespace hotrow::cmd {

CLI::App* AddServe(CLI::App& app, ServeFlags& f) {
  CLI::App* c = app.add_subcommand("serve", "Serve the HTTP API");
  c->add_option("--host", f.host, "Address to listen on")->envname("HOTROW_HOST")->capture_default_str();
  c->add_option("--port", f.port, "TCP port (0 picks a free one)")
      ->envname("HOTROW_PORT")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  c->add_option("--db", f.db, "Store URL: sqlite:PATH or postgresql://user@host:port/dbname")
      ->envname("HOTROW_DB")
      ->capture_default_str();
  c->add_option("--db-pool", f.db_pool,
                "PostgreSQL connections of this instance for requests (requests beyond wait in a bounded queue; "
                "point grants have 2 x --grant-workers + 1 of their own)")
      ->envname("HOTROW_DB_POOL")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  c->add_option("--redis", f.redis,
                "Keep the leaderboard in Redis (redis://host:port), shared by every instance; "
                "run Redis with appendonly yes, appendfsync always")
      ->envname("HOTROW_REDIS");
  c->add_option("--redis-replica", f.redis_replicas,
                "A replica of --redis (redis://host:port; repeatable, or several separated by commas) that serves "
                "leaderboard pages and friends views "
                "while its measured lag is within --redis-max-lag-ms; this instance's own writes are always seen")
      ->envname("HOTROW_REDIS_REPLICA");
  c->add_option("--redis-max-lag-ms", f.redis_max_lag_ms,
                "A replica serves reads only while its lag behind the master (hotrow:hb, written every 50 ms) is "
                "at most this")
      ->envname("HOTROW_REDIS_MAX_LAG_MS")
      ->check(CLI::Range(20, 60000))
      ->capture_default_str();
  c->add_option("--redis-cache-ms", f.redis_cache_ms,
                "Each board's top 100 is cached per instance for at most this (other instances' changes also clear "
                "it by pub/sub); 0: no cache")
      ->envname("HOTROW_REDIS_CACHE_MS")
      ->check(CLI::Range(0, 10000))
      ->capture_default_str();
  c->add_option("--redis-replica-split", f.redis_replica_split,
                "Benchmark only: send N of every M reads to the replicas whatever their lag (N/M, the reference "
                "post's 4/7); loses read-your-writes")
      ->group("")
      ->check([](const std::string& v) -> std::string {
        int n = 0, m = 0;
        char slash = 0;
        std::istringstream in(v);
        if (in >> n >> slash >> m && slash == '/' && in.peek() == EOF && n >= 0 && m > 0 && n <= m) return "";
        return "--redis-replica-split is N/M with 0 <= N <= M, M > 0";
      });
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
  c->add_option("--body-memory-mb", f.body_memory_mb,
                "Request bodies in flight, all connections together; past it new ones get 503")
      ->envname("HOTROW_BODY_MEMORY_MB")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  c->add_option("--handler-timeout-ms", f.handler_timeout_ms,
                "Every request is answered within this, whatever the stores do (grants excepted)")
      ->envname("HOTROW_HANDLER_TIMEOUT_MS")
      ->check(CLI::Range(100, 600000))
      ->capture_default_str();
  c->add_option("--cors-origin", f.cors_origins,
                "An origin whose browser requests get CORS headers (repeatable; * for any); none by default")
      ->envname("HOTROW_CORS_ORIGIN")
      ->delimiter(',')
      ->check([](const std::string& o) -> std::string {
        if (o == "*" || o.rfind("http://", 0) == 0 || o.rfind("https://", 0) == 0) return "";
        return "an origin is *, or scheme://host[:port] as a browser sends it";
      });
  c->add_option("--shutdown-grace-ms", f.shutdown_grace_ms,
                "On SIGTERM, how long in-flight requests may run before the stores stop under them")
      ->envname("HOTROW_SHUTDOWN_GRACE_MS")
      ->check(CLI::Range(0, 600000))
      ->capture_default_str();
  c->add_option("--drain-delay-ms", f.drain_delay_ms,
                "On SIGTERM, how long /readyz answers 503 while every route is still served, before the server "
                "stops accepting (a second signal skips it)")
      ->envname("HOTROW_DRAIN_DELAY_MS")
      ->check(CLI::Range(0, 600000))
      ->capture_default_str();
  c->add_option("--db-connect-timeout", f.db_connect_timeout_s,
                "Seconds to wait at start for PostgreSQL and Redis to accept connections (0: fail at once)")
      ->envname("HOTROW_DB_CONNECT_TIMEOUT")
      ->check(CLI::Range(0, 3600))
      ->capture_default_str();
  c->add_option("--grant-fold-chunk", f.grant_fold_chunk,
                "Cards per commit when a point grant's credits are folded into history after its answer (0: 1024 on "
                "SQLite, 4096 on PostgreSQL)")
      ->envname("HOTROW_GRANT_FOLD_CHUNK")
      ->check(CLI::Range(int64_t{0}, int64_t{1000000}))
      ->capture_default_str();
  c->add_option("--grant-workers", f.grant_workers,
                "PostgreSQL: backends that stage a point grant, and that fold it, at once on this instance (more "
                "than 1 only on a database server with cores to spare: each takes CPU from the payments)")
      ->envname("HOTROW_GRANT_WORKERS")
      ->check(CLI::Range(int64_t{1}, int64_t{16}))
      ->capture_default_str();
  c->add_option("--sqlite-wal-mb", f.sqlite_wal_mb,
                "SQLite: each file's WAL is started over at this much log in use even without a lull in the writes "
                "(a stall of the writer), and its file is shrunk back to this size; budget the database plus this "
                "per file (it grows further only while readers hold old snapshots)")
      ->envname("HOTROW_SQLITE_WAL_MB")
      ->check(CLI::Range(int64_t{16}, int64_t{65536}))
      ->capture_default_str();
  c->add_option("--metrics-token", f.metrics_token,
                "Bearer token for GET /metrics (none: /metrics is public); not the admin token")
      ->envname("HOTROW_METRICS_TOKEN");
  c->add_option("--access-log", f.access_log, "Access log: a file (appended to), - for stdout, or off")
      ->envname("HOTROW_ACCESS_LOG")
      ->capture_default_str();
  c->add_option("--log-format", f.log_format, "text or json, for the access log and the server's log")
      ->envname("HOTROW_LOG_FORMAT")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  c->add_option("--log-level", f.log_level, "trace, debug, info, warn, error or off")
      ->envname("HOTROW_LOG_LEVEL")
      ->capture_default_str();
  c->add_flag("--require-store-keys", f.require_store_keys,
              "Point uses need 'Authorization: Bearer <store key>' (or the admin token); without, 401. Off by "
              "default; serve on PostgreSQL warns while it is off")
      ->envname("HOTROW_REQUIRE_STORE_KEYS");
  c->add_option("--auth-failures-max", f.auth_failures_max,
                "Failed credentials (401, 403 on any route) from one client within a minute: its requests with "
                "Authorization then get 429 until the minute ends. A client is an address (IPv6: its /64); store "
                "keys from an address count apart, with 10 times the limit (0: never)")
      ->envname("HOTROW_AUTH_FAILURES_MAX")
      ->check(CLI::Range(int64_t{0}, int64_t{1000000}))
      ->capture_default_str();
  c->add_option("--score-rate", f.score_rate,
                "Score posts per ClientId per board on this instance, e.g. 10/s or 600/min (a burst of one second's "
                "worth); past it 429 with Retry-After; off by default")
      ->envname("HOTROW_SCORE_RATE")
      ->check([](const std::string& v) {
        auto r = leaderboard::ParseScoreRate(v);
        return r.ok() ? std::string() : r.status().message();
      })
      ->capture_default_str();
  c->add_option("--secrets-key-file", f.secrets_key_file,
                "File holding the key (64 hex digits, or 32 raw bytes) that boards' HMAC secrets are kept "
                "encrypted under (AES-256-GCM); without it no board may use auth hmac")
      ->envname("HOTROW_SECRETS_KEY_FILE");
  c->add_flag(
       "--test-hooks", f.test_hooks,
       "Accept boards whose seasons last seconds (\"reset\":{\"everySeconds\":N}), for tests; never in production")
      ->envname("HOTROW_TEST_HOOKS");
  c->add_flag("--print-config", f.print_config,
              "Print the settings in effect (flag > environment > --config file > default) and exit");
  c->add_flag("--print-routes", f.print_routes,
              "Print every route (METHOD PATTERN) after opening the stores, and exit (the OpenAPI check uses it)");
  AddConfigFile(*c, f.config);
  return c;
}

Result<std::vector<std::string>> ReplicaUrls(const std::vector<std::string>& values, const std::string& master) {
  std::vector<std::string> urls;
  auto trim = [](std::string_view v) {
    while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
    while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
    return std::string(v);
  };
  for (const std::string& value : values) {
    std::vector<std::string> parts;
    for (size_t start = 0;;) {
      size_t comma = value.find(',', start);
      std::string piece = value.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      std::string trimmed = trim(piece);
      // A piece is part of the URL before it only while that URL's
      // password is still open (no '@' yet) and the piece is not a URL.
      bool in_password = !parts.empty() && parts.back().starts_with("redis://") &&
                         parts.back().find('@') == std::string::npos && !trimmed.starts_with("redis://");
      if (in_password && (trimmed.empty() || value.find('@', start) != std::string::npos))
        parts.back() += "," + piece;
      else
        parts.push_back(trimmed);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    for (std::string& p : parts) {
      p = trim(p);
      if (p.empty())
        return Status::InvalidField("redis-replica",
                                    "--redis-replica has an empty URL in '" + db::RedactUrl(value) + "'");
      auto url = db::redis::ParseUrl(p);
      if (!url.ok())
        return Status::InvalidField("redis-replica",
                                    "--redis-replica must look like redis://host:port, not '" + db::RedactUrl(p) + "'");
      if (!master.empty()) {
        auto m = db::redis::ParseUrl(master);
        if (m.ok() && m->host == url->host && m->port == url->port)
          return Status::InvalidField("redis-replica", "--redis-replica " + db::RedactUrl(p) + " is --redis itself");
      }
      urls.push_back(p);
    }
  }
  return urls;
}

}  // namespace hotrow::cmd
