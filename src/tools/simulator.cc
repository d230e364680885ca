#include "tools/simulator.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "base/await.h"
#include "db/postgres.h"
#include "db/sqlite_database.h"
#include "http/client.h"
#include "http/json.h"
#include "ops/log.h"
#include "pointcard/check.h"
#include "pointcard/postgres_store.h"
#include "pointcard/service.h"
#include "pointcard/sqlite_file.h"
#include "pointcard/sqlite_store.h"
#include "tools/sim_clients.h"

namespace hotrow::tools {

// The simulator drives the point-card domain from outside, as a client would.
using namespace hotrow::pointcard;

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

LatencyStats Summarize(std::vector<double> ms) {
  LatencyStats s;
  s.count = static_cast<int64_t>(ms.size());
  if (ms.empty()) return s;
  std::sort(ms.begin(), ms.end());
  s.min = ms.front();
  s.max = ms.back();
  s.median = ms[ms.size() / 2];
  auto rank = [&](double q) {
    return ms[std::min(ms.size() - 1,
                       static_cast<size_t>(std::max(1.0, std::ceil(q * static_cast<double>(ms.size())))) - 1)];
  };
  s.p99 = rank(0.99);
  s.p999 = rank(0.999);
  double sum = 0;
  for (double v : ms) sum += v;
  s.mean = sum / static_cast<double>(ms.size());
  double sq = 0;
  for (double v : ms) sq += (v - s.mean) * (v - s.mean);
  s.variance = sq / static_cast<double>(ms.size());
  // Mode over whole milliseconds; the first on a tie, as in the reference.
  std::map<int64_t, int64_t> buckets;
  for (double v : ms) ++buckets[static_cast<int64_t>(v)];
  for (const auto& [bucket, n] : buckets)
    if (n > s.mode_count) s.mode = static_cast<double>(bucket), s.mode_count = n;
  return s;
}

namespace {

using sim::HttpSimClient;
using sim::InProcessClient;
using sim::ReferenceGrantClient;
using sim::SimClient;
using sim::StoreKeyRing;

// A point use, timed.
struct Sample {
  Clock::time_point start;
  double ms;
  enum { kOk, kRefused, kNg } outcome;
};

struct Shared {
  // Makes the payments' idempotency keys unique across runs on one server.
  const uint64_t run_nonce = std::random_device{}();
  std::atomic<bool> stop{false};
  std::atomic<int64_t> ok{0}, refused{0}, ng{0}, retries{0}, grants{0};
  std::atomic<int> ng_logged{0};  // the first few failures are logged with their cause
  std::mutex mutex;
  std::vector<Sample> samples;
  std::vector<double> iterations_ms;
  std::vector<std::pair<Clock::time_point, Clock::time_point>> grant_windows;
};

void Worker(SimClient& client, const SimulationOptions& o, int64_t cards, uint64_t seed, Shared& shared) {
  std::mt19937_64 rng(seed);
  const std::string key_prefix = "sim-" + std::to_string(shared.run_nonce) + "-" + std::to_string(seed) + "-";
  int64_t payments = 0;
  std::uniform_int_distribution<int64_t> any_card(1, cards), any_region(1, 47);
  std::vector<Sample> samples;
  std::vector<double> iterations;
  while (!shared.stop.load(std::memory_order_relaxed)) {
    auto t0 = Clock::now();
    int64_t card_id = any_card(rng);
    Result<Card> card = Status::Internal("unset");
    for (int t = 0; t < o.tries && !(card = client.GetCard(card_id)).ok(); ++t) {
    }
    std::vector<int64_t> stores;
    for (int attempt = 0; attempt < 10 && stores.empty(); ++attempt) {
      auto s = client.Stores(any_region(rng));
      if (s.ok()) stores = std::move(s).value();
    }
    int64_t balance = card.ok() ? card->balance : 0;
    int64_t store = stores.empty() ? 1 : stores[rng() % stores.size()];
    // Charge when the balance is low or on a coin flip; otherwise pay, up to
    // 105% of the balance, so that about 1 payment in 40 does not fit.
    int64_t amount;
    if (balance < 1000 || rng() % 2 == 0) {
      amount = static_cast<int64_t>(rng() % 100 + 1) * 100;
    } else {
      amount = -std::min<int64_t>(kAmountAbsMax, std::uniform_int_distribution<int64_t>(1, balance * 105 / 100)(rng));
    }
    auto t1 = Clock::now();
    Sample sample{t1, 0, Sample::kNg};
    const std::string key = key_prefix + std::to_string(++payments);
    Status last;
    for (int t = 0; t < o.tries; ++t) {
      if (t > 0) shared.retries.fetch_add(1, std::memory_order_relaxed);
      auto r = client.Pay(card_id, store, amount, key);
      if (r.ok()) {
        sample.outcome = r->refused ? Sample::kRefused : Sample::kOk;
        break;
      }
      last = r.status();
    }
    static constexpr int kNgLogged = 5;
    if (sample.outcome == Sample::kNg && shared.ng_logged.fetch_add(1, std::memory_order_relaxed) < kNgLogged)
      log::Warn("a payment failed after {} tries (NG; the first {} are logged): {}", o.tries, kNgLogged,
                last.ToString());
    auto t2 = Clock::now();
    sample.ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
    (sample.outcome == Sample::kOk        ? shared.ok
     : sample.outcome == Sample::kRefused ? shared.refused
                                          : shared.ng)
        .fetch_add(1, std::memory_order_relaxed);
    samples.push_back(sample);
    iterations.push_back(std::chrono::duration<double, std::milli>(t2 - t0).count());
    // The reference's 100 ms wait, cut short when the run ends.
    auto wake = Clock::now() + o.think;
    while (!shared.stop.load(std::memory_order_relaxed) && Clock::now() < wake)
      std::this_thread::sleep_for(std::min<Clock::duration>(wake - Clock::now(), std::chrono::milliseconds(20)));
  }
  std::lock_guard lock(shared.mutex);
  shared.samples.insert(shared.samples.end(), samples.begin(), samples.end());
  shared.iterations_ms.insert(shared.iterations_ms.end(), iterations.begin(), iterations.end());
}

// The period of the initial history: [first row, last row + 1 us).
Result<std::pair<int64_t, int64_t>> InitialPeriod(const std::string& path) {
  auto conn = db::sqlite::Connection::Open(path, db::sqlite::OpenMode::kReadOnly);
  if (!conn.ok()) return conn.status();
  auto from = db::sqlite::QueryInt(**conn, "SELECT MIN(PAYMENT_TIME) FROM H_TRANSACTION");
  auto to = db::sqlite::QueryInt(**conn, "SELECT MAX(PAYMENT_TIME) FROM H_TRANSACTION");
  auto cards = db::sqlite::QueryInt(**conn, "SELECT COUNT(*) FROM S_ACCOUNT");
  if (!from.ok() || !to.ok() || !cards.ok()) return Status::Internal("cannot read the template database");
  if (*cards == 0) return Status::BadRequest("the template database has no cards");
  return std::make_pair(*from, *to + 1);
}

Status MakeTemplate(const SimulationOptions& o, const std::string& path,
                    const std::function<void(const std::string&)>& progress_line) {
  std::error_code ec;
  fs::remove(path, ec);
  db::sqlite::DatabaseOptions db_options;
  db_options.checkpointer = false;
  auto db = db::sqlite::Database::Open(path, db_options);
  if (!db.ok()) return db.status();
  auto start = Clock::now();
  Status s = SeedPointCard((*db)->writer().connection(), o.data, [&](int64_t done, int64_t total) {
    if (progress_line && done % 200000 == 0)
      progress_line("generating data: " + std::to_string(done * 100 / std::max<int64_t>(total, 1)) + "%");
  });
  if (!s.ok()) return s;
  log::Info("generated {} card(s), {} store(s), {} history row(s) in {:.1f} s", o.data.cards, o.data.stores,
            o.data.history, std::chrono::duration<double>(Clock::now() - start).count());
  return Status::Ok();
}

// Runs one parallelism against `client_for(worker)`.
void Drive(const SimulationOptions& o, int parallel, int64_t cards, std::pair<int64_t, int64_t> period,
           const std::function<std::unique_ptr<SimClient>()>& make_client, RunResult& result,
           const std::function<void(const std::string&)>& progress_line,
           const std::function<std::unique_ptr<SimClient>()>& make_batch_client = nullptr) {
  Shared shared;
  std::vector<std::unique_ptr<SimClient>> clients;
  clients.reserve(static_cast<size_t>(parallel));
  for (int i = 0; i < parallel; ++i) clients.push_back(make_client());
  auto batch_client = make_batch_client ? make_batch_client() : make_client();
  auto start = Clock::now();
  auto end = start + o.duration;
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(parallel));
  for (int i = 0; i < parallel; ++i)
    threads.emplace_back([&, i] { Worker(*clients[static_cast<size_t>(i)], o, cards, 1000 + i, shared); });

