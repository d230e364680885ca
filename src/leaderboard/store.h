// Where scores are kept for good: the embedded SQLite table, a PostgreSQL
// table shared by every instance, or Redis sorted sets shared by every
// instance. Persistence only; the rules and the read model (the Board) are
// the service's (service.h).
//
// Lifecycle, the same for every store of every domain (cmd/serve.cc):
//   Open      a static factory per backend: connects, migrates the schema;
//   Load      every stored player, for the service's Board;
//   Follow    one change another instance made, as the store's change feed
//             reports it (PostgreSQL NOTIFY on channel()), parsed here, next
//             to the statement that sends it;
//   Stop      answers or fails every request the store holds and stops its
//             threads (at shutdown, while the event loops still run).
//
// Writes: `done` runs exactly once, after the change is durable (SQLite or
// PostgreSQL commit, or Redis with appendfsync always) or has failed.
//
// Redis ranks for every instance itself (ZREVRANK on one sorted set), so it
// has no players to load: it answers reads through SharedRanking, and the
// service keeps no Board beside it.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "base/inline_function.h"
#include "leaderboard/model.h"

namespace hotrow::leaderboard {

// The player's stored score after a post: the request's score, or the one it
// did not beat (kBest), or the same one again (an equal score changes
// nothing, so the player keeps their place among equal scores).
struct StoredScore {
  int64_t score = 0;
  int64_t seq = 0;       // the order among equal scores (0 from a SharedRanking store)
  bool changed = false;  // whether this post changed the stored score
  int64_t rank = 0;      // 1-based, from a SharedRanking store only
};

// A change to the board, as another instance made it.
struct ScoreChange {
  enum class Kind { kSet, kErase };
  Kind kind = Kind::kSet;
  std::string client_id;
  int64_t score = 0, seq = 0;  // kSet only
};

// Reads answered by a store that ranks for every instance (Redis). `done`
// runs later, on the store's client thread.
class SharedRanking {
 public:
  virtual ~SharedRanking() = default;
  // Entries at 0-based positions [offset, offset + limit), and the total.
  virtual void Top(int64_t offset, int64_t limit, Callback<Result<Page>> done) = 0;
  // not_found for an unknown player.
  virtual void Player(std::string client_id, std::optional<int64_t> around,
                      std::function<void(Result<PlayerView>)> done) = 0;
};

class LeaderboardStore {
 public:
  virtual ~LeaderboardStore() = default;

  // Calls sink once per stored player. Stores that rank themselves
  // (shared_ranking() != nullptr) call it for none.
  virtual Status Load(const std::function<void(std::string client_id, Stored stored)>& sink) = 0;
  // The channel whose notifications Follow parses; nullptr when no other
  // instance can change this store.
  virtual const char* channel() const { return nullptr; }
  // Parses one notification of channel() into the change it reports;
  // nullopt for one it cannot read (logged and ignored: any database user
  // may NOTIFY, and a newer release may add kinds). An error means the
  // change could not be applied: the caller reloads.
  virtual Result<std::optional<ScoreChange>> Follow(std::string_view notification) {
    return Status::Internal("this store has no change feed: " + std::string(notification));
  }
  virtual void Stop() {}

  // Stores `score` for the player (kReplace) or the higher of it and the
  // stored one (kBest). `done` gets what is stored after the commit.
  virtual void PostScore(std::string client_id, int64_t score, ScoreMode mode,
                         std::function<void(Result<StoredScore>)> done) = 0;
  // not_found when the player has no score.
  virtual void Remove(std::string client_id, std::function<void(Status)> done) = 0;

  // Non-null for a store that ranks for every instance itself (Redis).
  virtual SharedRanking* shared_ranking() { return nullptr; }
};

}  // namespace hotrow::leaderboard
