// hotrow seed <dataset>: fills a database with generated data for demos and
// benchmarks. Refuses to touch a database that a running server holds.
#include <chrono>

#include "cmd/commands.h"
#include "dateplan/seed.h"
#include "dateplan/sqlite_store.h"
#include "db/sqlite_database.h"
#include "db/store_url.h"
#include "ops/log.h"
#include "ops/progress.h"

namespace hotrow::cmd {

CLI::App* AddSeed(CLI::App& app, SeedFlags& f) {
  CLI::App* c = app.add_subcommand("seed", "Fill a database with generated data");
  c->require_subcommand(1);
  CLI::App* plans = c->add_subcommand("dateplans", "Date plans with ids 1..N and 0 likes");
  plans->add_option("--count", f.count, "Number of plans")->check(CLI::Range(int64_t{1}, int64_t{100000000}))
      ->capture_default_str();
  plans->add_option("--db", f.db, "Store URL: sqlite:PATH")->envname("HOTROW_DB")->capture_default_str();
  plans->add_option("--seed", f.seed, "Random seed (same seed, same data)")->capture_default_str();
  plans->add_flag("--if-empty", f.if_empty, "Do nothing (and succeed) when plans already exist");
  plans->add_flag("--replace", f.replace, "Delete existing plans first");
  plans->callback([&f] { f.what = "dateplans"; });
  return c;
}

namespace {

int SeedDatePlans(const SeedFlags& f, db::SqliteDatabase& database) {
  auto& conn = database.writer().connection();
  if (Status s = dateplan::CreateDatePlanSchema(conn); !s.ok()) {
    log::Error("{}", s.ToString());
    return 1;
  }
  auto existing = db::sqlite::QueryInt(conn, "SELECT COUNT(*) FROM datePlans");
  if (!existing.ok()) {
    log::Error("{}", existing.status().ToString());
    return 1;
  }
  if (*existing > 0 && f.if_empty) {
    log::Info("{} already holds {} date plan(s); nothing to do", database.path(), *existing);
    return 0;
  }
  if (*existing > 0 && f.replace) {
    if (Status s = conn.Exec("DELETE FROM datePlans"); !s.ok()) {
      log::Error("{}", s.ToString());
      return 1;
    }
  }
  ProgressBar bar("date plans", f.count);
  auto start = std::chrono::steady_clock::now();
  Status s = dateplan::SeedPlans(conn, f.count, f.seed, [&bar](int64_t done) { bar.Update(done); });
  bar.Finish();
  if (!s.ok()) {
    log::Error("{}", s.message());
    return 1;
  }
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  log::Info("seeded {} date plan(s) into {} in {} ms", f.count, database.path(), ms);
  return 0;
}

}  // namespace

int RunSeed(const SeedFlags& f) {
  auto url = db::ParseStoreUrl(f.db);
  if (!url.ok()) {
    log::Error("{}", url.status().message());
    return 2;
  }
  if (url->kind != db::StoreUrl::Kind::kSqlite) {
    log::Error("--db {}: only sqlite:PATH is supported by this build", f.db);
    return 2;
  }
  auto database = db::SqliteDatabase::Open(url->sqlite_path);
  if (!database.ok()) {
    log::Error("cannot seed: {}", database.status().message());
    return 1;
  }
  if (f.what == "dateplans") return SeedDatePlans(f, **database);
  log::Error("unknown dataset");
  return 2;
}

}  // namespace hotrow::cmd
