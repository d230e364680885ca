#include "contract/leaderboard_contract.h"

#include <algorithm>
#include <future>
#include <map>
#include <random>
#include <thread>

#include "contract/wait.h"

namespace hotrow::testing {

using leaderboard::Entry;
using leaderboard::Page;
using leaderboard::PlayerView;
using leaderboard::Posted;
using leaderboard::ScoreMode;

namespace {

Result<Posted> Post(leaderboard::LeaderboardService& s, const std::string& id, int64_t score,
                    ScoreMode mode = ScoreMode::kReplace) {
  return Wait<Result<Posted>>([&](auto done) { s.PostScore(id, score, mode, done); });
}
Status Remove(leaderboard::LeaderboardService& s, const std::string& id) {
  return Wait<Status>([&](auto done) { s.Remove(id, done); });
}
Result<Page> Top(leaderboard::LeaderboardService& s, int64_t offset, int64_t limit) {
  return Wait<Result<Page>>([&](auto done) { s.Top(offset, limit, done); });
}
Result<PlayerView> Player(leaderboard::LeaderboardService& s, const std::string& id,
                          std::optional<int64_t> around = std::nullopt) {
  return Wait<Result<PlayerView>>([&](auto done) { s.Player(id, around, done); });
}
// A checked element of a page (span has no at()).
const Entry& At(std::span<const Entry> entries, size_t i) {
  if (i >= entries.size()) throw std::out_of_range("no entry " + std::to_string(i) + " on the page");
  return entries[i];
}

std::vector<std::string> Ids(std::span<const Entry> entries) {
  std::vector<std::string> out;
  for (const auto& e : entries) out.push_back(e.client_id);
  return out;
}

}  // namespace

TEST_P(LeaderboardContract, PostReturnsStoredScoreAndRank) {
  auto a = Post(store(), "a", 10);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->entry.score, 10);
  EXPECT_EQ(a->entry.rank, 1);
  auto b = Post(store(), "b", 20);
  EXPECT_EQ(b->entry.rank, 1);
  auto c = Post(store(), "c", 15);
  EXPECT_EQ(c->entry.rank, 2);
  auto a2 = Post(store(), "a", 30);  // replace (the default)
  EXPECT_EQ(a2->entry.score, 30);
  EXPECT_EQ(a2->entry.rank, 1);
  auto a3 = Post(store(), "a", 5);  // replace goes down, too
  EXPECT_EQ(a3->entry.score, 5);
  EXPECT_EQ(a3->entry.rank, 3);
  auto page = Top(store(), 0, 10);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->total, 3);
  EXPECT_EQ(Ids(page->entries), (std::vector<std::string>{"b", "c", "a"}));
  EXPECT_EQ(page->entries[2].rank, 3);
  EXPECT_EQ(page->entries[2].score, 5);
}

TEST_P(LeaderboardContract, BestModeKeepsTheHigherScore) {
  ASSERT_TRUE(Post(store(), "p", 100).ok());
  auto lower = Post(store(), "p", 50, ScoreMode::kBest);
  ASSERT_TRUE(lower.ok());
  EXPECT_EQ(lower->entry.score, 100);
  EXPECT_FALSE(lower->changed);
  auto higher = Post(store(), "p", 150, ScoreMode::kBest);
  EXPECT_EQ(higher->entry.score, 150);
  EXPECT_TRUE(higher->changed);
  auto fresh = Post(store(), "q", -7, ScoreMode::kBest);  // a first score is stored in either mode
  EXPECT_EQ(fresh->entry.score, -7);
}

TEST_P(LeaderboardContract, AmongEqualScoresTheEarlierChangeRanksHigher) {
  ASSERT_TRUE(Post(store(), "first", 100).ok());
  ASSERT_TRUE(Post(store(), "second", 100).ok());
  ASSERT_TRUE(Post(store(), "third", 100).ok());
  EXPECT_EQ(Ids(Top(store(), 0, 10)->entries), (std::vector<std::string>{"first", "second", "third"}));
  // Re-posting an equal score changes nothing: "first" keeps its place.
  auto again = Post(store(), "first", 100);
  EXPECT_FALSE(again->changed);
  EXPECT_EQ(again->entry.rank, 1);
  EXPECT_EQ(Ids(Top(store(), 0, 10)->entries), (std::vector<std::string>{"first", "second", "third"}));
  // Leaving the score and coming back is a new change: now it is the latest.
  ASSERT_TRUE(Post(store(), "first", 99).ok());
  auto back = Post(store(), "first", 100);
  EXPECT_EQ(back->entry.rank, 3);
  EXPECT_EQ(Ids(Top(store(), 0, 10)->entries), (std::vector<std::string>{"second", "third", "first"}));
}

