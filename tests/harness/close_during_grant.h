// A card closed while a grant runs, by HTTP, on a server seeded with the
// contract's data (cards 3 and 4 exist) and armed with a failpoint that
// stretches one phase of the grant (grant.slow: its query;
// grant.apply.slow: between its staging and its apply) to 1.5 s. The
// closed card gets nothing and is left out of the grant's totals; the card
// still active gets its bonus; the server stops cleanly and the checker
// agrees. Shared by the SQLite and PostgreSQL tests.
#pragma once

#include <chrono>
#include <future>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "harness/http_client.h"
#include "harness/server_process.h"
#include "pointcard/model.h"

namespace hotrow::testing {

inline void CloseACardDuringAGrant(TestServer& server) {
  HttpClient c(server.port());
  const Headers admin = {{"Authorization", std::string("Bearer ") + kTestAdminToken}};
  const std::string from = pointcard::FormatTime(pointcard::NowUs());
  ASSERT_EQ(c.Post("/api/v1/cards/3/transactions", R"({"storeId":2,"amount":10000})").status, 201);
  ASSERT_EQ(c.Post("/api/v1/cards/4/transactions", R"({"storeId":2,"amount":20000})").status, 201);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const std::string to = pointcard::FormatTime(pointcard::NowUs());
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const int64_t before_3 = JsonInt(c.Get("/api/v1/cards/3").body, "balance");
  const int64_t before_4 = JsonInt(c.Get("/api/v1/cards/4").body, "balance");
  std::promise<HttpResponse> answered;
  std::thread granter([&] {
    HttpClient g(server.port(), std::chrono::seconds(60));
    answered.set_value(g.Post("/api/v1/grants",
                              R"({"from":")" + from + R"(","to":")" + to + R"(","ratePercent":10,"allowOverlap":true})",
                              admin));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the grant is in its stretched phase
  auto closed = c.Post("/api/v1/cards/3/close", "", admin);
  granter.join();
  ASSERT_EQ(closed.status, 200) << closed.body;
  auto grant = answered.get_future().get();
  ASSERT_EQ(grant.status, 201) << grant.body;
  EXPECT_EQ(JsonInt(grant.body, "cards"), 1) << grant.body;
  EXPECT_EQ(JsonInt(grant.body, "points"), 2000) << grant.body;
  EXPECT_EQ(JsonInt(c.Get("/api/v1/cards/3").body, "balance"), before_3);
  EXPECT_EQ(JsonInt(c.Get("/api/v1/cards/4").body, "balance"), before_4 + 2000);
  const int64_t grant_id = JsonInt(grant.body, "grantId");
  EXPECT_TRUE(Eventually(
      [&] {
        auto g = c.Get("/api/v1/grants/" + std::to_string(grant_id), admin);
        return g.status == 200 && JsonString(g.body, "state") == "folded" && JsonInt(g.body, "cards") == 1;
      },
      std::chrono::seconds(20)));
  EXPECT_EQ(server.Stop(), 0);
  auto check = RunHotrow({"check", "pointcard", "--db", server.db_url()});
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

}  // namespace hotrow::testing
