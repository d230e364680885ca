// Expiring lots over HTTP (0.13.0): a grant's expiry fields and their
// errors, GET /api/v1/cards/{id}/lots and its errors, against a real
// server on SQLite.
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "harness/http_client.h"
#include "harness/server_process.h"
#include "pointcard/model.h"

namespace hotrow::testing {
namespace {

TEST(PointCardHttp, ExpiringGrantsMakeLotsACardListsInTheOrderPaymentsTakeThem) {
  TestServer server(TestServerOptions{0, true, {}, {}});
  ASSERT_TRUE(server.ok());
  HttpClient c(server.port());
  const Headers admin = {{"Authorization", std::string("Bearer ") + kTestAdminToken}};
  const std::string from = pointcard::FormatTime(pointcard::NowUs());
  ASSERT_EQ(c.Post("/api/v1/cards/9/transactions", R"({"storeId":2,"amount":1000})").status, 201);
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const std::string to = pointcard::FormatTime(pointcard::NowUs());
  const std::string period = R"({"from":")" + from + R"(","to":")" + to + R"(","ratePercent":10)";

  for (const std::string& bad :
       {period + R"(,"expiresInDays":0})", period + R"(,"expiresInDays":3651})", period + R"(,"expiresInDays":"30"})",
        period + R"(,"expiresInDays":1.5})", period + R"(,"expiresInDays":null})",
        period + R"(,"expiresAt":"tomorrow"})", period + R"(,"expiresAt":"2020-01-01T00:00:00Z"})",
        period + R"(,"expiresInDays":30,"expiresAt":"2099-01-01T00:00:00Z"})", period + R"(,"expiresInMonths":1})"}) {
    auto r = c.Post("/api/v1/grants", bad, admin);
    EXPECT_EQ(r.status, 400) << bad << ": " << r.body;
    EXPECT_NE(r.body.find(R"("error")"), std::string::npos) << r.body;
  }
  EXPECT_EQ(c.Post("/api/v1/grants", period + R"(,"expiresInDays":30})").status, 401);

  auto grant = c.Post("/api/v1/grants", period + R"(,"expiresInDays":30})", admin);
  ASSERT_EQ(grant.status, 201) << grant.body;
  const std::string id = std::to_string(JsonInt(grant.body, "grantId"));
  ASSERT_TRUE(Eventually(
      [&] { return c.Get("/api/v1/grants/" + id, admin).body.find(R"("state":"folded")") != std::string::npos; },
      std::chrono::seconds(10)));
  auto info = c.Get("/api/v1/grants/" + id, admin);
  EXPECT_NE(info.body.find(R"("expiresAt":")"), std::string::npos) << info.body;

  auto lots = c.Get("/api/v1/cards/9/lots");
  ASSERT_EQ(lots.status, 200) << lots.body;
  EXPECT_EQ(lots.Header("Content-Type"), "application/json; charset=utf-8");
  const int64_t balance = JsonInt(c.Get("/api/v1/cards/9").body, "balance");
  EXPECT_NE(lots.body.find(R"("grantId":)" + id + R"(,"amount":100,"remaining":100,"reserved":0,"createdAt":")"),
            std::string::npos)
      << lots.body;
  EXPECT_NE(lots.body.find(R"("status":"active"}],"pending":[],"neverExpiring":{"remaining":)" +
                           std::to_string(balance - 100) + R"(,"reserved":0},"next":null})"),
            std::string::npos)
      << lots.body;
  ASSERT_EQ(c.Post("/api/v1/cards/9/holds", R"({"storeId":2,"amount":-130,"expiresInSeconds":600})").status, 201);
  lots = c.Get("/api/v1/cards/9/lots");
  EXPECT_NE(lots.body.find(R"("remaining":100,"reserved":100)"), std::string::npos) << lots.body;
  EXPECT_NE(lots.body.find(R"("reserved":30})"), std::string::npos) << "30 never-expiring held: " << lots.body;

  // A second lot, sooner: pages of one, in the order payments take them.
  auto sooner = c.Post("/api/v1/grants", period + R"(,"expiresInDays":10,"allowOverlap":true})", admin);
  ASSERT_EQ(sooner.status, 201) << sooner.body;
  const std::string sooner_id = std::to_string(JsonInt(sooner.body, "grantId"));
  ASSERT_TRUE(Eventually(
      [&] { return c.Get("/api/v1/grants/" + sooner_id, admin).body.find(R"("state":"folded")") != std::string::npos; },
      std::chrono::seconds(10)));
  auto first = c.Get("/api/v1/cards/9/lots?limit=1");
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_NE(first.body.find(R"("grantId":)" + sooner_id), std::string::npos) << first.body;
  EXPECT_EQ(first.body.find(R"("grantId":)" + id + ","), std::string::npos) << first.body;
  const std::string next = JsonString(first.body, "next");
  ASSERT_FALSE(next.empty()) << first.body;
  auto second = c.Get("/api/v1/cards/9/lots?limit=1&after=" + next);
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_NE(second.body.find(R"("grantId":)" + id + ","), std::string::npos) << second.body;
  EXPECT_NE(second.body.find(R"("next":null)"), std::string::npos) << second.body;
  EXPECT_NE(second.body.find(R"("neverExpiring":{"remaining":)" + std::to_string(balance - 100) + ","),
            std::string::npos)
      << "the rest counts every lot, on every page: " << second.body;
  for (const char* bad : {"?limit=0", "?limit=101", "?limit=x", "?after=abc", "?after=0", "?after=999999"})
    EXPECT_EQ(c.Get(std::string("/api/v1/cards/9/lots") + bad).status, 400) << bad;
  auto foreign = c.Get("/api/v1/cards/10/lots?after=" + next);
  EXPECT_EQ(foreign.status, 400) << "another card's lot is no cursor here: " << foreign.body;

  EXPECT_EQ(c.Get("/api/v1/cards/999999/lots").status, 404);
  EXPECT_EQ(c.Get("/api/v1/cards/abc/lots").status, 400);
  EXPECT_EQ(c.Get("/api/v1/cards/0/lots").status, 400);
  EXPECT_EQ(c.Post("/api/v1/cards/9/lots", "{}").status, 405);
  auto check = RunHotrow({"check", "pointcard", "--db", server.db_url()});
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

}  // namespace
}  // namespace hotrow::testing
