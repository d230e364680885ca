// Runs the leaderboard contract on both backends: the embedded SQLite store
// and Redis (a real redis-server started for the suite).
#include "contract/leaderboard_contract.h"
#include "db/sqlite_database.h"
#include "harness/or_throw.h"
#include "harness/redis_process.h"
#include "leaderboard/redis_store.h"
#include "leaderboard/sqlite_store.h"

namespace hotrow::testing {
namespace {

class SqliteBoard : public LeaderboardBackendInstance {
 public:
  SqliteBoard() { Open(); }
  leaderboard::LeaderboardStore& store() override { return *store_; }
  void Restart() override {
    store_.reset();
    db_.reset();
    Open();
  }

 private:
  void Open() {
    db_ = OrThrow(db::sqlite::Database::Open(dir_.File("lb.db")));
    store_ = OrThrow(leaderboard::SqliteLeaderboardStore::Open(*db_));
    db_->writer().Start();
  }
  TempDir dir_;
  std::unique_ptr<db::sqlite::Database> db_;
  std::unique_ptr<leaderboard::SqliteLeaderboardStore> store_;
};

class RedisBoard : public LeaderboardBackendInstance {
 public:
  RedisBoard() : redis_(RedisProcess::Start()) {
    if (!redis_) throw std::runtime_error("no redis-server");
    Open();
  }
  leaderboard::LeaderboardStore& store() override { return *store_; }
  void Restart() override {
    store_.reset();
    Open();
  }
  bool CrashServer() override {
    store_.reset();
    return redis_->Restart();
  }

 private:
  void Open() { store_ = OrThrow(leaderboard::RedisLeaderboardStore::Open(redis_->url())); }
  std::unique_ptr<RedisProcess> redis_;
  std::unique_ptr<leaderboard::RedisLeaderboardStore> store_;
};

INSTANTIATE_TEST_SUITE_P(Backends, LeaderboardContract,
                         ::testing::Values(LeaderboardBackend{"sqlite", [] { return std::make_unique<SqliteBoard>(); }},
                                           LeaderboardBackend{"redis", [] { return std::make_unique<RedisBoard>(); }}),
                         [](const auto& info) { return info.param.name; });

// The Redis key layout has a version (hotrow:schema), marked at the first
// open; a layout a contract step closed to this release is refused.
TEST(RedisSchema, TheLayoutIsMarkedAndALayoutClosedToThisReleaseIsRefused) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis);
  {
    auto store = leaderboard::RedisLeaderboardStore::Open(redis->url());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    auto version = (*store)->client().CommandSync({"HGET", "hotrow:schema", "version"});
    ASSERT_TRUE(version.ok());
    EXPECT_EQ(version->str, "0");
    ASSERT_TRUE(
        (*store)->client().CommandSync({"HSET", "hotrow:schema", "oldest_schema", "3", "oldest_binary", "9.9.0"}).ok());
  }
  auto refused = leaderboard::RedisLeaderboardStore::Open(redis->url());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("needs hotrow 9.9.0 or newer (schema 3)"), std::string::npos)
      << refused.status().ToString();
}

}  // namespace
}  // namespace hotrow::testing
