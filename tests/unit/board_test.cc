#include "leaderboard/board.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

namespace hotrow::leaderboard {
namespace {

TEST(Board, RanksByScoreThenSequence) {
  Board b;
  b.Set("a", 10, 1);
  b.Set("b", 20, 2);
  b.Set("c", 10, 3);
  b.Set("d", 10, 0);  // same score, earliest change
  auto page = b.Top(0, 10);
  ASSERT_EQ(page.entries.size(), 4u);
  EXPECT_EQ(page.entries[0].client_id, "b");
  EXPECT_EQ(page.entries[1].client_id, "d");
  EXPECT_EQ(page.entries[2].client_id, "a");
  EXPECT_EQ(page.entries[3].client_id, "c");
  EXPECT_EQ(b.Player("c", std::nullopt)->entry.rank, 4);
  b.Set("c", 30, 4);
  EXPECT_EQ(b.Player("c", std::nullopt)->entry.rank, 1);
  EXPECT_EQ(b.size(), 4);
  EXPECT_TRUE(b.Erase("c"));
  EXPECT_FALSE(b.Erase("c"));
  EXPECT_EQ(b.Player("a", std::nullopt)->entry.rank, 3);
}

TEST(Board, AProfileFollowsItsOwnOrderAndALateOneOfARemovedEntryIsDropped) {
  Board b;
  auto profile = [](std::string name, int64_t seq) {
    return std::make_shared<const Profile>(Profile{.display_name = std::move(name), .metadata = {}, .seq = seq});
  };
  b.SetProfile("ghost", profile("G", 1));  // not on the board: nothing
  b.Set("a", 5, 3);
  b.SetProfile("a", profile("First", 3));
  b.SetProfile("a", profile("Second", 7));  // a name change alone: the score's seq stays
  b.SetProfile("a", profile("First", 3));   // late: older than the one held
  ASSERT_TRUE(b.Player("a", std::nullopt)->entry.profile);
  EXPECT_EQ(b.Player("a", std::nullopt)->entry.profile->display_name, "Second");
  EXPECT_EQ(b.Top(0, 10).entries[0].profile->display_name, "Second") << "the top snapshot carries it";
  EXPECT_FALSE(b.Player("ghost", std::nullopt));
  // Removed, then back with a score (seq 12) and no name: a late answer of
  // the entry before (its profile seq 10) is not this one's.
  EXPECT_TRUE(b.Erase("a"));
  b.Set("a", 6, 12);
  b.SetProfile("a", profile("Stale", 10));
  EXPECT_FALSE(b.Player("a", std::nullopt)->entry.profile);
  EXPECT_FALSE(b.Top(0, 10).entries[0].profile);
  // Left to the store, which has none: the mark goes.
  auto token = b.profile_token();
  EXPECT_TRUE(b.Player("a", std::nullopt)->entry.profile_unread);
  b.CacheProfiles(token, {"a"}, {});
  EXPECT_FALSE(b.Player("a", std::nullopt)->entry.profile_unread);
  EXPECT_FALSE(b.Top(0, 10).entries[0].profile_unread);
}

// A name posted before a score change whose answer came first (the pool
// answers in any order): not held (it may be a removed entry's), but the
// top's snapshot now says to read the store.
TEST(Board, ALateNameOfATopPlayerSendsTheTopToTheStore) {
  Board b;
  b.Set("p", 10, 3);
  EXPECT_FALSE(b.Top(0, 1).entries[0].profile_unread);
  b.SetProfile("p", std::make_shared<const Profile>(Profile{.display_name = "P", .metadata = {}, .seq = 2}));
  EXPECT_FALSE(b.Top(0, 1).entries[0].profile);
  EXPECT_TRUE(b.Top(0, 1).entries[0].profile_unread);
}

// The sets since a read are remembered 128 deep: past that, a read keeps
// nothing (it cannot tell whom they touched).
TEST(Board, ARead128SetsOldStillKeepsWhatTheyDidNotTouch) {
  for (int sets : {128, 129}) {
    Board b;
    // Loaded: every player marked, no name held.
    std::vector<std::pair<std::string, Stored>> all;
    for (int i = 0; i < 300; ++i)
      all.push_back({"p" + std::to_string(i), Stored{.score = 1000 - i, .seq = i + 1, .has_profile = true}});
    b.ReplaceAll(all);
    auto token = b.profile_token();
    for (int i = 0; i < sets; ++i)
      b.SetProfile("p" + std::to_string(200 + i % 100),
                   std::make_shared<const Profile>(Profile{.display_name = "x", .metadata = {}, .seq = 1000 + i}));
    b.CacheProfiles(
        token, {"p0"},
        ProfileMap{{"p0", std::make_shared<const Profile>(Profile{.display_name = "Zero", .metadata = {}, .seq = 1})}});
    EXPECT_EQ(b.Top(0, 1).entries[0].profile != nullptr, sets == 128) << sets;
  }
}

// Profiles are held for the top kPageLimitMax only; every other player
// costs one bit, and its entries say to read the store.
TEST(Board, ProfilesAreHeldForTheTopOnly) {
  Board b;
  auto profile = [](int i, int64_t seq) {
    return std::make_shared<const Profile>(
        Profile{.display_name = "N" + std::to_string(i), .metadata = {}, .seq = seq});
  };
  const int n = 300;
  for (int i = 0; i < n; ++i) {  // player i has score n - i: rank i + 1
    b.Set("p" + std::to_string(i), n - i, i + 1);
    if (i % 2 == 0) b.SetProfile("p" + std::to_string(i), profile(i, i + 1));
  }
  EXPECT_EQ(b.profiles_held(), 50u) << "the named players among the top 100";
  auto top = b.Top(0, 100);
  for (int i = 0; i < 100; ++i) {
    const auto& e = top.entries[i];
    EXPECT_FALSE(e.profile_unread) << i;
    EXPECT_EQ(e.profile ? e.profile->display_name : "", i % 2 == 0 ? "N" + std::to_string(i) : "") << i;
  }
  auto deep = b.Top(100, 100);
  for (int i = 100; i < 200; ++i) {
    const auto& e = deep.entries[i - 100];
    EXPECT_FALSE(e.profile) << i;
    EXPECT_EQ(e.profile_unread, i % 2 == 0) << i;
  }
  EXPECT_TRUE(b.Player("p150", std::nullopt)->entry.profile_unread);
  EXPECT_FALSE(b.Player("p151", std::nullopt)->entry.profile_unread);
  // A score change keeps the mark.
  b.Set("p150", 0, 1000);
  EXPECT_TRUE(b.Player("p150", std::nullopt)->entry.profile_unread);

  // p0 leaves: p100 (named) enters the top, unread until the store's read
  // is handed back; then it is held. p0's profile is not.
  ASSERT_TRUE(b.Erase("p0"));
  auto entered = b.Top(99, 1).entries[0];
  EXPECT_EQ(entered.client_id, "p100");
  EXPECT_TRUE(entered.profile_unread);
  auto token = b.profile_token();
  b.CacheProfiles(token, {"p100", "p102"}, ProfileMap{{"p100", profile(100, 101)}, {"p102", profile(102, 103)}});
  entered = b.Top(99, 1).entries[0];
  ASSERT_TRUE(entered.profile);
  EXPECT_EQ(entered.profile->display_name, "N100");
  EXPECT_EQ(b.profiles_held(), 50u) << "p0's went, p100's came; p102 is outside the top";
  EXPECT_TRUE(b.Player("p102", std::nullopt)->entry.profile_unread);

  // A read that overlapped an erase is dropped: the player read may be
  // another entry now.
  b.Set("p1", 1000, 2000);  // p1 (unnamed) to the top
  token = b.profile_token();
  ASSERT_TRUE(b.Erase("p2"));
  b.Set("p3", 999, 2001);
  b.CacheProfiles(token, {"p104"}, {});
  EXPECT_TRUE(b.Player("p104", std::nullopt)->entry.profile_unread) << "not unmarked";
  // One that overlapped a SetProfile keeps the mark of a player it found
  // without one.
  token = b.profile_token();
  b.SetProfile("p103", profile(103, 3000));
  b.CacheProfiles(token, {"p103"}, {});
  EXPECT_TRUE(b.Player("p103", std::nullopt)->entry.profile_unread);
  // A read from before a rename of a player outside the top, handed back
  // after the player entered it, is not held: the rename was not held
  // either, so the old name would stay.
  b.Set("p150", 1, 4000);  // below the top again (named, so marked)
  token = b.profile_token();
  b.SetProfile("p150", profile(1501, 4001));  // renamed outside the top: marked only
  b.Set("p150", 5000, 4002);                  // into the top
  b.CacheProfiles(token, {"p150"}, ProfileMap{{"p150", profile(150, 151)}});
  EXPECT_FALSE(b.Player("p150", std::nullopt)->entry.profile) << "the read from before the rename is not held";
  EXPECT_TRUE(b.Player("p150", std::nullopt)->entry.profile_unread);
  token = b.profile_token();
  b.CacheProfiles(token, {"p150"}, ProfileMap{{"p150", profile(1501, 4001)}});
  EXPECT_EQ(b.Player("p150", std::nullopt)->entry.profile->display_name, "N1501");
  // A set of another player since the token does not stop it: a named
  // player enters the top (two above went) and is held though p120 was
  // renamed meanwhile.
  ASSERT_TRUE(b.Erase("p5"));
  ASSERT_TRUE(b.Erase("p7"));
  token = b.profile_token();
  b.SetProfile("p120", profile(1201, 5000));
  auto top_now = b.Top(0, 100);
  auto unread = std::find_if(top_now.entries.begin(), top_now.entries.end(),
                             [](const Entry& e) { return e.profile_unread && e.client_id != "p150"; });
  ASSERT_NE(unread, top_now.entries.end());
  const std::string id = unread->client_id;
  b.CacheProfiles(token, {id}, ProfileMap{{id, profile(7, 7)}});
  ASSERT_TRUE(b.Player(id, std::nullopt)->entry.profile) << id;
  // An older profile than the one held is not kept.
  token = b.profile_token();
  b.CacheProfiles(token, {"p4"}, ProfileMap{{"p4", profile(-4, 1)}});
  EXPECT_EQ(b.Player("p4", std::nullopt)->entry.profile->display_name, "N4");
}

// ReplaceAll (a load) marks every player that has a profile and holds
// none: the first read of the top reads them.
TEST(Board, ALoadMarksThePlayersWithAProfile) {
  Board b;
  std::vector<std::pair<std::string, Stored>> players;
  for (int i = 0; i < 500; ++i)
    players.push_back({"p" + std::to_string(i), Stored{.score = 500 - i, .seq = i + 1, .has_profile = i % 2 == 0}});
  // Listed twice: the newer entry (no profile) counts.
  players.push_back({"p4", Stored{.score = 1, .seq = 900}});
  b.ReplaceAll(players);
  EXPECT_EQ(b.profiles_held(), 0u);
  auto top = b.Top(0, 100);
  EXPECT_EQ(top.entries[4].client_id, "p5");
  for (const auto& e : top.entries)
    EXPECT_EQ(e.profile_unread, e.client_id != "p4" && (std::stoi(e.client_id.substr(1)) % 2 == 0)) << e.client_id;
  EXPECT_FALSE(b.Player("p4", std::nullopt)->entry.profile_unread);
  EXPECT_TRUE(b.Player("p300", std::nullopt)->entry.profile_unread);
  EXPECT_FALSE(b.Player("p301", std::nullopt)->entry.profile_unread);
  auto token = b.profile_token();
  b.CacheProfiles(
      token, {"p0", "p2"},
      ProfileMap{{"p0", std::make_shared<const Profile>(Profile{.display_name = "Zero", .metadata = {}, .seq = 1})}});
  EXPECT_EQ(b.profiles_held(), 1u);
  EXPECT_EQ(b.Top(0, 1).entries[0].profile->display_name, "Zero");
  EXPECT_FALSE(b.Player("p2", std::nullopt)->entry.profile_unread) << "the store had none";
  // The top's snapshot is published again when a player of it is unmarked.
  EXPECT_EQ(b.Top(0, 100).entries[5].client_id, "p6");
  EXPECT_TRUE(b.Top(0, 100).entries[5].profile_unread);
  token = b.profile_token();
  b.CacheProfiles(token, {"p6"}, {});
  EXPECT_FALSE(b.Top(0, 100).entries[5].profile_unread);
}

TEST(Board, RankMatchesALinearRecount) {
  Board b;
  std::mt19937_64 rng(3);
  std::map<std::string, std::pair<int64_t, int64_t>> truth;
  for (int64_t seq = 1; seq <= 5000; ++seq) {
    std::string id = "p" + std::to_string(rng() % 800);
    int64_t score = static_cast<int64_t>(rng() % 100);
    if (rng() % 10 == 0) {
      b.Erase(id);
      truth.erase(id);
      continue;
    }
    b.Set(id, score, seq);
    truth[id] = {score, seq};
  }
  for (const auto& [id, v] : truth) {
    int64_t better = 0;
    for (const auto& [other, w] : truth)
      if (w.first > v.first || (w.first == v.first && w.second < v.second)) ++better;
    EXPECT_EQ(b.Player(id, std::nullopt)->entry.rank, better + 1) << id;
  }
  EXPECT_EQ(b.size(), static_cast<int64_t>(truth.size()));
  // The lock-free top-100 snapshot agrees with the tree after all that churn.
  std::vector<std::pair<std::pair<int64_t, int64_t>, std::string>> order;
  for (const auto& [id, v] : truth) order.push_back({{-v.first, v.second}, id});
  std::sort(order.begin(), order.end());
  for (int64_t offset : {0, 7, 90}) {
    auto page = b.Top(offset, 10);
    EXPECT_EQ(page.total, static_cast<int64_t>(truth.size()));
    ASSERT_EQ(page.entries.size(), 10u);
    for (size_t i = 0; i < 10; ++i) {
      EXPECT_EQ(page.entries[i].client_id, order[static_cast<size_t>(offset) + i].second);
      EXPECT_EQ(page.entries[i].rank, offset + static_cast<int64_t>(i) + 1);
    }
  }
  auto deep = b.Top(100, 5);  // past the snapshot: served from the tree
  ASSERT_EQ(deep.entries.size(), 5u);
  EXPECT_EQ(deep.entries[0].client_id, order[100].second);
}

// Every order and ranking against a linear recount: asc boards put the
// lowest score first; shared ranks are 1 + the number of strictly better
// scores, on pages that start inside a tie too.
TEST(Board, EveryOrderAndRankingMatchesALinearRecount) {
  for (Order order : {Order::kDesc, Order::kAsc}) {
    for (Ranking ranking : {Ranking::kUnique, Ranking::kShared}) {
      Board b(order, ranking);
      std::mt19937_64 rng(11);
      std::map<std::string, std::pair<int64_t, int64_t>> truth;
      for (int64_t seq = 1; seq <= 3000; ++seq) {
        std::string id = "p" + std::to_string(rng() % 500);
        int64_t score = static_cast<int64_t>(rng() % 40) - 20;
        b.Set(id, score, seq);
        truth[id] = {score, seq};
      }
      auto better = [&](const std::pair<int64_t, int64_t>& w, const std::pair<int64_t, int64_t>& v) {
        return order == Order::kDesc ? w.first > v.first : w.first < v.first;
      };
      std::vector<std::pair<std::pair<int64_t, int64_t>, std::string>> listed;
      for (const auto& [id, v] : truth) {
        int64_t above = 0;  // strictly better, or equal and earlier
        int64_t strictly = 0;
        for (const auto& [other, w] : truth) {
          strictly += better(w, v);
          above += better(w, v) || (w.first == v.first && w.second < v.second);
        }
        int64_t expected = ranking == Ranking::kUnique ? above + 1 : strictly + 1;
        EXPECT_EQ(b.Player(id, std::nullopt)->entry.rank, expected) << id;
        EXPECT_EQ(b.RankOf(v.first, v.second), expected) << id;
        listed.push_back({{order == Order::kDesc ? -v.first : v.first, v.second}, id});
      }
      std::sort(listed.begin(), listed.end());
      for (int64_t offset : {0, 13, 95, 250}) {
        auto page = b.Top(offset, 10);
        ASSERT_EQ(page.entries.size(), 10u);
        for (size_t i = 0; i < 10; ++i) {
          const auto& [key, id] = listed[static_cast<size_t>(offset) + i];
          EXPECT_EQ(page.entries[i].client_id, id);
          EXPECT_EQ(page.entries[i].rank, b.Player(id, std::nullopt)->entry.rank) << "offset " << offset;
        }
      }
    }
  }
}

// The player index (open addressing, deletion by backward shift) under heavy
// churn: every present id is found with its score, every removed one is
// not, through many growths and long probe runs.
TEST(Board, ThePlayerIndexSurvivesHeavyChurn) {
  Board b;
  std::mt19937_64 rng(5);
  std::map<std::string, int64_t> truth;
  std::set<std::string> marked;  // the slot's bit must move with the slot
  for (int64_t seq = 1; seq <= 200000; ++seq) {
    std::string id = "player-" + std::to_string(rng() % 20000);
    if (rng() % 5 < 2) {
      EXPECT_EQ(b.Erase(id), truth.erase(id) == 1) << id;
      marked.erase(id);
      continue;
    }
    int64_t score = static_cast<int64_t>(rng() % 1000);
    b.Set(id, score, seq);
    truth[id] = score;
    if (rng() % 7 == 0) {
      b.SetProfile(id, std::make_shared<const Profile>(Profile{.display_name = "n", .metadata = {}, .seq = seq}));
      marked.insert(id);
    }
  }
  ASSERT_EQ(b.size(), static_cast<int64_t>(truth.size()));
  for (int i = 0; i < 20000; ++i) {
    std::string id = "player-" + std::to_string(i);
    auto view = b.Player(id, std::nullopt);
    auto it = truth.find(id);
    ASSERT_EQ(view.has_value(), it != truth.end()) << id;
    if (view) {
      EXPECT_EQ(view->entry.score, it->second) << id;
      EXPECT_EQ(view->entry.profile_unread || view->entry.profile, marked.count(id) == 1) << id;
    }
  }
  // Loading replaces every player; a player listed twice counts once (the
  // newer change).
  b.ReplaceAll(
      {{"a", Stored{.score = 1, .seq = 1}}, {"b", Stored{.score = 2, .seq = 2}}, {"a", Stored{.score = 3, .seq = 3}}});
  EXPECT_EQ(b.size(), 2);
  EXPECT_EQ(b.Player("a", std::nullopt)->entry.score, 3);
  EXPECT_EQ(b.Player("b", std::nullopt)->entry.score, 2);
  EXPECT_FALSE(b.Player("player-1", std::nullopt).has_value());
}

}  // namespace
}  // namespace hotrow::leaderboard
