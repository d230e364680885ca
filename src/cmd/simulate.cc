// hotrow simulate pointcard: the Tsurugi-vs-PostgreSQL experiment against
// hotrow (see src/tools/simulator.h).
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "cmd/commands.h"
#include "db/store_url.h"
#include "ops/log.h"
#include "tools/report.h"
#include "tools/simulator.h"

namespace hotrow::cmd {

// "180s", "3m", "500ms", or plain seconds.
bool ParseDuration(const std::string& text, std::chrono::milliseconds* out, bool zero_allowed) {
  try {
    size_t end = 0;
    double v = std::stod(text, &end);
    std::string unit = text.substr(end);
    double scale = unit == "ms" ? 1 : unit == "m" ? 60000 : (unit == "s" || unit.empty()) ? 1000 : -1;
    if (scale < 0 || !std::isfinite(v)) return false;
    double ms = std::round(v * scale);
    if (ms < (zero_allowed ? 0 : 1) || ms > kDurationMsMax) return false;
    *out = std::chrono::milliseconds(static_cast<int64_t>(ms));
    return true;
  } catch (...) {
    return false;
  }
}

namespace {

std::string Machine() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(cpuinfo, line))
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return std::to_string(std::thread::hardware_concurrency()) + " cores (" + model + "), host " + host;
}

}  // namespace

CLI::App* AddSimulate(CLI::App& app, SimulateFlags& f) {
  CLI::App* c = app.add_subcommand("simulate", "Run a workload simulation");
  c->require_subcommand(1);
  CLI::App* p = c->add_subcommand("pointcard", "The point-card experiment: online point uses beside grant batches");
  p->add_option("--parallel", f.parallel, "Online workers, one run per value (comma-separated)")->capture_default_str();
  p->add_option("--duration", f.duration, "Length of each run (180s, 3m, 500ms)")->capture_default_str();
  p->add_option("--db", f.db,
                "sqlite:PATH: start every run from a copy of it; postgresql://…/db: run on PostgreSQL (template and "
                "run databases are created beside db); default: generate, embedded");
  p->add_option("--db-pool", f.db_pool, "PostgreSQL connections")->check(CLI::Range(1, 1000))->capture_default_str();
  p->add_option("--grant-workers", f.grant_workers,
                "PostgreSQL: backends that stage a grant, and that fold it, at once (serve's --grant-workers)")
      ->check(CLI::Range(int64_t{1}, int64_t{16}))
      ->capture_default_str();
  p->add_option("--grant-fold-chunk", f.grant_fold_chunk,
                "In-process: cards per commit when a grant is folded (serve's --grant-fold-chunk; 0: the store's "
                "default)")
      ->check(CLI::Range(int64_t{0}, int64_t{1000000}))
      ->capture_default_str();
  p->add_option("--cards", f.cards, "Cards to generate")->capture_default_str();
  p->add_option("--stores", f.stores, "Stores to generate")->capture_default_str();
  p->add_option("--history", f.history, "Initial history rows to generate")->capture_default_str();
  p->add_option("--seed", f.seed, "Random seed for the generated data")->capture_default_str();
  p->add_option("--grant-interval", f.grant_interval, "Wait between grants")->capture_default_str();
  p->add_option("--rate-percent", f.rate_percent, "The grants' rate")->check(CLI::Range(1, 100))->capture_default_str();
  p->add_option("--url", f.url, "Drive a running server over HTTP instead (http://host:port)")->envname("HOTROW_URL");
  p->add_option("--admin-token", f.admin_token, "The server's admin token (with --url)")->envname("HOTROW_ADMIN_TOKEN");
  p->add_flag("--store-keys", f.store_keys,
              "With --url: pay as each store's till, with a key per store made before the runs (POST "
              "/api/v1/stores/{id}/keys, with --admin-token) and revoked after them: for servers run with "
              "--require-store-keys");
  p->add_option("--work-dir", f.work_dir, "Where the run databases live")->capture_default_str();
  p->add_option("--out", f.out, "Where to write simulation.json, .svg and .html")->capture_default_str();
  p->add_option("--grant-mode", f.grant_mode,
                "PostgreSQL only: hotrow (the store's staged grant), plain (the reference's grant: one "
                "SERIALIZABLE transaction, no lock, no retry) or read-committed (the same at READ COMMITTED; it "
                "loses payments: run it on a throwaway database)")
      ->check(CLI::IsMember({"hotrow", "plain", "read-committed"}))
      ->capture_default_str();
  p->add_flag("--quick", f.quick, "Small data, short runs (2,000 cards, parallel 1,8, 3 s): for tests");
  p->callback([&f] { f.what = "pointcard"; });
  return c;
}

