// The leaderboard contract, signed submissions (auth hmac): the secret kept
// sealed by the store of record and read back after a restart, a signature
// that replays its answer, rotation with and without grace, on every
// backend.
#include "base/crypto.h"
#include "base/text.h"
#include "base/time.h"
#include "contract/leaderboard_contract.h"
#include "contract/wait.h"

namespace hotrow::testing {

using leaderboard::BoardAuth;
using leaderboard::BoardInfo;
using leaderboard::BoardSettings;
using leaderboard::BoardView;
using leaderboard::LeaderboardService;
using leaderboard::Operator;
using leaderboard::Posted;
using leaderboard::PostExtras;
using leaderboard::SignedRequest;

namespace {

struct Signed {
  std::string path, client, ts, body, signature;
  SignedRequest View() const { return SignedRequest{path, client, ts, signature, body}; }
};
Signed Sign(const std::string& secret, const std::string& board, const std::string& client, int64_t score) {
  Signed s{"/api/v1/boards/" + board + "/scores", client, std::to_string(NowMicros() / 1000000),
           "{\"score\":" + std::to_string(score) + "}", ""};
  s.signature = HexEncode(HmacSha256(secret, "POST\n" + s.path + "\n" + client + "\n" + s.ts + "\n" + s.body));
  return s;
}

}  // namespace

TEST_P(LeaderboardContract, ASignedPostIsCheckedAgainstTheSealedSecretAndReplayedWhenSentTwice) {
  BoardSettings settings;
  settings.auth = BoardAuth::kHmac;
  settings.op = Operator::kIncrement;
  auto made = Wait<Result<BoardView>>(
      [&](auto done) { store().CreateBoard(BoardInfo{.id = "ranked", .settings = settings, .created_us = 0}, done); });
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  ASSERT_TRUE(made->secret.has_value());
  const std::string secret = *made->secret;
  EXPECT_EQ(secret.size(), 64u);
  EXPECT_FALSE(store().GetBoard("ranked")->secret) << "shown once";
  EXPECT_EQ(store().GetBoard("ranked")->info.secret_sealed.find(secret), std::string::npos) << "sealed, not plain";

  Signed s = Sign(secret, "ranked", "ann", 5);
  auto post = [&](const Signed& req) -> Result<Posted> {
    auto signature = store().CheckSignature("ranked", req.View());
    if (!signature.ok()) return signature.status();
    return Wait<Result<Posted>>([&](auto done) {
      store().PostScore("ranked", "ann", 5, std::nullopt, PostExtras{.signature = *signature}, done);
    });
  };
  auto first = post(s);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE(first->replayed);
  Signed tampered = s;
  tampered.body = R"({"score":50})";
  EXPECT_EQ(post(tampered).status().code(), ErrorCode::kBadSignature);
  EXPECT_EQ(store().CheckSignature("ranked", Signed{s.path, "ann", s.ts, s.body, ""}.View()).status().code(),
            ErrorCode::kBadSignature)
      << "unsigned";

  Restart();  // the secret is read back from the store of record
  auto again = post(s);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->replayed) << "the same signed request is one post";
  EXPECT_EQ(again->entry.score, 5);

  // Rotation without grace: the old secret is refused at once.
  auto rotated = Wait<Result<BoardView>>([&](auto done) { store().RotateSecret("ranked", 0, done); });
  ASSERT_TRUE(rotated.ok()) << rotated.status().ToString();
  ASSERT_TRUE(rotated->secret.has_value());
  EXPECT_EQ(store().CheckSignature("ranked", Sign(secret, "ranked", "ann", 1).View()).status().code(),
            ErrorCode::kBadSignature);
  EXPECT_TRUE(store().CheckSignature("ranked", Sign(*rotated->secret, "ranked", "ann", 1).View()).ok());
  // An unsigned board needs none.
  auto open = store().CheckSignature("default", Signed{"/api/v1/score", "ann", "", "{}", ""}.View());
  ASSERT_TRUE(open.ok());
  EXPECT_EQ(*open, "");
}

}  // namespace hotrow::testing
