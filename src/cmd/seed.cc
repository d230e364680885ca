// hotrow seed <dataset>: fills a database with generated data for demos and
// benchmarks. Refuses to touch a database that a running server holds.
#include "dateplan/seed.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <random>

#include "cmd/commands.h"
#include "dateplan/postgres_store.h"
#include "dateplan/sqlite_store.h"
#include "db/postgres.h"
#include "db/sqlite_database.h"
#include "db/store_url.h"
#include "leaderboard/postgres_store.h"
#include "leaderboard/redis_store.h"
#include "leaderboard/service.h"
#include "leaderboard/sqlite_store.h"
#include "ops/log.h"
#include "ops/progress.h"
#include "pointcard/postgres_store.h"
#include "pointcard/seed.h"
#include "pointcard/sqlite_file.h"
#include "pointcard/sqlite_store.h"

namespace hotrow::cmd {

CLI::App* AddSeed(CLI::App& app, SeedFlags& f) {
  CLI::App* c = app.add_subcommand("seed", "Fill a database with generated data");
  c->require_subcommand(1);
  CLI::App* plans = c->add_subcommand("dateplans", "Date plans with ids 1..N and 0 likes");
  plans->add_option("--count", f.count, "Number of plans")
      ->check(CLI::Range(int64_t{1}, int64_t{100000000}))
      ->capture_default_str();
  plans->add_option("--db", f.db, "Store URL: sqlite:PATH or postgresql://…")
      ->envname("HOTROW_DB")
      ->capture_default_str();
  plans->add_option("--seed", f.seed, "Random seed (same seed, same data)")->capture_default_str();
  plans->add_flag("--if-empty", f.if_empty, "Do nothing (and succeed) when plans already exist");
  plans->add_flag("--replace", f.replace, "Delete existing plans first");
  plans->callback([&f] { f.what = "dateplans"; });

  CLI::App* players = c->add_subcommand("leaderboard", "Players player-1..player-N with random scores");
  players->add_option("--clients", f.clients, "Number of players")
      ->check(CLI::Range(int64_t{1}, int64_t{10000000}))
      ->capture_default_str();
  players->add_option("--db", f.db, "Store URL: sqlite:PATH or postgresql://…")
      ->envname("HOTROW_DB")
      ->capture_default_str();
  players->add_option("--redis", f.redis, "Seed the Redis leaderboard at this URL instead")->envname("HOTROW_REDIS");
  players->add_option("--seed", f.seed, "Random seed (same seed, same data)")->capture_default_str();
  auto* players_if_empty =
      players->add_flag("--if-empty", f.if_empty, "Do nothing (and succeed) when players already exist");
  players->add_flag("--replace", f.replace, "Delete existing players first")->excludes(players_if_empty);
  players->callback([&f] { f.what = "leaderboard"; });

  CLI::App* cards = c->add_subcommand("pointcard", "Regions, stores, cards 1..N and an initial history");
  cards->add_option("--cards", f.cards, "Number of cards")
      ->check(CLI::Range(int64_t{1}, int64_t{100000000}))
      ->capture_default_str();
  cards->add_option("--stores", f.stores, "Number of stores")
      ->check(CLI::Range(int64_t{1}, int64_t{10000000}))
      ->capture_default_str();
  cards->add_option("--history", f.history, "Number of initial history rows")
      ->check(CLI::Range(int64_t{0}, int64_t{1000000000}))
      ->capture_default_str();
  cards->add_option("--db", f.db, "Store URL: sqlite:PATH or postgresql://…")
      ->envname("HOTROW_DB")
      ->capture_default_str();
  cards->add_option("--seed", f.seed, "Random seed (same seed, same data)")->capture_default_str();
  cards->add_flag("--if-empty", f.if_empty, "Do nothing (and succeed) when cards already exist");
  cards->add_flag("--replace", f.replace, "Delete existing point-card data first");
  cards->callback([&f] { f.what = "pointcard"; });
  return c;
}

namespace {

// One data set on the embedded database: its table, its schema and its
// generator. Point-card tables join the same way.
struct SqliteDataset {
  const char* noun;   // "date plan(s)"
  const char* table;  // counted, and emptied by --replace (a table, or a table and a WHERE clause)
  Status (*create_schema)(db::sqlite::Connection&);
  std::function<Status(db::sqlite::Connection&, int64_t count, uint64_t seed, const std::function<void(int64_t)>&)>
      generate;
};

int SeedSqlite(const SeedFlags& f, db::sqlite::Database& database, int64_t count, const SqliteDataset& d) {
  auto& conn = database.writer().connection();
  auto fail = [](const Status& s) {
    log::Error("{}", s.ToString());
    return 1;
  };
  if (Status s = d.create_schema(conn); !s.ok()) return fail(s);
  auto existing = db::sqlite::QueryInt(conn, std::string("SELECT COUNT(*) FROM ") + d.table);
  if (!existing.ok()) return fail(existing.status());
  if (*existing > 0 && f.if_empty) {
    log::Info("{} already holds {} {}; nothing to do", database.path(), *existing, d.noun);
    return 0;
  }
  if (*existing > 0 && f.replace) {
    if (Status s = conn.Exec(std::string("DELETE FROM ") + d.table); !s.ok()) return fail(s);
  }
  ProgressBar bar(d.noun, count);
  auto start = std::chrono::steady_clock::now();
  Status s = d.generate(conn, count, f.seed, [&bar](int64_t done) { bar.Update(done); });
  bar.Finish();
  if (!s.ok()) {
    log::Error("{}", s.ToString());
    return 1;
  }
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  log::Info("seeded {} {} into {} in {} ms", count, d.noun, database.path(), ms);
  return 0;
}

const SqliteDataset kDatePlans{"date plan(s)", "datePlans", dateplan::CreateDatePlanSchema, dateplan::SeedPlans};
pointcard::SeedOptions PointCardOptions(const SeedFlags& f) {
  pointcard::SeedOptions options;
  options.cards = f.cards;
  options.stores = f.stores;
  options.history = f.history;
  options.seed = f.seed;
  return options;
}

Status DeletePointCardData(db::sqlite::Connection& conn) {
  return conn.Exec(
      "DELETE FROM H_TRANSACTION; DELETE FROM S_ACCOUNT; DELETE FROM M_STORE; DELETE FROM M_REGION; "
      "DELETE FROM P_IDEMPOTENCY; DELETE FROM P_GRANT_CREDIT; DELETE FROM P_GRANT; DELETE FROM P_REQUEST_KEY; "
      "DELETE FROM M_STORE_KEY; DELETE FROM P_HOLD; DELETE FROM P_LOT; DELETE FROM P_LOT_USE; DELETE FROM P_LOT_HOLD;");
}

int SeedPointCards(const SeedFlags& f, db::sqlite::Database& database) {
  auto& conn = database.writer().connection();
  if (Status s = pointcard::CreatePointCardSchema(conn); !s.ok()) {
    log::Error("{}", s.ToString());
    return 1;
  }
  auto existing = db::sqlite::QueryInt(conn, "SELECT COUNT(*) FROM S_ACCOUNT");
  if (!existing.ok()) {
    log::Error("{}", existing.status().ToString());
    return 1;
  }
  if (*existing > 0 && f.if_empty) {
    log::Info("{} already holds {} card(s); nothing to do", database.path(), *existing);
    return 0;
  }
  if (*existing > 0 && f.replace) {
    if (Status s = DeletePointCardData(conn); !s.ok()) {
      log::Error("{}", s.ToString());
      return 1;
    }
  }
  ProgressBar bar("cards and history", f.cards + f.history);
  auto start = std::chrono::steady_clock::now();
  Status s = pointcard::SeedPointCard(conn, PointCardOptions(f), [&bar](int64_t done, int64_t) { bar.Update(done); });
  bar.Finish();
  if (!s.ok()) {
    log::Error("{}", s.ToString());
    return 1;
  }
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  log::Info("seeded {} card(s), {} store(s), {} history row(s) into {} in {} ms", f.cards, f.stores, f.history,
            database.path(), ms);
  return 0;
}

const SqliteDataset kPlayers{"player(s)", "lb_score WHERE board_id = 'default'", leaderboard::CreateLeaderboardSchema,
                             leaderboard::SeedLeaderboard};

// Through the same scripts the server uses, pipelined, so members and
// sequence numbers follow the same rules.
int SeedRedisLeaderboard(const SeedFlags& f) {
  auto store = leaderboard::RedisLeaderboardStore::Open(f.redis);
  if (!store.ok()) {
    log::Error("{}", store.status().ToString());
    return 1;
  }
  // Through the service: it gives each post its season and schedule, as a
  // served post has them (the script refuses a post without them), and
  // knows `default`'s current season, the one seeded and counted.
  leaderboard::LeaderboardService service(**store);
  if (Status s = service.Load(); !s.ok()) {
    log::Error("{}", s.ToString());
    return 1;
  }
  auto board = service.GetBoard(std::string(leaderboard::kDefaultBoard));
  if (!board.ok()) {
    log::Error("{}", board.status().ToString());
    return 1;
  }
  const std::string where = db::RedactUrl(f.redis);
  auto existing = (*store)->Count(std::string(leaderboard::kDefaultBoard), board->season);
  if (!existing.ok()) {
    log::Error("{}", existing.status().ToString());
    return 1;
  }
  if (*existing > 0 && f.if_empty) {
    log::Info("Redis at {} already holds {} player(s) in season {}; nothing to do", where, *existing, board->season);
    return 0;
  }
  if (*existing > 0 && !f.replace) {
    log::Error("Redis at {} already holds {} player(s) in season {}; pass --replace or --if-empty", where, *existing,
               board->season);
    return 1;
  }
  if (f.replace) {
    if (Status s = (*store)->Clear(); !s.ok()) {
      log::Error("cannot clear the board on Redis at {}: {}", where, s.ToString());
      return 1;
    }
  }
  std::mt19937_64 rng(f.seed);
  ProgressBar bar("players", f.clients);
  auto start = std::chrono::steady_clock::now();
  // At most kInFlight posts queued at once: the client's queue is bounded.
  constexpr int64_t kInFlight = 4096;
  std::mutex mutex;
  std::condition_variable wake;
  int64_t in_flight = 0, done = 0, failed = 0, season = board->season;
  std::string first_error;
  for (int64_t i = 1; i <= f.clients; ++i) {
    {
      std::unique_lock lock(mutex);
      wake.wait(lock, [&] { return in_flight < kInFlight; });
      ++in_flight;
    }
    service.PostScore("player-" + std::to_string(i), leaderboard::DemoScore(rng), leaderboard::ScoreMode::kReplace,
                      [&](Result<leaderboard::Posted> r) {
                        std::lock_guard lock(mutex);
                        if (!r.ok() && failed++ == 0) first_error = r.status().ToString();
                        if (r.ok()) season = std::max(season, r->season);
                        --in_flight;
                        ++done;
                        wake.notify_all();
                      });
    if (i % 1000 == 0) bar.Update(std::max<int64_t>(0, i - kInFlight));
  }
  {
    std::unique_lock lock(mutex);
    wake.wait(lock, [&] { return done == f.clients; });
  }
  bar.Update(f.clients);
  bar.Finish();
  if (failed > 0) {
    log::Error("{} of {} score(s) failed or may not have been written; the first: {}", failed, f.clients, first_error);
    return 1;
  }
  auto count = (*store)->Count(std::string(leaderboard::kDefaultBoard), season);
  if (!count.ok() || *count != f.clients) {
    log::Error("Redis holds {} player(s) after seeding {}", count.ok() ? *count : -1, f.clients);
    return 1;
  }
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  log::Info("seeded {} player(s) into Redis at {} (season {}) in {} ms", f.clients, where, season, ms);
  return 0;
}

// PostgreSQL: COPY into empty tables (--replace truncates them first).
int SeedPostgres(const SeedFlags& f, const std::string& url) {
  auto conn = db::pg::Connection::Connect(url);
  if (!conn.ok()) {
    log::Error("{}", conn.status().ToString());
    return 1;
  }
  auto& c = **conn;
  struct Target {
    const char* table;
    const char* truncate;
    Status (*create)(db::pg::Connection&);
  };
  Target t = f.what == "dateplans"
                 ? Target{"datePlans", "TRUNCATE datePlans RESTART IDENTITY", dateplan::CreatePostgresDatePlanSchema}
             : f.what == "leaderboard"
                 ? Target{"lb_score WHERE board_id = 'default'", "DELETE FROM lb_score WHERE board_id = 'default'",
                          leaderboard::CreatePostgresLeaderboardSchema}
                 : Target{"S_ACCOUNT",
                          "TRUNCATE H_TRANSACTION, S_ACCOUNT, M_STORE, M_REGION, P_IDEMPOTENCY, "
                          "P_GRANT, P_GRANT_CREDIT, P_REQUEST_KEY, M_STORE_KEY, P_HOLD RESTART IDENTITY",
                          pointcard::CreatePostgresPointCardSchema};
  if (Status s = t.create(c); !s.ok()) {
    log::Error("{}", s.ToString());
    return 1;
  }
  auto existing = c.Query(std::string("SELECT COUNT(*) FROM ") + t.table);
  if (!existing.ok()) {
    log::Error("{}", existing.status().ToString());
    return 1;
  }
  if (existing->Int(0, 0) > 0 && f.if_empty) {
    log::Info("{} already holds {} row(s) in {}; nothing to do", db::RedactUrl(url), existing->Int(0, 0), t.table);
    return 0;
  }
  if (existing->Int(0, 0) > 0 && f.replace) {
    if (Status s = c.Exec(t.truncate); !s.ok()) {
      log::Error("{}", s.ToString());
      return 1;
    }
  }
  auto start = std::chrono::steady_clock::now();
  Status s;
  if (f.what == "dateplans") {
    s = dateplan::SeedPostgresPlans(c, f.count, f.seed);
  } else if (f.what == "leaderboard") {
    s = leaderboard::SeedPostgresLeaderboard(c, f.clients, f.seed);
  } else {
    ProgressBar bar("cards and history", f.cards + f.history);
    s = pointcard::SeedPostgresPointCard(c, PointCardOptions(f), [&bar](int64_t done, int64_t) { bar.Update(done); });
    bar.Finish();
  }
  if (!s.ok()) {
    log::Error("{}", s.ToString());
    return 1;
  }
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  log::Info("seeded {} into PostgreSQL in {} ms", f.what, ms);
  return 0;
}

}  // namespace

int RunSeed(const SeedFlags& f) {
  if (f.what == "leaderboard" && !f.redis.empty()) return SeedRedisLeaderboard(f);
  auto url = db::ParseStoreUrl(f.db);
  if (!url.ok()) {
    log::Error("{}", url.status().message());
    return 2;
  }
  if (url->kind == db::StoreUrl::Kind::kPostgres) return SeedPostgres(f, url->postgres_url);
  db::sqlite::DatabaseOptions options;
  auto database = db::sqlite::Database::Open(url->sqlite_path, options);
  if (!database.ok()) {
    log::Error("cannot seed: {}", database.status().ToString());
    return 1;
  }
  // Always, and first: it moves the point card out of a file an older
  // release wrote, before the main file's migrations record that it did.
  auto cards = pointcard::OpenPointCardDatabase(**database, options);
  if (!cards.ok()) {
    log::Error("cannot seed: {}", cards.status().ToString());
    return 1;
  }
  if (f.what == "dateplans") return SeedSqlite(f, **database, f.count, kDatePlans);
  if (f.what == "leaderboard") return SeedSqlite(f, **database, f.clients, kPlayers);
  if (f.what == "pointcard") return SeedPointCards(f, **cards);
  log::Error("unknown dataset");
  return 2;
}

}  // namespace hotrow::cmd
