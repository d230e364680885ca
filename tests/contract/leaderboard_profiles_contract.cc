// The leaderboard contract, display names and metadata: kept byte for
// byte, shown in every read, kept when omitted, replaced when given (even
// when the operator keeps the score), on every backend.
#include "contract/leaderboard_contract.h"
#include "contract/leaderboard_helpers.h"
#include "contract/wait.h"
#include "ops/metrics.h"

namespace hotrow::testing {

using leaderboard::BoardInfo;
using leaderboard::BoardSettings;
using leaderboard::BoardView;
using leaderboard::Entry;
using leaderboard::LeaderboardService;
using leaderboard::Operator;
using leaderboard::Page;
using leaderboard::PlayerView;
using leaderboard::Posted;
using leaderboard::PostExtras;
using leaderboard::RanksView;

namespace {

Result<Posted> Post(LeaderboardService& s, const std::string& board, const std::string& id, int64_t score,
                    PostExtras extras = {}) {
  return Wait<Result<Posted>>([&](auto done) { s.PostScore(board, id, score, std::nullopt, extras, done); });
}
PostExtras Named(std::optional<std::string> name, std::optional<std::string> metadata = std::nullopt) {
  return PostExtras{.idempotency_key = {}, .display_name = std::move(name), .metadata = std::move(metadata)};
}
// "id:name|metadata" ("-" for unset).
std::string Shown(const Entry& e) {
  if (!e.profile) return e.client_id + ":-|-";
  auto or_dash = [](const std::string& s) { return s.empty() ? std::string("-") : s; };
  return e.client_id + ":" + or_dash(e.profile->display_name) + "|" + or_dash(e.profile->metadata);
}
std::vector<std::string> Shown(std::span<const Entry> entries) {
  std::vector<std::string> out;
  for (const auto& e : entries) out.push_back(Shown(e));
  return out;
}
using Strings = std::vector<std::string>;

Result<Page> Top(LeaderboardService& s, const std::string& board, int64_t offset = 0, int64_t limit = 10) {
  return Wait<Result<Page>>([&](auto done) { s.Top(board, std::nullopt, offset, limit, done); });
}
Result<PlayerView> Player(LeaderboardService& s, const std::string& board, const std::string& id,
                          std::optional<int64_t> around = std::nullopt) {
  return Wait<Result<PlayerView>>([&](auto done) { s.Player(board, std::nullopt, id, around, done); });
}

constexpr const char* kMetadata = R"({ "level" : 7, "tags": ["a", {"b": null}], "note": "\u00e9 ok" })";

}  // namespace

TEST_P(LeaderboardContract, ADisplayNameAndMetadataAreKeptByteForByteAndShownInEveryRead) {
  ASSERT_TRUE(Create(store(), "arena", BoardSettings{}).ok());
  ASSERT_TRUE(Post(store(), "arena", "ann", 30, Named("Ann ✨ the Great", kMetadata)).ok());
  ASSERT_TRUE(Post(store(), "arena", "bob", 20).ok());
  ASSERT_TRUE(Post(store(), "arena", "cy", 10, Named(std::nullopt, R"({"x":1})")).ok());
  const Strings want = {std::string("ann:Ann ✨ the Great|") + kMetadata, "bob:-|-", R"(cy:-|{"x":1})"};
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "as posted" : "after a restart");
    auto top = Top(store(), "arena");
    ASSERT_TRUE(top.ok()) << top.status().ToString();
    EXPECT_EQ(Shown(top->entries), want);
    // A page past the top 100's snapshot is built another way.
    auto deep = Top(store(), "arena", 1, 100);
    ASSERT_TRUE(deep.ok());
    EXPECT_EQ(Shown(deep->entries), Strings(want.begin() + 1, want.end()));
    auto player = Player(store(), "arena", "ann", 1);
    ASSERT_TRUE(player.ok()) << player.status().ToString();
    EXPECT_EQ(Shown(player->entry), want[0]);
    ASSERT_TRUE(player->around.has_value());
    EXPECT_EQ(Shown(*player->around), Strings(want.begin(), want.begin() + 2));
    auto ranks = Wait<Result<RanksView>>([&](auto done) {
      store().Ranks("arena", std::nullopt, std::vector<std::string>{"cy", "ann"}, done);
    });
    ASSERT_TRUE(ranks.ok()) << ranks.status().ToString();
    EXPECT_EQ(Shown(ranks->entries), (Strings{want[0], want[2]}));
    if (round == 0) Restart();
  }
}

