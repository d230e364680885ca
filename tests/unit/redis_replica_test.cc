// Leaderboard reads from Redis replicas (db/redis_replicas.h): a real master
// and a real replica (REPLICAOF) on loopback. A replica gets reads only
// while it is caught up; this instance always sees its own writes; a
// replica that stops replicating, or dies, stops getting reads.
#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "contract/wait.h"
#include "db/redis_replicas.h"
#include "harness/or_throw.h"
#include "harness/redis_process.h"
#include "leaderboard/redis_store.h"
#include "leaderboard/service.h"

namespace hotrow::testing {
namespace {

using leaderboard::LeaderboardService;
using leaderboard::Page;
using leaderboard::Posted;
using leaderboard::ScoreMode;

Result<Posted> Post(LeaderboardService& s, const std::string& id, int64_t score) {
  return Wait<Result<Posted>>([&](auto done) { s.PostScore(id, score, ScoreMode::kReplace, done); });
}
Result<Page> Top(LeaderboardService& s) {
  return Wait<Result<Page>>([&](auto done) { s.Top(std::string(leaderboard::kDefaultBoard), 0, 10, done); });
}

bool Eventually(const std::function<bool()>& f, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return f();
}

uint64_t ReplicaReads(leaderboard::RedisLeaderboardStore& store) {
  uint64_t n = 0;
  for (const auto& r : store.replicas()->States()) n += r.reads;
  return n;
}

// The (one) replica serves reads: its lag is reported only while it does.
bool ReplicaUsable(leaderboard::RedisLeaderboardStore& store) {
  return store.replicas()->States().at(0).lag_ms.has_value();
}

// A master, a replica of it, and one instance (store + service) reading
// through the replica.
class RedisReplicas : public ::testing::Test {
 protected:
  void SetUp() override {
    master_ = RedisProcess::Start();
    replica_ = RedisProcess::Start();
    ASSERT_TRUE(master_ && replica_);
    auto m = OrThrow(db::redis::Client::Connect(master_->url()));
    // No 5 s wait before the first full sync.
    ASSERT_TRUE(m->CommandSync({"CONFIG", "SET", "repl-diskless-sync-delay", "0"}).ok());
    replica_client_ = OrThrow(db::redis::Client::Connect(replica_->url()));
    ASSERT_TRUE(replica_client_->CommandSync({"REPLICAOF", "127.0.0.1", std::to_string(master_->port())}).ok());
    ASSERT_TRUE(Eventually([&] {
      auto info = replica_client_->CommandSync({"INFO", "replication"});
      return info.ok() && info->str.find("master_link_status:up") != std::string::npos;
    })) << "the replica did not sync";
  }
  void Open(leaderboard::RedisReads reads) {
    store_ = OrThrow(leaderboard::RedisLeaderboardStore::Open(master_->url(), {}, std::move(reads)));
    service_ = std::make_unique<LeaderboardService>(*store_);
    ASSERT_TRUE(service_->Load().ok());
  }
  leaderboard::RedisReads WithReplica(int64_t cache_ms = leaderboard::kCacheAgeMaxMs) {
    return {.replicas = {.urls = {replica_->url()}, .max_lag_ms = 100}, .cache_ms = cache_ms};
  }
  void TearDown() override {
    service_.reset();
    store_.reset();
  }