  std::mutex grants_mutex;
  std::thread batch([&] {
    auto wake = Clock::now() + o.grant_interval;
    while (true) {
      while (!shared.stop && Clock::now() < wake) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (shared.stop) return;
      auto g0 = Clock::now();
      auto g = batch_client->Grant(period.first, period.second, o.grant_rate_percent);
      auto g1 = Clock::now();
      wake = g1 + o.grant_interval;  // the wait runs from the answer, folding or not
      // A grant's window runs until its history rows are written (SQLite
      // folds them after the answer; PostgreSQL has at once).
      Result<double> fold_ms = g.ok() ? batch_client->WaitFolded(g->grant_id, shared.stop) : Result<double>(0.0);
      auto g2 = Clock::now();
      std::lock_guard lock(grants_mutex);
      if (g1 > end || shared.stop) {
        ++result.grants_cut_off;  // the reference aborts it and does not count it
        shared.grant_windows.push_back({g0, g2});
        return;
      }
      shared.grant_windows.push_back({g0, g2});
      if (!g.ok()) {
        if (result.grants_failed++ == 0) result.grant_error = g.status().ToString();
        log::Warn("grant failed: {}", g.status().ToString());
        continue;
      }
      if (!fold_ms.ok()) log::Warn("grant {}: {}", g->grant_id, fold_ms.status().ToString());
      result.grants.push_back({std::chrono::duration<double, std::milli>(g1 - g0).count(), g->query_ms, g->update_ms,
                               g->commit_ms, g->cards, g->points, fold_ms.ok() ? *fold_ms : 0,
                               std::chrono::duration<double, std::milli>(g2 - g0).count()});
      ++shared.grants;
    }
  });

