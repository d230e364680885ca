// The leaderboard store contract: what both backends (embedded SQLite with
// the in-memory Board, and Redis) must do. A backend joins by instantiating
// LeaderboardContract with a factory.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "leaderboard/store.h"

namespace hotrow::testing {

class LeaderboardBackendInstance {
 public:
  virtual ~LeaderboardBackendInstance() = default;
  virtual leaderboard::LeaderboardStore& store() = 0;
  // Stops hotrow's side and opens the same data again (a hotrow restart).
  virtual void Restart() = 0;
  // Kills the backing server with SIGKILL and restarts it, when there is
  // one (Redis); false when the backend has no separate server.
  virtual bool CrashServer() { return false; }
};

struct LeaderboardBackend {
  std::string name;
  std::function<std::unique_ptr<LeaderboardBackendInstance>()> make;
};

inline void PrintTo(const LeaderboardBackend& b, std::ostream* os) { *os << b.name; }

class LeaderboardContract : public ::testing::TestWithParam<LeaderboardBackend> {
 protected:
  void SetUp() override {
    backend = GetParam().make();
    ASSERT_TRUE(backend);
  }
  leaderboard::LeaderboardStore& store() { return backend->store(); }
  std::unique_ptr<LeaderboardBackendInstance> backend;
};

}  // namespace hotrow::testing
