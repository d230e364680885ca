// Runs the leaderboard contract on both backends: the embedded SQLite store
// and Redis (a real redis-server started for the suite).
#include <future>
#include <mutex>

#include "base/time.h"
#include "contract/leaderboard_contract.h"
#include "contract/wait.h"
#include "db/sqlite_database.h"
#include "harness/http_client.h"
#include "harness/or_throw.h"
#include "harness/redis_process.h"
#include "leaderboard/redis_store.h"
#include "leaderboard/service.h"
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
    EXPECT_EQ(version->str, "1") << "step 1: many boards";
    ASSERT_TRUE(
        (*store)->client().CommandSync({"HSET", "hotrow:schema", "oldest_schema", "3", "oldest_binary", "9.9.0"}).ok());
  }
  auto refused = leaderboard::RedisLeaderboardStore::Open(redis->url());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("needs hotrow 9.9.0 or newer (schema 3)"), std::string::npos)
      << refused.status().ToString();
}

// Step 1 of the layout: v0.1.0's keys, as a release before wrote them,
// become season 1 of `default`, scores, ties and sequence numbers kept.
TEST(RedisSchema, TheKeysOfOneBoardBecomeTheBoardDefault) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis);
  {
    auto raw = OrThrow(db::redis::Client::Connect(redis->url()));
    // a and b tie at 10, a reached it first (seq 1); c has 20 (seq 3).
    for (std::vector<std::string> cmd :
         {std::vector<std::string>{"ZADD", "hotrow:lb:z", "10", "9007199254740990a", "10", "9007199254740989b", "20",
                                   "9007199254740988c"},
          {"HSET", "hotrow:lb:m", "a", "9007199254740990a", "b", "9007199254740989b", "c", "9007199254740988c"},
          {"SET", "hotrow:lb:seq", "3"}})
      ASSERT_TRUE(raw->CommandSync(cmd).ok());
  }
  auto store = OrThrow(leaderboard::RedisLeaderboardStore::Open(redis->url()));
  leaderboard::LeaderboardService service(*store);
  ASSERT_TRUE(service.Load().ok());
  auto page = Wait<Result<leaderboard::Page>>([&](auto done) { service.Top(0, 10, done); });
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  std::vector<std::string> ids;
  for (const auto& e : page->entries) ids.push_back(e.client_id + ":" + std::to_string(e.rank));
  EXPECT_EQ(ids, (std::vector<std::string>{"c:1", "a:2", "b:3"}));
  EXPECT_EQ(store->client().CommandSync({"EXISTS", "hotrow:lb:z"})->integer, 0);
  auto d = Wait<Result<leaderboard::Posted>>(
      [&](auto done) { service.PostScore("d", 10, leaderboard::ScoreMode::kReplace, done); });
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->entry.rank, 4) << "the sequence goes on after the old ones";
}