TEST_P(LeaderboardContract, AnOmittedNameIsKeptAndAGivenOneReplacesItEvenWhenTheScoreStays) {
  BoardSettings best;
  best.op = Operator::kBest;
  ASSERT_TRUE(Create(store(), "best", best).ok());
  ASSERT_TRUE(Post(store(), "best", "ann", 10, Named("First")).ok());
  auto kept = Post(store(), "best", "ann", 5);  // best keeps 10, and the name stays
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->entry.score, 10);
  auto p = Player(store(), "best", "ann");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(Shown(p->entry), "ann:First|-");
  auto renamed = Post(store(), "best", "ann", 3, Named("Second"));  // the score stays; the name does not
  ASSERT_TRUE(renamed.ok());
  EXPECT_EQ(renamed->entry.score, 10);
  EXPECT_EQ(Shown(Player(store(), "best", "ann")->entry), "ann:Second|-");
  // Metadata alone: the name is kept.
  ASSERT_TRUE(Post(store(), "best", "ann", 3, Named(std::nullopt, R"({"k":[]})")).ok());
  EXPECT_EQ(Shown(Player(store(), "best", "ann")->entry), R"(ann:Second|{"k":[]})");
  // A changed profile keeps the player's place among equal scores.
  ASSERT_TRUE(Post(store(), "best", "bob", 10).ok());
  ASSERT_TRUE(Post(store(), "best", "ann", 10, Named("Third")).ok());
  auto top = Top(store(), "best");
  ASSERT_TRUE(top.ok());
  EXPECT_EQ(Shown(top->entries), (Strings{R"(ann:Third|{"k":[]})", "bob:-|-"}));
  Restart();
  EXPECT_EQ(Shown(Top(store(), "best")->entries), (Strings{R"(ann:Third|{"k":[]})", "bob:-|-"}));
}

TEST_P(LeaderboardContract, ARemovedPlayerComesBackWithoutTheOldName) {
  ASSERT_TRUE(Create(store(), "arena", BoardSettings{}).ok());
  ASSERT_TRUE(Post(store(), "arena", "ann", 30, Named("Ann", R"({"a":1})")).ok());
  ASSERT_TRUE(Wait<Status>([&](auto done) { store().Remove("arena", "ann", done); }).ok());
  ASSERT_TRUE(Post(store(), "arena", "ann", 31).ok());
  EXPECT_EQ(Shown(Player(store(), "arena", "ann")->entry), "ann:-|-");
  Restart();
  EXPECT_EQ(Shown(Player(store(), "arena", "ann")->entry), "ann:-|-");
}

