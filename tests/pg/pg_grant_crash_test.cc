// Grants on PostgreSQL that outlive their instance: a staging grant of a
// dead instance, a killed server's staging backend, and a server killed at
// each step of a grant (failpoints).
#include <csignal>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "contract/pointcard_contract.h"
#include "contract/wait.h"
#include "db/postgres.h"
#include "harness/grant_requests.h"
#include "harness/http_client.h"
#include "harness/or_throw.h"
#include "harness/postgres_process.h"
#include "harness/server_process.h"
#include "pg/pg_cards_fixture.h"
#include "pointcard/postgres_store.h"
#include "pointcard/service.h"

namespace hotrow::testing {
namespace {

// A staging grant whose instance died (here: rows left as it would leave
// them, its lease running out) blocks grants only until its lease ends; then
// it goes with its credits, and its key is free again.
TEST(PostgresGrant, AStagingGrantOfADeadInstanceGoesWhenItsLeaseRunsOut) {
  PgCardsFixture f;
  auto conn = OrThrow(db::pg::Connection::Connect(f.url));
  ASSERT_TRUE(conn->Exec("INSERT INTO P_GRANT (GRANT_TIME, FROM_TIME, TO_TIME, RATE_PERCENT, CARDS, POINTS, QUERY_MS, "
                         "UPDATE_MS, IDEMPOTENCY_KEY, FINGERPRINT, STATE, LEASE_UNTIL) VALUES (now(), now(), now(), 1, "
                         "0, 0, 0, 0, 'dead', 'x', 'staging', (clock_timestamp() AT TIME ZONE 'UTC') + "
                         "interval '1500 milliseconds'); "
                         "INSERT INTO P_GRANT_CREDIT SELECT CARD_ID, 1, 5 FROM S_ACCOUNT WHERE CARD_ID <= 3")
                  .ok());
  auto refused = f.Grant(1);
  EXPECT_EQ(refused.status().code(), ErrorCode::kGrantInProgress) << refused.status().ToString();
  EXPECT_EQ(f.Card(1)->pending_points, 0) << "staged credit is not visible";
  EXPECT_TRUE(Eventually([&] { return f.Int("SELECT COUNT(*) FROM P_GRANT") == 0; }, std::chrono::seconds(5)))
      << "the folder drops it within a second of its lease's end";
  EXPECT_EQ(f.Int("SELECT COUNT(*) FROM P_GRANT_CREDIT"), 0);
  auto granted = f.Grant(1, "dead");
  ASSERT_TRUE(granted.ok()) << granted.status().ToString();
  EXPECT_FALSE(granted->replayed);
  ASSERT_TRUE(f.Folded(granted->grant_id));
  f.ExpectInvariants();
}

// A crash in each phase of a grant, on a server: after a restart the grant
// is wholly absent (it had not applied: its lease runs out) or wholly
// present (its fold resumes), and the invariants hold either way.
void CrashInsideAPostgresGrant(const std::string& failpoint, bool expect_present) {
  std::string url = FreshDatabase();
  auto seeded = RunHotrow(
      {"seed", "pointcard", "--cards", "200", "--stores", "20", "--history", "1000", "--seed", "7", "--db", url});
  ASSERT_EQ(seeded.exit_code, 0) << seeded.output;
  auto conn = OrThrow(db::pg::Connection::Connect(url));
  auto count = [&](const std::string& sql) { return OrThrow(conn->Query(sql)).Int(0, 0); };
  int64_t balances_before = count("SELECT SUM(BALANCE) FROM S_ACCOUNT");
  TestServer server(TestServerOptions{0, false, {"--grant-fold-chunk", "10"}, {{"HOTROW_FAILPOINT", failpoint}}, url});
  ASSERT_TRUE(server.ok());
  PayThenGrantAsTheServerDies(server.port());
  if (::testing::Test::HasFatalFailure()) return;
  EXPECT_EQ(server.process().Wait(std::chrono::seconds(30)), -SIGABRT) << server.process().Log();
  ASSERT_TRUE(server.Start({}));
  // A staging grant's lease (10 s) runs out, and the folder drops it; an
  // applied one's fold resumes.
  EXPECT_TRUE(Eventually([&] { return count("SELECT COUNT(*) FROM P_GRANT WHERE STATE <> 'folded'") == 0; },
                         std::chrono::seconds(20)));
  EXPECT_EQ(count("SELECT COUNT(*) FROM P_GRANT_CREDIT"), 0) << "every credit is folded (applied) or dropped";
  int64_t grants = count("SELECT COUNT(*) FROM P_GRANT");
  int64_t rows = count("SELECT COUNT(*) FROM H_TRANSACTION WHERE STORE_ID = 0");
  int64_t balances = count("SELECT SUM(BALANCE) FROM S_ACCOUNT");
  if (expect_present) {
    EXPECT_EQ(grants, 1);
    EXPECT_GT(rows, 50) << "the grant should have reached many cards";
    EXPECT_EQ(rows, count("SELECT CARDS FROM P_GRANT"));
    EXPECT_EQ(balances, balances_before + 500 + count("SELECT POINTS FROM P_GRANT"));
  } else {
    EXPECT_EQ(grants, 0);
    EXPECT_EQ(rows, 0) << "a half-applied grant survived the crash";
    EXPECT_EQ(balances, balances_before + 500) << "the acknowledged payment must survive, the grant must not";
  }
  auto check = RunHotrow({"check", "pointcard", "--db", url});
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

// A server killed while its grant stages leaves backends running its
// staging statements. They used to run on (here: blocked behind a lock on
// H_TRANSACTION), holding the grant's row, so its lease could not expire
// and every later grant got 409 grant_in_progress until they ended; now
// client_connection_check_interval ends them within about a second.
TEST(PostgresGrant, TheStagingOfAKilledServerStopsWithIt) {
  std::string url = FreshDatabase();
  auto seeded = RunHotrow(
      {"seed", "pointcard", "--cards", "200", "--stores", "20", "--history", "1000", "--seed", "7", "--db", url});
  ASSERT_EQ(seeded.exit_code, 0) << seeded.output;
  auto conn = OrThrow(db::pg::Connection::Connect(url));
  auto staging = [&] {
    return OrThrow(conn->Query("SELECT COUNT(*) FROM pg_stat_activity WHERE query LIKE '%stage_range_v1%' "
                               "AND pid <> pg_backend_pid()"))
        .Int(0, 0);
  };
  TestServer server(TestServerOptions{0, false, {}, {}, url});
  ASSERT_TRUE(server.ok());
  auto locker = OrThrow(db::pg::Connection::Connect(url));
  ASSERT_TRUE(locker->Exec("BEGIN").ok());
  ASSERT_TRUE(locker->Exec("LOCK TABLE H_TRANSACTION IN ACCESS EXCLUSIVE MODE").ok());
  std::thread client([port = server.port()] {
    try {
      HttpClient c(port);
      std::string to = pointcard::FormatTime(pointcard::NowUs() - 1000000);
      c.Post("/api/v1/grants", R"({"from":"2000-01-01T00:00:00Z","to":")" + to + R"(","ratePercent":1})",
             {{"Authorization", std::string("Bearer ") + kTestAdminToken}});
    } catch (const std::exception&) {
      // the server dies mid-request, as arranged
    }
  });
  EXPECT_TRUE(Eventually([&] { return staging() > 0; }, std::chrono::seconds(20))) << "the grant never staged";
  server.Kill();
  client.join();
  EXPECT_TRUE(Eventually([&] { return staging() == 0; }, std::chrono::seconds(5)))
      << "a dead server's staging backend still runs";
  ASSERT_TRUE(locker->Exec("ROLLBACK").ok());
}

TEST(PostgresGrant, ACrashAfterItsCreditsAreStagedLeavesNoneOfIt) { CrashInsideAPostgresGrant("grant.stage", false); }

TEST(PostgresGrant, ACrashRightAfterTheApplyKeepsAllOfIt) { CrashInsideAPostgresGrant("grant.commit", true); }

TEST(PostgresGrant, ACrashWhileItFoldsKeepsAllOfIt) { CrashInsideAPostgresGrant("grant.fold:5", true); }

}  // namespace
}  // namespace hotrow::testing
