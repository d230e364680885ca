// Durable before acknowledged: what a 2xx promised survives kill -9, and a
// graceful stop loses nothing in flight.
#include <signal.h>

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "db/sqlite.h"
#include "harness/grant_requests.h"
#include "harness/http_client.h"
#include "harness/server_process.h"
#include "pointcard/model.h"
#include "pointcard/sqlite_file.h"

namespace hotrow::testing {
namespace {

int64_t LikeCount(uint16_t port, int id) {
  HttpClient c(port);
  return JsonInt(c.Get("/datePlan/" + std::to_string(id)).body, "like");
}

// Clients like plan 1 until told to stop, counting requests sent and 200s.
struct LikeLoad {
  std::atomic<bool> stop{false};
  std::atomic<int64_t> sent{0}, acked{0};
  std::vector<std::thread> threads;

  void Start(uint16_t port, int clients) {
    for (int t = 0; t < clients; ++t)
      threads.emplace_back([this, port] {
        try {
          HttpClient c(port, std::chrono::milliseconds(5000));
          while (!stop) {
            ++sent;
            if (c.Post("/datePlan/1/like").status == 200) ++acked;
          }
        } catch (const std::exception&) {
          // the server went away mid-request: that request may or may not count
        }
      });
  }
  void Join() {
    stop = true;
    for (auto& t : threads) t.join();
  }
};

TEST(Durability, EveryAcknowledgedLikeSurvivesKill9) {
  TestServer server(2);
  ASSERT_TRUE(server.ok());
  LikeLoad load;
  load.Start(server.port(), 32);
  // Let the load run until a good number of likes are acknowledged.
  for (int i = 0; i < 400 && load.acked < 2000; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  server.Kill();
  load.Join();
  ASSERT_GT(load.acked.load(), 0);
  ASSERT_TRUE(server.Start());
  int64_t count = LikeCount(server.port(), 1);
  EXPECT_GE(count, load.acked.load()) << "an acknowledged like was lost";
  EXPECT_LE(count, load.sent.load()) << "more likes than requests";
}

TEST(Durability, SigtermFinishesInFlightRequestsAndExitsZero) {
  TestServer server(2);
  ASSERT_TRUE(server.ok());
  LikeLoad load;
  load.Start(server.port(), 16);
  for (int i = 0; i < 400 && load.acked < 500; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(server.Stop(), 0) << server.process().Log();
  load.Join();
  ASSERT_TRUE(server.Start());
  int64_t count = LikeCount(server.port(), 1);
  EXPECT_GE(count, load.acked.load());
  EXPECT_LE(count, load.sent.load());
  EXPECT_NE(server.process().Log().find("writer flushed"), std::string::npos);
}

TEST(Durability, SeedRefusesADatabaseARunningServerHolds) {
  TestServer server(2);
  ASSERT_TRUE(server.ok());
  auto r = RunHotrow({"seed", "dateplans", "--count", "10", "--replace", "--db", server.db_url()});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("in use by a running hotrow server (pid " + std::to_string(server.process().pid())),
            std::string::npos)
      << r.output;
  EXPECT_EQ(LikeCount(server.port(), 2), 0);
  // A second server on the same file is refused the same way.
  auto second = RunHotrow({"serve", "--port", "0", "--db", server.db_url()}, std::chrono::seconds(30));
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_NE(second.output.find("in use by a running hotrow server"), std::string::npos) << second.output;
}

TEST(Seed, RefusesANonEmptyDatabaseUnlessAsked) {
  TempDir dir;
  std::string db = "sqlite:" + dir.File("s.db");
  EXPECT_EQ(RunHotrow({"seed", "dateplans", "--count", "5", "--db", db}).exit_code, 0);
  auto again = RunHotrow({"seed", "dateplans", "--count", "5", "--db", db});
  EXPECT_NE(again.exit_code, 0);
  EXPECT_NE(again.output.find("already holds 5 date plan(s)"), std::string::npos) << again.output;
  EXPECT_EQ(RunHotrow({"seed", "dateplans", "--count", "5", "--if-empty", "--db", db}).exit_code, 0);
  EXPECT_EQ(RunHotrow({"seed", "dateplans", "--count", "7", "--replace", "--db", db}).exit_code, 0);
  auto p = ServerProcess::Start({"--db", db}, dir.File("log"));
  ASSERT_TRUE(p);
  HttpClient c(p->port());
  EXPECT_EQ(c.Get("/datePlan/7").status, 200);
  EXPECT_EQ(c.Get("/datePlan/8").status, 404);
  EXPECT_EQ(p->Stop(), 0);
}

TEST(Cli, HelpAndBadFlags) {
  auto help = RunHotrow({"serve", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  for (const char* flag : {"--port", "HOTROW_PORT", "--db", "HOTROW_DB", "--threads", "--max-connections",
                           "--admin-token", "HOTROW_ADMIN_TOKEN"})
    EXPECT_NE(help.output.find(flag), std::string::npos) << flag;
  EXPECT_EQ(RunHotrow({"seed", "dateplans", "--help"}).exit_code, 0);
  EXPECT_NE(RunHotrow({"serve", "--port", "70000"}).exit_code, 0);
  auto bad_db = RunHotrow({"serve", "--db", "mysql://x"});
  EXPECT_NE(bad_db.exit_code, 0);
  EXPECT_NE(bad_db.output.find("--db must be sqlite:PATH"), std::string::npos) << bad_db.output;
  EXPECT_NE(RunHotrow({}).exit_code, 0);
}

TEST(Cli, VersionAndUnknownCommand) {
  auto version = RunHotrow({"--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_NE(version.output.find("hotrow 0."), std::string::npos) << version.output;
  EXPECT_NE(version.output.find("commit "), std::string::npos) << version.output;
  auto unknown = RunHotrow({"serv"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.output.find("unknown command 'serv'"), std::string::npos) << unknown.output;
  EXPECT_NE(unknown.output.find("serve, seed, check, grant, simulate"), std::string::npos) << unknown.output;
}

// A database that cannot be opened is named with SQLite's reason. Before,
// after SQLite's text moved to the detail, the CLI printed only "SQLite
// error" (found in review).
TEST(Cli, AnUnopenableDatabaseIsNamedWithTheReason) {
  TempDir dir;  // a directory, not a database file
  auto r = RunHotrow({"check", "pointcard", "--db", "sqlite:" + dir.path()});
  EXPECT_NE(r.exit_code, 0);
  // "cannot open PATH: <SQLite's reason>" (which reason depends on the mode).
  size_t named = r.output.find("cannot open " + dir.path() + ": ");
  ASSERT_NE(named, std::string::npos) << r.output;
  EXPECT_NE(r.output.find_first_not_of(" \n", named + dir.path().size() + 14), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("SQLite error"), std::string::npos) << r.output;
}

// No password reaches a log line or a message (issue 9, item 11).
TEST(Cli, UrlPasswordsAreNeverPrinted) {
  auto seed = RunHotrow({"seed", "leaderboard", "--clients", "1", "--redis", "redis://:topsecret@127.0.0.1:1"});
  EXPECT_NE(seed.exit_code, 0);
  EXPECT_EQ(seed.output.find("topsecret"), std::string::npos) << seed.output;
  auto bad = RunHotrow({"serve", "--port", "0", "--db", "mysql://u:topsecret@h/db"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_EQ(bad.output.find("topsecret"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("mysql://u:***@h/db"), std::string::npos) << bad.output;
  TempDir dir;
  // Waiting for Redis to come up logs the reason too (--db-connect-timeout).
  auto serve = RunHotrow({"serve", "--port", "0", "--db", "sqlite:" + dir.File("a.db"), "--redis",
                          "redis://:topsecret@127.0.0.1:1", "--db-connect-timeout", "1"},
                         std::chrono::seconds(30));
  EXPECT_NE(serve.exit_code, 0);
  EXPECT_EQ(serve.output.find("topsecret"), std::string::npos) << serve.output;
}

}  // namespace
}  // namespace hotrow::testing

namespace hotrow::testing {
namespace {

// In the point card's own file (pointcard/sqlite_file.h).
int64_t CountRows(const std::string& db_url, const std::string& sql) {
  auto conn = db::sqlite::Connection::Open(pointcard::PointCardPath(db_url.substr(7)), db::sqlite::OpenMode::kReadOnly);
  return db::sqlite::QueryInt(**conn, sql).value();
}

// A crash in each phase of a grant (pointcard/sqlite_store.h): while its
// credits are staged, right after the apply commits, while it folds. After
// a restart the grant is wholly absent (staging) or wholly present (its
// fold resumes and ends), and the invariants hold either way.
void CrashInsideAGrant(const std::string& failpoint, bool expect_present) {
  TestServer server(TestServerOptions{0, true, {}, {{"HOTROW_FAILPOINT", failpoint}}});
  ASSERT_TRUE(server.ok());
  int64_t balances_before = CountRows(server.db_url(), "SELECT SUM(BALANCE) FROM S_ACCOUNT");
  PayThenGrantAsTheServerDies(server.port());
  if (::testing::Test::HasFatalFailure()) return;
  EXPECT_EQ(server.process().Wait(std::chrono::seconds(30)), -SIGABRT) << server.process().Log();
  EXPECT_NE(server.process().Log().find("failpoint " + failpoint.substr(0, failpoint.find(':'))), std::string::npos);
  ASSERT_TRUE(server.Start({}));
  EXPECT_EQ(CountRows(server.db_url(), "SELECT COUNT(*) FROM P_GRANT WHERE STATE = 'staging'"), 0)
      << "a grant that never applied is deleted at start";
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (CountRows(server.db_url(), "SELECT COUNT(*) FROM P_GRANT WHERE STATE = 'applied'") > 0 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(CountRows(server.db_url(), "SELECT COUNT(*) FROM P_GRANT_CREDIT"), 0)
      << "every credit is folded (applied) or deleted (staged)";
  int64_t grants = CountRows(server.db_url(), "SELECT COUNT(*) FROM P_GRANT");
  int64_t rows = CountRows(server.db_url(), "SELECT COUNT(*) FROM H_TRANSACTION WHERE STORE_ID = 0");
  int64_t balances = CountRows(server.db_url(), "SELECT SUM(BALANCE) FROM S_ACCOUNT");
  if (expect_present) {
    EXPECT_EQ(grants, 1);
    EXPECT_GT(rows, 50) << "the grant should have reached many cards";
    EXPECT_EQ(rows, CountRows(server.db_url(), "SELECT CARDS FROM P_GRANT"));
    EXPECT_EQ(balances, balances_before + 500 + CountRows(server.db_url(), "SELECT POINTS FROM P_GRANT"));
  } else {
    EXPECT_EQ(grants, 0);
    EXPECT_EQ(rows, 0) << "a half-applied grant survived the crash";
    EXPECT_EQ(balances, balances_before + 500) << "the acknowledged payment must survive, the grant must not";
  }
  auto check = RunHotrow({"check", "pointcard", "--db", server.db_url()});
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

TEST(Durability, ACrashInTheMiddleOfAGrantLeavesNoneOfIt) { CrashInsideAGrant("grant.write:50", false); }

TEST(Durability, ACrashRightAfterAGrantCommitsKeepsAllOfIt) { CrashInsideAGrant("grant.commit", true); }

TEST(Durability, ACrashWhileAGrantFoldsKeepsAllOfIt) { CrashInsideAGrant("grant.fold:20", true); }

}  // namespace
}  // namespace hotrow::testing
