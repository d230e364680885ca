// Helpers the leaderboard contract files share: a board made and changed
// through the service, waited for.
#pragma once

#include <string>

#include "contract/wait.h"
#include "leaderboard/service.h"

namespace hotrow::testing {

inline Result<leaderboard::BoardView> Create(leaderboard::LeaderboardService& s, const std::string& id,
                                             leaderboard::BoardSettings settings = {}) {
  return Wait<Result<leaderboard::BoardView>>(
      [&](auto done) { s.CreateBoard(leaderboard::BoardInfo{.id = id, .settings = settings, .created_us = 0}, done); });
}

inline Result<leaderboard::BoardView> Patch(leaderboard::LeaderboardService& s, const std::string& id,
                                            leaderboard::BoardPatch patch) {
  return Wait<Result<leaderboard::BoardView>>([&](auto done) { s.UpdateBoard(id, patch, done); });
}

}  // namespace hotrow::testing
