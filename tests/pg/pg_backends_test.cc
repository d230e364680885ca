// The three store contracts, unchanged, on PostgreSQL: a throwaway cluster
// (one per test binary), a fresh database per test.
#include <fstream>
#include <future>
#include <latch>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "contract/dateplan_contract.h"
#include "contract/leaderboard_contract.h"
#include "contract/pointcard_contract.h"
#include "dateplan/postgres_store.h"
#include "db/postgres.h"
#include "harness/or_throw.h"
#include "harness/postgres_process.h"
#include "leaderboard/postgres_store.h"
#include "leaderboard/service.h"
#include "pg/pg_cards_fixture.h"
#include "pointcard/postgres_store.h"

namespace hotrow::testing {
namespace {

// An error raised by the implicit COMMIT at a pipeline's Sync (a deferred
// constraint trigger: PostgreSQL cannot defer a CHECK) used to be dropped:
// the pipeline reported success for a rolled-back transaction, and the
// connection stayed in pipeline mode, failing every later statement while
// Check() said healthy (issue 9, item 4). Seen failing before the fix.
TEST(PgConnection, AnErrorAtTheImplicitCommitFailsThePipelineAndTheConnectionGoesOn) {
  auto conn = OrThrow(db::pg::Connection::Connect(FreshDatabase()));
  ASSERT_TRUE(conn->Exec(R"(
    CREATE TABLE t (x int);
    CREATE FUNCTION refuse_negative() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.x < 0 THEN RAISE EXCEPTION 'negative at commit' USING ERRCODE = '23514'; END IF;
      RETURN NULL;
    END $$;
    CREATE CONSTRAINT TRIGGER t_refuse AFTER INSERT OR UPDATE ON t DEFERRABLE INITIALLY DEFERRED
      FOR EACH ROW EXECUTE FUNCTION refuse_negative();)")
                  .ok());
  auto bad = conn->Pipeline({{"INSERT INTO t VALUES (1)", {}}, {"INSERT INTO t VALUES (-1)", {}}});
  ASSERT_FALSE(bad.ok()) << "the commit at Sync failed: nothing may be reported as written";
  EXPECT_EQ(bad.status().sqlstate(), "23514") << bad.status().ToString();
  auto count = conn->Query("SELECT COUNT(*) FROM t");
  ASSERT_TRUE(count.ok()) << count.status().ToString();
  EXPECT_EQ(count->Int(0, 0), 0) << "the whole implicit transaction rolled back";
  auto good = conn->Pipeline({{"INSERT INTO t VALUES (2)", {}}, {"SELECT COUNT(*) FROM t", {}}});
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_TRUE(conn->Check());
  EXPECT_EQ(conn->Query("SELECT COUNT(*) FROM t")->Int(0, 0), 1);
}

// A statement canceled from outside (pg_cancel_backend: an operator, or a
// shutdown) is not a timeout: both are SQLSTATE 57014, and the answer used
// to say "did not answer in time" for either. A grant, which runs without a
// statement_timeout, can only be canceled so (a hostile review canceled
// stagings and read "did not answer in time"). Seen failing before the fix.
TEST(PgConnection, ACanceledStatementSaysCanceledAndATimeoutSaysTimeout) {
  std::string url = FreshDatabase();
  auto conn = OrThrow(db::pg::Connection::Connect(url));
  auto other = OrThrow(db::pg::Connection::Connect(url));
  const int64_t pid = OrThrow(conn->Query("SELECT pg_backend_pid()")).Int(0, 0);
  auto slept = std::async(std::launch::async, [&] { return conn->Exec("SELECT pg_sleep(30)"); });
  bool running = false;  // a cancel before the statement runs is dropped
  for (int i = 0; i < 500 && !running; ++i) {
    auto active = OrThrow(other->Query("SELECT COUNT(*) FROM pg_stat_activity WHERE pid = " + std::to_string(pid) +
                                       " AND query LIKE 'SELECT pg_sleep%' AND state = 'active'"));
    running = active.Int(0, 0) == 1;
    if (!running) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(running) << "pg_sleep never showed as running";
  ASSERT_TRUE(other->Query("SELECT pg_cancel_backend(" + std::to_string(pid) + ")").ok());
  Status canceled = slept.get();
  EXPECT_EQ(canceled.sqlstate(), "57014") << canceled.ToString();
  EXPECT_EQ(canceled.message(),
            "the database canceled the statement (a cancel from outside hotrow, such as pg_cancel_backend); nothing "
            "was written");
  ASSERT_TRUE(conn->Exec("SET statement_timeout = '50ms'").ok());
  Status timed_out = conn->Exec("SELECT pg_sleep(5)");
  EXPECT_EQ(timed_out.sqlstate(), "57014") << timed_out.ToString();
  EXPECT_EQ(timed_out.message(), "the database did not answer in time; nothing was written");
}

// A database v0.1.0 made (its datePlans had no version column) is migrated
// when a store opens it, once, and its rows are kept (issue 9, item 3). The
// statement below is v0.1.0's CREATE TABLE, verbatim.
TEST(PgMigration, AV010DatabaseGainsTheVersionColumnOnce) {
  std::string url = FreshDatabase();
  auto conn = OrThrow(db::pg::Connection::Connect(url));
  ASSERT_TRUE(conn->Exec(R"(
    CREATE TABLE datePlans (
      id              BIGSERIAL PRIMARY KEY,
      title           TEXT   NOT NULL,
      content         TEXT   NOT NULL,
      category        TEXT   NOT NULL,
      "like"          BIGINT NOT NULL DEFAULT 0 CHECK ("like" >= 0),
      edit_token_hash BYTEA
    );
    INSERT INTO datePlans (title, content, category, "like") VALUES ('from v0.1.0', '', 'Indoor', 7);)")
                  .ok());
  for (int open = 0; open < 2; ++open) {
    auto pool = OpenPool(url);
    auto store = OrThrow(dateplan::PostgresDatePlanStore::Open(*pool));
    std::vector<dateplan::Plan> plans;
    ASSERT_TRUE(store->LoadAll([&](dateplan::Plan&& p) { plans.push_back(std::move(p)); }).ok());
    ASSERT_EQ(plans.size(), 1u);
    EXPECT_EQ(plans[0].title, "from v0.1.0");
    EXPECT_EQ(plans[0].like, 7);
    EXPECT_EQ(plans[0].version, 1);
  }
  auto applied = conn->Query("SELECT COUNT(*) FROM schema_migrations WHERE component = 'dateplans'");
  ASSERT_TRUE(applied.ok()) << applied.status().ToString();
  EXPECT_EQ(applied->Int(0, 0), 1) << "applied once, recorded once";
}

// Processes that create and migrate a schema at once (instances starting
// beside a `hotrow seed`) take turns on the schema's advisory lock: each
// store's exported Create...Schema takes it, not only the pool's. Before,
// `seed` ran them unlocked, and two at once failed on PostgreSQL's own
// catalog (a concurrent CREATE TABLE IF NOT EXISTS) or on the second ALTER
// TABLE ... ADD COLUMN.
// A database v0.5.0 made (its leaderboard table is the one every release
// before 0.7.0 wrote) takes leaderboard step 1: its players are season 1 of
// `default`, ties and sequence kept, and the table's name is now a view that
// reads them but fails a release-before's write, instead of taking it where
// nobody reads.
TEST(PgMigration, AV050LeaderboardBecomesTheBoardDefault) {
  std::ifstream in(std::string(HOTROW_SOURCE_DIR) + "/tests/fixtures/v0.5.0-postgres.sql");
  std::stringstream dump;
  dump << in.rdbuf();
  std::string url = PostgresProcess::Shared()->CreateDatabase();
  std::string database = url.substr(url.rfind('/') + 1), out;
  ASSERT_EQ(PostgresProcess::Shared()->Psql(database, dump.str(), &out), 0) << out;
  auto pool = OpenPool(url);
  auto store = OrThrow(leaderboard::PostgresLeaderboardStore::Open(*pool));
  leaderboard::LeaderboardService service(*store);
  ASSERT_TRUE(service.Load().ok());
  std::promise<Result<leaderboard::Page>> page;
  service.Top(0, 2, [&](Result<leaderboard::Page> r) { page.set_value(std::move(r)); });
  auto top = page.get_future().get();
  ASSERT_TRUE(top.ok()) << top.status().ToString();
  EXPECT_EQ(top->total, 21);
  ASSERT_EQ(top->entries.size(), 2u);
  EXPECT_EQ(top->entries[0].client_id, "fixture-player");
  EXPECT_EQ(top->entries[1].client_id, "player-8");
  auto conn = OrThrow(db::pg::Connection::Connect(url));
  EXPECT_EQ(OrThrow(conn->Query("SELECT COUNT(*) FROM leaderboard")).Int(0, 0), 21) << "the view reads default";
  auto old_write = conn->Query("INSERT INTO leaderboard (client_id, score, seq) VALUES ('old', 1, 999)");
  EXPECT_FALSE(old_write.ok()) << "a write of a release before fails";
  EXPECT_EQ(
      OrThrow(conn->Query("SELECT MAX(version) FROM schema_migrations WHERE component = 'leaderboard'")).Int(0, 0), 4);
}

TEST(PgMigration, SchemasCreatedByManyConnectionsAtOnceAreCreatedOnce) {
  using Create = Status (*)(db::pg::Connection&);
  const Create creates[] = {dateplan::CreatePostgresDatePlanSchema, leaderboard::CreatePostgresLeaderboardSchema,
                            pointcard::CreatePostgresPointCardSchema};
  for (int round = 0; round < 3; ++round) {
    std::string url = FreshDatabase();
    constexpr int kConnections = 6;
    std::vector<std::unique_ptr<db::pg::Connection>> conns;
    for (int i = 0; i < kConnections; ++i) conns.push_back(OrThrow(db::pg::Connection::Connect(url)));
    for (Create create : creates) {
      std::latch start(kConnections);
      std::vector<std::future<Status>> results;
      for (auto& c : conns)
        results.push_back(std::async(std::launch::async, [&start, &c, create] {
          start.arrive_and_wait();
          return create(*c);
        }));
      for (auto& r : results) {
        Status s = r.get();
        EXPECT_TRUE(s.ok()) << "round " << round << ": " << s.ToString();
      }
    }
    auto applied = conns[0]->Query("SELECT COUNT(*) FROM schema_migrations WHERE component = 'dateplans'");
    ASSERT_TRUE(applied.ok()) << applied.status().ToString();
    EXPECT_EQ(applied->Int(0, 0), 1);
  }
}

// Expand-then-contract on PostgreSQL (db/migration.h): steps a newer
// release applied are used as they are; a contract step that closed the
// schema to this release refuses it, naming both releases.
TEST(PgMigration, ANewerExpandStepIsUsedAndAClosedSchemaIsRefused) {
  std::string url = FreshDatabase();
  auto conn = OrThrow(db::pg::Connection::Connect(url));
  {
    auto pool = OpenPool(url);
    OrThrow(dateplan::PostgresDatePlanStore::Open(*pool));
  }
  ASSERT_TRUE(conn->Exec("ALTER TABLE datePlans ADD COLUMN from_a_newer_release text; "
                         "INSERT INTO schema_migrations (component, version) VALUES ('dateplans', 2)")
                  .ok());
  {
    auto pool = OpenPool(url);
    auto store = dateplan::PostgresDatePlanStore::Open(*pool);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
  }
  ASSERT_TRUE(conn->Exec("INSERT INTO schema_compat VALUES ('dateplans', 2, '9.9.0')").ok());
  auto pool = OpenPool(url);
  auto refused = dateplan::PostgresDatePlanStore::Open(*pool);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("dateplans schema needs hotrow 9.9.0 or newer (schema 2); this is hotrow"),
            std::string::npos)
      << refused.status().ToString();
}

class PgPlans : public DatePlanBackendInstance {
 public:
  PgPlans() : url_(FreshDatabase()) { Open(); }
  dateplan::DatePlanStore& store() override { return *store_; }
  void Restart() override {
    store_.reset();
    pool_.reset();
    Open();
  }

