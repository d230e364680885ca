// The leaderboard contract, many boards: what every backend must do with
// boards of every order, operator and ranking, seen through the service.
#include <set>

#include "contract/leaderboard_contract.h"
#include "contract/leaderboard_helpers.h"
#include "contract/wait.h"

namespace hotrow::testing {

using leaderboard::BoardInfo;
using leaderboard::BoardPatch;
using leaderboard::BoardSettings;
using leaderboard::BoardView;
using leaderboard::Entry;
using leaderboard::LeaderboardService;
using leaderboard::Operator;
using leaderboard::Order;
using leaderboard::Page;
using leaderboard::PlayerView;
using leaderboard::Posted;
using leaderboard::Ranking;
using leaderboard::RanksView;

namespace {

Status Delete(LeaderboardService& s, const std::string& id) {
  return Wait<Status>([&](auto done) { s.DeleteBoard(id, done); });
}
Result<Posted> Post(LeaderboardService& s, const std::string& board, const std::string& id, int64_t score) {
  return Wait<Result<Posted>>([&](auto done) { s.PostScore(board, id, score, std::nullopt, done); });
}
Result<Page> Top(LeaderboardService& s, const std::string& board, int64_t offset = 0, int64_t limit = 10) {
  return Wait<Result<Page>>([&](auto done) { s.Top(board, offset, limit, done); });
}
Result<PlayerView> Player(LeaderboardService& s, const std::string& board, const std::string& id,
                          std::optional<int64_t> around = std::nullopt) {
  return Wait<Result<PlayerView>>([&](auto done) { s.Player(board, id, around, done); });
}
Result<RanksView> Ranks(LeaderboardService& s, const std::string& board, std::vector<std::string> ids) {
  return Wait<Result<RanksView>>([&](auto done) { s.Ranks(board, ids, done); });
}
// "id:rank:score" of each entry.
std::vector<std::string> Listed(std::span<const Entry> entries) {
  std::vector<std::string> out;
  for (const auto& e : entries)
    out.push_back(e.client_id + ":" + std::to_string(e.rank) + ":" + std::to_string(e.score));
  return out;
}
using Strings = std::vector<std::string>;

}  // namespace

TEST_P(LeaderboardContract, DefaultExistsAndBoardsAreCreatedListedChangedAndDeleted) {
  auto def = store().GetBoard("default");
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(def->info.settings, BoardSettings{});
  EXPECT_EQ(def->season, 1);
  auto made = Create(store(), "weekly-race", {.order = Order::kAsc, .ranking = Ranking::kShared, .keep_seasons = 3});
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  EXPECT_EQ(made->info.settings.order, Order::kAsc);
  EXPECT_EQ(made->info.settings.keep_seasons, 3);
  EXPECT_GT(made->info.created_us, 0);
  EXPECT_EQ(made->season_started_us, made->info.created_us);
  EXPECT_FALSE(made->next_reset_us);
  EXPECT_EQ(Create(store(), "weekly-race").status().code(), ErrorCode::kAlreadyExists);
  EXPECT_EQ(Create(store(), "Weekly-Race").status().code(), ErrorCode::kOk) << "ids are case-sensitive";
  for (const char* bad : {"", "-lead", "has space", "ü", "a/b"}) {
    EXPECT_EQ(Create(store(), bad).status().code(), ErrorCode::kInvalidField) << "'" << bad << "'";
  }
  EXPECT_EQ(Create(store(), std::string(65, 'a')).status().code(), ErrorCode::kInvalidField);
  EXPECT_TRUE(Create(store(), std::string(64, 'a')).ok());
  EXPECT_EQ(Create(store(), "k", {.keep_seasons = 0}).status().code(), ErrorCode::kInvalidField);

  auto list = store().ListBoards(0, 100);
  ASSERT_TRUE(list.ok());
  Strings ids;
  for (const auto& b : list->boards) ids.push_back(b.info.id);
  EXPECT_EQ(ids, (Strings{"Weekly-Race", std::string(64, 'a'), "default", "weekly-race"}));
  EXPECT_EQ(list->total, 4);
  auto second = store().ListBoards(1, 2);
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(second->boards.size(), 2u);
  EXPECT_EQ(second->boards[0].info.id, std::string(64, 'a'));

  auto patched = Patch(store(), "weekly-race", {.keep_seasons = 7});
  ASSERT_TRUE(patched.ok()) << patched.status().ToString();
  EXPECT_EQ(patched->info.settings.keep_seasons, 7);
  EXPECT_EQ(patched->info.settings.order, Order::kAsc) << "what PATCH does not name stays";
  EXPECT_EQ(store().GetBoard("weekly-race")->info.settings.keep_seasons, 7);
  EXPECT_EQ(Patch(store(), "nope", {.keep_seasons = 2}).status().code(), ErrorCode::kNotFound);

  EXPECT_EQ(Delete(store(), "default").code(), ErrorCode::kConflict);
  ASSERT_TRUE(Delete(store(), "weekly-race").ok());
  EXPECT_EQ(store().GetBoard("weekly-race").status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(Delete(store(), "weekly-race").code(), ErrorCode::kNotFound);
  Restart();
  EXPECT_EQ(store().GetBoard("weekly-race").status().code(), ErrorCode::kNotFound);
  auto kept = store().GetBoard("Weekly-Race");
  ASSERT_TRUE(kept.ok()) << "boards survive a restart";
  EXPECT_EQ(kept->info.created_us, store().GetBoard("Weekly-Race")->info.created_us);
  EXPECT_TRUE(store().GetBoard("default").ok());
}

TEST_P(LeaderboardContract, EachBoardKeepsItsOwnScores) {
  ASSERT_TRUE(Create(store(), "b").ok());
  ASSERT_TRUE(Post(store(), "default", "p", 10).ok());
  ASSERT_TRUE(Post(store(), "b", "p", 99).ok());
  ASSERT_TRUE(Post(store(), "b", "q", 5).ok());
  EXPECT_EQ(Listed(Top(store(), "default")->entries), (Strings{"p:1:10"}));
  EXPECT_EQ(Listed(Top(store(), "b")->entries), (Strings{"p:1:99", "q:2:5"}));
  EXPECT_EQ(Top(store(), "b")->total, 2);
  EXPECT_EQ(Post(store(), "missing", "p", 1).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(Top(store(), "missing").status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(Player(store(), "b", "nobody").status().code(), ErrorCode::kNotFound);
  // A deleted board's scores go with it; the id starts again empty.
  ASSERT_TRUE(Delete(store(), "b").ok());
  EXPECT_EQ(Post(store(), "b", "p", 1).status().code(), ErrorCode::kNotFound);
  ASSERT_TRUE(Create(store(), "b").ok());
  EXPECT_EQ(Top(store(), "b")->total, 0);
  EXPECT_EQ(Player(store(), "b", "p").status().code(), ErrorCode::kNotFound);
  ASSERT_TRUE(Post(store(), "b", "r", 3).ok());
  Restart();
  EXPECT_EQ(Listed(Top(store(), "b")->entries), (Strings{"r:1:3"}));
  EXPECT_EQ(Listed(Top(store(), "default")->entries), (Strings{"p:1:10"}));
}

TEST_P(LeaderboardContract, AnAscBoardRanksTheLowestScoreFirst) {
  ASSERT_TRUE(Create(store(), "times", {.order = Order::kAsc, .op = Operator::kBest}).ok());
  for (auto [id, score] : std::vector<std::pair<std::string, int64_t>>{{"a", 70}, {"b", 50}, {"c", 50}, {"d", 90}})
    ASSERT_TRUE(Post(store(), "times", id, score).ok());
  EXPECT_EQ(Listed(Top(store(), "times")->entries), (Strings{"b:1:50", "c:2:50", "a:3:70", "d:4:90"}));
  // best on an asc board keeps the lower score.
  auto slower = Post(store(), "times", "a", 80);
  ASSERT_TRUE(slower.ok());
  EXPECT_EQ(slower->entry.score, 70);
  EXPECT_FALSE(slower->changed);
  auto faster = Post(store(), "times", "a", 10);
  ASSERT_TRUE(faster.ok());
  EXPECT_EQ(faster->entry.score, 10);
  EXPECT_EQ(faster->entry.rank, 1);
  auto around = Player(store(), "times", "c", 1);
  ASSERT_TRUE(around.ok());
  EXPECT_EQ(around->entry.rank, 3);
  EXPECT_EQ(Listed(*around->around), (Strings{"b:2:50", "c:3:50", "d:4:90"}));
}

TEST_P(LeaderboardContract, IncrementAddsAndRefusesToLeaveTheRange) {
  ASSERT_TRUE(Create(store(), "coins", {.op = Operator::kIncrement}).ok());
  ASSERT_TRUE(Post(store(), "coins", "p", 5).ok());
  auto more = Post(store(), "coins", "p", 7);
  ASSERT_TRUE(more.ok());
  EXPECT_EQ(more->entry.score, 12);
  EXPECT_TRUE(more->changed);
  auto less = Post(store(), "coins", "p", -20);
  ASSERT_TRUE(less.ok());
  EXPECT_EQ(less->entry.score, -8);
  auto zero = Post(store(), "coins", "p", 0);
  ASSERT_TRUE(zero.ok());
  EXPECT_FALSE(zero->changed) << "an equal result changes nothing";
  const int64_t max = leaderboard::kScoreAbsMax;
  ASSERT_TRUE(Post(store(), "coins", "big", max).ok());
  auto over = Post(store(), "coins", "big", 1);
  EXPECT_EQ(over.status().code(), ErrorCode::kInvalidField);
  EXPECT_EQ(over.status().field(), "score");
  EXPECT_EQ(Player(store(), "coins", "big")->entry.score, max) << "nothing was written";
  ASSERT_TRUE(Post(store(), "coins", "small", -max).ok());
  EXPECT_EQ(Post(store(), "coins", "small", -1).status().code(), ErrorCode::kInvalidField);
  Restart();
  EXPECT_EQ(Player(store(), "coins", "p")->entry.score, -8);
}

TEST_P(LeaderboardContract, SharedRanksCountOnlyStrictlyBetterScores) {
  ASSERT_TRUE(Create(store(), "shared", {.ranking = Ranking::kShared}).ok());
  for (auto [id, score] :
       std::vector<std::pair<std::string, int64_t>>{{"a", 100}, {"b", 90}, {"c", 90}, {"d", 80}, {"e", 90}})
    ASSERT_TRUE(Post(store(), "shared", id, score).ok());
  EXPECT_EQ(Listed(Top(store(), "shared")->entries), (Strings{"a:1:100", "b:2:90", "c:2:90", "e:2:90", "d:5:80"}));
  EXPECT_EQ(Listed(Top(store(), "shared", 2, 2)->entries), (Strings{"c:2:90", "e:2:90"}))
      << "a page that starts inside a tie";
  EXPECT_EQ(Player(store(), "shared", "e")->entry.rank, 2);
  auto posted = Post(store(), "shared", "f", 90);
  ASSERT_TRUE(posted.ok());
  EXPECT_EQ(posted->entry.rank, 2);
  auto around = Player(store(), "shared", "d", 1);
  ASSERT_TRUE(around.ok());
  EXPECT_EQ(Listed(*around->around), (Strings{"f:2:90", "d:6:80"}));
}

TEST_P(LeaderboardContract, TheFriendsViewRanksTheIdsAsked) {
  ASSERT_TRUE(Create(store(), "f").ok());
  for (int i = 1; i <= 20; ++i) ASSERT_TRUE(Post(store(), "f", "p" + std::to_string(i), i * 10).ok());
  auto view = Ranks(store(), "f", {"p3", "nobody", "p20", "p11"});
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  EXPECT_EQ(Listed(view->entries), (Strings{"p20:1:200", "p11:10:110", "p3:18:30"}));
  EXPECT_EQ(view->missing, (Strings{"nobody"}));
  EXPECT_EQ(Ranks(store(), "f", {}).status().code(), ErrorCode::kInvalidField);
  EXPECT_EQ(Ranks(store(), "f", {"p1", "p1"}).status().code(), ErrorCode::kInvalidField);
  EXPECT_EQ(Ranks(store(), "f", {"bad id"}).status().code(), ErrorCode::kInvalidField);
  Strings many;
  for (int i = 0; i < 101; ++i) many.push_back("x" + std::to_string(i));
  EXPECT_EQ(Ranks(store(), "f", many).status().code(), ErrorCode::kInvalidField);
  many.pop_back();
  auto hundred = Ranks(store(), "f", many);
  ASSERT_TRUE(hundred.ok());
  EXPECT_EQ(hundred->missing.size(), 100u);
  EXPECT_EQ(Ranks(store(), "nope", {"p1"}).status().code(), ErrorCode::kNotFound);
  // Shared ranks: equal scores in sequence order.
  ASSERT_TRUE(Create(store(), "g", {.ranking = Ranking::kShared}).ok());
  for (auto id : {"x", "y", "z"}) ASSERT_TRUE(Post(store(), "g", id, 5).ok());
  EXPECT_EQ(Listed(Ranks(store(), "g", {"z", "x", "y"})->entries), (Strings{"x:1:5", "y:1:5", "z:1:5"}));
}

TEST_P(LeaderboardContract, TheLegacyRoutesAreTheBoardDefault) {
  ASSERT_TRUE(Post(store(), "default", "via-board", 7).ok());
  auto legacy = Wait<Result<Page>>([&](auto done) { store().Top(0, 10, done); });
  ASSERT_TRUE(legacy.ok());
  EXPECT_EQ(Listed(legacy->entries), (Strings{"via-board:1:7"}));
  auto best =
      Wait<Result<Posted>>([&](auto done) { store().PostScore("via-board", 3, leaderboard::ScoreMode::kBest, done); });
  ASSERT_TRUE(best.ok());
  EXPECT_EQ(best->entry.score, 7) << "?mode=best overrides the board's operator for that request";
  ASSERT_TRUE(Post(store(), "default", "via-board", 3).ok());
  EXPECT_EQ(Player(store(), "default", "via-board")->entry.score, 3) << "default replaces";
}

}  // namespace hotrow::testing
