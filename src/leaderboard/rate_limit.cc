#include "leaderboard/rate_limit.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>

namespace hotrow::leaderboard {

Result<ScoreRate> ParseScoreRate(std::string_view text, std::string_view flag) {
  if (text.empty() || text == "off") return ScoreRate{};
  const std::string field(flag);
  auto bad = [&] {
    return Status::InvalidField(
        field, field + " must be N/s or N/min with N > 0 (\"10/s\"), or off; not '" + std::string(text) + "'");
  };
  size_t slash = text.find('/');
  if (slash == std::string_view::npos) return bad();
  std::string_view number = text.substr(0, slash), unit = text.substr(slash + 1);
  double n = 0;
  auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), n);
  if (ec != std::errc() || end != number.data() + number.size() || !std::isfinite(n) || n <= 0) return bad();
  double per_second = 0;
  if (unit == "s")
    per_second = n;
  else if (unit == "min")
    per_second = n / 60;
  else
    return bad();
  constexpr double kPerSecondMax = 1'000'000;
  if (per_second > kPerSecondMax) return bad();
  return ScoreRate{per_second};
}

ScoreRateLimiter::ScoreRateLimiter(ScoreRate rate, size_t buckets_max)
    : rate_(rate), burst_(std::max(1.0, rate.per_second)), shard_max_(std::max<size_t>(1, buckets_max / kShards)) {}

std::optional<int64_t> ScoreRateLimiter::Take(std::string_view board_id, std::string_view client_id, int64_t now_us) {
  if (!enabled()) return std::nullopt;
  std::string key;
  key.reserve(board_id.size() + 1 + client_id.size());
  key.append(board_id).push_back('\n');  // neither id may hold a newline
  key.append(client_id);
  Shard& shard = shards_[std::hash<std::string>{}(key) % kShards];
  std::lock_guard lock(shard.mutex);
  auto it = shard.buckets.find(key);
  if (it == shard.buckets.end()) {
    if (shard.buckets.size() >= shard_max_) {
      shard.buckets.erase(shard.lru.front());  // the one idle longest
      shard.lru.pop_front();
    }
    shard.lru.push_back(key);
    it = shard.buckets.emplace(std::move(key), Bucket{burst_, now_us, std::prev(shard.lru.end())}).first;
  } else {
    shard.lru.splice(shard.lru.end(), shard.lru, it->second.lru);
  }
  Bucket& b = it->second;
  if (now_us > b.at_us) {
    b.tokens = std::min(burst_, b.tokens + static_cast<double>(now_us - b.at_us) / 1e6 * rate_.per_second);
    b.at_us = now_us;
  }
  if (b.tokens >= 1) {
    b.tokens -= 1;
    return std::nullopt;
  }
  double wait_s = (1 - b.tokens) / rate_.per_second;
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(wait_s)));
}

size_t ScoreRateLimiter::buckets() const {
  size_t n = 0;
  for (const Shard& s : shards_) {
    std::lock_guard lock(s.mutex);
    n += s.buckets.size();
  }
  return n;
}

}  // namespace hotrow::leaderboard