 private:
  void Open() {
    pool_ = OpenPool(url_);
    store_ = OrThrow(dateplan::PostgresDatePlanStore::Open(*pool_));
  }
  std::string url_;
  std::unique_ptr<db::pg::Pool> pool_;
  std::unique_ptr<dateplan::PostgresDatePlanStore> store_;
};

class PgBoard : public LeaderboardBackendInstance {
 public:
  PgBoard() : url_(FreshDatabase()) { Open(); }
  leaderboard::LeaderboardStore& store() override { return *store_; }
  void Restart() override {
    store_.reset();
    pool_.reset();
    Open();
  }
  bool CrashServer() override {
    store_.reset();
    pool_.reset();
    if (!PostgresProcess::Shared()->Restart()) throw std::runtime_error("PostgreSQL did not come back after kill -9");
    return true;
  }

 private:
  void Open() {
    pool_ = OpenPool(url_);
    store_ = OrThrow(leaderboard::PostgresLeaderboardStore::Open(*pool_));
  }
  std::string url_;
  std::unique_ptr<db::pg::Pool> pool_;
  std::unique_ptr<leaderboard::PostgresLeaderboardStore> store_;
};

class PgCards : public PointCardBackendInstance {
 public:
  PgCards() : url_(FreshDatabase()) {
    SeedContractCards(url_);
    Open();
  }
  pointcard::PointCardStore& store() override { return *store_; }
  void Restart() override {
    store_.reset();
    pool_.reset();
    Open();
  }
  Result<pointcard::CheckReport> Check() override {
    auto conn = db::pg::Connection::Connect(url_);
    if (!conn.ok()) return conn.status();
    return pointcard::CheckPostgresInvariants(**conn);
  }

