// Date-plan scenarios that need more than a request and an answer: tokens
// carried between requests, concurrency, restarts.
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "harness/http_client.h"
#include "harness/server_process.h"

namespace hotrow::testing {
namespace {

TEST(DatePlanHttp, TheCreatorsEditTokenEditsAndDeletesOnlyTheirPlan) {
  TestServer server(5);
  ASSERT_TRUE(server.ok());
  HttpClient c(server.port());
  auto created = c.Post("/datePlan", R"({"title":"a","content":"b","category":"Cafe"})");
  ASSERT_EQ(created.status, 201) << created.body;
  std::string token = JsonString(created.body, "editToken");
  int64_t id = JsonInt(created.body, "id");
  ASSERT_GE(token.size(), 32u);
  EXPECT_EQ(created.Header("Location"), "/datePlan/" + std::to_string(id));
  Headers auth = {{"Authorization", "Bearer " + token}};

  auto other = c.Put("/datePlan/1", R"({"title":"x","content":"","category":"Cafe"})", auth);
  EXPECT_EQ(other.status, 403) << "a plan's token must not edit another plan";
  auto edited = c.Put("/datePlan/" + std::to_string(id), R"({"title":"a2","content":"b2","category":"Bar"})", auth);
  EXPECT_EQ(edited.status, 200) << edited.body;
  EXPECT_EQ(JsonString(edited.body, "category"), "Bar");
  EXPECT_EQ(edited.body.find("editToken"), std::string::npos) << "the token is shown only at creation";
  auto got = c.Get("/datePlan/" + std::to_string(id));
  EXPECT_EQ(got.body.find("editToken"), std::string::npos);
  EXPECT_EQ(JsonString(got.body, "title"), "a2");
  EXPECT_EQ(c.Delete("/datePlan/" + std::to_string(id), auth).status, 204);
  EXPECT_EQ(c.Get("/datePlan/" + std::to_string(id)).status, 404);
}

TEST(DatePlanHttp, RandomNeverReturnsADeletedPlanAndHonoursTheCategory) {
  TestServer server(30);
  ASSERT_TRUE(server.ok());
  HttpClient c(server.port());
  Headers admin = {{"Authorization", std::string("Bearer ") + kTestAdminToken}};
  for (int id = 1; id <= 30; ++id)
    if (id % 3 != 0) {
      ASSERT_EQ(c.Delete("/datePlan/" + std::to_string(id), admin).status, 204);
    }
  std::set<int64_t> seen;
  for (int i = 0; i < 300; ++i) {
    auto r = c.Get("/datePlan/");
    ASSERT_EQ(r.status, 200);
    int64_t id = JsonInt(r.body, "id");
    EXPECT_EQ(id % 3, 0) << "picked deleted plan " << id;
    seen.insert(id);
  }
  EXPECT_EQ(seen.size(), 10u) << "300 draws over 10 plans should reach all of them";
  auto cat = c.Post("/datePlan", R"({"title":"only one","content":"","category":"唯一"})");
  ASSERT_EQ(cat.status, 201);
  for (int i = 0; i < 20; ++i) {
    auto r = c.Get("/datePlan?category=%E5%94%AF%E4%B8%80");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(JsonString(r.body, "title"), "only one");
  }
}

TEST(DatePlanHttp, AThousandLikesFromAHundredClientsAreExactAndSurviveARestart) {
  TestServer server(3);
  ASSERT_TRUE(server.ok());
  const int clients = 100, per_client = 10;
  std::vector<std::vector<int64_t>> counts(clients);
  std::vector<int> failures(clients, 0);
  {
    std::vector<std::thread> threads;
    for (int t = 0; t < clients; ++t)
      threads.emplace_back([&, t] {
        HttpClient c(server.port());
        for (int i = 0; i < per_client; ++i) {
          auto r = c.Post("/datePlan/1/like");
          if (r.status == 200)
            counts[t].push_back(JsonInt(r.body, "like"));
          else
            ++failures[t];
        }
      });
    for (auto& th : threads) th.join();
  }
  std::set<int64_t> distinct;
  size_t ok = 0;
  for (auto& v : counts) {
    ok += v.size();
    distinct.insert(v.begin(), v.end());
  }
  EXPECT_EQ(ok, 1000u);
  EXPECT_EQ(distinct.size(), 1000u) << "every 200 carries a distinct count";
  EXPECT_EQ(*distinct.begin(), 1);
  EXPECT_EQ(*distinct.rbegin(), 1000);
  HttpClient c(server.port());
  EXPECT_EQ(JsonInt(c.Get("/datePlan/1").body, "like"), 1000);

  EXPECT_EQ(server.Stop(), 0);
  ASSERT_TRUE(server.Start());
  HttpClient after(server.port());
  auto plan = after.Get("/datePlan/1");
  EXPECT_EQ(JsonInt(plan.body, "like"), 1000);
  EXPECT_EQ(after.Get("/datePlan/3").status, 200);
  auto ranking = after.Get("/datePlan/ranking?limit=1");
  EXPECT_NE(ranking.body.find("\"id\":1,"), std::string::npos) << ranking.body;
}

}  // namespace
}  // namespace hotrow::testing
