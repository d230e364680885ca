// The leaderboard contract, Idempotency-Key on score posts: a retry gets
// the first answer and writes nothing, on every backend (store.h,
// ScorePost).
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "base/time.h"
#include "contract/leaderboard_contract.h"
#include "contract/leaderboard_helpers.h"
#include "contract/wait.h"

namespace hotrow::testing {

using leaderboard::BoardInfo;
using leaderboard::BoardSettings;
using leaderboard::BoardView;
using leaderboard::LeaderboardService;
using leaderboard::Operator;
using leaderboard::PlayerView;
using leaderboard::Posted;
using leaderboard::PostExtras;

namespace {

Result<Posted> Post(LeaderboardService& s, const std::string& board, const std::string& id, int64_t score,
                    const std::string& key, std::optional<Operator> op = std::nullopt) {
  return Wait<Result<Posted>>(
      [&](auto done) { s.PostScore(board, id, score, op, PostExtras{.idempotency_key = key}, done); });
}
Result<PlayerView> Player(LeaderboardService& s, const std::string& board, const std::string& id) {
  return Wait<Result<PlayerView>>([&](auto done) { s.Player(board, std::nullopt, id, std::nullopt, done); });
}
int64_t ScoreOf(LeaderboardService& s, const std::string& board, const std::string& id) {
  auto p = Player(s, board, id);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? p->entry.score : INT64_MIN;
}
BoardSettings Increment() {
  BoardSettings settings;
  settings.op = Operator::kIncrement;
  return settings;
}

}  // namespace

TEST_P(LeaderboardContract, ARetriedIncrementWithItsKeyAddsOnceAndGetsTheFirstAnswer) {
  ASSERT_TRUE(Create(store(), "coins", Increment()).ok());
  auto first = Post(store(), "coins", "ann", 5, "order-1");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE(first->replayed);
  ASSERT_TRUE(Post(store(), "coins", "bob", 9, "order-1").ok());  // bob's key: his own
  auto again = Post(store(), "coins", "ann", 5, "order-1");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->replayed);
  EXPECT_EQ(again->entry.score, 5);
  EXPECT_EQ(again->season, first->season);
  EXPECT_EQ(again->entry.rank, 2);  // behind bob's 9
  EXPECT_EQ(ScoreOf(store(), "coins", "ann"), 5) << "the retry added nothing";

  auto next = Post(store(), "coins", "ann", 5, "order-2");
  ASSERT_TRUE(next.ok());
  EXPECT_FALSE(next->replayed);
  EXPECT_EQ(next->entry.score, 10);
  // ann moved on (10, ahead of bob's 9): her first answer's 5 would be
  // behind bob, and she is not counted twice.
  auto moved = Post(store(), "coins", "ann", 5, "order-1");
  ASSERT_TRUE(moved.ok());
  EXPECT_TRUE(moved->replayed);
  EXPECT_EQ(moved->entry.score, 5);
  EXPECT_EQ(moved->entry.rank, 2);
  // Without a key, every post counts.
  ASSERT_TRUE(Post(store(), "coins", "ann", 1, "").ok());
  ASSERT_TRUE(Post(store(), "coins", "ann", 1, "").ok());
  EXPECT_EQ(ScoreOf(store(), "coins", "ann"), 12);

  // Kept with the score: a restart still knows the key.
  Restart();
  auto after = Post(store(), "coins", "ann", 5, "order-2");
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_TRUE(after->replayed);
  EXPECT_EQ(after->entry.score, 10);
  EXPECT_EQ(ScoreOf(store(), "coins", "ann"), 12);
}

TEST_P(LeaderboardContract, AReplayedAnswerNeverCountsThePlayerTwice) {
  ASSERT_TRUE(Create(store(), "solo", Increment()).ok());
  ASSERT_TRUE(Post(store(), "solo", "only", 5, "k1").ok());
  ASSERT_TRUE(Post(store(), "solo", "only", 5, "k2").ok());
  auto replay = Post(store(), "solo", "only", 5, "k1");
  ASSERT_TRUE(replay.ok()) << replay.status().ToString();
  EXPECT_TRUE(replay->replayed);
  EXPECT_EQ(replay->entry.rank, 1) << "alone on the board";
  BoardSettings shared = Increment();
  shared.ranking = leaderboard::Ranking::kShared;
  ASSERT_TRUE(Create(store(), "tied", shared).ok());
  ASSERT_TRUE(Post(store(), "tied", "a", 5, "k1").ok());
  ASSERT_TRUE(Post(store(), "tied", "b", 5, "").ok());
  ASSERT_TRUE(Post(store(), "tied", "a", 5, "k2").ok());  // a: 10
  auto shared_replay = Post(store(), "tied", "a", 5, "k1");
  ASSERT_TRUE(shared_replay.ok());
  EXPECT_EQ(shared_replay->entry.rank, 1) << "tied with b, a's own 10 not counted";
}

