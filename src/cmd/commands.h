// The hotrow subcommands. Each Add* registers its options on the CLI11 app
// and returns the subcommand; Run* is called when it was chosen and returns
// the process exit status.
#pragma once

#include <CLI/CLI.hpp>

namespace hotrow::cmd {

struct ServeFlags {
  std::string host = "0.0.0.0";
  int port = 8080;
  std::string db = "sqlite:data/hotrow.db";
  std::string redis;
  std::vector<std::string> redis_replicas;  // --redis-replica, repeatable
  int redis_max_lag_ms = 100;
  int redis_cache_ms = 100;
  std::string redis_replica_split;  // benchmark only: "N/M" of reads to replicas, whatever their lag
  int db_pool = 4;
  int threads = 0;
  int max_connections = 10000;
  std::string admin_token;
  int request_timeout_ms = 30000;
  int handler_timeout_ms = 10000;
  int body_memory_mb = 64;
  std::string log_level = "info";
  std::vector<std::string> cors_origins;
  int shutdown_grace_ms = 15000;
  int drain_delay_ms = 5000;
  int db_connect_timeout_s = 60;
  int64_t grant_fold_chunk = 0;  // 0: the store's default
  int64_t grant_workers = 1;     // PostgreSQL: backends staging, and folding, one grant
  int64_t sqlite_wal_mb = 1024;  // SQLite: the log in use at which the WAL is started over, lull or not
  std::string metrics_token;
  std::string access_log = "off";
  std::string log_format = "text";
  bool print_config = false;
  bool test_hooks = false;          // boards with seasons of seconds (tests)
  std::string score_rate = "off";   // leaderboard posts per ClientId per board (--score-rate)
  std::string secrets_key_file;     // the key boards' HMAC secrets are sealed with (--secrets-key-file)
  bool require_store_keys = false;  // point uses need a store key or the admin token
  int64_t auth_failures_max = 30;   // failed credentials per address per minute before 429
  bool print_routes = false;
  std::string config;  // read before parsing (cmd/config.h)
};
CLI::App* AddServe(CLI::App& app, ServeFlags& flags);
int RunServe(const ServeFlags& flags);

struct SeedFlags {
  std::string what;
  std::string db = "sqlite:data/hotrow.db";
  std::string redis;
  int64_t count = 100000;
  int64_t clients = 10000;
  int64_t cards = 1000000;
  int64_t stores = 10000;
  int64_t history = 1000000;
  uint64_t seed = 42;
  bool if_empty = false;
  bool replace = false;
};
CLI::App* AddSeed(CLI::App& app, SeedFlags& flags);
int RunSeed(const SeedFlags& flags);

struct CheckFlags {
  std::string what;
  std::string db = "sqlite:data/hotrow.db";
  int64_t sample_cards = 0;  // 0: every card
  std::string for_duration;  // empty: one snapshot
  std::string every = "200ms";
};
// "180s", "3m", "500ms", or plain seconds, rounded to a millisecond; false
// for anything else, under 1 ms (0 when zero_allowed) or over 30 days.
inline constexpr double kDurationMsMax = 30.0 * 24 * 3600 * 1000;
bool ParseDuration(const std::string& text, std::chrono::milliseconds* out, bool zero_allowed = false);
CLI::App* AddCheck(CLI::App& app, CheckFlags& flags);
int RunCheck(const CheckFlags& flags);

struct GrantFlags {
  std::string url = "http://127.0.0.1:8080";
  std::string from;
  std::string to;
  int rate_percent = 1;
  std::string admin_token;
  std::string idempotency_key;
  bool allow_overlap = false;
};
CLI::App* AddGrant(CLI::App& app, GrantFlags& flags);
int RunGrant(const GrantFlags& flags);

struct SimulateFlags {
  std::string what;
  std::string parallel = "1,32,64,128,192";
  std::string duration = "180s";
  std::string db;
  int64_t cards = 1000000;
  int64_t stores = 10000;
  int64_t history = 1000000;
  uint64_t seed = 42;
  std::string grant_interval = "10s";
  int rate_percent = 1;
  std::string url;
  std::string admin_token;
  bool store_keys = false;
  int db_pool = 16;
  int64_t grant_workers = 1;
  int64_t grant_fold_chunk = 0;
  std::string grant_mode = "hotrow";
  std::string work_dir = "data/simulation";
  std::string out = "data/simulation/report";
  bool quick = false;
};
CLI::App* AddSimulate(CLI::App& app, SimulateFlags& flags);
int RunSimulate(const SimulateFlags& flags);

struct BackupFlags {
  std::string db = "sqlite:data/hotrow.db";
  std::string out;
};
CLI::App* AddBackup(CLI::App& app, BackupFlags& flags);
int RunBackup(const BackupFlags& flags);

struct ProbeFlags {
  std::string url;
  int timeout_ms = 2000;
};
CLI::App* AddProbe(CLI::App& app, ProbeFlags& flags);
int RunProbe(const ProbeFlags& flags);

}  // namespace hotrow::cmd
