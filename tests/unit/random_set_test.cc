#include "dateplan/random_set.h"

#include <cmath>
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "dateplan/catalog.h"

namespace hotrow::dateplan {
namespace {

// The chi-square statistic of observed counts against a uniform expectation.
double ChiSquare(const std::map<int64_t, int64_t>& counts, size_t categories, int64_t draws) {
  double expected = static_cast<double>(draws) / static_cast<double>(categories);
  double chi = 0;
  size_t seen = 0;
  for (const auto& [id, n] : counts) {
    chi += (n - expected) * (n - expected) / expected;
    ++seen;
  }
  chi += static_cast<double>(categories - seen) * expected;  // never drawn
  return chi;
}

// The chi-square quantile at p = 0.999 (Wilson-Hilferty approximation).
double ChiSquareCritical999(double df) {
  const double z = 3.0902;
  double t = 1 - 2 / (9 * df) + z * std::sqrt(2 / (9 * df));
  return df * t * t * t;
}

// Ids 1..10000 with about half deleted in an uneven pattern: long runs
// (1000..2999, 7000..7499), every third id in 3000..6999, and a random
// scattering, so that survivors sit after gaps of very different lengths.
std::set<int64_t> UnevenSurvivors() {
  std::set<int64_t> live;
  std::mt19937_64 rng(7);
  for (int64_t id = 1; id <= 10000; ++id) {
    bool gone = (id >= 1000 && id < 3000) || (id >= 7000 && id < 7500) || (id >= 3000 && id < 7000 && id % 3 == 0) ||
                (id >= 7500 && rng() % 4 == 0);
    if (!gone) live.insert(id);
  }
  return live;
}

TEST(RandomSet, InsertEraseKeepsMembership) {
  RandomSet s;
  EXPECT_TRUE(s.Insert(5));
  EXPECT_FALSE(s.Insert(5));
  EXPECT_TRUE(s.Insert(9));
  EXPECT_TRUE(s.Insert(1));
  EXPECT_TRUE(s.Erase(5));
  EXPECT_FALSE(s.Erase(5));
  EXPECT_FALSE(s.Contains(5));
  EXPECT_TRUE(s.Contains(9));
  EXPECT_TRUE(s.Contains(1));
  EXPECT_EQ(s.size(), 2u);
  std::mt19937_64 rng(1);
  for (int i = 0; i < 100; ++i) {
    int64_t id = s.Pick(rng);
    EXPECT_TRUE(id == 9 || id == 1);
  }
}

TEST(RandomSet, UniformAfterUnevenDeletes) {
  RandomSet s;
  for (int64_t id = 1; id <= 10000; ++id) s.Insert(id);
  std::set<int64_t> live = UnevenSurvivors();
  for (int64_t id = 1; id <= 10000; ++id)
    if (!live.count(id)) s.Erase(id);
  ASSERT_EQ(s.size(), live.size());

  std::mt19937_64 rng(12345);
  const int64_t draws = static_cast<int64_t>(live.size()) * 100;
  std::map<int64_t, int64_t> counts;
  for (int64_t i = 0; i < draws; ++i) {
    int64_t id = s.Pick(rng);
    ASSERT_TRUE(live.count(id)) << "picked a deleted id " << id;
    ++counts[id];
  }
  double chi = ChiSquare(counts, live.size(), draws);
  double critical = ChiSquareCritical999(static_cast<double>(live.size() - 1));
  EXPECT_LT(chi, critical) << "picks are not uniform over the " << live.size() << " live plans";
}

// The same test rejects the biased "first id >= a random number" pick, so
// passing it means something.
TEST(RandomSet, ChiSquareRejectsTheNextIdTrick) {
  std::set<int64_t> live = UnevenSurvivors();
  std::mt19937_64 rng(12345);
  std::uniform_int_distribution<int64_t> any(1, *live.rbegin());
  const int64_t draws = static_cast<int64_t>(live.size()) * 100;
  std::map<int64_t, int64_t> counts;
  for (int64_t i = 0; i < draws; ++i) ++counts[*live.lower_bound(any(rng))];
  double chi = ChiSquare(counts, live.size(), draws);
  EXPECT_GT(chi, ChiSquareCritical999(static_cast<double>(live.size() - 1)) * 10);
}

TEST(Catalog, RandomWithinCategoryIsUniformAndStaysInside) {
  Catalog c;
  for (int64_t id = 1; id <= 3000; ++id) c.Put(Plan{id, "t", "", id % 3 == 0 ? "Indoor" : "Outdoor", 0, ""});
  for (int64_t id = 1; id <= 3000; id += 7) c.Erase(id);
  std::mt19937_64 rng(99);
  std::map<int64_t, int64_t> counts;
  int64_t draws = 0;
  std::set<int64_t> indoor;
  for (int64_t id = 1; id <= 3000; ++id)
    if (id % 3 == 0 && (id - 1) % 7 != 0) indoor.insert(id);
  for (int i = 0; i < static_cast<int>(indoor.size()) * 100; ++i, ++draws) {
    ASSERT_TRUE(c.WithRandom(std::string_view("Indoor"), rng, [&](const Plan& p) {
      EXPECT_EQ(p.category, "Indoor");
      ++counts[p.id];
    }));
  }
  EXPECT_LT(ChiSquare(counts, indoor.size(), draws), ChiSquareCritical999(static_cast<double>(indoor.size() - 1)));
  EXPECT_FALSE(c.WithRandom(std::string_view("Nope"), rng, [](const Plan&) {}));
}

TEST(Catalog, RankingByLikesThenId) {
  Catalog c;
  c.Put(Plan{1, "a", "", "X", 5, ""});
  c.Put(Plan{2, "b", "", "X", 9, ""});
  c.Put(Plan{3, "c", "", "Y", 5, ""});
  c.Put(Plan{4, "d", "", "Y", 0, ""});
  auto r = c.Ranking(3);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].id, 2);
  EXPECT_EQ(r[1].id, 1);
  EXPECT_EQ(r[2].id, 3);
  c.SetLike(4, 10);
  EXPECT_EQ(c.Ranking(1)[0].id, 4);
  c.SetLike(4, 3);  // likes never go backwards
  EXPECT_EQ(c.Ranking(1)[0].like, 10);
  c.Put(Plan{4, "d2", "", "Z", 0, ""});  // an edit keeps the likes
  EXPECT_EQ(c.Ranking(1)[0].like, 10);
  EXPECT_EQ(c.Ranking(1)[0].title, "d2");
  c.Erase(4);
  EXPECT_EQ(c.Ranking(10).size(), 3u);
}

