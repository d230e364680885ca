// --score-rate: the token bucket per ClientId per board, its flag, and the
// bound on buckets.
#include "leaderboard/rate_limit.h"

#include <gtest/gtest.h>

#include "base/auth.h"
#include "http/message.h"

namespace hotrow::leaderboard {
namespace {

constexpr int64_t kSecond = 1'000'000;

TEST(ScoreRate, ParsesPerSecondAndPerMinuteAndRefusesTheRest) {
  EXPECT_EQ(ParseScoreRate("10/s")->per_second, 10);
  EXPECT_EQ(ParseScoreRate("600/min")->per_second, 10);
  EXPECT_EQ(ParseScoreRate("0.5/s")->per_second, 0.5);
  EXPECT_EQ(ParseScoreRate("off")->per_second, 0);
  EXPECT_EQ(ParseScoreRate("")->per_second, 0);
  for (const char* bad : {"0/s", "-1/s", "10", "10/h", "ten/s", "10/s ", "1e7/s", "nan/s", "inf/s", "/s", "10/"}) {
    auto r = ParseScoreRate(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().field(), "--score-rate") << bad;
  }
}

TEST(ScoreRateLimiter, ABurstOfOneSecondsWorthThenTheRate) {
  ScoreRateLimiter limiter(ScoreRate{2});
  int64_t t = 1000 * kSecond;
  EXPECT_FALSE(limiter.Take("b", "ann", t));
  EXPECT_FALSE(limiter.Take("b", "ann", t));
  auto wait = limiter.Take("b", "ann", t);
  ASSERT_TRUE(wait.has_value());
  EXPECT_EQ(*wait, 1);  // whole seconds, at least one
  // Another player, and the same player on another board, have their own.
  EXPECT_FALSE(limiter.Take("b", "bob", t));
  EXPECT_FALSE(limiter.Take("c", "ann", t));
  // Half a second later one token is back (2/s), and only one.
  EXPECT_FALSE(limiter.Take("b", "ann", t + kSecond / 2));
  EXPECT_TRUE(limiter.Take("b", "ann", t + kSecond / 2));
  // An idle player's bucket fills up to the burst, not beyond.
  t += 100 * kSecond;
  EXPECT_FALSE(limiter.Take("b", "ann", t));
  EXPECT_FALSE(limiter.Take("b", "ann", t));
  EXPECT_TRUE(limiter.Take("b", "ann", t));
}

TEST(ScoreRateLimiter, ASlowRateAnswersTheSecondsUntilItsNextToken) {
  ScoreRateLimiter limiter(ScoreRate{1.0 / 60});  // 1/min: a burst of one
  EXPECT_FALSE(limiter.Take("b", "ann", 0));
  auto wait = limiter.Take("b", "ann", 0);
  ASSERT_TRUE(wait.has_value());
  EXPECT_EQ(*wait, 60);
  wait = limiter.Take("b", "ann", 30 * kSecond);
  ASSERT_TRUE(wait.has_value());
  EXPECT_EQ(*wait, 30);
  EXPECT_FALSE(limiter.Take("b", "ann", 60 * kSecond));
}

TEST(ScoreRateLimiter, TheBucketsAreBoundedAndTheIdleLongestGoFirst) {
  ScoreRateLimiter limiter(ScoreRate{1}, /*buckets_max=*/ScoreRateLimiter::kShards * 4);
  for (int i = 0; i < 10'000; ++i) EXPECT_FALSE(limiter.Take("b", "p" + std::to_string(i), i));
  EXPECT_LE(limiter.buckets(), ScoreRateLimiter::kShards * 4);
  // The last players are still limited; the first ones were evicted and
  // start again with a full bucket.
  EXPECT_TRUE(limiter.Take("b", "p9999", 10'000));
  EXPECT_FALSE(limiter.Take("b", "p0", 10'000));
}

TEST(ScoreRateLimiter, OffAdmitsEverything) {
  ScoreRateLimiter limiter(ScoreRate{});
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(limiter.Take("b", "ann", 0));
  EXPECT_EQ(limiter.buckets(), 0u);
}

}  // namespace
}  // namespace hotrow::leaderboard

namespace hotrow {
namespace {

using Clock = AuthFailureThrottle::Clock;

// --auth-failures-max: a client is refused once it has failed `max` times
// within a window of its first failure, until that window ends; others are
// not; 0 never refuses.
TEST(AuthFailureThrottle, RefusesAClientPastItsFailuresUntilTheWindowEnds) {
  AuthFailureThrottle t(3, std::chrono::seconds(60));
  const Clock::time_point t0 = Clock::now();
  EXPECT_EQ(t.RetryAfterSeconds("a", t0), 0);
  t.Failed("a", t0);
  t.Failed("a", t0 + std::chrono::seconds(10));
  EXPECT_EQ(t.RetryAfterSeconds("a", t0 + std::chrono::seconds(10)), 0) << "two failures of three";
  t.Failed("a", t0 + std::chrono::seconds(20));
  EXPECT_EQ(t.RetryAfterSeconds("a", t0 + std::chrono::seconds(20)), 40) << "until 60 s after the first";
  EXPECT_EQ(t.RetryAfterSeconds("a", t0 + std::chrono::milliseconds(59500)), 1) << "at least 1 s, rounded up";
  EXPECT_EQ(t.RetryAfterSeconds("b", t0 + std::chrono::seconds(20)), 0) << "another client";
  EXPECT_EQ(t.RetryAfterSeconds("a", t0 + std::chrono::seconds(60)), 0) << "the window is over";
  t.Failed("a", t0 + std::chrono::seconds(61));
  EXPECT_EQ(t.RetryAfterSeconds("a", t0 + std::chrono::seconds(61)), 0) << "a new window starts at one failure";

  AuthFailureThrottle off(0, std::chrono::seconds(60));
  for (int i = 0; i < 100; ++i) off.Failed("a", t0);
  EXPECT_EQ(off.RetryAfterSeconds("a", t0), 0);
}

// Who counts: the address without its port, an IPv6 address by its /64
// (an IPv4-mapped one as IPv4), and store keys from an address apart, with
// ten times the limit.
TEST(AuthFailureThrottle, CountsByAddressAndStoreKeysApart) {
  auto client = [](std::string_view peer, std::optional<std::string> bearer) {
    http::Request r;
    r.peer = peer;
    std::string header = bearer ? "Bearer " + *bearer : std::string();
    if (bearer) r.headers.emplace_back("Authorization", header);
    return http::AuthThrottleClient(r);
  };
  EXPECT_EQ(client("203.0.113.7:51234", std::nullopt), "203.0.113.7");
  EXPECT_EQ(client("203.0.113.7:51234", "admin-token"), "203.0.113.7");
  EXPECT_EQ(client("[2001:db8:1:2:3:4:5:6]:443", std::nullopt), "2001:db8:1:2::/64");
  EXPECT_EQ(client("[2001:db8:1:2:ffff::1]:443", std::nullopt), "2001:db8:1:2::/64") << "one /64, one client";
  EXPECT_EQ(client("[::ffff:198.51.100.9]:443", std::nullopt), "198.51.100.9") << "a dual-stack listener's IPv4";
  EXPECT_EQ(client("-", std::nullopt), "-");
  const std::string key = "0123456789abcdef." + std::string(64, 'a');
  EXPECT_EQ(client("203.0.113.7:1", key), "203.0.113.7#keys");
  EXPECT_EQ(client("203.0.113.7:1", key + "a"), "203.0.113.7") << "not a key's shape: by address";
  EXPECT_FALSE(NamedCredentialId("0123456789ABCDEF." + std::string(64, 'a')));
  EXPECT_FALSE(NamedCredentialId("0123456789abcdef." + std::string(63, 'a')));
  EXPECT_EQ(NamedCredentialId(key), "0123456789abcdef");

  AuthFailureThrottle t(2, std::chrono::seconds(60));
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < 19; ++i) t.Failed("a#keys", t0);
  EXPECT_EQ(t.RetryAfterSeconds("a#keys", t0), 0) << "19 of 20";
  EXPECT_TRUE(t.Failed("a#keys", t0)) << "the 20th refuses";
  EXPECT_GT(t.RetryAfterSeconds("a#keys", t0), 0);
  EXPECT_EQ(t.RetryAfterSeconds("a", t0), 0) << "the address's own bucket";
}

// Expired windows are forgotten once a minute, so the throttle is idle (no
// lookup) again once failures stop.
TEST(AuthFailureThrottle, IsIdleAgainOnceFailuresStop) {
  AuthFailureThrottle t(2, std::chrono::seconds(60));
  const Clock::time_point t0 = Clock::now();
  EXPECT_TRUE(t.idle());
  t.Failed("a", t0);
  EXPECT_FALSE(t.idle());
  t.Failed("b", t0 + std::chrono::seconds(90));   // sweeps "a" first
  t.Failed("c", t0 + std::chrono::seconds(200));  // and "b"
  EXPECT_FALSE(t.idle());
  EXPECT_EQ(t.RetryAfterSeconds("c", t0 + std::chrono::seconds(200)), 0);
  t.Failed("c", t0 + std::chrono::seconds(201));
  EXPECT_GT(t.RetryAfterSeconds("c", t0 + std::chrono::seconds(201)), 0) << "c's two failures";
  EXPECT_EQ(t.RetryAfterSeconds("c", t0 + std::chrono::seconds(400)), 0);
  EXPECT_TRUE(t.idle()) << "the lookup a minute after the last sweep forgot every expired window";
  AuthFailureThrottle off(0, std::chrono::seconds(60));
  off.Failed("a", t0);
  EXPECT_TRUE(off.idle());
}

// The table is bounded: past kClientsMax clients, expired windows are
// forgotten, and with none expired a new client goes untracked.
TEST(AuthFailureThrottle, TracksABoundedNumberOfClients) {
  AuthFailureThrottle t(1, std::chrono::seconds(60));
  const Clock::time_point t0 = Clock::now();
  for (size_t i = 0; i < AuthFailureThrottle::kClientsMax; ++i) t.Failed(std::to_string(i), t0);
  EXPECT_GT(t.RetryAfterSeconds("0", t0), 0);
  t.Failed("new", t0);
  EXPECT_EQ(t.RetryAfterSeconds("new", t0), 0) << "untracked while every window is live";
  t.Failed("new", t0 + std::chrono::seconds(61));
  EXPECT_GT(t.RetryAfterSeconds("new", t0 + std::chrono::seconds(61)), 0) << "expired windows made room";
  EXPECT_EQ(t.RetryAfterSeconds("0", t0 + std::chrono::seconds(61)), 0);
}

}  // namespace
}  // namespace hotrow