// The embedded stores' Boards hold profiles for their top 100 only: past
// it, every read takes them from the store, and a player who enters the
// top shows theirs.
TEST_P(LeaderboardContract, NamesPastTheTop100AreShownInEveryRead) {
  ASSERT_TRUE(Create(store(), "deep", BoardSettings{}).ok());
  const int n = 160;
  auto id = [](int i) { return "p" + std::to_string(i); };
  auto shown = [&](int i) {
    return id(i) + (i % 3 == 0 ? ":-|-" : ":N" + std::to_string(i) + "|{\"i\":" + std::to_string(i) + "}");
  };
  for (int i = 0; i < n; ++i)  // rank i + 1; every third without a profile
    ASSERT_TRUE(Post(store(), "deep", id(i), 1000 - i,
                     i % 3 == 0 ? PostExtras{} : Named("N" + std::to_string(i), "{\"i\":" + std::to_string(i) + "}"))
                    .ok());
  auto expect_reads = [&](const std::vector<int>& order) {  // `order`: the players by rank
    auto want = [&](size_t from, size_t to) {
      Strings out;
      for (size_t r = from; r < to && r < order.size(); ++r) out.push_back(shown(order[r]));
      return out;
    };
    for (int64_t offset : {0, 90, 100, 140}) {
      auto page = Top(store(), "deep", offset, 20);
      ASSERT_TRUE(page.ok()) << page.status().ToString();
      EXPECT_EQ(Shown(page->entries), want(offset, offset + 20)) << "offset " << offset;
    }
    auto player = Player(store(), "deep", id(order[130]), 3);
    ASSERT_TRUE(player.ok()) << player.status().ToString();
    EXPECT_EQ(Shown(player->entry), shown(order[130]));
    EXPECT_EQ(Shown(*player->around), want(127, 134));
    auto ranks = Wait<Result<RanksView>>([&](auto done) {
      store().Ranks("deep", std::nullopt, std::vector<std::string>{id(order[150]), id(order[2]), id(order[101])}, done);
    });
    ASSERT_TRUE(ranks.ok()) << ranks.status().ToString();
    EXPECT_EQ(Shown(ranks->entries), (Strings{shown(order[2]), shown(order[101]), shown(order[150])}));
  };
  std::vector<int> order;
  for (int i = 0; i < n; ++i) order.push_back(i);
  {
    SCOPED_TRACE("as posted");
    expect_reads(order);
  }
  // The leader leaves: p100 (named) enters the top 100.
  ASSERT_TRUE(Wait<Status>([&](auto done) { store().Remove("deep", id(0), done); }).ok());
  order.erase(order.begin());
  {
    SCOPED_TRACE("after the leader left");
    expect_reads(order);
  }
  // A player past the top renames; one leaves and comes back unnamed.
  ASSERT_TRUE(Post(store(), "deep", id(131), 1000 - 131, Named("Renamed")).ok());
  ASSERT_TRUE(Wait<Status>([&](auto done) { store().Remove("deep", id(140), done); }).ok());
  ASSERT_TRUE(Post(store(), "deep", id(140), 1000 - 140).ok());
  auto renamed = Player(store(), "deep", id(131));
  ASSERT_TRUE(renamed.ok());
  EXPECT_EQ(Shown(renamed->entry), id(131) + ":Renamed|{\"i\":131}");
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "back unnamed" : "after a restart");
    auto back = Player(store(), "deep", id(140));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(Shown(back->entry), id(140) + ":-|-");
    // And up into the top: still unnamed; the renamed one keeps its name there.
    if (round == 0) {
      ASSERT_TRUE(Post(store(), "deep", id(140), 5000).ok());
      ASSERT_TRUE(Post(store(), "deep", id(131), 4000).ok());
    }
    auto top = Top(store(), "deep", 0, 2);
    ASSERT_TRUE(top.ok());
    EXPECT_EQ(Shown(top->entries), (Strings{id(140) + ":-|-", id(131) + ":Renamed|{\"i\":131}"}));
    if (round == 0) Restart();
  }
  // After the restart the top's names were read once (the load's read, or
  // the first page's): pages within the top read the store no more.
  auto& reads = metrics::Registry::Default().GetCounter("hotrow_leaderboard_profile_reads_total", "");
  const uint64_t before = reads.value();
  for (int i = 0; i < 20; ++i) {
    auto top = Top(store(), "deep", i * 5, 5);
    ASSERT_TRUE(top.ok());
    EXPECT_EQ(Shown(top->entries).size(), 5u);
  }
  EXPECT_EQ(reads.value(), before) << "the top 100's profiles are held";
  ASSERT_TRUE(Top(store(), "deep", 100, 5).ok());
  EXPECT_EQ(reads.value(), backend->store().shared_ranking() ? before : before + 1) << "past the top: one read";
}

TEST_P(LeaderboardContract, BadNamesAndMetadataAreRefusedAndWriteNothing) {
  ASSERT_TRUE(Create(store(), "arena", BoardSettings{}).ok());
  for (std::string bad :
       {std::string(""), std::string(65, 'n'), std::string(" padded"), std::string("tab\there"), std::string("\xC3")}) {
    auto r = Post(store(), "arena", "ann", 1, Named(bad));
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().field(), "displayName") << bad;
  }
  EXPECT_TRUE(Post(store(), "arena", "ann", 1, Named(std::string(64, 'n'))).ok()) << "64 is allowed";
  // A name may end in a combining mark or a variation selector.
  for (std::string good : {std::string("Jose\xCC\x81"),
                           std::string("\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D"
                                       "\xE0\xA4\xA4\xE0\xA5\x87"),
                           std::string("\xE2\x9D\xA4\xEF\xB8\x8F")})
    EXPECT_TRUE(Post(store(), "arena", "dee", 1, Named(good)).ok()) << good;
  auto big = Post(store(), "arena", "bob", 1, Named(std::nullopt, "{\"k\":\"" + std::string(1020, 'x') + "\"}"));
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().field(), "metadata");
  EXPECT_FALSE(Player(store(), "arena", "bob").ok()) << "nothing written";
  // With an Idempotency-Key, the name is part of the request.
  PostExtras keyed = Named("Ann");
  keyed.idempotency_key = "k";
  ASSERT_TRUE(Post(store(), "arena", "cy", 1, keyed).ok());
  keyed.display_name = "Other";
  auto other = Post(store(), "arena", "cy", 1, keyed);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), ErrorCode::kIdempotencyMismatch);
}

}  // namespace hotrow::testing
