// Allocation ceilings per request on the hot paths, counted in-process
// (bench/request_app.h: the real routes, services and SQLite stores behind
// an InProcessConnection) after a warm-up. Counts are deterministic there;
// no test here looks at a time. SQLite's own allocations are counted apart
// and left out: the ceilings are about hotrow's code.
#include <gtest/gtest.h>

#include "ops/alloc_counter.h"
#include "request_app.h"

namespace hotrow {
namespace {

class Allocations : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { app = new bench::RequestApp(); }
  static void TearDownTestSuite() {
    delete app;
    app = nullptr;
  }
  // hotrow's own allocations per request, over `n` requests after a warm-up.
  double PerRequest(const std::string& raw, int expected_status, int n = 200) {
    std::string out;
    for (int i = 0; i < 200; ++i) EXPECT_EQ(app->Exchange(raw, &out), expected_status) << out;
    uint64_t before = alloc::Own();
    for (int i = 0; i < n; ++i) app->Exchange(raw, &out);
    return static_cast<double>(alloc::Own() - before) / n;
  }
  static bench::RequestApp* app;
};
bench::RequestApp* Allocations::app = nullptr;

TEST_F(Allocations, CountingIsOn) {
  ASSERT_TRUE(alloc::Counting()) << "tests/alloc must link src/ops/alloc_hooks.cc";
  uint64_t before = alloc::Total();
  int* volatile p = new int(5);  // volatile: the compiler may not elide the pair
  delete p;
  EXPECT_EQ(alloc::Total() - before, 1u) << "the counter must see an allocation, or the ceilings mean nothing";
}

TEST_F(Allocations, RandomPlanMakesNone) { EXPECT_EQ(PerRequest(bench::GetRequest("/datePlan/"), 200), 0.0); }

TEST_F(Allocations, LeaderboardTopMakesNone) {
  EXPECT_EQ(PerRequest(bench::GetRequest("/api/v1/leaderboard"), 200), 0.0);
}

TEST_F(Allocations, EchoMakesNone) {
  EXPECT_EQ(PerRequest(bench::PostRequest("/api/v1/echo", R"({"name":"test","id":"id1","country":"testCountry","age":10})"),
                       200),
            0.0);
}

TEST_F(Allocations, LikeMakesAtMostOne) {
  EXPECT_LE(PerRequest(bench::PostRequest("/datePlan/1/like", ""), 200), 1.0);
}

TEST_F(Allocations, PointUseMakesAtMostOne) {
  EXPECT_LE(PerRequest(bench::PostRequest("/api/v1/cards/1/transactions", R"({"storeId":1,"amount":100})"), 201),
            1.0);
}

}  // namespace
}  // namespace hotrow
