// Schema migrations: a database made by the release before (the fixture,
// tests/fixtures/make-fixture.sh with v0.1.0) opens, migrates and serves
// everything it held; a database from a newer release is refused.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "db/sqlite.h"
#include "harness/http_client.h"
#include "harness/server_process.h"
#include "pointcard/model.h"
#include "pointcard/sqlite_file.h"

namespace hotrow::testing {
namespace {

namespace fs = std::filesystem;

int64_t QueryOne(const std::string& path, const std::string& sql) {
  auto conn = db::sqlite::Connection::Open(path, db::sqlite::OpenMode::kReadOnly);
  return db::sqlite::QueryInt(**conn, sql).value();
}

class FromV010 : public ::testing::Test {
 protected:
  void SetUp() override {
    path = dir.File("hotrow.db");
    fs::copy_file(std::string(HOTROW_SOURCE_DIR) + "/tests/fixtures/v0.1.0.db", path);
    ASSERT_EQ(QueryOne(path, "PRAGMA user_version"), 0) << "the fixture is v0.1.0's";
  }
  TempDir dir;
  std::string path;
};

TEST_F(FromV010, ADatabaseTheReleaseMadeIsMigratedAndServed) {
  auto p = ServerProcess::Start({"--db", "sqlite:" + path, "--admin-token", kTestAdminToken}, dir.File("log"));
  ASSERT_TRUE(p);
  HttpClient c(p->port());
  auto one = c.Get("/datePlan/1");
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(JsonInt(one.body, "like"), 3) << "the likes v0.1.0 counted";
  EXPECT_EQ(JsonString(c.Get("/datePlan/2").body, "title"), "edited by v0.1.0");
  EXPECT_EQ(c.Get("/datePlan/3").status, 404) << "deleted under v0.1.0";
  EXPECT_EQ(c.Get("/datePlan/20").status, 200);
  EXPECT_EQ(c.Get("/api/v1/leaderboard/fixture-player").status, 200);
  auto replay =
      c.Post("/api/v1/cards/1/transactions", R"({"storeId":1,"amount":700})", {{"Idempotency-Key", "fixture-1"}});
  EXPECT_EQ(replay.status, 201) << replay.body;
  EXPECT_EQ(replay.Header("Idempotent-Replayed"), "true") << "v0.1.0's key is still known";
  // The migrated column works: an edit bumps the version.
  auto edit = c.Put("/datePlan/2", R"({"title":"edited by the new release","content":"c","category":"Indoor"})",
                    {{"Authorization", std::string("Bearer ") + kTestAdminToken}});
  EXPECT_EQ(edit.status, 200) << edit.body;
  EXPECT_EQ(c.Post("/datePlan/1/like").status, 200);
  ASSERT_EQ(p->Stop(), 0);
  EXPECT_EQ(QueryOne(path, "PRAGMA user_version"), 3);
  // The leaderboard's rows are season 1 of the board `default`, and its
  // steps are recorded per component from the main file's step 3 on.
  EXPECT_EQ(QueryOne(path, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'leaderboard'"), 0);
  EXPECT_EQ(QueryOne(path, "SELECT COUNT(*) FROM lb_score WHERE board_id = 'default' AND client_id = 'fixture-player'"),
            1);
  EXPECT_EQ(QueryOne(path, "SELECT MAX(version) FROM schema_migrations WHERE component = 'leaderboard'"), 4);
  // The point card moved into its own file (pointcard/sqlite_file.h), and
  // releases before that may no longer open the main file.
  EXPECT_EQ(QueryOne(path, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'S_ACCOUNT'"), 0);
  EXPECT_EQ(QueryOne(pointcard::PointCardPath(path), "SELECT COUNT(*) FROM S_ACCOUNT"), 50);
  EXPECT_EQ(QueryOne(path, "SELECT oldest_schema FROM schema_compat"), 3);
  EXPECT_EQ(QueryOne(path, "SELECT version FROM datePlans WHERE id = 2"), 2);
  EXPECT_EQ(QueryOne(path, "SELECT version FROM datePlans WHERE id = 1"), 1) << "a like is not an edit";
  // A second start finds nothing to migrate.
  auto again = ServerProcess::Start({"--db", "sqlite:" + path}, dir.File("log2"));
  ASSERT_TRUE(again);
  HttpClient c2(again->port());
  EXPECT_EQ(JsonInt(c2.Get("/datePlan/1").body, "like"), 4);
  EXPECT_EQ(again->Stop(), 0);
  auto check = RunHotrow({"check", "pointcard", "--db", "sqlite:" + path});
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

// Expand-then-contract (db/migration.h): a newer release's expand steps
// leave the database usable by this one (a rolling restart runs both)...
TEST_F(FromV010, ADatabaseWithANewerReleasesExpandStepsIsServed) {
  {
    auto conn = db::sqlite::Connection::Open(path, db::sqlite::OpenMode::kReadWrite);
    ASSERT_TRUE(conn.ok());
    ASSERT_TRUE((*conn)->Exec("ALTER TABLE datePlans ADD COLUMN version INTEGER NOT NULL DEFAULT 1").ok());
    ASSERT_TRUE((*conn)->Exec("ALTER TABLE datePlans ADD COLUMN a_newer_column TEXT").ok());
    ASSERT_TRUE((*conn)->Exec("PRAGMA user_version = 3").ok());
  }
  auto p = ServerProcess::Start({"--db", "sqlite:" + path}, dir.File("log"));
  ASSERT_TRUE(p);
  HttpClient c(p->port());
  EXPECT_EQ(JsonInt(c.Get("/datePlan/1").body, "like"), 3);
  EXPECT_EQ(c.Post("/datePlan/1/like").status, 200);
  ASSERT_EQ(p->Stop(), 0);
  EXPECT_EQ(QueryOne(path, "PRAGMA user_version"), 3) << "never rolled back";
}

// ...until a contract step records that older binaries may no longer use it:
// then this one is refused, with both releases named.
TEST_F(FromV010, ADatabaseAContractStepClosedToThisReleaseIsRefused) {
  {
    auto conn = db::sqlite::Connection::Open(path, db::sqlite::OpenMode::kReadWrite);
    ASSERT_TRUE(conn.ok());
    ASSERT_TRUE((*conn)->Exec("PRAGMA user_version = 99").ok());
    ASSERT_TRUE((*conn)
                    ->Exec("CREATE TABLE schema_compat (id INTEGER PRIMARY KEY CHECK (id = 1), oldest_schema INTEGER "
                           "NOT NULL, oldest_binary TEXT NOT NULL); INSERT INTO schema_compat VALUES (1, 99, '9.9.0')")
                    .ok());
  }
  auto r = RunHotrow({"serve", "--port", "0", "--db", "sqlite:" + path}, std::chrono::seconds(30));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("needs hotrow 9.9.0 or newer (schema 99); this is hotrow 0."), std::string::npos) << r.output;
  auto seed = RunHotrow({"seed", "dateplans", "--count", "1", "--db", "sqlite:" + path});
  EXPECT_NE(seed.exit_code, 0) << "seed applies the same rule";
  EXPECT_NE(seed.output.find("needs hotrow 9.9.0"), std::string::npos) << seed.output;
}

}  // namespace
}  // namespace hotrow::testing

namespace hotrow::testing {
namespace {

// v0.6.5, the last release before many boards (0.7.0), with the point card
// in its own file already (tests/fixtures/make-fixture.sh): its one
// leaderboard becomes season 1 of the board `default`, served by the
// legacy routes and the board routes; names and the other domains work on
// the migrated files.
TEST(FromV065, ItsLeaderboardBecomesTheBoardDefaultAndEverythingIsServed) {
  TempDir dir;
  const std::string path = dir.File("hotrow.db"),
                    fixture = std::string(HOTROW_SOURCE_DIR) + "/tests/fixtures/v0.6.5.db";
  fs::copy_file(fixture, path);
  fs::copy_file(fixture + ".pointcard.db", pointcard::PointCardPath(path));
  ASSERT_EQ(QueryOne(path, "PRAGMA user_version"), 2) << "the fixture is v0.6.5's";
  ASSERT_EQ(QueryOne(path, "SELECT score FROM leaderboard WHERE client_id = 'fixture-player'"), 424242);
  const int64_t players = QueryOne(path, "SELECT COUNT(*) FROM leaderboard");
  {
    auto p = ServerProcess::Start({"--db", "sqlite:" + path, "--admin-token", kTestAdminToken}, dir.File("log"));
    ASSERT_TRUE(p);
    HttpClient c(p->port());
    auto legacy = c.Get("/api/v1/leaderboard/fixture-player");
    ASSERT_EQ(legacy.status, 200) << legacy.body;
    EXPECT_EQ(JsonInt(legacy.body, "score"), 424242);
    EXPECT_EQ(JsonInt(legacy.body, "rank"), 1);
    auto page = c.Get("/api/v1/boards/default/leaderboard?limit=100");
    ASSERT_EQ(page.status, 200) << page.body;
    EXPECT_EQ(JsonInt(page.body, "total"), players);
    EXPECT_EQ(JsonInt(page.body, "season"), 1);
    auto named = c.Post("/api/v1/boards/default/scores", R"({"score":5,"displayName":"Since 0.7.0"})",
                        {{"ClientId", "new-player"}});
    EXPECT_EQ(named.status, 200) << named.body;
    auto made = c.Post("/api/v1/boards", R"({"id":"weekly","reset":"weekly"})",
                       {{"Authorization", std::string("Bearer ") + kTestAdminToken}});
    EXPECT_EQ(made.status, 201) << made.body;
    auto replay =
        c.Post("/api/v1/cards/1/transactions", R"({"storeId":1,"amount":700})", {{"Idempotency-Key", "fixture-1"}});
    EXPECT_EQ(replay.status, 201) << replay.body;
    EXPECT_EQ(replay.Header("Idempotent-Replayed"), "true") << "v0.6.5's key is still known";
    EXPECT_EQ(JsonInt(c.Get("/datePlan/1").body, "like"), 3);
    ASSERT_EQ(p->Stop(), 0);
  }
  EXPECT_EQ(QueryOne(path, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'leaderboard'"), 0);
  EXPECT_EQ(QueryOne(path, "SELECT COUNT(*) FROM lb_score WHERE board_id = 'default'"), players + 1);
  EXPECT_EQ(QueryOne(path, "SELECT MAX(version) FROM schema_migrations WHERE component = 'leaderboard'"), 4);
  // Served again from the migrated files: the name (a load reads no
  // names; the view reads it from the store) and the board made.
  auto again = ServerProcess::Start({"--db", "sqlite:" + path}, dir.File("log2"));
  ASSERT_TRUE(again);
  HttpClient c2(again->port());
  auto player = c2.Get("/api/v1/boards/default/players/new-player");
  ASSERT_EQ(player.status, 200) << player.body;
  EXPECT_EQ(JsonString(player.body, "displayName"), "Since 0.7.0");
  EXPECT_EQ(c2.Get("/api/v1/boards/weekly").status, 200);
  EXPECT_EQ(again->Stop(), 0);
  auto check = RunHotrow({"check", "pointcard", "--db", "sqlite:" + path});
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

// v0.7.2, the last release before history rows had their own fields
// (point-card schema 2): its rows are numbered in primary-key order and get
// their actors; a key it stored replays with the row's id; new rows are
// numbered after them; rows a release before 0.8.0 writes into the
// migrated file (a downgrade) are numbered at the next start.
TEST(FromV072, HistoryRowsGetTheirIdsAndActorsAndAreServed) {
  TempDir dir;
  const std::string path = dir.File("hotrow.db"),
                    fixture = std::string(HOTROW_SOURCE_DIR) + "/tests/fixtures/v0.7.2.db";
  const std::string cards = pointcard::PointCardPath(path);
  fs::copy_file(fixture, path);
  fs::copy_file(fixture + ".pointcard.db", cards);
  ASSERT_EQ(QueryOne(cards, "PRAGMA user_version"), 1) << "the fixture is v0.7.2's";
  const int64_t rows = QueryOne(cards, "SELECT COUNT(*) FROM H_TRANSACTION");
  ASSERT_GT(QueryOne(cards, "SELECT COUNT(*) FROM H_TRANSACTION WHERE KIND = 'grant'"), 0);
  auto unmigrated = RunHotrow({"check", "pointcard", "--db", "sqlite:" + path});
  EXPECT_EQ(unmigrated.exit_code, 0) << "checked as it is, before any 0.8.0 server migrated it: " << unmigrated.output;
  {
    auto p = ServerProcess::Start({"--db", "sqlite:" + path, "--admin-token", kTestAdminToken}, dir.File("log"));
    ASSERT_TRUE(p);
    HttpClient c(p->port());
    auto replay =
        c.Post("/api/v1/cards/1/transactions", R"({"storeId":1,"amount":700})", {{"Idempotency-Key", "fixture-1"}});
    ASSERT_EQ(replay.status, 201) << replay.body;
    EXPECT_EQ(replay.Header("Idempotent-Replayed"), "true") << "v0.7.2's key is still known";
    EXPECT_GT(JsonInt(replay.body, "transactionId"), 0);
    EXPECT_EQ(JsonString(replay.body, "actor"), "anonymous");
    EXPECT_EQ(JsonString(replay.body, "kind"), "charge");
    auto fresh = c.Post("/api/v1/cards/1/transactions", R"({"storeId":1,"amount":5,"reference":"R-1"})");
    ASSERT_EQ(fresh.status, 201) << fresh.body;
    EXPECT_EQ(JsonInt(fresh.body, "transactionId"), rows + 1) << "after every numbered row";
    ASSERT_EQ(p->Stop(), 0);
  }
  EXPECT_EQ(QueryOne(cards, "PRAGMA user_version"), 6)
      << "schema 2, then 3 (0.9.0's cards), 4 (keys), 5 (holds), 6 (lots)";
  // Numbered 1..rows in primary-key order, each once.
  EXPECT_EQ(QueryOne(cards,
                     "SELECT COUNT(*) FROM (SELECT TRANSACTION_ID, row_number() OVER (ORDER BY PAYMENT_TIME, CARD_ID, "
                     "STORE_ID) AS n FROM H_TRANSACTION WHERE TRANSACTION_ID <= " +
                         std::to_string(rows) + ") WHERE TRANSACTION_ID = n"),
            rows);
  EXPECT_EQ(QueryOne(cards, "SELECT COUNT(*) FROM H_TRANSACTION WHERE KIND = 'grant' AND ACTOR <> 'system'"), 0);
  EXPECT_EQ(QueryOne(cards, "SELECT COUNT(*) FROM H_TRANSACTION WHERE KIND <> 'grant' AND ACTOR <> 'anonymous'"), 0);
  // A row as v0.7.2 writes it, into the migrated file.
  {
    auto conn = db::sqlite::Connection::Open(cards, db::sqlite::OpenMode::kReadWrite);
    ASSERT_TRUE(conn.ok());
    ASSERT_TRUE((*conn)
                    ->Exec("INSERT INTO H_TRANSACTION (PAYMENT_TIME, CARD_ID, STORE_ID, AMOUNT, BALANCE, KIND) "
                           "SELECT LAST_UPDATE + 1, 2, 1, 10, BALANCE + 10, 'charge' FROM S_ACCOUNT WHERE CARD_ID = 2; "
                           "UPDATE S_ACCOUNT SET BALANCE = BALANCE + 10, LAST_UPDATE = LAST_UPDATE + 1 "
                           "WHERE CARD_ID = 2")
                    .ok());
  }
  auto unnumbered = RunHotrow({"check", "pointcard", "--db", "sqlite:" + path});
  EXPECT_EQ(unnumbered.exit_code, 1) << unnumbered.output;
  EXPECT_NE(unnumbered.output.find("row fields"), std::string::npos) << unnumbered.output;
  auto again = ServerProcess::Start({"--db", "sqlite:" + path}, dir.File("log2"));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->Stop(), 0);
  EXPECT_EQ(QueryOne(cards, "SELECT TRANSACTION_ID FROM H_TRANSACTION WHERE CARD_ID = 2 ORDER BY PAYMENT_TIME DESC"),
            rows + 2);
  EXPECT_EQ(QueryOne(cards, "SELECT COUNT(*) FROM H_TRANSACTION WHERE ACTOR IS NULL OR TRANSACTION_ID IS NULL"), 0);
  auto check = RunHotrow({"check", "pointcard", "--db", "sqlite:" + path});
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

// A file v0.8.0 made (the last release before point-card migration 3): its
// cards are active, issued cards take ids after them, a closed card refuses
// payments, and the checker passes.
TEST(FromV080, CardsGetTheirStatesAndNewCardsTheNextIds) {
  TempDir dir;
  const std::string path = dir.File("hotrow.db"),
                    fixture = std::string(HOTROW_SOURCE_DIR) + "/tests/fixtures/v0.8.0.db";
  const std::string cards = pointcard::PointCardPath(path);
  fs::copy_file(fixture, path);
  fs::copy_file(fixture + ".pointcard.db", cards);
  ASSERT_EQ(QueryOne(cards, "PRAGMA user_version"), 2) << "the fixture is v0.8.0's";
  const int64_t seeded = QueryOne(cards, "SELECT COUNT(*) FROM S_ACCOUNT");
  auto unmigrated = RunHotrow({"check", "pointcard", "--db", "sqlite:" + path});
  EXPECT_EQ(unmigrated.exit_code, 0) << "checked as it is, before any 0.9.0 server migrated it: " << unmigrated.output;
  {
    auto p = ServerProcess::Start({"--db", "sqlite:" + path, "--admin-token", kTestAdminToken}, dir.File("log"));
    ASSERT_TRUE(p);
    HttpClient c(p->port());
    const Headers admin = {{"Authorization", std::string("Bearer ") + kTestAdminToken}};
    auto made = c.Post("/api/v1/cards", R"({"regionId":13,"externalRef":"m-80"})", admin);
    ASSERT_EQ(made.status, 201) << made.body;
    EXPECT_EQ(JsonInt(made.body, "cardId"), seeded + 1);
    auto old = c.Get("/api/v1/cards/1");
    ASSERT_EQ(old.status, 200);
    EXPECT_EQ(JsonString(old.body, "status"), "active");
    auto replay =
        c.Post("/api/v1/cards/1/transactions", R"({"storeId":1,"amount":700})", {{"Idempotency-Key", "fixture-1"}});
    EXPECT_EQ(replay.Header("Idempotent-Replayed"), "true") << "v0.8.0's key is still known";
    ASSERT_EQ(c.Post("/api/v1/cards/2/close", "", admin).status, 200);
    auto refused = c.Post("/api/v1/cards/2/transactions", R"({"storeId":1,"amount":5})");
    EXPECT_EQ(refused.status, 409) << refused.body;
    EXPECT_NE(refused.body.find(R"("code":"card_closed")"), std::string::npos) << refused.body;
    ASSERT_EQ(p->Stop(), 0);
  }
  EXPECT_EQ(QueryOne(cards, "PRAGMA user_version"), 6) << "3, then 0.10.0's keys, 0.12.0's holds, 0.13.0's lots";
  EXPECT_EQ(QueryOne(cards, "SELECT COUNT(*) FROM S_ACCOUNT WHERE STATUS = 'closed'"), 1);
  auto check = RunHotrow({"check", "pointcard", "--db", "sqlite:" + path});
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

// 0.10.0 adds store keys (point-card schema 4) to what 0.9.0 wrote: its
// issued and closed cards and the store it made keep serving, and a key of
// that store pays.
TEST(FromV090, StoresOfTheReleaseBeforeGetKeys) {
  TempDir dir;
  const std::string path = dir.File("hotrow.db"),
                    fixture = std::string(HOTROW_SOURCE_DIR) + "/tests/fixtures/v0.9.0.db";
  const std::string cards = pointcard::PointCardPath(path);
  fs::copy_file(fixture, path);
  fs::copy_file(fixture + ".pointcard.db", cards);
  ASSERT_EQ(QueryOne(cards, "PRAGMA user_version"), 3) << "the fixture is v0.9.0's";
  ASSERT_EQ(QueryOne(cards, "SELECT COUNT(*) FROM S_ACCOUNT WHERE STATUS = 'closed'"), 1);
  const int64_t stores = QueryOne(cards, "SELECT MAX(STORE_ID) FROM M_STORE");
  {
    auto p = ServerProcess::Start({"--db", "sqlite:" + path, "--admin-token", kTestAdminToken, "--require-store-keys"},
                                  dir.File("log"));
    ASSERT_TRUE(p);
    HttpClient c(p->port());
    const Headers admin = {{"Authorization", std::string("Bearer ") + kTestAdminToken}};
    auto key = c.Post("/api/v1/stores/" + std::to_string(stores) + "/keys", "", admin);
    ASSERT_EQ(key.status, 201) << key.body;
    const Headers terminal = {{"Authorization", "Bearer " + JsonString(key.body, "key")}};
    auto paid = c.Post("/api/v1/cards/51/transactions", R"({"storeId":)" + std::to_string(stores) + R"(,"amount":40})",
                       terminal);
    EXPECT_EQ(paid.status, 201) << "0.9.0's issued card, at 0.9.0's store: " << paid.body;
    EXPECT_EQ(JsonString(paid.body, "actor"), "key:" + JsonString(key.body, "keyId"));
    auto closed =
        c.Post("/api/v1/cards/2/transactions", R"({"storeId":)" + std::to_string(stores) + R"(,"amount":1})", terminal);
    EXPECT_EQ(closed.status, 409) << closed.body;
    auto anonymous =
        c.Post("/api/v1/cards/1/transactions", R"({"storeId":1,"amount":700})", {{"Idempotency-Key", "fixture-1"}});
    EXPECT_EQ(anonymous.status, 401) << "--require-store-keys: " << anonymous.body;
    auto replay = c.Post("/api/v1/cards/1/transactions", R"({"storeId":1,"amount":700})",
                         {{"Idempotency-Key", "fixture-1"}, admin[0]});
    EXPECT_EQ(replay.Header("Idempotent-Replayed"), "true") << "the admin token still pays; 0.9.0's key replays";
    ASSERT_EQ(p->Stop(), 0);
  }
  EXPECT_EQ(QueryOne(cards, "PRAGMA user_version"), 6) << "4 (keys), then 5 (holds) and 6 (lots)";
  EXPECT_EQ(QueryOne(cards, "SELECT COUNT(*) FROM M_STORE_KEY"), 1);
  auto check = RunHotrow({"check", "pointcard", "--db", "sqlite:" + path});
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

// 0.12.0 adds holds (point-card schema 5) to what 0.11.0 wrote: its store
// key's payment and keyed refund replay, a card of it holds, captures and
// pays from what is left available, and the check passes.
TEST(FromV0110, CardsOfTheReleaseBeforeGetHolds) {
  TempDir dir;
  const std::string path = dir.File("hotrow.db"),
                    fixture = std::string(HOTROW_SOURCE_DIR) + "/tests/fixtures/v0.11.0.db";
  const std::string cards = pointcard::PointCardPath(path);
  fs::copy_file(fixture, path);
  fs::copy_file(fixture + ".pointcard.db", cards);
  ASSERT_EQ(QueryOne(cards, "PRAGMA user_version"), 4) << "the fixture is v0.11.0's";
  ASSERT_EQ(QueryOne(cards, "SELECT COUNT(*) FROM H_TRANSACTION WHERE KIND = 'refund'"), 1);
  {
    auto p = ServerProcess::Start({"--db", "sqlite:" + path, "--admin-token", kTestAdminToken}, dir.File("log"));
    ASSERT_TRUE(p);
    HttpClient c(p->port());
    auto paid =
        c.Post("/api/v1/cards/5/transactions", R"({"storeId":1,"amount":-30})", {{"Idempotency-Key", "fixture-paid"}});
    ASSERT_EQ(paid.status, 201) << paid.body;
    EXPECT_EQ(paid.Header("Idempotent-Replayed"), "true") << "0.11.0's payment key";
    auto refund =
        c.Post("/api/v1/cards/5/transactions/" + std::to_string(JsonInt(paid.body, "transactionId")) + "/refund",
               R"({"amount":10})", {{"Idempotency-Key", "fixture-refund"}});
    EXPECT_EQ(refund.status, 201) << refund.body;
    EXPECT_EQ(refund.Header("Idempotent-Replayed"), "true") << "0.11.0's refund key";
    const int64_t balance = JsonInt(c.Get("/api/v1/cards/4").body, "balance");
    ASSERT_GT(balance, 100);
    auto hold = c.Post("/api/v1/cards/4/holds", R"({"storeId":1,"amount":-100,"expiresInSeconds":600})");
    ASSERT_EQ(hold.status, 201) << hold.body;
    EXPECT_EQ(JsonInt(c.Get("/api/v1/cards/4").body, "available"), balance - 100);
    auto over =
        c.Post("/api/v1/cards/4/transactions", R"({"storeId":1,"amount":-)" + std::to_string(balance - 99) + "}");
    EXPECT_EQ(over.status, 409) << "the hold is not available: " << over.body;
    auto captured = c.Post("/api/v1/cards/4/holds/" + std::to_string(JsonInt(hold.body, "holdId")) + "/capture");
    EXPECT_EQ(captured.status, 200) << captured.body;
    ASSERT_EQ(p->Stop(), 0);
  }
  EXPECT_EQ(QueryOne(cards, "PRAGMA user_version"), 6) << "4, then 0.12.0's holds and 0.13.0's lots";
  EXPECT_EQ(QueryOne(cards, "SELECT oldest_schema FROM schema_compat WHERE id = 1"), 6)
      << "contract steps: 0.11.0 would spend what holds keep, 0.12.0 what lots have without taking it from them";
  EXPECT_EQ(QueryOne(cards, "SELECT COUNT(*) FROM P_HOLD WHERE STATUS = 'captured'"), 1);
  auto check = RunHotrow({"check", "pointcard", "--db", "sqlite:" + path});
  EXPECT_EQ(check.exit_code, 0) << check.output;
  // A reseed drops the holds with the cards they were of.
  auto reseed =
      RunHotrow({"seed", "pointcard", "--cards", "20", "--history", "40", "--replace", "--db", "sqlite:" + path});
  ASSERT_EQ(reseed.exit_code, 0) << reseed.output;
  EXPECT_EQ(QueryOne(cards, "SELECT COUNT(*) FROM P_HOLD"), 0);
}

// 0.13.0's lots (point-card schema 6) on a file 0.12.0 made, with a hold
// captured in part and one left open: the upgrade makes no lot (every
// point so far never expires), and an expiring grant then makes lots that
// payments spend first, beside the holds 0.12.0 made.
TEST(FromV0120, CardsOfTheReleaseBeforeGetExpiringLots) {
  TempDir dir;
  const std::string path = dir.File("hotrow.db"),
                    fixture = std::string(HOTROW_SOURCE_DIR) + "/tests/fixtures/v0.12.0.db";
  const std::string cards = pointcard::PointCardPath(path);
  fs::copy_file(fixture, path);
  fs::copy_file(fixture + ".pointcard.db", cards);
  ASSERT_EQ(QueryOne(cards, "PRAGMA user_version"), 5) << "the fixture is v0.12.0's";
  ASSERT_EQ(QueryOne(cards, "SELECT COUNT(*) FROM P_HOLD WHERE STATUS = 'captured'"), 1);
  const int64_t balances = QueryOne(cards, "SELECT SUM(BALANCE) FROM S_ACCOUNT");
  {
    auto p = ServerProcess::Start({"--db", "sqlite:" + path, "--admin-token", kTestAdminToken}, dir.File("log"));
    ASSERT_TRUE(p);
    HttpClient c(p->port());
    auto lots = c.Get("/api/v1/cards/4/lots");
    ASSERT_EQ(lots.status, 200) << lots.body;
    EXPECT_NE(lots.body.find(R"("lots":[])"), std::string::npos) << lots.body;
    const int64_t balance = JsonInt(c.Get("/api/v1/cards/4").body, "balance");
    const std::string from = pointcard::FormatTime(pointcard::NowUs());
    ASSERT_EQ(c.Post("/api/v1/cards/4/transactions", R"({"storeId":1,"amount":500})").status, 201);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const std::string to = pointcard::FormatTime(pointcard::NowUs());
    auto grant = c.Post("/api/v1/grants",
                        R"({"from":")" + from + R"(","to":")" + to + R"(","ratePercent":10,"expiresInDays":30})",
                        {{"Authorization", std::string("Bearer ") + kTestAdminToken}});
    ASSERT_EQ(grant.status, 201) << grant.body;
    auto info = c.Get("/api/v1/grants/" + std::to_string(JsonInt(grant.body, "grantId")),
                      {{"Authorization", std::string("Bearer ") + kTestAdminToken}});
    EXPECT_NE(info.body.find(R"("expiresAt":"20)"), std::string::npos) << info.body;
    ASSERT_TRUE(Eventually([&] { return JsonInt(c.Get("/api/v1/cards/4").body, "balance") == balance + 550; },
                           std::chrono::seconds(10)));
    ASSERT_EQ(c.Post("/api/v1/cards/4/transactions", R"({"storeId":1,"amount":-20})").status, 201);
    lots = c.Get("/api/v1/cards/4/lots");
    EXPECT_NE(lots.body.find(R"("amount":50,"remaining":30,"reserved":0)"), std::string::npos)
        << "the payment took from the lot: " << lots.body;
    ASSERT_EQ(p->Stop(), 0);
  }
  EXPECT_EQ(QueryOne(cards, "PRAGMA user_version"), 6) << "5, then 0.13.0's lots";
  EXPECT_EQ(QueryOne(cards, "SELECT oldest_schema FROM schema_compat WHERE id = 1"), 6)
      << "a contract step: 0.12.0 would spend what lots have without taking it from them";
  EXPECT_EQ(QueryOne(cards, "SELECT SUM(BALANCE) FROM S_ACCOUNT"), balances + 530);
  EXPECT_EQ(QueryOne(cards, "SELECT COUNT(*) FROM P_LOT WHERE CARD_ID = 4"), 1);
  EXPECT_EQ(QueryOne(cards, "SELECT COUNT(*) FROM P_HOLD WHERE STATUS = 'captured'"), 1) << "0.12.0's holds stay";
  auto check = RunHotrow({"check", "pointcard", "--db", "sqlite:" + path});
  EXPECT_EQ(check.exit_code, 0) << check.output;
  auto reseed =
      RunHotrow({"seed", "pointcard", "--cards", "20", "--history", "40", "--replace", "--db", "sqlite:" + path});
  ASSERT_EQ(reseed.exit_code, 0) << reseed.output;
  EXPECT_EQ(QueryOne(cards, "SELECT COUNT(*) FROM P_LOT"), 0) << "a reseed drops the lots with their cards";
}

// v0.4.0 kept the point card in the main file; this release moves it into
// PATH.pointcard.db (pointcard/sqlite_file.h) and closes the main file to
// releases before it.
class FromV040 : public ::testing::Test {
 protected:
  void SetUp() override {
    path = dir.File("hotrow.db");
    fs::copy_file(std::string(HOTROW_SOURCE_DIR) + "/tests/fixtures/v0.4.0.db", path);
    ASSERT_EQ(QueryOne(path, "PRAGMA user_version"), 1) << "the fixture is v0.4.0's";
    ASSERT_EQ(QueryOne(path, "SELECT COUNT(*) FROM S_ACCOUNT"), 50);
    balances = QueryOne(path, "SELECT SUM(BALANCE) FROM S_ACCOUNT");
    rows = QueryOne(path, "SELECT COUNT(*) FROM H_TRANSACTION");
  }
  // Everything v0.4.0 wrote is in the point card's file, served, and
  // nothing of it is left in the main file.
  void ExpectMoved() {
    auto p = ServerProcess::Start({"--db", "sqlite:" + path}, dir.File("log-after"));
    ASSERT_TRUE(p);
    HttpClient c(p->port());
    EXPECT_EQ(JsonInt(c.Get("/datePlan/1").body, "like"), 3);
    auto replay =
        c.Post("/api/v1/cards/1/transactions", R"({"storeId":1,"amount":700})", {{"Idempotency-Key", "fixture-1"}});
    EXPECT_EQ(replay.status, 201) << replay.body;
    EXPECT_EQ(replay.Header("Idempotent-Replayed"), "true") << "v0.4.0's key moved with its card";
    auto pay = c.Post("/api/v1/cards/2/transactions", R"({"storeId":1,"amount":5})");
    EXPECT_EQ(pay.status, 201) << pay.body;
    ASSERT_EQ(p->Stop(), 0);
    std::string cards = pointcard::PointCardPath(path);
    ASSERT_TRUE(fs::exists(cards));
    EXPECT_FALSE(fs::exists(cards + ".tmp"));
    EXPECT_EQ(QueryOne(path, "SELECT COUNT(*) FROM sqlite_master WHERE name IN ('S_ACCOUNT', 'H_TRANSACTION')"), 0);
    EXPECT_EQ(QueryOne(cards, "SELECT SUM(BALANCE) FROM S_ACCOUNT"), balances + 5);
    EXPECT_EQ(QueryOne(cards, "SELECT COUNT(*) FROM H_TRANSACTION"), rows + 1);
    EXPECT_EQ(QueryOne(cards, "SELECT COUNT(*) FROM P_GRANT WHERE IDEMPOTENCY_KEY = 'fixture-grant'"), 1);
    EXPECT_EQ(QueryOne(cards, "SELECT COUNT(*) FROM P_IDEMPOTENCY WHERE KEY = 'fixture-1'"), 1);
    EXPECT_EQ(QueryOne(path, "SELECT oldest_schema FROM schema_compat"), 3)
        << "v0.4.0 (and every release before per-component steps) may no longer open it";
    auto check = RunHotrow({"check", "pointcard", "--db", "sqlite:" + path});
    EXPECT_EQ(check.exit_code, 0) << check.output;
  }
  TempDir dir;
  std::string path;
  int64_t balances = 0, rows = 0;
};

TEST_F(FromV040, ThePointCardMovesIntoItsOwnFile) {
  auto p = ServerProcess::Start({"--db", "sqlite:" + path}, dir.File("log"));
  ASSERT_TRUE(p);
  EXPECT_NE(p->Log().find("moved 50 card(s) and"), std::string::npos) << p->Log();
  ASSERT_EQ(p->Stop(), 0);
  EXPECT_EQ(QueryOne(path, "PRAGMA user_version"), 3);
  ExpectMoved();
}

// `hotrow seed` of another data set moves it too, before the main file's
// migration records the move.
TEST_F(FromV040, SeedingAnotherDataSetMovesThePointCardFirst) {
  auto seed = RunHotrow({"seed", "leaderboard", "--clients", "5", "--if-empty", "--db", "sqlite:" + path});
  ASSERT_EQ(seed.exit_code, 0) << seed.output;
  EXPECT_EQ(QueryOne(path, "SELECT oldest_schema FROM schema_compat"), 3)
      << "closed to v0.4.0 by the move, then to every release before per-component steps by the leaderboard's";
  ExpectMoved();
}

// An old single-file backup restored over the main file alone, beside the
// point card a move made: its point card is not a leftover of that move,
// and is never dropped.
TEST_F(FromV040, AnOldBackupRestoredBesideAMovedPointCardIsRefusedNotDropped) {
  auto seed = RunHotrow({"seed", "leaderboard", "--clients", "5", "--if-empty", "--db", "sqlite:" + path});
  ASSERT_EQ(seed.exit_code, 0) << seed.output;
  fs::remove(path);
  fs::copy_file(std::string(HOTROW_SOURCE_DIR) + "/tests/fixtures/v0.4.0.db", path);
  {
    auto conn = db::sqlite::Connection::Open(path, db::sqlite::OpenMode::kReadWrite);
    ASSERT_TRUE((*conn)->Exec("UPDATE S_ACCOUNT SET BALANCE = BALANCE + 1 WHERE CARD_ID = 1").ok());
  }
  auto serve = RunHotrow({"serve", "--port", "0", "--db", "sqlite:" + path}, std::chrono::seconds(30));
  EXPECT_NE(serve.exit_code, 0);
  EXPECT_NE(serve.output.find("that is not the one"), std::string::npos) << serve.output;
  EXPECT_EQ(QueryOne(path, "SELECT SUM(BALANCE) FROM S_ACCOUNT"), balances + 1) << "the backup's point card is kept";
}

// A crash at each step of the move leaves the point card whole: in the
// main file (before the rename) or in its own file (after).
class FromV040Crash : public FromV040, public ::testing::WithParamInterface<const char*> {};

TEST_P(FromV040Crash, ACrashDuringTheMoveLosesNothing) {
  auto crashed = RunHotrow({"seed", "dateplans", "--count", "1", "--if-empty", "--db", "sqlite:" + path},
                           std::chrono::seconds(60), {{"HOTROW_FAILPOINT", GetParam()}});
  ASSERT_EQ(crashed.exit_code, -SIGABRT) << crashed.output;
  ExpectMoved();
}

INSTANTIATE_TEST_SUITE_P(EachStep, FromV040Crash, ::testing::Values("split.copy:3", "split.rename", "split.drop"),
                         [](const auto& info) {
                           std::string name = info.param;
                           return name.substr(6, name.find(':') - 6);
                         });

}  // namespace
}  // namespace hotrow::testing
