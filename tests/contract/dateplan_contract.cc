#include "contract/dateplan_contract.h"

#include <future>
#include <set>
#include <thread>

#include "contract/wait.h"

namespace hotrow::testing {

using dateplan::CreatedPlan;
using dateplan::Plan;
using dateplan::PlanFields;

namespace {

// Blocking wrappers around the asynchronous service calls.
Result<CreatedPlan> Create(dateplan::DatePlanService& s, PlanFields f) {
  return Wait<Result<CreatedPlan>>([&](auto done) { s.Create(std::move(f), done); });
}
Result<Plan> Update(dateplan::DatePlanService& s, int64_t id, PlanFields f) {
  return Wait<Result<Plan>>([&](auto done) { s.Update(id, std::move(f), done); });
}
Status Delete(dateplan::DatePlanService& s, int64_t id) {
  return Wait<Status>([&](auto done) { s.Delete(id, done); });
}
Result<int64_t> Like(dateplan::DatePlanService& s, int64_t id) {
  return Wait<Result<int64_t>>([&](auto done) { s.Like(id, done); });
}
std::optional<Plan> Get(const dateplan::DatePlanService& s, int64_t id) {
  std::optional<Plan> out;
  s.catalog().With(id, [&](const Plan& p) { out = p; });
  return out;
}

}  // namespace

void DatePlanContract::SetUp() {
  backend = GetParam().make();
  ASSERT_TRUE(backend);
  service = std::make_unique<dateplan::DatePlanService>(backend->store(), admin);
  ASSERT_TRUE(service->Load().ok());
}

void DatePlanContract::Restart() {
  service.reset();
  backend->Restart();
  service = std::make_unique<dateplan::DatePlanService>(backend->store(), admin);
  ASSERT_TRUE(service->Load().ok());
}

TEST_P(DatePlanContract, CreateAssignsAnIdZeroLikesAndAWorkingEditToken) {
  auto c = Create(*service, {"インドカレー屋に行く", "インドカレーは穏やかな色になるとなぜか辛くなる", "Indoor"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_GT(c->plan.id, 0);
  EXPECT_EQ(c->plan.like, 0);
  EXPECT_GE(c->edit_token.size(), 32u) << "at least 128 bits, hex";
  auto got = Get(*service, c->plan.id);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->title, "インドカレー屋に行く");
  EXPECT_TRUE(service->Authorize(c->plan.id, c->edit_token).ok());
  EXPECT_TRUE(service->Authorize(c->plan.id, std::string_view("admin-secret")).ok());
  EXPECT_EQ(service->Authorize(c->plan.id, std::string_view("wrong")).code(), ErrorCode::kForbidden);
  EXPECT_EQ(service->Authorize(c->plan.id, std::nullopt).code(), ErrorCode::kUnauthorized);
  EXPECT_EQ(service->Authorize(c->plan.id + 1000, c->edit_token).code(), ErrorCode::kNotFound);
  auto c2 = Create(*service, {"b", "", "Outdoor"});
  ASSERT_TRUE(c2.ok());
  EXPECT_NE(c2->edit_token, c->edit_token);
  EXPECT_EQ(service->Authorize(c2->plan.id, c->edit_token).code(), ErrorCode::kForbidden)
      << "one plan's token must not edit another";
}

TEST_P(DatePlanContract, FieldRulesCountCodePoints) {
  std::string title100, title101;
  for (int i = 0; i < 100; ++i) title100 += "あ";
  title101 = title100 + "a";
  EXPECT_TRUE(Create(*service, {title100, "", "Indoor"}).ok());
  auto too_long = Create(*service, {title101, "", "Indoor"});
  EXPECT_EQ(too_long.status().field(), "title");
  EXPECT_EQ(too_long.status().message(), "title must be 1-100 characters");
  EXPECT_EQ(Create(*service, {"", "", "Indoor"}).status().field(), "title");
  EXPECT_EQ(Create(*service, {"t", std::string(2001, 'x'), "Indoor"}).status().field(), "content");
  EXPECT_TRUE(Create(*service, {"t", std::string(2000, 'x'), "Indoor"}).ok());
  EXPECT_EQ(Create(*service, {"t", "", ""}).status().field(), "category");
  EXPECT_EQ(Create(*service, {"t", "", std::string(31, 'c')}).status().field(), "category");
  EXPECT_EQ(Create(*service, {"t\x01", "", "c"}).status().field(), "title");
  EXPECT_EQ(Create(*service, {"t", "", "c\xff"}).status().field(), "category");
  EXPECT_TRUE(Create(*service, {"t", "line one\nline two", "c"}).ok());
}

TEST_P(DatePlanContract, UpdateReplacesFieldsAndKeepsLikes) {
  auto c = Create(*service, {"a", "b", "X"});
  ASSERT_TRUE(c.ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Like(*service, c->plan.id).ok());
  auto u = Update(*service, c->plan.id, {"a2", "b2", "Y"});
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->title, "a2");
  EXPECT_EQ(u->like, 3);
  EXPECT_EQ(Get(*service, c->plan.id)->category, "Y");
  EXPECT_TRUE(service->Authorize(c->plan.id, c->edit_token).ok()) << "the edit token survives an update";
  EXPECT_EQ(Update(*service, 987654321, {"a", "b", "c"}).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(Update(*service, c->plan.id, {"", "b", "c"}).status().field(), "title");
}

TEST_P(DatePlanContract, DeleteRemovesAndIdsAreNeverReused) {
  auto a = Create(*service, {"a", "", "X"});
  auto b = Create(*service, {"b", "", "X"});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(Delete(*service, b->plan.id).ok());
  EXPECT_EQ(Delete(*service, b->plan.id).code(), ErrorCode::kNotFound);
  EXPECT_FALSE(Get(*service, b->plan.id));
  EXPECT_EQ(Like(*service, b->plan.id).status().code(), ErrorCode::kNotFound);
  auto c = Create(*service, {"c", "", "X"});
  ASSERT_TRUE(c.ok());
  EXPECT_GT(c->plan.id, b->plan.id) << "a deleted plan's id must not be handed out again";
}

TEST_P(DatePlanContract, ConcurrentLikesGetDistinctCountsAndAreAllCounted) {
  auto c = Create(*service, {"hot", "", "X"});
  ASSERT_TRUE(c.ok());
  const int threads = 8, per_thread = 250;
  std::vector<std::vector<int64_t>> seen(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        auto r = Like(*service, c->plan.id);
        if (r.ok()) seen[t].push_back(*r);
      }
    });
  for (auto& w : workers) w.join();
  std::set<int64_t> all;
  size_t total = 0;
  for (auto& v : seen) {
    total += v.size();
    all.insert(v.begin(), v.end());
  }
  EXPECT_EQ(total, static_cast<size_t>(threads * per_thread));
  EXPECT_EQ(all.size(), total) << "every like must get a distinct count";
  EXPECT_EQ(*all.begin(), 1);
  EXPECT_EQ(*all.rbegin(), threads * per_thread);
  EXPECT_EQ(Get(*service, c->plan.id)->like, threads * per_thread);
}

TEST_P(DatePlanContract, EverythingSurvivesARestart) {
  auto a = Create(*service, {"a", "content a", "X"});
  auto b = Create(*service, {"b", "content b", "Y"});
  ASSERT_TRUE(a.ok() && b.ok());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(Like(*service, b->plan.id).ok());
  ASSERT_TRUE(Update(*service, a->plan.id, {"a2", "content a2", "Z"}).ok());
  Restart();
  auto ga = Get(*service, a->plan.id), gb = Get(*service, b->plan.id);
  ASSERT_TRUE(ga && gb);
  EXPECT_EQ(ga->title, "a2");
  EXPECT_EQ(ga->category, "Z");
  EXPECT_EQ(gb->like, 5);
  EXPECT_TRUE(service->Authorize(a->plan.id, a->edit_token).ok()) << "edit tokens survive a restart";
  auto ranking = service->catalog().Ranking(1);
  ASSERT_EQ(ranking.size(), 1u);
  EXPECT_EQ(ranking[0].id, b->plan.id);
  auto like = Like(*service, b->plan.id);
  ASSERT_TRUE(like.ok());
  EXPECT_EQ(*like, 6);
}

}  // namespace hotrow::testing
