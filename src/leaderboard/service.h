// The leaderboard service: the rules for scores and pages, and the read
// model, over one store (store.h).
//
// Read model: on SQLite and PostgreSQL the service keeps the Board
// (board.h), loaded from the store at start-up and changed after each
// commit, before the caller is answered, so every later read sees the
// change; other instances' changes arrive through Follow. On Redis the
// store ranks for every instance (SharedRanking) and the service asks it.
//
// Callbacks run inline (a read from the Board) or on a store thread.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "base/domain.h"
#include "leaderboard/board.h"
#include "leaderboard/store.h"

namespace hotrow::leaderboard {

class LeaderboardService final : public DomainService {
 public:
  explicit LeaderboardService(LeaderboardStore& store) : store_(store), ranking_(store.shared_ranking()) {}

  // DomainService: the Board from the store (none on a SharedRanking store).
  std::string_view name() const override { return "leaderboard"; }
  Status Load() override;
  size_t entries() const override { return static_cast<size_t>(board_.size()); }
  const char* channel() const override { return store_.channel(); }
  Status Follow(std::string_view notification) override;
  void Stop() override { store_.Stop(); }

  // client_id as ValidateClientId; |score| <= kScoreAbsMax. `done` gets the
  // score stored after the request and its rank.
  void PostScore(const std::string& client_id, int64_t score, ScoreMode mode, std::function<void(Result<Posted>)> done);
  // not_found when the player has no score.
  void Remove(const std::string& client_id, std::function<void(Status)> done);
  // offset >= 0, limit 1-kPageLimitMax.
  void Top(int64_t offset, int64_t limit, Callback<Result<Page>> done);
  // around 0-kAroundMax; not_found for an unknown player.
  void Player(std::string client_id, std::optional<int64_t> around, std::function<void(Result<PlayerView>)> done);

 private:
  LeaderboardStore& store_;
  SharedRanking* const ranking_;  // the store's, or nullptr: then board_ answers
  Board board_;
};

}  // namespace hotrow::leaderboard
