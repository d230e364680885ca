// The leaderboard on Redis: the truth for every instance that points at the
// same Redis, so several hotrow instances agree on one board.
//
// Data (all changed together by Lua scripts, so each change is atomic: a
// score reads the old member, compares, ZREMs it, INCRs, ZADDs, HSETs and
// PUBLISHes in one script):
//   hotrow:lb:z    sorted set; score = the player's score (exact: |score| <
//                  2^53), member = 16 decimal digits of (2^53-1 - seq)
//                  followed by the client id
//   hotrow:lb:m    hash client id -> member
//   hotrow:lb:seq  INCR counter: the sequence number of a score change
// ZREVRANGE orders equal scores by member bytes, descending; the inverted,
// fixed-width sequence number makes the earlier change the larger member,
// so "earlier ranks higher" holds, the same rule as the embedded Board.
// Every change PUBLISHes the client id on hotrow:lb:changed.
//
// Durability: a 200 is durable only when Redis runs with appendonly yes and
// appendfsync always (scripts/redis-durable.conf, the tests and the cluster
// scripts start it that way); hotrow logs a warning at start-up otherwise.
// With appendfsync everysec a crash can lose up to a second of acknowledged
// scores.
//
// Cache: the top 100 (and the total) are cached per instance and serve every
// page inside them. An entry is valid while (a) no change was seen since it
// was fetched -- this instance's own writes bump the version before they
// answer, so its reads after a 200 refetch; other instances' writes arrive
// by pub/sub, and a reconnect of the subscriber counts as a change -- and
// (b) it is younger than kCacheAgeMaxMs (100 ms), which bounds staleness
// even when pub/sub messages are lost. Misses are single-flight: readers
// that arrive while a fetch runs share it, unless a change was seen after it
// started, in which case they wait for the next one. A player's own rank
// (GET /leaderboard/{id}) always goes to Redis, so a player always sees
// their own accepted score.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

#include "db/redis.h"
#include "leaderboard/store.h"

namespace hotrow::leaderboard {

inline constexpr int64_t kCacheAgeMaxMs = 100;

class RedisLeaderboardStore final : public LeaderboardStore, public SharedRanking {
 public:
  static Result<std::unique_ptr<RedisLeaderboardStore>> Open(const std::string& url, db::redis::Options options = {});
  ~RedisLeaderboardStore() override;

  // Redis ranks: nothing to load; other instances' changes reach the cache
  // by pub/sub (below), not through the service.
  Status Load(const std::function<void(std::string, Stored)>&) override { return Status::Ok(); }
  void Stop() override;
  SharedRanking* shared_ranking() override { return this; }

  void PostScore(std::string client_id, int64_t score, ScoreMode mode,
                 std::function<void(Result<StoredScore>)> done) override;
  void Remove(std::string client_id, std::function<void(Status)> done) override;
  void Top(int64_t offset, int64_t limit, Callback<Result<Page>> done) override;
  void Player(std::string client_id, std::optional<int64_t> around,
              std::function<void(Result<PlayerView>)> done) override;

  // Players on the board (ZCARD), for seeding and start-up logs.
  Result<int64_t> Count();
  // Deletes the board's keys (seeding with --replace, tests).
  Status Clear();
  db::redis::Client& client() { return *client_; }

 private:
  RedisLeaderboardStore() = default;
  void Invalidate() { version_.fetch_add(1, std::memory_order_acq_rel); }
  void FetchTop(uint64_t version);

  // The cached top (public so the slicing helper can name it).
 public:
  struct Cached {
    uint64_t version;
    std::chrono::steady_clock::time_point fetched;
    std::vector<Entry> top;  // the top kPageLimitMax entries
    int64_t total;
  };
  using CachedView = Cached;

 private:
  struct Waiter {
    uint64_t version;  // the change count when the reader arrived
    int64_t offset, limit;
    Callback<Result<Page>> done;
  };

  std::unique_ptr<db::redis::Client> client_;
  std::unique_ptr<db::redis::Subscriber> subscriber_;
  std::atomic<uint64_t> version_{1};
  std::mutex cache_mutex_;
  std::shared_ptr<const Cached> cache_;
  bool fetching_ = false;
  std::vector<Waiter> waiters_;
};

}  // namespace hotrow::leaderboard
