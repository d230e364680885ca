// Where the leaderboard lives: the embedded SQLite table with an in-memory
// Board (sqlite_store.h), or Redis sorted sets shared by every instance
// (redis_store.h). Both answer reads and writes through this interface, so
// the service and the contract suite (tests/contract/) do not know which.
//
// Writes: `done` runs exactly once, after the change is durable (SQLite
// commit, or Redis with appendfsync always) or has failed. Reads: `done` may
// run before the call returns (memory) or later on a client thread (Redis).
// A read that starts after a write's `done` ran sees that write.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "base/inline_function.h"
#include "leaderboard/model.h"

namespace hotrow::leaderboard {

class LeaderboardStore {
 public:
  virtual ~LeaderboardStore() = default;

  // Stores `score` for the player (kReplace) or the higher of it and the
  // stored one (kBest). An equal score changes nothing, so the player keeps
  // their place among equal scores.
  virtual void PostScore(std::string client_id, int64_t score, ScoreMode mode,
                         std::function<void(Result<Posted>)> done) = 0;
  // not_found when the player has no score.
  virtual void Remove(std::string client_id, std::function<void(Status)> done) = 0;

  // Entries at 0-based positions [offset, offset + limit), and the total.
  virtual void Top(int64_t offset, int64_t limit, Callback<Result<Page>> done) = 0;
  // not_found for an unknown player.
  virtual void Player(std::string client_id, std::optional<int64_t> around,
                      std::function<void(Result<PlayerView>)> done) = 0;

  // Answers or fails every request it holds and stops its threads; later
  // requests answer unavailable. Called at shutdown while the event loops
  // still deliver responses. Stores whose requests run on a shared writer or
  // pool have nothing of their own to stop.
  virtual void Stop() {}
};

}  // namespace hotrow::leaderboard
