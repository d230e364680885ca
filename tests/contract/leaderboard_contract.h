// The leaderboard contract: what every backend (embedded SQLite and
// PostgreSQL with the service's in-memory Board, and Redis) must do, seen
// through the service as the routes see it. A backend joins by
// instantiating LeaderboardContract with a factory.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "leaderboard/service.h"
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
    Reopen();
  }
  // A service over the backend's store as it is now (after a Restart).
  void Reopen() {
    service_.reset();
    service_ = std::make_unique<leaderboard::LeaderboardService>(
        backend->store(), leaderboard::LeaderboardOptions{.test_hooks = true, .secrets_key = kSecretsKey});
    ASSERT_TRUE(service_->Load().ok());
  }
  leaderboard::LeaderboardService& store() { return *service_; }
  // The --secrets-key-file key of the service (auth hmac boards).
  static inline const std::string kSecretsKey = std::string(32, 'k');
  // The service goes first: it holds a reference to the store.
  void Restart() {
    service_.reset();
    backend->Restart();
    Reopen();
  }
  bool CrashServer() {
    service_.reset();
    return backend->CrashServer();
  }
  std::unique_ptr<LeaderboardBackendInstance> backend;
  std::unique_ptr<leaderboard::LeaderboardService> service_;
};

}  // namespace hotrow::testing