TEST_P(LeaderboardContract, ScoresAreExactAtTheLimits) {
  const int64_t max = leaderboard::kScoreAbsMax;
  ASSERT_TRUE(Post(store(), "top", max).ok());
  ASSERT_TRUE(Post(store(), "near", max - 1).ok());
  ASSERT_TRUE(Post(store(), "bottom", -max).ok());
  auto page = Top(store(), 0, 10);
  ASSERT_EQ(page->entries.size(), 3u);
  EXPECT_EQ(page->entries[0].score, max);
  EXPECT_EQ(page->entries[1].score, max - 1);
  EXPECT_EQ(page->entries[2].score, -max);
  EXPECT_EQ(Player(store(), "near")->entry.score, max - 1);
}

TEST_P(LeaderboardContract, PagesAndTheirEdges) {
  for (int i = 1; i <= 25; ++i) ASSERT_TRUE(Post(store(), "p" + std::to_string(i), 1000 - i).ok());
  auto first = Top(store(), 0, 10);
  ASSERT_EQ(first->entries.size(), 10u);
  EXPECT_EQ(first->entries.front().client_id, "p1");
  EXPECT_EQ(first->total, 25);
  auto last = Top(store(), 20, 10);
  ASSERT_EQ(last->entries.size(), 5u);
  EXPECT_EQ(last->entries.front().rank, 21);
  EXPECT_EQ(last->entries.back().client_id, "p25");
  auto past = Top(store(), 25, 10);
  EXPECT_TRUE(past->entries.empty());
  EXPECT_EQ(past->total, 25);
  EXPECT_TRUE(Top(store(), 1000, 100)->entries.empty());
  auto deep = Top(store(), 95, 10);  // beyond any cached top 100
  EXPECT_TRUE(deep->entries.empty());
  EXPECT_EQ(At(Top(store(), 24, 1)->entries, 0).client_id, "p25");
}

TEST_P(LeaderboardContract, AroundClipsAtBothEnds) {
  for (int i = 1; i <= 10; ++i) ASSERT_TRUE(Post(store(), "p" + std::to_string(i), 100 - i).ok());
  auto top = Player(store(), "p1", 3);
  ASSERT_TRUE(top.ok());
  EXPECT_EQ(top->entry.rank, 1);
  EXPECT_EQ(Ids(*top->around), (std::vector<std::string>{"p1", "p2", "p3", "p4"}));
  auto bottom = Player(store(), "p10", 2);
  EXPECT_EQ(Ids(*bottom->around), (std::vector<std::string>{"p8", "p9", "p10"}));
  EXPECT_EQ(bottom->around->front().rank, 8);
  auto middle = Player(store(), "p5", 1);
  EXPECT_EQ(Ids(*middle->around), (std::vector<std::string>{"p4", "p5", "p6"}));
  auto zero = Player(store(), "p5", 0);
  EXPECT_EQ(Ids(*zero->around), (std::vector<std::string>{"p5"}));
  EXPECT_FALSE(Player(store(), "p5")->around.has_value());
  EXPECT_EQ(Player(store(), "nobody").status().code(), ErrorCode::kNotFound);
}

TEST_P(LeaderboardContract, RemoveTakesThePlayerOff) {
  ASSERT_TRUE(Post(store(), "cheater", 1000000).ok());
  ASSERT_TRUE(Post(store(), "honest", 10).ok());
  EXPECT_TRUE(Remove(store(), "cheater").ok());
  EXPECT_EQ(Remove(store(), "cheater").code(), ErrorCode::kNotFound);
  EXPECT_EQ(Player(store(), "cheater").status().code(), ErrorCode::kNotFound);
  auto page = Top(store(), 0, 10);
  EXPECT_EQ(page->total, 1);
  EXPECT_EQ(At(page->entries, 0).client_id, "honest");
  EXPECT_EQ(At(page->entries, 0).rank, 1);
}

TEST_P(LeaderboardContract, AReadAfterAWriteSeesIt) {
  for (int i = 0; i < 50; ++i) {
    std::string id = "r" + std::to_string(i);
    ASSERT_TRUE(Post(store(), id, 1000 + i).ok());
    auto page = Top(store(), 0, 1);
    ASSERT_EQ(At(page->entries, 0).client_id, id) << "the top read after a 200 must reflect it";
  }
}