 private:
  void Open() {
    pool_ = OpenPool(url_);
    // Small fold chunks: a grant on these few cards crosses chunk boundaries.
    store_ = OrThrow(pointcard::PostgresPointCardStore::Open(*pool_, {.fold_chunk = 5}));
  }
  std::string url_;
  std::unique_ptr<db::pg::Pool> pool_;
  std::unique_ptr<pointcard::PostgresPointCardStore> store_;
};

auto Name = [](const auto& info) { return info.param.name; };

INSTANTIATE_TEST_SUITE_P(Postgres, DatePlanContract,
                         ::testing::Values(DatePlanBackend{"postgres", [] { return std::make_unique<PgPlans>(); }}),
                         Name);
INSTANTIATE_TEST_SUITE_P(Postgres, LeaderboardContract,
                         ::testing::Values(LeaderboardBackend{"postgres", [] { return std::make_unique<PgBoard>(); }}),
                         Name);
INSTANTIATE_TEST_SUITE_P(Postgres, PointCardContract,
                         ::testing::Values(PointCardBackend{"postgres", [] { return std::make_unique<PgCards>(); }}),
                         Name);

// The payment and grant rules answer typed outcomes (hotrow_pay_v2,
// hotrow_grant_v2); the text-outcome functions of earlier builds stay, as
// wrappers, for instances of those builds still running beside this one
// during a rolling upgrade. Each outcome, through the old names:
TEST(PostgresPointCard, TheTextOutcomesOfEarlierBuildsStillAnswer) {
  std::string url = FreshDatabase();
  auto conn = OrThrow(db::pg::Connection::Connect(url));
  pointcard::SeedOptions o;
  o.cards = 3;
  o.stores = 2;
  o.history = 0;
  OrThrow(pointcard::SeedPostgresPointCard(*conn, o, nullptr));
  auto pool = OpenPool(url);
  auto store = OrThrow(pointcard::PostgresPointCardStore::Open(*pool));  // creates the functions
  auto outcome = [&](const std::string& sql) {
    auto rows = conn->Query(sql);
    if (!rows.ok()) return "error: " + rows.status().ToString();
    return std::string(rows->Text(0, 0));
  };
  EXPECT_EQ(outcome("SELECT outcome FROM hotrow_pay(1, 1, 10, 'k1', 'fp')"), "ok");
  EXPECT_EQ(outcome("SELECT outcome FROM hotrow_pay(1, 1, 10, 'k1', 'fp')"), "replayed");
  EXPECT_EQ(outcome("SELECT outcome FROM hotrow_pay(1, 1, 10, 'k1', 'other')"), "mismatch");
  EXPECT_EQ(outcome("SELECT outcome FROM hotrow_pay(1, 1, -999999999, 'k2', 'fp')"), "refused");
  EXPECT_EQ(outcome("SELECT outcome FROM hotrow_pay(1, 1, -999999999, 'k2', 'fp')"), "replayed-refused");
  EXPECT_EQ(outcome("SELECT outcome FROM hotrow_pay(999, 1, 10, NULL, '')"), "no-card");
  std::string future = "(EXTRACT(EPOCH FROM now()) * 1000000)::bigint + 3600000000";
  EXPECT_EQ(outcome("SELECT outcome FROM hotrow_grant(0, " + future + ", 1, NULL, '')"), "future");
  EXPECT_EQ(outcome("SELECT outcome FROM hotrow_grant(0, 1000, 1, 'g', 'fp', false)"), "ok");
  EXPECT_EQ(outcome("SELECT outcome FROM hotrow_grant(0, 1000, 1, 'g', 'fp', false)"), "replayed");
  EXPECT_EQ(outcome("SELECT outcome FROM hotrow_grant(0, 1000, 1, 'g', 'other', false)"), "mismatch");
  EXPECT_EQ(outcome("SELECT outcome FROM hotrow_grant(500, 2000, 1, NULL, '', false)"), "overlap");
  EXPECT_EQ(outcome("SELECT outcome FROM hotrow_grant(500, 2000, 1, NULL, '')"), "ok") << "v0.1.0 allowed overlaps";
}

// The pool never opens more than its size, and a full queue answers
// overloaded at once instead of waiting (or failing with "too many clients").
TEST(PostgresPool, AFullQueueAnswersOverloaded) {
  PostgresProcess* pg = PostgresProcess::Shared();
  ASSERT_TRUE(pg);
  db::pg::PoolOptions options;
  options.url = pg->CreateDatabase();
  options.size = 1;
  options.queue_max = 2;
  auto pool = db::pg::Pool::Open(options);
  ASSERT_TRUE(pool.ok());
  std::promise<void> started;
  std::vector<std::promise<Status>> done(4);
  (*pool)->Submit([&](Result<db::pg::Connection*> c) {
    started.set_value();
    done[0].set_value((*c)->Exec("SELECT pg_sleep(0.5)"));
  });
  started.get_future().wait();  // the only connection is busy now
  for (int i = 1; i < 4; ++i)
    (*pool)->Submit([&, i](Result<db::pg::Connection*> c) { done[i].set_value(c.ok() ? Status::Ok() : c.status()); });
  EXPECT_EQ(done[3].get_future().get().code(), ErrorCode::kOverloaded);
  EXPECT_TRUE(done[0].get_future().get().ok());
  EXPECT_TRUE(done[1].get_future().get().ok());
  EXPECT_TRUE(done[2].get_future().get().ok());
  auto connections = (*pool)->Run<db::pg::Rows>([](db::pg::Connection& c) {
    return c.Query(
        "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = '' AND datname = current_database()");
  });
  ASSERT_TRUE(connections.ok());
  EXPECT_EQ(connections->Int(0, 0), 1);
}

// The PostgreSQL checker finds what the SQLite one finds.
TEST(PostgresChecker, FindsCorruption) {
  PgCards cards;
  auto clean = cards.Check();
  ASSERT_TRUE(clean.ok()) << clean.status().ToString();
  EXPECT_TRUE(clean->ok());
  EXPECT_EQ(clean->cards, kContractCards);
  EXPECT_EQ(clean->rows, kContractHistory);
  PostgresProcess* pg = PostgresProcess::Shared();
  std::string url = pg->CreateDatabase();
  auto conn = db::pg::Connection::Connect(url);
  ASSERT_TRUE(conn.ok());
  pointcard::SeedOptions o;
  o.cards = 50;
  o.stores = 5;
  o.history = 200;
  ASSERT_TRUE(pointcard::SeedPostgresPointCard(**conn, o, nullptr).ok());
  ASSERT_TRUE((*conn)
                  ->Exec("UPDATE S_ACCOUNT SET BALANCE = BALANCE + 1 WHERE CARD_ID = "
                         "(SELECT MIN(CARD_ID) FROM H_TRANSACTION)")
                  .ok());
  ASSERT_TRUE((*conn)->Exec("INSERT INTO H_TRANSACTION VALUES ('2020-01-01', 999, 1, 5, 5)").ok());
  auto report = pointcard::CheckPostgresInvariants(**conn);
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->violations.count("balance"));
  EXPECT_TRUE(report->violations.count("orphan history"));
}

}  // namespace
}  // namespace hotrow::testing