  while (Clock::now() < end) {
    std::this_thread::sleep_for(std::min<Clock::duration>(end - Clock::now(), std::chrono::seconds(1)));
    if (progress_line) {
      auto elapsed = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start).count();
      progress_line("parallel " + std::to_string(parallel) + ": " + std::to_string(elapsed) + "/" +
                    std::to_string(std::chrono::duration_cast<std::chrono::seconds>(o.duration).count()) + " s  OK " +
                    std::to_string(shared.ok.load()) + "  REFUSED " + std::to_string(shared.refused.load()) + "  NG " +
                    std::to_string(shared.ng.load()) + "  grants " + std::to_string(shared.grants.load()));
    }
  }
  shared.stop = true;
  for (auto& t : threads) t.join();
  batch.join();
  result.seconds = std::chrono::duration<double>(o.duration).count();

  std::vector<double> all, under, over, failures, outside, inside;
  for (const Sample& s : shared.samples) {
    if (s.start >= end) continue;  // started after the bell
    if (s.outcome == Sample::kNg) {
      failures.push_back(s.ms);
      continue;
    }
    all.push_back(s.ms);
    (s.ms < 1000 ? under : over).push_back(s.ms);
    auto s_end = s.start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(s.ms));
    bool overlaps = false;
    for (const auto& [g0, g1] : shared.grant_windows) overlaps = overlaps || (s.start < g1 && s_end > g0);
    (overlaps ? inside : outside).push_back(s.ms);
  }
  for (const Sample& s : shared.samples) {
    if (s.start >= end) continue;
    if (s.outcome == Sample::kOk)
      ++result.ok;
    else if (s.outcome == Sample::kRefused)
      ++result.refused;
    else
      ++result.ng;
  }
  result.retries = shared.retries;
  result.success_all = Summarize(all);
  result.success_under_1s = Summarize(under);
  result.success_over_1s = Summarize(over);
  result.failures = Summarize(failures);
  result.success_outside_grants = Summarize(outside);
  result.success_during_grants = Summarize(inside);
  double sum = 0;
  for (double v : shared.iterations_ms) sum += v;
  result.iteration_mean_ms = shared.iterations_ms.empty() ? 0 : sum / static_cast<double>(shared.iterations_ms.size());
}