// Boards reach another instance by pub/sub; a message lost while its
// subscriber reconnects must not leave it without the board for good: the
// reconnect reads every board again. (Before, B answered 404 for a board A
// made while B's subscriber was down, until B restarted.)
TEST(RedisBoards, ABoardMadeWhileTheOtherInstanceWasDeafReachesItAfterItsReconnect) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis);
  auto store_a = OrThrow(leaderboard::RedisLeaderboardStore::Open(redis->url()));
  auto store_b = OrThrow(leaderboard::RedisLeaderboardStore::Open(redis->url()));
  leaderboard::LeaderboardService a(*store_a), b(*store_b);
  ASSERT_TRUE(a.Load().ok());
  ASSERT_TRUE(b.Load().ok());
  ASSERT_TRUE(store_a->client().CommandSync({"CLIENT", "KILL", "TYPE", "pubsub"}).ok());
  auto made = Wait<Result<leaderboard::BoardView>>(
      [&](auto done) { a.CreateBoard(leaderboard::BoardInfo{.id = "lost", .settings = {}, .created_us = 0}, done); });
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  EXPECT_TRUE(Eventually([&] { return b.GetBoard("lost").ok(); }, std::chrono::seconds(10)));
  // And a board made again with other settings is posted to with those,
  // whatever an instance remembers: the store decides with its own.
  ASSERT_TRUE(Wait<Status>([&](auto done) { a.DeleteBoard("lost", done); }).ok());
  ASSERT_TRUE(Wait<Result<leaderboard::BoardView>>([&](auto done) {
                a.CreateBoard(leaderboard::BoardInfo{.id = "lost",
                                                     .settings = {.order = leaderboard::Order::kAsc,
                                                                  .op = leaderboard::Operator::kBest},
                                                     .created_us = 0},
                              done);
              }).ok());
  auto post = [&](int64_t score) {
    return Wait<Result<leaderboard::Posted>>([&](auto done) { b.PostScore("lost", "p", score, std::nullopt, done); });
  };
  // b may not know the board made again yet (not_found until it hears):
  // the first post is sent until it lands. (Posting 20 after a 10 that
  // never landed made 20 the first score: a flake under the sanitizers.)
  ASSERT_TRUE(Eventually([&] { return post(10).ok(); }, std::chrono::seconds(10)));
  auto r = post(20);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->entry.score, 10) << "best on the asc board keeps the lower score";
}

// The real SQLite store, but a post's answer is held until the test lets it
// go: the order in which PostgreSQL's pool threads may answer a post and a
// delete that committed after it.
class HeldPostAnswers : public leaderboard::LeaderboardStore {
 public:
  explicit HeldPostAnswers(leaderboard::LeaderboardStore& store) : store_(store) {}
  Status Load(const std::function<int64_t(leaderboard::BoardInfo)>& boards,
              const std::function<void(const std::string&, int64_t, std::string, leaderboard::Stored)>& sink) override {
    return store_.Load(boards, sink);
  }
  Result<std::vector<leaderboard::RecordedSeason>> SeasonHistory(const std::string& id) override {
    return store_.SeasonHistory(id);
  }
  Result<leaderboard::BoardInfo> LoadBoard(const std::string& id) override { return store_.LoadBoard(id); }
  void CreateBoard(leaderboard::BoardInfo b, std::function<void(Status)> done) override {
    store_.CreateBoard(std::move(b), std::move(done));
  }
  void UpdateBoard(leaderboard::BoardInfo b, leaderboard::BoardInfo expected,
                   std::vector<leaderboard::RecordedSeason> h, std::function<void(Status)> done) override {
    store_.UpdateBoard(std::move(b), std::move(expected), std::move(h), std::move(done));
  }
  void DeleteBoard(leaderboard::BoardInfo b, std::function<void(Status)> done) override {
    store_.DeleteBoard(std::move(b), std::move(done));
  }
  void PostScore(leaderboard::ScorePost p, std::function<void(Result<leaderboard::StoredScore>)> done) override {
    store_.PostScore(std::move(p), [this, done = std::move(done)](Result<leaderboard::StoredScore> r) {
      std::lock_guard lock(mutex_);
      held_.push_back([r = std::move(r), done] { done(r); });
    });
  }
  void Purge(std::string id, int64_t created_us, int64_t through, std::function<void(Status)> done) override {
    store_.Purge(std::move(id), created_us, through, std::move(done));
  }
  void Remove(std::string id, int64_t season, std::string client, std::function<void(Result<int64_t>)> done) override {
    store_.Remove(std::move(id), season, std::move(client), std::move(done));
  }
  // Answers every held post (on the caller's thread); how many.
  size_t Release() {
    std::vector<std::function<void()>> held;
    {
      std::lock_guard lock(mutex_);
      held.swap(held_);
    }
    for (auto& answer : held) answer();
    return held.size();
  }

 private:
  leaderboard::LeaderboardStore& store_;
  std::mutex mutex_;
  std::vector<std::function<void()>> held_;
};