// Completions that arrive out of order (issue 9, item 3): an older version
// never replaces a newer one, and a deleted plan never comes back.
TEST(Catalog, AnOlderVersionNeverReplacesANewerOneAndADeletedPlanStaysDeleted) {
  Catalog c;
  c.Put(Plan{1, "v1", "", "X", 0, "", 1});
  c.Put(Plan{1, "v3", "", "X", 2, "", 3});
  c.Put(Plan{1, "v2", "", "Y", 5, "", 2});  // late: its fields lose, its likes count
  std::string title;
  ASSERT_TRUE(c.With(1, [&](const Plan& p) { title = p.title; }));
  EXPECT_EQ(title, "v3");
  EXPECT_EQ(c.Ranking(1)[0].like, 5);
  EXPECT_EQ(c.Categories()[0].name, "X");
  c.Put(Plan{2, "b", "", "X", 0, "", 1});
  EXPECT_TRUE(c.Erase(2));
  c.Put(Plan{2, "b edited before the delete", "", "X", 0, "", 2});  // an edit's completion after the delete
  EXPECT_FALSE(c.With(2, [](const Plan&) {})) << "a deleted plan came back";
  c.ReplaceAll({Plan{2, "b", "", "X", 0, "", 1}});
  EXPECT_FALSE(c.With(2, [](const Plan&) {})) << "not even through a reload that raced the delete";
}

TEST(Catalog, CategoriesCountAndDisappearWhenEmpty) {
  Catalog c;
  c.Put(Plan{1, "a", "", "X", 0, ""});
  c.Put(Plan{2, "b", "", "Y", 0, ""});
  c.Put(Plan{3, "c", "", "Y", 0, ""});
  auto cats = c.Categories();
  ASSERT_EQ(cats.size(), 2u);
  EXPECT_EQ(cats[0].name, "Y");
  EXPECT_EQ(cats[0].count, 2u);
  c.Erase(1);
  cats = c.Categories();
  ASSERT_EQ(cats.size(), 1u);
  c.Put(Plan{2, "b", "", "Z", 0, ""});  // moving category
  cats = c.Categories();
  ASSERT_EQ(cats.size(), 2u);
  EXPECT_EQ(cats[0].count, 1u);
}

}  // namespace
}  // namespace hotrow::dateplan