int RunSimulate(const SimulateFlags& f) {
  tools::SimulationOptions o;
  std::string parallel = f.parallel, duration = f.duration, interval = f.grant_interval;
  o.data.cards = f.cards;
  o.data.stores = f.stores;
  o.data.history = f.history;
  if (f.quick) {
    if (parallel == SimulateFlags().parallel) parallel = "1,8";
    if (duration == SimulateFlags().duration) duration = "3s";
    if (interval == SimulateFlags().grant_interval) interval = "1s";
    if (f.cards == SimulateFlags().cards) o.data.cards = 2000;
    if (f.stores == SimulateFlags().stores) o.data.stores = 100;
    if (f.history == SimulateFlags().history) o.data.history = 5000;
  }
  o.data.seed = f.seed;
  o.parallel.clear();
  std::stringstream list(parallel);
  for (std::string item; std::getline(list, item, ',');) {
    try {
      int p = std::stoi(item);
      if (p < 1 || p > 10000) throw std::out_of_range("parallel");
      o.parallel.push_back(p);
    } catch (...) {
      log::Error("--parallel must be a comma-separated list of 1..10000, not '{}'", parallel);
      return 2;
    }
  }
  if (!ParseDuration(duration, &o.duration) || !ParseDuration(interval, &o.grant_interval)) {
    log::Error("--duration and --grant-interval take values such as 180s, 3m or 500ms");
    return 2;
  }
  o.grant_rate_percent = f.rate_percent;
  o.url = f.url;
  o.admin_token = f.admin_token;
  o.store_keys = f.store_keys;
  if (o.store_keys && (o.url.empty() || o.admin_token.empty())) {
    log::Error("--store-keys makes keys on a running server: it needs --url and --admin-token");
    return 2;
  }
  o.work_dir = f.work_dir;
  o.db_pool = f.db_pool;
  o.grant_workers = f.grant_workers;
  o.grant_fold_chunk = f.grant_fold_chunk;
  o.grant_mode = f.grant_mode == "plain"            ? tools::SimulationOptions::GrantMode::kPlain
                 : f.grant_mode == "read-committed" ? tools::SimulationOptions::GrantMode::kReadCommitted
                                                    : tools::SimulationOptions::GrantMode::kHotrow;
  if (!f.db.empty()) {
    auto url = db::ParseStoreUrl(f.db);
    if (!url.ok()) {
      log::Error("--db must be sqlite:PATH (a template database) or postgresql://...");
      return 2;
    }
    if (url->kind == db::StoreUrl::Kind::kPostgres)
      o.postgres_url = url->postgres_url;
    else
      o.template_db = url->sqlite_path;
  }
  if (o.grant_mode != tools::SimulationOptions::GrantMode::kHotrow && (o.postgres_url.empty() || !o.url.empty())) {
    log::Error(
        "--grant-mode {} reproduces the reference's PostgreSQL runs in-process: it needs --db "
        "postgresql://... and no --url",
        f.grant_mode);
    return 2;
  }
  // Per-grant log lines would interleave with the progress line; the
  // report has every grant.
  log::SetLevel("warn");
  bool tty = isatty(STDERR_FILENO);
  auto progress = [tty](const std::string& line) {
    if (tty)
      std::fprintf(stderr, "\r%-100s", line.c_str());
    else
      std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
  };
  auto result = tools::Simulate(o, progress);
  if (tty) std::fprintf(stderr, "\n");
  if (!result.ok()) {
    log::Error("simulation failed: {}", result.status().ToString());
    return 1;
  }
  result->machine = Machine();
  std::string text = tools::ReportText(*result);
  std::fputs(text.c_str(), stdout);
  std::error_code ec;
  std::filesystem::create_directories(f.out, ec);
  std::ofstream(f.out + "/simulation.json") << tools::ReportJson(*result);
  std::ofstream(f.out + "/simulation.svg") << tools::ReportSvg(*result);
  std::ofstream(f.out + "/simulation-median.svg") << tools::ReportMedianSvg(*result);
  std::ofstream(f.out + "/simulation.html") << tools::ReportHtml(*result);
  std::ofstream(f.out + "/simulation.txt") << text;
  log::Info("wrote {}/simulation.json, .svg, .html and .txt", f.out);
  bool all_ok = true;
  for (const auto& r : result->runs) all_ok = all_ok && (r.invariants_ok || !o.url.empty());
  return all_ok ? 0 : 1;
}

}  // namespace hotrow::cmd
