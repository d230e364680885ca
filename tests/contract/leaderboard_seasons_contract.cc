// The leaderboard contract, seasons: boards that reset on a schedule, on
// every backend. Seasons of a second or two (the test hooks'
// "everySeconds"), so a test waits for a boundary instead of midnight.
#include <chrono>
#include <future>
#include <thread>

#include "base/time.h"
#include "contract/leaderboard_contract.h"
#include "contract/leaderboard_helpers.h"
#include "contract/wait.h"
#include "harness/http_client.h"

namespace hotrow::testing {

using leaderboard::BoardInfo;
using leaderboard::BoardPatch;
using leaderboard::BoardSettings;
using leaderboard::BoardView;
using leaderboard::Entry;
using leaderboard::LeaderboardService;
using leaderboard::Page;
using leaderboard::PlayerView;
using leaderboard::Posted;
using leaderboard::Reset;
using leaderboard::SeasonInfo;

namespace {

Result<Posted> Post(LeaderboardService& s, const std::string& board, const std::string& id, int64_t score) {
  return Wait<Result<Posted>>([&](auto done) { s.PostScore(board, id, score, std::nullopt, done); });
}
Result<Page> Top(LeaderboardService& s, const std::string& board, std::optional<int64_t> season) {
  return Wait<Result<Page>>([&](auto done) { s.Top(board, season, 0, 10, done); });
}
Result<PlayerView> Player(LeaderboardService& s, const std::string& board, std::optional<int64_t> season,
                          const std::string& id) {
  return Wait<Result<PlayerView>>([&](auto done) { s.Player(board, season, id, std::nullopt, done); });
}
std::vector<std::string> Listed(std::span<const Entry> entries) {
  std::vector<std::string> out;
  for (const auto& e : entries)
    out.push_back(e.client_id + ":" + std::to_string(e.rank) + ":" + std::to_string(e.score));
  return out;
}
using Strings = std::vector<std::string>;

// Sleeps until the board's current season has ended (its next reset, and a
// margin for the stores' clocks).
void WaitForNextSeason(LeaderboardService& s, const std::string& board) {
  auto view = s.GetBoard(board);
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  ASSERT_TRUE(view->next_reset_us.has_value());
  int64_t wait_us = *view->next_reset_us - NowMicros() + 50'000;
  if (wait_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(wait_us));
}

BoardSettings EverySeconds(int64_t every_s, int64_t keep_seasons) {
  BoardSettings settings;
  settings.reset_every_s = every_s;
  settings.keep_seasons = keep_seasons;
  return settings;
}

}  // namespace

TEST_P(LeaderboardContract, AScoreGoesToTheSeasonTheClockIsInAndTheLastOneStaysReadable) {
  auto made = Create(store(), "sprint", EverySeconds(2, 3));
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  const int64_t first = made->season;
  auto a = Post(store(), "sprint", "ann", 10);
  auto b = Post(store(), "sprint", "bob", 20);
  ASSERT_TRUE(a.ok() && b.ok());
  // The test may have been slow: the season the posts went to is the one read.
  const int64_t s1 = b->season;
  ASSERT_GE(s1, first);
  WaitForNextSeason(store(), "sprint");

  auto c = Post(store(), "sprint", "ann", 5);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_GT(c->season, s1);
  EXPECT_EQ(c->entry.rank, 1);  // a new season starts empty
  auto now = Top(store(), "sprint", std::nullopt);
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(Listed(now->entries), (Strings{"ann:1:5"}));

  auto before = Top(store(), "sprint", s1);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_EQ(Listed(before->entries), (Strings{"bob:1:20", "ann:2:10"}));
  auto ann = Player(store(), "sprint", s1, "ann");
  ASSERT_TRUE(ann.ok());
  EXPECT_EQ(ann->entry.rank, 2);

  auto seasons = store().Seasons("sprint");
  ASSERT_TRUE(seasons.ok());
  ASSERT_GE(seasons->size(), 2u);
  EXPECT_EQ(seasons->back().season, c->season);
  EXPECT_FALSE(seasons->back().ended_us.has_value());
  for (size_t i = 0; i + 1 < seasons->size(); ++i) {
    EXPECT_EQ((*seasons)[i].season + 1, (*seasons)[i + 1].season);
    EXPECT_EQ((*seasons)[i].ended_us, std::optional((*seasons)[i + 1].started_us));
  }

  // A season ahead, or one it never had, is not found.
  EXPECT_EQ(store().ReadSeason("sprint", c->season + 1).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(store().ReadSeason("sprint", 0).status().code(), ErrorCode::kNotFound);

  // After a restart the archived season comes from the store.
  Restart();
  before = Top(store(), "sprint", s1);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_EQ(Listed(before->entries), (Strings{"bob:1:20", "ann:2:10"}));
}

TEST_P(LeaderboardContract, KeepSeasonsBoundsWhatIsReadable) {
  auto made = Create(store(), "blitz", EverySeconds(1, 1));
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  auto a = Post(store(), "blitz", "ann", 1);
  ASSERT_TRUE(a.ok());
  const int64_t s1 = a->season;
  WaitForNextSeason(store(), "blitz");
  WaitForNextSeason(store(), "blitz");
  auto b = Post(store(), "blitz", "bob", 2);
  ASSERT_TRUE(b.ok());
  ASSERT_GE(b->season, s1 + 2);
  // keepSeasons 1: the current season and the one before it.
  EXPECT_EQ(store().ReadSeason("blitz", s1).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(Top(store(), "blitz", s1).status().code(), ErrorCode::kNotFound);
  auto kept = store().ReadSeason("blitz", b->season - 1);
  ASSERT_TRUE(kept.ok());
  auto seasons = store().Seasons("blitz");
  ASSERT_TRUE(seasons.ok());
  ASSERT_EQ(seasons->size(), 2u);
  EXPECT_EQ(seasons->front().season, b->season - 1);
  // The first post of a season deleted the seasons past keepSeasons (a
  // store that ranks for itself cannot list a season here).
  // (in the background, after the move to a new season).
  bool purged = Eventually(
      [&] {
        int rows = 0;
        Status listed = backend->store().LoadSeason("blitz", s1, [&](std::string, leaderboard::Stored) { ++rows; });
        return !listed.ok() || rows == 0;
      },
      std::chrono::seconds(5));
  EXPECT_TRUE(purged) << "season " << s1 << " is still stored";
}

// Two changes of one board at once: each either lands or is refused
// (409), never answered 200 and then undone by the other. (Before, the
// second overwrote the first's setting with the value it had read: 26 of
// 30 runs lost one.)
TEST_P(LeaderboardContract, TwoChangesAtOnceNeverUndoEachOther) {
  for (int round = 0; round < 10; ++round) {
    std::string id = "patch-" + std::to_string(round);
    ASSERT_TRUE(Create(store(), id, BoardSettings{}).ok());
    std::promise<Result<BoardView>> keep, reset;
    store().UpdateBoard(id, BoardPatch{.keep_seasons = 7}, [&](Result<BoardView> r) { keep.set_value(r); });
    store().UpdateBoard(id, BoardPatch{.reset = Reset::kDaily}, [&](Result<BoardView> r) { reset.set_value(r); });
    auto k = keep.get_future().get(), r = reset.get_future().get();
    for (const auto& answer : {k, r}) {
      if (!answer.ok()) {
        EXPECT_EQ(answer.status().code(), ErrorCode::kConflict) << answer.status().ToString();
      }
    }
    ASSERT_TRUE(k.ok() || r.ok()) << "one of them lands";
    auto now = store().GetBoard(id);
    ASSERT_TRUE(now.ok());
    if (k.ok()) {
      EXPECT_EQ(now->info.settings.keep_seasons, 7);
    }
    if (r.ok()) {
      EXPECT_EQ(now->info.settings.reset, Reset::kDaily);
    }
  }
}

TEST_P(LeaderboardContract, AChangedScheduleTakesEffectAtTheNextBoundary) {
  auto made = Create(store(), "cup", BoardSettings{});
  ASSERT_TRUE(made.ok());
  EXPECT_EQ(made->season, 1);
  EXPECT_FALSE(made->next_reset_us.has_value());
  ASSERT_TRUE(Post(store(), "cup", "ann", 7).ok());

  auto patched = Patch(store(), "cup", BoardPatch{.reset_every_s = 1});
  ASSERT_TRUE(patched.ok()) << patched.status().ToString();
  EXPECT_EQ(patched->season, 1);  // season 1 runs on until the first boundary
  ASSERT_TRUE(patched->next_reset_us.has_value());
  EXPECT_EQ(patched->info.settings.reset_every_s, 1);
  WaitForNextSeason(store(), "cup");
  auto b = Post(store(), "cup", "bob", 3);
  ASSERT_TRUE(b.ok());
  EXPECT_GE(b->season, 2);
  auto first = Top(store(), "cup", 1);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(Listed(first->entries), (Strings{"ann:1:7"}));
  auto seasons = store().Seasons("cup");
  ASSERT_TRUE(seasons.ok());
  EXPECT_EQ(seasons->front().season, 1);
  EXPECT_EQ(seasons->front().started_us, made->info.created_us);

  // Back to no reset: once the pending boundary passes, the season stays.
  auto none = Patch(store(), "cup", BoardPatch{.reset = Reset::kNone});
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  WaitForNextSeason(store(), "cup");
  auto view = store().GetBoard("cup");
  ASSERT_TRUE(view.ok());
  EXPECT_FALSE(view->next_reset_us.has_value());
  const int64_t last = view->season;
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_EQ(store().GetBoard("cup")->season, last);
  // The seasons before the change keep their starts, across a restart.
  Restart();
  auto again = store().Seasons("cup");
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), seasons->size() + (last - seasons->back().season));
  EXPECT_EQ(again->front().started_us, made->info.created_us);
}

TEST_P(LeaderboardContract, TheLegacyRoutesFollowDefaultIntoItsNextSeason) {
  ASSERT_TRUE(Wait<Result<Posted>>([&](auto done) {
                store().PostScore("ann", 50, leaderboard::ScoreMode::kReplace, done);
              }).ok());
  auto legacy = Wait<Result<Page>>([&](auto done) { store().Top(0, 10, done); });
  ASSERT_TRUE(legacy.ok());
  EXPECT_EQ(legacy->total, 1);
  const int64_t s1 = store().GetBoard("default")->season;
  ASSERT_TRUE(Patch(store(), "default", BoardPatch{.reset_every_s = 1}).ok());
  WaitForNextSeason(store(), "default");
  legacy = Wait<Result<Page>>([&](auto done) { store().Top(0, 10, done); });
  ASSERT_TRUE(legacy.ok());
  EXPECT_EQ(legacy->total, 0);  // the new season is empty
  auto player = Wait<Result<PlayerView>>([&](auto done) { store().Player("ann", std::nullopt, done); });
  EXPECT_EQ(player.status().code(), ErrorCode::kNotFound);
  auto old = Top(store(), "default", s1);
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(Listed(old->entries), (Strings{"ann:1:50"}));
}

}  // namespace hotrow::testing