// PostgreSQL: a template database from the generator, and a fresh copy of
// it (CREATE DATABASE ... TEMPLATE, a file copy) for every parallelism.
Result<SimulationResult> SimulatePostgres(const SimulationOptions& o,
                                          const std::function<void(const std::string&)>& progress_line) {
  SimulationResult out;
  out.options = o;
  auto admin = db::pg::Connection::Connect(o.postgres_url);
  if (!admin.ok()) return admin.status();
  const std::string template_db = "hotrow_sim_template", run_db = "hotrow_sim_run";
  log::WarnIfFailed((*admin)->Exec("DROP DATABASE IF EXISTS " + run_db), "dropping " + run_db);
  log::WarnIfFailed((*admin)->Exec("DROP DATABASE IF EXISTS " + template_db), "dropping " + template_db);
  if (Status s = (*admin)->Exec("CREATE DATABASE " + template_db); !s.ok()) return s;
  std::pair<int64_t, int64_t> period;
  {
    auto conn = db::pg::Connection::Connect(db::pg::WithDatabase(o.postgres_url, template_db));
    if (!conn.ok()) return conn.status();
    auto start = Clock::now();
    Status s = SeedPostgresPointCard(**conn, o.data, [&](int64_t done, int64_t total) {
      if (progress_line && done % 200000 == 0)
        progress_line("generating data: " + std::to_string(done * 100 / std::max<int64_t>(total, 1)) + "%");
    });
    if (!s.ok()) return s;
    log::Info("generated the template database in {:.1f} s",
              std::chrono::duration<double>(Clock::now() - start).count());
    auto p = (*conn)->Query("SELECT hotrow_us(MIN(PAYMENT_TIME)), hotrow_us(MAX(PAYMENT_TIME)) + 1 FROM H_TRANSACTION");
    if (!p.ok()) return p.status();
    period = {p->Int(0, 0), p->Int(0, 1)};
  }
  out.data_note =
      "PostgreSQL: every parallelism starts from a fresh CREATE DATABASE ... TEMPLATE copy of the generated "
      "data (" +
      std::to_string(o.data.cards) + " cards), " + std::to_string(o.db_pool) +
      " pooled connections; grants cover the whole initial history period; grant mode " + GrantModeName(o.grant_mode) +
      (o.grant_mode == SimulationOptions::GrantMode::kHotrow
           ? ", " + std::to_string(o.grant_workers) + " staging and " + std::to_string(o.grant_workers) +
                 " folding backend(s)"
           : "");
  for (int p : o.parallel) {
    log::WarnIfFailed((*admin)->Exec("DROP DATABASE IF EXISTS " + run_db), "dropping " + run_db);
    if (Status s =
            (*admin)->Exec(std::string("CREATE DATABASE ").append(run_db).append(" TEMPLATE ").append(template_db));
        !s.ok())
      return s;
    RunResult r;
    r.parallel = p;
    std::string url = db::pg::WithDatabase(o.postgres_url, run_db);
    {
      db::pg::PoolOptions pool_options;
      pool_options.url = url;
      pool_options.size = o.db_pool;
      pool_options.queue_max = static_cast<size_t>(p) + 1024;
      auto pool = db::pg::Pool::Open(pool_options);
      if (!pool.ok()) return pool.status();
      PostgresPointCardOptions card_options;
      card_options.fold_workers = card_options.stage_workers = o.grant_workers;
      card_options.lane = pool_options;  // as `hotrow serve` does
      if (o.grant_fold_chunk > 0) card_options.fold_chunk = o.grant_fold_chunk;
      auto store = PostgresPointCardStore::Open(**pool, card_options);
      if (!store.ok()) return store.status();
      PointCardService service(**store);
      if (Status s = service.Load(); !s.ok()) return s;
      std::function<std::unique_ptr<SimClient>()> make_batch;
      if (o.grant_mode != SimulationOptions::GrantMode::kHotrow) {
        auto grant_conn = db::pg::Connection::Connect(url);
        if (!grant_conn.ok()) return grant_conn.status();
        std::string isolation =
            o.grant_mode == SimulationOptions::GrantMode::kPlain ? "SERIALIZABLE" : "READ COMMITTED";
        make_batch = [&, c = std::make_shared<std::unique_ptr<db::pg::Connection>>(std::move(*grant_conn)),
                      isolation]() -> std::unique_ptr<SimClient> {
          return std::make_unique<ReferenceGrantClient>(service, std::move(*c), isolation);
        };
      }
      Drive(
          o, p, o.data.cards, period, [&] { return std::make_unique<InProcessClient>(service); }, r, progress_line,
          make_batch);
    }
    auto conn = db::pg::Connection::Connect(url);
    if (conn.ok()) {
      auto report = CheckPostgresInvariants(**conn);
      r.invariants_ok = report.ok() && report->ok();
      r.invariants_report = !report.ok()   ? report.status().ToString()
                            : report->ok() ? "OK: " + std::to_string(report->rows) + " history rows"
                                           : report->examples.front();
      auto size = (*conn)->Query("SELECT pg_database_size(current_database())");
      if (size.ok()) r.db_bytes_end = size->Int(0, 0);
    }
    conn = Status::Internal("closed");
    out.runs.push_back(r);
  }
  log::WarnIfFailed((*admin)->Exec("DROP DATABASE IF EXISTS " + run_db), "dropping " + run_db);
  log::WarnIfFailed((*admin)->Exec("DROP DATABASE IF EXISTS " + template_db), "dropping " + template_db);
  return out;
}

}  // namespace

