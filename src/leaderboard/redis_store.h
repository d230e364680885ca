// The leaderboard on Redis: the truth for every instance that points at the
// same Redis, so several hotrow instances agree on every board.
//
// Data (all changed together by Lua scripts, so each change is atomic: a
// score checks its board, reads the old member, decides, ZREMs it, INCRs,
// ZADDs, HSETs and PUBLISHes in one script):
//   hotrow:lb:boards            hash board id -> its settings, "<order>
//                               <operator> <reset> <timezone> <ranking>
//                               <auth> <keepSeasons> <created_us>
//                               <everySeconds> <epoch_season> <epoch_us>
//                               <pre_epoch_started_us> <secret>
//                               <previous secret> <its grace's end>"
//                               (season.h; secrets sealed, "-" for none)
//   hotrow:lb:purged            hash board id -> the season up to which its
//                               seasons' keys are deleted (keepSeasons)
//   hotrow:lb:b:<board>:written set of the seasons that have keys (a purge
//                               and a delete take them all)
//   hotrow:lb:b:<board>:seasons hash season -> its start, for the seasons
//                               before a schedule change (SeasonHistory)
//   hotrow:lb:b:<board>:<season>:z
//                               sorted set; score = the player's score
//                               (exact: |score| < 2^53), member = 16 decimal
//                               digits of the sequence number followed by
//                               the client id
//   hotrow:lb:b:<board>:<season>:m
//                               hash client id -> member
//   hotrow:lb:b:<board>:<season>:p
//                               hash client id -> "<name bytes, -1: none>
//                               <display name><metadata>", for the players
//                               that have either
//   hotrow:lb:seq               INCR counter: the sequence number of a
//                               score change, for every board
//   hotrow:lb:b:<board>:key:<client> <Idempotency-Key>
//                               string "<board created> <score> <member>
//                               <season> <fingerprint>", the answer a keyed
//                               post got; expires after kIdempotencyKeptUs
//   hotrow:hb                   "<value> <epoch>", the replicas' heartbeat
//                               (db/redis_replicas.h; with --redis-replica)
// On a desc board the digits are 2^53-1 - seq and pages read ZREVRANGE,
// which orders equal scores by member bytes, descending: the earlier change
// is the larger member. On an asc board they are seq itself and pages read
// ZRANGE, ascending. Either way "earlier ranks higher" among equal scores,
// the embedded Board's rule. A shared rank is 1 + ZCOUNT of the strictly
// better scores. Every score change PUBLISHes the board's id on
// hotrow:lb:changed; a board's creation, change or deletion publishes
// "board <id>", on which every instance reads that board again.
//
// Seasons: a post is given the season the instance's clock chose, its
// bounds and the schedule it used; the script checks them against Redis's
// TIME and the board's settings and answers "season" or "stale" (nothing
// written) when they disagree (store.h, ScorePost). Purge deletes the keys
// of the seasons past keepSeasons, by UNLINK.
//
// Key layout migrations (db::redis::Migrate, hotrow:schema): step 1
// (v0.7.0, contract) creates `default` and renames v0.1.0's hotrow:lb:z and
// hotrow:lb:m to `default`'s season 1.
//
// Durability: a 200 is durable only when Redis runs with appendonly yes and
// appendfsync always (scripts/redis-durable.conf, the tests and the cluster
// scripts start it that way); hotrow logs a warning at start-up otherwise.
// With appendfsync everysec a crash can lose up to a second of acknowledged
// scores.
//
// Cache: each board's top 100 (and total) are cached per instance and serve
// every page inside them. An entry is valid while (a) no change of that
// board was seen since it was fetched -- this instance's own writes bump the
// board's version before they answer, so its reads after a 200 refetch;
// other instances' writes arrive by pub/sub, and a reconnect of the
// subscriber counts as a change of every board -- and (b) it is younger than
// --redis-cache-ms (kCacheAgeMaxMs, 100 ms, by default; 0: no cache), which
// bounds staleness even when pub/sub
// messages are lost. Misses are single-flight per board: readers that arrive
// while a fetch runs share it, unless a change was seen after it started, in
// which case they wait for the next one. A player's own rank (GET
// .../players/{id}) always goes to the master, so a player always sees their
// own accepted score.
//
// Replicas (--redis-replica, db/redis_replicas.h): the cache's fetches,
// pages past it and the friends view go to a replica whose measured lag is
// within --redis-max-lag-ms and that holds this instance's newest write;
// everything else goes to the master. So this instance's own writes are
// always seen; another instance's reach a page within the cache's age plus
// the lag bound (a fetch started on its pub/sub message may read a replica
// that does not have it yet).
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "db/redis.h"
#include "db/redis_replicas.h"
#include "leaderboard/store.h"

