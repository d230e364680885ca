// Score posts per ClientId per board per instance (--score-rate): a token
// bucket each, holding at most one second's worth of posts (at least one),
// refilled at the rate. At most kBucketsMax buckets at once: past it the
// one idle longest goes (a player who comes back starts with a full
// bucket, which is what an idle bucket would hold anyway once refilled).
//
// Per instance: N instances behind a balancer admit up to N times the rate
// for one player. Thread-safe: the buckets are split into kShards, each
// with its own mutex and least-recently-used list (so "idle longest" is per
// shard, and each shard holds kBucketsMax / kShards).
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/status.h"

namespace hotrow::leaderboard {

struct ScoreRate {
  double per_second = 0;  // 0: off
  bool operator==(const ScoreRate&) const = default;
};

// "10/s", "600/min", "0.5/s"; "off" or "" for none. invalid_field naming
// `flag` otherwise (a rate must be > 0 and at most 1,000,000 per second).
Result<ScoreRate> ParseScoreRate(std::string_view text, std::string_view flag = "--score-rate");

class ScoreRateLimiter {
 public:
  static constexpr size_t kBucketsMax = 100'000;
  static constexpr size_t kShards = 16;

  explicit ScoreRateLimiter(ScoreRate rate, size_t buckets_max = kBucketsMax);

  // Takes a token for (board, client) at `now_us`: nullopt when the post
  // may go ahead, else the whole seconds (>= 1) until a token is there.
  std::optional<int64_t> Take(std::string_view board_id, std::string_view client_id, int64_t now_us);

  size_t buckets() const;
  bool enabled() const { return rate_.per_second > 0; }

 private:
  struct Bucket {
    double tokens = 0;
    int64_t at_us = 0;  // when `tokens` was last brought up to date
    std::list<std::string>::iterator lru;
  };
  struct Shard {
    mutable std::mutex mutex;
    std::unordered_map<std::string, Bucket> buckets;
    std::list<std::string> lru;  // least recently used first
  };

  const ScoreRate rate_;
  const double burst_;
  const size_t shard_max_;
  Shard shards_[kShards];
};

}  // namespace hotrow::leaderboard