const char* GrantModeName(SimulationOptions::GrantMode mode) {
  switch (mode) {
    case SimulationOptions::GrantMode::kPlain:
      return "plain (the reference's grant: one SERIALIZABLE transaction, no lock, no retry)";
    case SimulationOptions::GrantMode::kReadCommitted:
      return "read-committed (the reference's grant at READ COMMITTED)";
    default:
      return "hotrow (staged, applied in one commit, folded)";
  }
}

Result<SimulationResult> Simulate(const SimulationOptions& o,
                                  const std::function<void(const std::string&)>& progress_line) {
  SimulationResult out;
  out.options = o;
  if (!o.url.empty()) {
    std::string host;
    uint16_t port = 0;
    if (!http::ParseHttpUrl(o.url, &host, &port)) return Status::InvalidField("url", "--url must be http://host:port");
    out.data_note = "driven over HTTP at " + o.url +
                    ": the runs share the server's data, one after the other (it is not reset between "
                    "parallelisms); grants cover everything before the simulation started";
    std::pair<int64_t, int64_t> period{0, NowUs() - 1000000};
    StoreKeyRing keys(o.admin_token);  // shared by the workers of every run
    std::optional<http::HttpClient> setup;
    if (o.store_keys) {
      setup.emplace(host, port, std::chrono::seconds(60));
      if (Status s = keys.MakeAll(*setup, progress_line); !s.ok()) {
        keys.RevokeAll(*setup);
        return s;
      }
    }
    for (int p : o.parallel) {
      RunResult r;
      r.parallel = p;
      Drive(
          o, p, o.data.cards, period,
          [&] { return std::make_unique<HttpSimClient>(host, port, o.admin_token, o.store_keys ? &keys : nullptr); }, r,
          progress_line);
      out.runs.push_back(r);
    }
    if (setup) keys.RevokeAll(*setup);
    return out;
  }

  if (!o.postgres_url.empty()) return SimulatePostgres(o, progress_line);

  std::error_code ec;
  fs::create_directories(o.work_dir, ec);
  // --db sqlite:PATH names a server's database: its point card is
  // PATH.pointcard.db (or PATH, before 0.5.0). The runs use point-card
  // files only.
  std::string template_path = o.template_db.empty() ? "" : PointCardPathToRead(o.template_db);
  if (template_path.empty()) {
    template_path = o.work_dir + "/template.db";
    if (Status s = MakeTemplate(o, template_path, progress_line); !s.ok()) return s;
  }
  auto period = InitialPeriod(template_path);
  if (!period.ok()) return period.status();
  int64_t cards = 0;
  {
    auto conn = db::sqlite::Connection::Open(template_path, db::sqlite::OpenMode::kReadOnly);
    if (!conn.ok()) return conn.status();
    cards = db::sqlite::QueryInt(**conn, "SELECT COUNT(*) FROM S_ACCOUNT").value();
  }
  out.data_note = "every parallelism starts from a fresh copy of " + template_path + " (" + std::to_string(cards) +
                  " cards); grants cover its whole initial history period";

  for (int p : o.parallel) {
    std::string run_path = o.work_dir + "/run-" + std::to_string(p) + ".db";
    for (const char* suffix : {"", "-wal", "-shm", ".lock"}) fs::remove(run_path + suffix, ec);
    fs::copy_file(template_path, run_path, fs::copy_options::overwrite_existing, ec);
    if (ec) return Status::Internal("cannot copy " + template_path + ": " + ec.message());
    RunResult r;
    r.parallel = p;
    {
      db::sqlite::DatabaseOptions db_options;
      db_options.writer.queue_ops_max = static_cast<size_t>(p) + 1024;
      auto db = db::sqlite::Database::Open(run_path, db_options);
      if (!db.ok()) return db.status();
      SqlitePointCardOptions card_options;
      if (o.grant_fold_chunk > 0) card_options.fold_chunk = o.grant_fold_chunk;
      auto store = SqlitePointCardStore::Open(**db, card_options);
      if (!store.ok()) return store.status();
      (*db)->writer().Start();
      PointCardService service(**store);
      if (Status s = service.Load(); !s.ok()) return s;
      Drive(
          o, p, cards, *period, [&] { return std::make_unique<InProcessClient>(service); }, r, progress_line);
      auto stats = (*db)->checkpoint_stats();
      r.checkpoints = stats.checkpoints;
      r.wal_restarts = stats.restarts;
      r.wal_bytes_largest = stats.wal_bytes_largest;
      auto reader = (*db)->OpenReader();
      if (reader.ok()) {
        auto report = CheckInvariants(**reader);
        r.invariants_ok = report.ok() && report->ok();
        r.invariants_report = !report.ok()   ? report.status().ToString()
                              : report->ok() ? "OK: " + std::to_string(report->rows) + " history rows"
                                             : report->examples.front();
      }
    }
    r.db_bytes_end = static_cast<int64_t>(fs::file_size(run_path, ec)) +
                     (fs::exists(run_path + "-wal") ? static_cast<int64_t>(fs::file_size(run_path + "-wal", ec)) : 0);
    for (const char* suffix : {"", "-wal", "-shm", ".lock"}) fs::remove(run_path + suffix, ec);
    out.runs.push_back(r);
  }
  return out;
}

}  // namespace hotrow::tools