TEST_P(LeaderboardContract, ScoresAndRanksSurviveARestart) {
  ASSERT_TRUE(Post(store(), "x", 5).ok());
  ASSERT_TRUE(Post(store(), "y", 5).ok());
  ASSERT_TRUE(Post(store(), "z", 9).ok());
  Restart();
  EXPECT_EQ(Ids(Top(store(), 0, 10)->entries), (std::vector<std::string>{"z", "x", "y"}));
  auto y = Post(store(), "y", 5);
  EXPECT_EQ(y->entry.rank, 3) << "tie order survives the restart";
  auto w = Post(store(), "w", 5);
  EXPECT_EQ(w->entry.rank, 4) << "sequence numbers continue after the restart";
}

TEST_P(LeaderboardContract, AcknowledgedScoresSurviveKill9OfTheServer) {
  ASSERT_TRUE(Post(store(), "durable", 42).ok());
  ASSERT_TRUE(Post(store(), "also", 43).ok());
  if (!CrashServer()) GTEST_SKIP() << "no separate server to crash for " << GetParam().name;
  Restart();
  auto p = Player(store(), "durable");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->entry.score, 42);
  EXPECT_EQ(p->entry.rank, 2);
}

// 50 writers post random scores while 50 readers read; at the end every
// player's reported rank equals the rank recomputed from the stored scores.
TEST_P(LeaderboardContract, RanksAreExactAfterConcurrentWritesAndReads) {
  const int writers = 50, readers = 50, players = 200, posts_per_writer = 40;
  std::atomic<bool> stop{false};
  std::atomic<int> read_errors{0}, write_errors{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < writers; ++w)
    threads.emplace_back([&, w] {
      std::mt19937_64 rng(w);
      for (int i = 0; i < posts_per_writer; ++i) {
        auto mode = rng() % 4 == 0 ? ScoreMode::kBest : ScoreMode::kReplace;
        if (!Post(store(), "c" + std::to_string(rng() % players), static_cast<int64_t>(rng() % 500), mode).ok())
          ++write_errors;
      }
    });
  for (int r = 0; r < readers; ++r)
    threads.emplace_back([&, r] {
      std::mt19937_64 rng(1000 + r);
      while (!stop) {
        auto page = Top(store(), 0, 10);
        if (!page.ok())
          ++read_errors;
        else if (!std::is_sorted(page->entries.begin(), page->entries.end(),
                                 [](const Entry& a, const Entry& b) { return a.score > b.score; }))
          ++read_errors;  // a page must always be in rank order
        (void)Player(store(), "c" + std::to_string(rng() % players));
        // Pace like a client: in-memory reads in a tight loop on 50 threads
        // would only starve the writers of CPU on a 2-core machine.
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
  for (int w = 0; w < writers; ++w) threads[static_cast<size_t>(w)].join();
  stop = true;
  for (size_t i = writers; i < threads.size(); ++i) threads[i].join();
  EXPECT_EQ(write_errors.load(), 0);
  EXPECT_EQ(read_errors.load(), 0);

  // Recompute: the full board, in order, must be sorted by score, and each
  // player's own rank must be its position there.
  // The board page by page (a page holds kPageLimitMax at most); nothing
  // writes meanwhile, so the pages join up.
  std::vector<Entry> entries;
  int64_t total = -1;
  for (int64_t offset = 0; total < 0 || offset < total; offset += leaderboard::kPageLimitMax) {
    auto page = Top(store(), offset, leaderboard::kPageLimitMax);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    total = page->total;
    entries.insert(entries.end(), page->entries.begin(), page->entries.end());
    if (page->entries.empty()) break;
  }
  ASSERT_EQ(total, static_cast<int64_t>(entries.size()));
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    EXPECT_EQ(e.rank, static_cast<int64_t>(i) + 1);
    if (i > 0) {
      EXPECT_GE(entries[i - 1].score, e.score);
    }
    int64_t higher = std::count_if(entries.begin(), entries.end(), [&](const Entry& o) { return o.score > e.score; });
    EXPECT_GT(e.rank, higher) << e.client_id;
    auto mine = Player(store(), e.client_id);
    ASSERT_TRUE(mine.ok());
    EXPECT_EQ(mine->entry.rank, e.rank) << e.client_id;
    EXPECT_EQ(mine->entry.score, e.score) << e.client_id;
  }
}

}  // namespace hotrow::testing
