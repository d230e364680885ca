// The point-card simulator: reproduces the published Tsurugi-vs-PostgreSQL
// experiment of batch and online work at SERIALIZABLE (its tables 8.1-8.6;
// docs/pointcard.md names the post and quotes its figures) against hotrow.
//
// For each parallelism P it starts from the same generated data (a copy of
// one template database), then runs for `duration`:
//   - P online workers, each looping: read a random card; read the stores of
//     a random region and choose one; draw an amount (a charge, or a payment
//     drawn so that most fit the balance); run the point use with the
//     reference's policy (up to 3 tries); wait 100 ms.
//   - one batch loop: wait 10 s, grant over the whole initial history period,
//     repeat; a grant still running when the time is up is not counted.
// Outcomes: OK (committed), REFUSED (insufficient balance: a correct
// answer), NG (failed after 3 tries: error, timeout, 503).
//
// In-process (the default) it calls the same PointCardService the HTTP
// handlers call, on the embedded store or, with `postgres_url`, on
// PostgreSQL (the template is a database created from the generator, and
// each run a CREATE DATABASE ... TEMPLATE copy of it). With `url` it drives
// a running server over HTTP (then it cannot reset the data between
// parallelisms, and says so).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "pointcard/seed.h"

namespace hotrow::tools {

struct SimulationOptions {
  std::vector<int> parallel = {1, 32, 64, 128, 192};
  std::chrono::milliseconds duration{180000};
  pointcard::SeedOptions data;   // generated when no template is given
  std::string template_db;       // an existing database to start from (copied)
  std::string postgres_url;      // run on PostgreSQL: its data lives in databases next to this one
  int db_pool = 16;              // PostgreSQL connections
  int64_t grant_workers = 1;     // PostgreSQL: staging and folding backends per grant
  int64_t grant_fold_chunk = 0;  // cards per fold commit; 0: the store's default
  std::string work_dir;          // where run databases live
  std::chrono::milliseconds think{100};
  std::chrono::milliseconds grant_interval{10000};
  int64_t grant_rate_percent = 1;
  int tries = 3;
  std::string url;          // drive a running server instead
  std::string admin_token;  // for grants over HTTP
  bool store_keys = false;  // over HTTP: pay with a key per store, made with the admin token
  bool progress = true;
  // PostgreSQL only: how grants run. kHotrow: the store's (postgres_store.h).
  // kPlain: the reference's own grant (its section 5.4), one SERIALIZABLE
  // transaction with no lock and no retry. kReadCommitted: the same at
  // READ COMMITTED (its section 8.3.4). Payments are hotrow's in every mode.
  enum class GrantMode { kHotrow, kPlain, kReadCommitted };
  GrantMode grant_mode = GrantMode::kHotrow;
};

// "hotrow", "plain", "read-committed".
const char* GrantModeName(SimulationOptions::GrantMode mode);

// Latency summary in milliseconds, as the reference tabulates it.
struct LatencyStats {
  int64_t count = 0;
  double min = 0, mode = 0, median = 0, mean = 0, variance = 0, max = 0, p99 = 0, p999 = 0;
  int64_t mode_count = 0;
};
LatencyStats Summarize(std::vector<double> ms);

struct GrantRun {
  double total_ms, query_ms, update_ms, commit_ms;  // total: request to answer
  int64_t cards, points;
  double fold_ms = 0;    // writing its history rows after the answer (SQLite)
  double window_ms = 0;  // request to fold end: the window "overlapped a grant" counts
};

struct RunResult {
  int parallel = 0;
  double seconds = 0;
  int64_t ok = 0, refused = 0, ng = 0;
  int64_t retries = 0;
  LatencyStats success_all, success_under_1s, success_over_1s, failures;
  LatencyStats success_outside_grants;  // point uses that overlapped no grant
  LatencyStats success_during_grants;   // ... and those that overlapped one (request to fold end)
  double iteration_mean_ms = 0;         // one iteration without its 100 ms wait
  std::vector<GrantRun> grants;         // completed within the run
  int64_t grants_failed = 0;
  std::string grant_error;     // the first failed grant's error
  int64_t grants_cut_off = 0;  // still running at the end: not counted
  // Storage, in-process only.
  uint64_t checkpoints = 0;
  uint64_t wal_restarts = 0;
  int64_t wal_bytes_largest = 0;
  int64_t db_bytes_end = 0;
  bool invariants_ok = false;
  std::string invariants_report;
};

struct SimulationResult {
  SimulationOptions options;
  std::string machine;
  std::string data_note;  // how each run's data came to be
  std::vector<RunResult> runs;
};

// Runs every parallelism; `progress_line` gets a one-line status now and
// then (nullptr: silent).
Result<SimulationResult> Simulate(const SimulationOptions& options,
                                  const std::function<void(const std::string&)>& progress_line);

}  // namespace hotrow::tools