// A post that committed before its board's delete, answered after it, must
// not bring the board back on this instance. (Before, its answer made the
// deleted board again here, with the post's settings, until a reload.)
TEST(LeaderboardService, APostAnsweredAfterItsBoardsDeleteDoesNotBringTheBoardBack) {
  TempDir dir;
  auto db = OrThrow(db::sqlite::Database::Open(dir.File("lb.db")));
  auto sqlite = OrThrow(leaderboard::SqliteLeaderboardStore::Open(*db));
  db->writer().Start();
  HeldPostAnswers store(*sqlite);
  leaderboard::LeaderboardService service(store);
  ASSERT_TRUE(service.Load().ok());
  ASSERT_TRUE(Wait<Result<leaderboard::BoardView>>([&](auto done) {
                service.CreateBoard(leaderboard::BoardInfo{.id = "gone", .settings = {}, .created_us = 0}, done);
              }).ok());
  std::promise<Result<leaderboard::Posted>> posted;
  service.PostScore("gone", "ann", 5, std::nullopt, [&](Result<leaderboard::Posted> r) { posted.set_value(r); });
  ASSERT_TRUE(Eventually(
      [&] {
        // The post is stored (held answer) once the writer has run it.
        return Wait<Status>([&](auto done) { service.DeleteBoard("gone", done); }).ok();
      },
      std::chrono::seconds(5)));
  ASSERT_EQ(store.Release(), 1u);
  auto r = posted.get_future().get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(service.GetBoard("gone").status().code(), ErrorCode::kNotFound);
  auto list = service.ListBoards(0, 10);
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->total, 1) << "only default";
}

// An instance that missed a change of a board's schedule (its message lost)
// must not post into a season computed with the old one: the script
// compares the schedule the season was computed with, answers "stale",
// and the instance reads the board again and posts with the new one.
// (Before, the post went to the old schedule's season.)
TEST(RedisBoards, APostComputedWithAMissedScheduleChangeIsRetriedWithTheNewOne) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis);
  auto store = OrThrow(leaderboard::RedisLeaderboardStore::Open(redis->url()));
  leaderboard::LeaderboardService service(*store, leaderboard::LeaderboardOptions{.test_hooks = true});
  ASSERT_TRUE(service.Load().ok());
  ASSERT_TRUE(Wait<Result<leaderboard::BoardView>>([&](auto done) {
                service.CreateBoard(leaderboard::BoardInfo{.id = "quiet", .settings = {}, .created_us = 0}, done);
              }).ok());
  auto view = service.GetBoard("quiet");
  ASSERT_TRUE(view.ok());
  // Another instance's PATCH, its message lost: seasons of one second from
  // an epoch one second ago, so the board is in season 2 or later now.
  leaderboard::BoardInfo changed = view->info;
  changed.settings.reset_every_s = 1;
  changed.epoch_season = 2;
  changed.epoch_us = NowMicros() - 1'000'000;
  changed.pre_epoch_started_us = view->info.created_us;
  const auto& s = changed.settings;
  std::string encoded = std::string(leaderboard::Name(s.order)) + " " + leaderboard::Name(s.op) + " none UTC " +
                        leaderboard::Name(s.ranking) + " none " + std::to_string(s.keep_seasons) + " " +
                        std::to_string(changed.created_us) + " 1 2 " + std::to_string(changed.epoch_us) + " " +
                        std::to_string(changed.pre_epoch_started_us);
  ASSERT_TRUE(store->client().CommandSync({"HSET", "hotrow:lb:boards", "quiet", encoded}).ok());
  auto posted =
      Wait<Result<leaderboard::Posted>>([&](auto done) { service.PostScore("quiet", "ann", 5, std::nullopt, done); });
  ASSERT_TRUE(posted.ok()) << posted.status().ToString();
  EXPECT_GE(posted->season, 2) << "the season of the schedule the board has";
  auto now = service.GetBoard("quiet");
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->info.settings.reset_every_s, 1) << "the instance read the board again";
}

}  // namespace
}  // namespace hotrow::testing
