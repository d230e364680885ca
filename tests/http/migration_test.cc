// Schema migrations: a database made by the release before (the fixture,
// tests/fixtures/make-fixture.sh with v0.1.0) opens, migrates and serves
// everything it held; a database from a newer release is refused.
#include <filesystem>

#include <gtest/gtest.h>

#include "db/sqlite.h"
#include "harness/http_client.h"
#include "harness/server_process.h"

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
  EXPECT_EQ(QueryOne(path, "PRAGMA user_version"), 1);
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
    ASSERT_TRUE((*conn)->Exec("PRAGMA user_version = 2").ok());
  }
  auto p = ServerProcess::Start({"--db", "sqlite:" + path}, dir.File("log"));
  ASSERT_TRUE(p);
  HttpClient c(p->port());
  EXPECT_EQ(JsonInt(c.Get("/datePlan/1").body, "like"), 3);
  EXPECT_EQ(c.Post("/datePlan/1/like").status, 200);
  ASSERT_EQ(p->Stop(), 0);
  EXPECT_EQ(QueryOne(path, "PRAGMA user_version"), 2) << "never rolled back";
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
