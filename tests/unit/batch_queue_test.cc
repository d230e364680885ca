// The shared machinery of base/: the bounded batch queue in front of every
// store thread, the periodic task, and Await.
#include "base/batch_queue.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/await.h"
#include "base/periodic_task.h"

namespace hotrow {
namespace {

TEST(BatchQueue, AFullQueueRefusesWithOverloadedAndLeavesTheItemWithTheCaller) {
  BatchQueue<std::unique_ptr<int>> q(2, "full");
  auto a = std::make_unique<int>(1), b = std::make_unique<int>(2), c = std::make_unique<int>(3);
  ASSERT_TRUE(q.Push(a).ok());
  ASSERT_TRUE(q.Push(b).ok());
  EXPECT_EQ(a, nullptr) << "a queued item is moved in";
  Status s = q.Push(c);
  EXPECT_EQ(s.code(), ErrorCode::kOverloaded);
  EXPECT_EQ(s.message(), "full");
  ASSERT_NE(c, nullptr) << "a refused item stays with the caller, to be failed";
  EXPECT_EQ(*c, 3);
}

TEST(BatchQueue, PopBatchTakesOldestFirstUpToTheBatchBound) {
  BatchQueue<int> q(10, "full");
  for (int i = 1; i <= 5; ++i) {
    int v = i;
    ASSERT_TRUE(q.Push(v).ok());
  }
  std::vector<int> out;
  ASSERT_TRUE(q.PopBatch(out, 3));
  EXPECT_EQ(out, (std::vector<int>{1, 2, 3}));
  out.clear();
  ASSERT_TRUE(q.PopBatch(out, 3));
  EXPECT_EQ(out, (std::vector<int>{4, 5}));
  // The ring wraps around.
  for (int i = 6; i <= 15; ++i) {
    int v = i;
    ASSERT_TRUE(q.Push(v).ok());
  }
  out.clear();
  q.TakeAll(out);
  EXPECT_EQ(out.size(), 10u);
  EXPECT_EQ(out.front(), 6);
  EXPECT_EQ(out.back(), 15);
  EXPECT_EQ(q.size(), 0u);
}

TEST(BatchQueue, TheRingGrowsWithTheLoadUpToItsBoundAndKeepsTheOrder) {
  BatchQueue<int> q(1000, "full");
  std::vector<int> out;
  for (int i = 0; i < 10; ++i) {  // the ring wraps before it grows
    int v = -1;
    ASSERT_TRUE(q.Push(v).ok());
  }
  ASSERT_TRUE(q.PopBatch(out, 5));
  out.clear();
  for (int i = 0; i < 995; ++i) {
    int v = i;
    ASSERT_TRUE(q.Push(v).ok()) << i;
  }
  int extra = 1;
  EXPECT_EQ(q.Push(extra).code(), ErrorCode::kOverloaded) << "1000 waiting: the bound";
  q.TakeAll(out);
  ASSERT_EQ(out.size(), 1000u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(out[i], -1);
  for (size_t i = 5; i < out.size(); ++i) ASSERT_EQ(out[i], static_cast<int>(i - 5));
}

TEST(BatchQueue, PauseTakesEverythingAndRefusesUntilResume) {
  BatchQueue<int> q(10, "full");
  int a = 1;
  ASSERT_TRUE(q.Push(a).ok());
  std::vector<int> out;
  q.Pause(Status::Unavailable("reconnecting"), out);
  EXPECT_EQ(out, (std::vector<int>{1}));
  int b = 2;
  Status s = q.Push(b);
  EXPECT_EQ(s.code(), ErrorCode::kUnavailable);
  EXPECT_EQ(s.message(), "reconnecting");
  q.Resume();
  EXPECT_TRUE(q.Push(b).ok());
  EXPECT_EQ(q.size(), 1u);
}

TEST(BatchQueue, StopRefusesNewItemsButDrainsTheQueuedOnes) {
  BatchQueue<int> q(10, "full");
  int v = 7;
  ASSERT_TRUE(q.Push(v).ok());
  q.Stop();
  int w = 8;
  EXPECT_EQ(q.Push(w).code(), ErrorCode::kUnavailable);
  std::vector<int> out;
  EXPECT_TRUE(q.PopBatch(out, 10)) << "what was queued before Stop is still handed out";
  EXPECT_EQ(out, (std::vector<int>{7}));
  EXPECT_FALSE(q.PopBatch(out, 10));
}

TEST(BatchQueue, StopWakesAWaitingConsumer) {
  BatchQueue<int> q(4, "full");
  std::atomic<bool> returned{false};
  std::thread consumer([&] {
    std::vector<int> out;
    EXPECT_FALSE(q.PopBatch(out, 4));
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(returned);
  q.Stop();
  consumer.join();
  EXPECT_TRUE(returned);
}

TEST(BatchQueue, EveryAcceptedItemOfManyProducersReachesTheConsumersOnce) {
  BatchQueue<int64_t> q(64, "full");
  const int producers = 4, per_producer = 5000;
  std::atomic<int64_t> accepted_sum{0}, consumed_sum{0}, consumed{0}, accepted{0};
  std::vector<std::thread> consumers;
  for (int c = 0; c < 2; ++c)
    consumers.emplace_back([&] {
      std::vector<int64_t> out;
      while (q.PopBatch(out, 16)) {
        for (int64_t v : out) consumed_sum += v, ++consumed;
        out.clear();
      }
    });
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p)
    threads.emplace_back([&, p] {
      for (int i = 0; i < per_producer; ++i) {
        int64_t v = p * per_producer + i + 1;
        if (q.Push(v).ok()) accepted_sum += p * per_producer + i + 1, ++accepted;
      }
    });
  for (auto& t : threads) t.join();
  q.Stop();
  for (auto& t : consumers) t.join();
  EXPECT_GT(accepted.load(), 0);
  EXPECT_EQ(consumed.load(), accepted.load());
  EXPECT_EQ(consumed_sum.load(), accepted_sum.load());
}

TEST(PeriodicTask, RunsFirstThenEveryPeriodAndStopsAtOnce) {
  std::atomic<int> runs{0};
  auto start = std::chrono::steady_clock::now();
  {
    PeriodicTask task(std::chrono::milliseconds(10), std::chrono::milliseconds(10), [&] { ++runs; });
    while (runs < 3 && std::chrono::steady_clock::now() - start < std::chrono::seconds(5))
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_GE(runs.load(), 3);
  int after = runs;
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(runs.load(), after) << "nothing runs after the task is destroyed";

  auto long_start = std::chrono::steady_clock::now();
  PeriodicTask idle(std::chrono::hours(1), std::chrono::hours(1), [] {});
  idle.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - long_start, std::chrono::seconds(1))
      << "Stop does not wait out the period";
}

TEST(Await, ReturnsWhatTheCallbackIsCalledWithFromAnotherThread) {
  std::thread worker;
  int got = Await<int>([&](auto done) { worker = std::thread([done] { done(42); }); });
  worker.join();
  EXPECT_EQ(got, 42);
}

}  // namespace
}  // namespace hotrow