TEST_P(LeaderboardContract, RetriesSentAtOnceAddOnce) {
  ASSERT_TRUE(Create(store(), "coins", Increment()).ok());
  constexpr int kRetries = 8;
  std::vector<std::promise<Result<Posted>>> answers(kRetries);
  for (auto& a : answers)
    store().PostScore("coins", "ann", 5, std::nullopt, PostExtras{.idempotency_key = "once"},
                      [&a](Result<Posted> r) { a.set_value(std::move(r)); });
  int firsts = 0;
  for (auto& a : answers) {
    auto r = a.get_future().get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->entry.score, 5);
    firsts += r->replayed ? 0 : 1;
  }
  EXPECT_EQ(firsts, 1);
  EXPECT_EQ(ScoreOf(store(), "coins", "ann"), 5);
}

TEST_P(LeaderboardContract, AKeySentAgainWithAnotherPostIsRefusedAndWritesNothing) {
  ASSERT_TRUE(Create(store(), "scores", BoardSettings{}).ok());
  ASSERT_TRUE(Post(store(), "scores", "ann", 7, "k").ok());
  auto other = Post(store(), "scores", "ann", 8, "k");
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), ErrorCode::kIdempotencyMismatch) << other.status().ToString();
  EXPECT_EQ(other.status().field(), "Idempotency-Key");
  // The operator is part of the request too (the legacy route's ?mode).
  auto mode = Post(store(), "scores", "ann", 7, "k", Operator::kBest);
  ASSERT_FALSE(mode.ok());
  EXPECT_EQ(mode.status().code(), ErrorCode::kIdempotencyMismatch);
  EXPECT_EQ(ScoreOf(store(), "scores", "ann"), 7);
  // The key is scoped to the board.
  ASSERT_TRUE(Create(store(), "other", BoardSettings{}).ok());
  auto elsewhere = Post(store(), "other", "ann", 8, "k");
  ASSERT_TRUE(elsewhere.ok());
  EXPECT_FALSE(elsewhere->replayed);
}

TEST_P(LeaderboardContract, AKeyIsCheckedAndRefusedWhenItIsNotVisibleAscii) {
  ASSERT_TRUE(Create(store(), "scores", BoardSettings{}).ok());
  for (std::string bad : {std::string(" "), std::string("a b"), std::string(201, 'k'), std::string("caf\xC3\xA9")}) {
    auto r = Post(store(), "scores", "ann", 1, bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidField);
    EXPECT_EQ(r.status().field(), "Idempotency-Key");
  }
  EXPECT_FALSE(Player(store(), "scores", "ann").ok()) << "nothing written";
}

TEST_P(LeaderboardContract, AReplayNeitherBringsBackARemovedPlayerNorOutlivesItsBoard) {
  ASSERT_TRUE(Create(store(), "coins", Increment()).ok());
  ASSERT_TRUE(Post(store(), "coins", "ann", 3, "k").ok());
  ASSERT_TRUE(Post(store(), "coins", "bob", 3, "").ok());  // equal, later
  ASSERT_TRUE(Post(store(), "coins", "cy", 1, "").ok());
  ASSERT_TRUE(Wait<Status>([&](auto done) { store().Remove("coins", "ann", done); }).ok());
  auto replay = Post(store(), "coins", "ann", 3, "k");
  ASSERT_TRUE(replay.ok()) << replay.status().ToString();
  EXPECT_TRUE(replay->replayed);
  EXPECT_EQ(replay->entry.rank, 1) << "where the kept entry would be: ahead of bob's later 3";
  EXPECT_FALSE(Player(store(), "coins", "ann").ok()) << "the replay wrote ann back";

  // A board deleted and made again starts with no keys.
  ASSERT_TRUE(Wait<Status>([&](auto done) { store().DeleteBoard("coins", done); }).ok());
  ASSERT_TRUE(Create(store(), "coins", Increment()).ok());
  auto fresh = Post(store(), "coins", "ann", 3, "k");
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_FALSE(fresh->replayed);
  EXPECT_EQ(ScoreOf(store(), "coins", "ann"), 3);
}

TEST_P(LeaderboardContract, ARetryAfterTheSeasonEndedGetsItsSeasonAndWritesNothingInTheNewOne) {
  BoardSettings settings = Increment();
  settings.reset_every_s = 1;
  auto made = Create(store(), "blitz", settings);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  auto first = Post(store(), "blitz", "ann", 4, "k");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto view = store().GetBoard("blitz");
  ASSERT_TRUE(view.ok());
  int64_t wait_us = *view->next_reset_us - NowMicros() + 50'000;
  if (first->season != view->season) GTEST_SKIP() << "the season ended during the first post";
  if (wait_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(wait_us));
  auto again = Post(store(), "blitz", "ann", 4, "k");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->replayed);
  EXPECT_EQ(again->season, first->season);
  EXPECT_EQ(again->entry.score, 4);
  EXPECT_FALSE(Player(store(), "blitz", "ann").ok()) << "nothing in the new season";
}

}  // namespace hotrow::testing