  std::unique_ptr<RedisProcess> master_, replica_;
  std::unique_ptr<db::redis::Client> replica_client_;
  std::unique_ptr<leaderboard::RedisLeaderboardStore> store_;
  std::unique_ptr<LeaderboardService> service_;
};

TEST_F(RedisReplicas, ACaughtUpReplicaServesPagesAndTheInstanceSeesItsOwnWrites) {
  Open(WithReplica());
  ASSERT_TRUE(Eventually([&] { return ReplicaUsable(*store_); })) << "the replica's lag was never measured";
  // Every page read right after a 200 shows that post, though most pages
  // come from the replica (each post moves the board, so each read
  // refetches past the cache).
  for (int i = 1; i <= 300; ++i) {
    ASSERT_TRUE(Post(*service_, "p" + std::to_string(i), i).ok());
    // Now and then, time for the fence's heartbeat and poll: that read
    // may go to the replica; the others find the fence not yet known.
    if (i % 3 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(i % 2 ? 1 : 5));
    auto page = Top(*service_);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    ASSERT_FALSE(page->entries.empty());
    ASSERT_EQ(page->entries[0].client_id, "p" + std::to_string(i)) << "read " << i << " missed its own write";
    ASSERT_EQ(page->total, i);
  }
  EXPECT_GT(ReplicaReads(*store_), 0u) << "no read ever went to the caught-up replica";
}

// Another instance writes to the master; this one reads through a replica
// that then stops replicating. Within the lag bound it stops getting reads
// and this instance's pages show the other's write.
TEST_F(RedisReplicas, AReplicaThatStopsReplicatingGetsNoReadsPastTheLagBound) {
  Open(WithReplica());
  auto other_store = OrThrow(leaderboard::RedisLeaderboardStore::Open(master_->url()));
  LeaderboardService other(*other_store);
  ASSERT_TRUE(other.Load().ok());
  ASSERT_TRUE(Post(other, "first", 10).ok());
  ASSERT_TRUE(Eventually([&] {
    auto page = Top(*service_);
    return page.ok() && page->total == 1 && ReplicaReads(*store_) > 0;
  })) << "the replica never served the first write";

  ASSERT_TRUE(replica_client_->CommandSync({"REPLICAOF", "NO", "ONE"}).ok());
  ASSERT_TRUE(Post(other, "second", 20).ok());
  auto started = std::chrono::steady_clock::now();
  // A page can show the second write before the replica is judged stale for
  // good: a read the replica fails is read again on the master, and the
  // replica is usable again at its next poll while its lag is within the
  // bound; or the poll that finds its last heartbeat lands just after a read
  // was routed by the one before. So both are waited for together; the
  // page cache (as old as the lag bound) keeps the next pages off it.
  ASSERT_TRUE(Eventually(
      [&] {
        auto page = Top(*service_);
        return page.ok() && page->total == 2 && page->entries[0].client_id == "second" && !ReplicaUsable(*store_);
      },
      std::chrono::seconds(3)))
      << "pages kept coming from the replica that stopped replicating, or it still counts as usable";
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  // Bound: the lag limit, the poll's age, and the cache's age.
  EXPECT_LT(took.count(), 1500) << "the stale replica was left for " << took.count() << " ms";
  // Past its bound it gets no more reads, and stays past it.
  const auto reads = ReplicaReads(*store_);
  for (int i = 0; i < 5; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(60));  // past a poll
    auto page = Top(*service_);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    EXPECT_EQ(page->entries[0].client_id, "second");
  }
  EXPECT_EQ(ReplicaReads(*store_), reads) << "the stale replica got reads past its lag bound";
  EXPECT_FALSE(ReplicaUsable(*store_)) << "the stale replica counts as usable again";
  other_store->Stop();
}

// A read a replica fails (it died, or stalls past the replicas' timeout)
// is sent again to the master: the client never sees it.
TEST_F(RedisReplicas, ADeadOrStalledReplicaCostsNoFailedRead) {
  Open(WithReplica(/*cache_ms=*/0));
  ASSERT_TRUE(Post(*service_, "a", 1).ok());
  for (bool kill : {false, true}) {
    ASSERT_TRUE(Eventually([&] { return Top(*service_).ok() && ReplicaUsable(*store_); }));
    uint64_t before = ReplicaReads(*store_);
    ASSERT_TRUE(Top(*service_).ok());
    ASSERT_GT(ReplicaReads(*store_), before) << "the replica was not read before the fault";
    if (kill)
      replica_->Kill();
    else
      replica_->Pause();
    // Reads at once, while the replica still counts as caught up.
    for (int i = 0; i < 20; ++i) {
      auto page = Top(*service_);
      ASSERT_TRUE(page.ok()) << (kill ? "killed" : "stalled") << ", read " << i << ": " << page.status().ToString();
      ASSERT_EQ(page->total, 1);
    }
    EXPECT_FALSE(ReplicaUsable(*store_));
    if (!kill) replica_->Resume();
  }
}

// A replica that follows another master is never read, even when that
// master is a copy of ours (a restored backup, a promoted replica) whose
// heartbeat carried our epoch and is kept going by another instance; nor
// while the replica is being moved from one master to the other and back
// under a stream of reads (each read checks the heartbeat before and after
// it, not only the last poll).
TEST_F(RedisReplicas, AReplicaOfAnotherMasterIsNeverRead) {
  Open(WithReplica(/*cache_ms=*/0));
  ASSERT_TRUE(Post(*service_, "here", 5).ok());
  ASSERT_TRUE(Eventually([&] { return ReplicaUsable(*store_); }));
  // The copy: our heartbeat as it is now, and a player of its own.
  auto other = RedisProcess::Start();
  ASSERT_TRUE(other);
  auto o = OrThrow(db::redis::Client::Connect(other->url()));
  ASSERT_TRUE(o->CommandSync({"CONFIG", "SET", "repl-diskless-sync-delay", "0"}).ok());
  auto hb = OrThrow(store_->client().CommandSync({"GET", db::redis::kHeartbeatKey}));
  ASSERT_TRUE(o->CommandSync({"SET", db::redis::kHeartbeatKey, hb.str}).ok());
  auto copy_store = OrThrow(leaderboard::RedisLeaderboardStore::Open(
      other->url(), {}, {.replicas = {.urls = {"redis://127.0.0.1:" + std::to_string(FreePort())}}}));
  LeaderboardService copy(*copy_store);
  ASSERT_TRUE(copy.Load().ok());
  ASSERT_TRUE(Post(copy, "copy-only", 9).ok());

  std::atomic<bool> stop{false};
  std::atomic<int> reads{0}, wrong{0};
  std::string seen;
  std::thread reader([&] {
    while (!stop) {
      auto page = Top(*service_);
      ++reads;
      if (!page.ok() || page->total != 1 || page->entries[0].client_id != "here") {
        if (wrong++ == 0) seen = page.ok() ? std::to_string(page->total) + " players" : page.status().ToString();
      }
    }
  });
  for (int round = 0; round < 2; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ASSERT_TRUE(replica_client_->CommandSync({"REPLICAOF", "127.0.0.1", std::to_string(other->port())}).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    ASSERT_TRUE(replica_client_->CommandSync({"REPLICAOF", "127.0.0.1", std::to_string(master_->port())}).ok());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  stop = true;
  reader.join();
  EXPECT_EQ(wrong.load(), 0) << "of " << reads.load() << " reads; the first wrong one: " << seen;
  copy_store->Stop();
}

// Benchmark only: the reference's 4/7 split, counted exactly.
TEST_F(RedisReplicas, TheSplitSendsItsShareToTheReplicaWhateverItsLag) {
  auto reads = WithReplica(/*cache_ms=*/0);
  reads.replicas.split = 4;
  reads.replicas.split_of = 7;
  Open(std::move(reads));
  ASSERT_TRUE(Post(*service_, "a", 1).ok());
  ASSERT_TRUE(Eventually([&] { return Top(*service_).ok() && ReplicaReads(*store_) > 0; }));
  uint64_t before = ReplicaReads(*store_);
  for (int i = 0; i < 70; ++i) ASSERT_TRUE(Top(*service_).ok());
  EXPECT_EQ(ReplicaReads(*store_) - before, 40u);
}

TEST(RedisReplicaSet, ABadUrlIsRefusedAndAnAbsentReplicaGetsNoReads) {
  auto master = RedisProcess::Start();
  ASSERT_TRUE(master);
  auto client = OrThrow(db::redis::Client::Connect(master->url()));
  auto bad = db::redis::ReplicaSet::Start(*client, {.urls = {"http://127.0.0.1:1"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--redis-replica"), std::string::npos) << bad.status().message();

  auto set =
      OrThrow(db::redis::ReplicaSet::Start(*client, {.urls = {"redis://127.0.0.1:" + std::to_string(FreePort())}}));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (int i = 0; i < 10; ++i) EXPECT_EQ(&set->ForRead(), client.get());
  set->Stop();
  client->Stop();
}

}  // namespace
}  // namespace hotrow::testing
