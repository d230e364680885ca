// Point-card scenarios across processes: the command-line tools (grant,
// simulate, check) against real servers and databases.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "harness/close_during_grant.h"
#include "harness/http_client.h"
#include "harness/server_process.h"
#include "pointcard/model.h"

namespace hotrow::testing {
namespace {

TEST(PointCardHttp, GrantCommandCallsTheServer) {
  TestServer server(TestServerOptions{0, true, {}, {}});
  ASSERT_TRUE(server.ok());
  std::string url = "http://127.0.0.1:" + std::to_string(server.port());
  std::string to = pointcard::FormatTime(pointcard::NowUs() - 1000000);
  auto r = RunHotrow({"grant", "--url", url, "--from", "2000-01-01T00:00:00Z", "--to", to, "--rate-percent", "2",
                      "--admin-token", kTestAdminToken, "--idempotency-key", "cli-1"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"grantId\":1,"), std::string::npos) << r.output;
  auto again = RunHotrow({"grant", "--url", url, "--from", "2000-01-01T00:00:00Z", "--to", to, "--rate-percent", "2",
                          "--admin-token", kTestAdminToken, "--idempotency-key", "cli-1"});
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("\"grantId\":1,"), std::string::npos) << "the retry must not grant twice";
  auto unauthorized = RunHotrow({"grant", "--url", url, "--from", "2000-01-01T00:00:00Z", "--to", to});
  EXPECT_EQ(unauthorized.exit_code, 1);
  EXPECT_NE(unauthorized.output.find("unauthorized"), std::string::npos) << unauthorized.output;
  EXPECT_EQ(server.Stop(), 0);
  auto check = RunHotrow({"check", "pointcard", "--db", server.db_url()});
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

// A card closed while a grant runs gets nothing from it: closed in the
// grant's query phase, the query leaves it out; closed between its staging
// and its apply, the apply drops its credit.
TEST(PointCardHttp, ACardClosedDuringAGrantsQueryGetsNothingFromIt) {
  TestServer server(TestServerOptions{0, true, {}, {{"HOTROW_FAILPOINT", "grant.slow:1500"}}});
  ASSERT_TRUE(server.ok());
  CloseACardDuringAGrant(server);
}

TEST(PointCardHttp, ACardClosedBeforeAGrantsApplyGetsNothingFromIt) {
  TestServer server(TestServerOptions{0, true, {}, {{"HOTROW_FAILPOINT", "grant.apply.slow:1500"}}});
  ASSERT_TRUE(server.ok());
  CloseACardDuringAGrant(server);
}

TEST(PointCardHttp, CheckRunsBesideALiveServer) {
  TestServer server(TestServerOptions{0, true, {}, {}});
  ASSERT_TRUE(server.ok());
  HttpClient c(server.port());
  ASSERT_EQ(c.Post("/api/v1/cards/3/transactions", R"({"storeId":2,"amount":700})").status, 201);
  auto check = RunHotrow({"check", "pointcard", "--db", server.db_url()});
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_NE(check.output.find("checked 200 card(s) and 1001 history row(s)"), std::string::npos) << check.output;
}

TEST(PointCardHttp, QuickSimulationWritesItsReports) {
  TempDir dir;
  auto r = RunHotrow({"simulate", "pointcard", "--quick", "--parallel", "1,4", "--duration", "2s", "--work-dir",
                      dir.File("work"), "--out", dir.File("out")},
                     std::chrono::seconds(240));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("8.1 point use"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("8.6 point grant"), std::string::npos);
  for (const char* f : {"simulation.json", "simulation.svg", "simulation.html", "simulation.txt"})
    EXPECT_TRUE(std::filesystem::exists(dir.File("out") + "/" + f)) << f;
  std::ifstream json(dir.File("out") + "/simulation.json");
  std::stringstream body;
  body << json.rdbuf();
  EXPECT_NE(body.str().find("\"parallel\":4"), std::string::npos);
  EXPECT_EQ(body.str().find("\"invariantsOk\":false"), std::string::npos) << "every run must keep the invariants";
  EXPECT_NE(body.str().find("\"ng\":0"), std::string::npos);
}

TEST(PointCardHttp, SimulationOverHttp) {
  TestServer server(TestServerOptions{0, true, {}, {}});
  ASSERT_TRUE(server.ok());
  TempDir dir;
  auto r = RunHotrow({"simulate", "pointcard", "--url", "http://127.0.0.1:" + std::to_string(server.port()),
                      "--admin-token", kTestAdminToken, "--cards", "200", "--parallel", "4", "--duration", "2s",
                      "--grant-interval", "500ms", "--out", dir.File("out")},
                     std::chrono::seconds(120));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("driven over HTTP"), std::string::npos) << r.output;
  EXPECT_EQ(server.Stop(), 0);
  auto check = RunHotrow({"check", "pointcard", "--db", server.db_url()});
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

}  // namespace
}  // namespace hotrow::testing