namespace hotrow::leaderboard {

inline constexpr int64_t kCacheAgeMaxMs = 100;

// Where reads go (serve --redis-replica, --redis-max-lag-ms,
// --redis-cache-ms).
struct RedisReads {
  // Replicas for pages and the friends view (db/redis_replicas.h); none:
  // every read goes to the master.
  db::redis::ReplicaOptions replicas = {};
  // The top-100 cache's age limit; 0: no cache, every page read goes to
  // Redis (for the benchmark's comparison).
  int64_t cache_ms = kCacheAgeMaxMs;
};

class RedisLeaderboardStore final : public LeaderboardStore, public SharedRanking {
 public:
  static Result<std::unique_ptr<RedisLeaderboardStore>> Open(const std::string& url, db::redis::Options options = {},
                                                             RedisReads reads = {});
  ~RedisLeaderboardStore() override;

  // Redis ranks: only the boards to load; other instances' score changes
  // reach the cache by pub/sub (below), not through the service, and their
  // board changes through OnBoardChange.
  Status Load(const std::function<int64_t(BoardInfo)>& board_sink,
              const std::function<void(const std::string&, int64_t, std::string, Stored)>& sink) override;
  Result<std::vector<RecordedSeason>> SeasonHistory(const std::string& board_id) override;
  Result<BoardInfo> LoadBoard(const std::string& board_id) override;
  void OnBoardChange(std::function<void(const std::string& board_id)> f) override;
  void Stop() override;
  SharedRanking* shared_ranking() override { return this; }

  void CreateBoard(BoardInfo board, std::function<void(Status)> done) override;
  void UpdateBoard(BoardInfo board, BoardInfo expected, std::vector<RecordedSeason> history,
                   std::function<void(Status)> done) override;
  void DeleteBoard(BoardInfo board, std::function<void(Status)> done) override;
  void PostScore(ScorePost post, std::function<void(Result<StoredScore>)> done) override;
  void Purge(std::string board_id, int64_t created_us, int64_t through_season,
             std::function<void(Status)> done) override;
  void Remove(std::string board_id, int64_t season, std::string client_id,
              std::function<void(Result<int64_t>)> done) override;

  void Top(const BoardInfo& board, int64_t season, int64_t offset, int64_t limit, Callback<Result<Page>> done) override;
  void Player(const BoardInfo& board, int64_t season, std::string client_id, std::optional<int64_t> around,
              std::function<void(Result<PlayerView>)> done) override;
  void Ranks(const BoardInfo& board, int64_t season, std::vector<std::string> client_ids,
             std::function<void(Result<std::vector<Entry>>)> done) override;

  // Players on a board's season (ZCARD), for seeding and start-up logs.
  Result<int64_t> Count(const std::string& board_id = std::string(kDefaultBoard), int64_t season = kFirstSeason);
  // Deletes every player of `default`, of every season (seeding with
  // --replace); other boards are kept.
  Status Clear();
  db::redis::Client& client() { return *client_; }
  // Null without --redis-replica.
  db::redis::ReplicaSet* replicas() { return replicas_.get(); }

 private:
  RedisLeaderboardStore() = default;
  void Invalidate(const std::string& board_id);
  void InvalidateAll();
  void OnMessage(const std::string& payload);

  // A board's cached top (public so the slicing helper can name it).
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
    uint64_t version;  // the board's change count when the reader arrived
    int64_t offset, limit;
    Callback<Result<Page>> done;
  };
  // One board's cache, under cache_mutex_.
  struct BoardCache {
    BoardInfo board;  // as the newest reader had it: its incarnation and order
    uint64_t version = 1;
    std::shared_ptr<const Cached> cached;
    bool fetching = false;
    std::vector<Waiter> waiters;
  };
  void FetchTop(const BoardInfo& board, int64_t season, uint64_t version);
  // Runs a read (a page or a friends view) on a replica that is caught up,
  // else on the master; a replica's transient failure is retried on the
  // master, once.
  void ReadEval(const db::redis::Script& script, std::vector<std::string> args, db::redis::Client::Callback done);
  // Before a write's caller is answered (read-your-writes on replicas).
  void Wrote() {
    if (replicas_) replicas_->Wrote();
  }
  void DeepTop(const BoardInfo& board, int64_t season, int64_t offset, int64_t limit, Callback<Result<Page>> done);

  std::unique_ptr<db::redis::Client> client_;
  std::unique_ptr<db::redis::ReplicaSet> replicas_;  // stopped before client_
  int64_t cache_ms_ = kCacheAgeMaxMs;
  std::unique_ptr<db::redis::Subscriber> subscriber_;
  std::mutex cache_mutex_;
  std::map<std::pair<std::string, int64_t>, BoardCache> caches_;  // by (board id, season)
  // Past it, a new (board, season) first drops every idle entry.
  static constexpr size_t kCachedSeasonsMax = 4096;
  std::mutex listener_mutex_;
  std::function<void(const std::string&)> on_board_change_;
};

}  // namespace hotrow::leaderboard
