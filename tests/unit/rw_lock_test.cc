#include "base/rw_lock.h"

#include <mutex>
#include <shared_mutex>
#include <thread>

#include <gtest/gtest.h>

namespace hotrow {
namespace {

// The *Locked helpers assert HeldExclusively(): it must be true only on the
// thread holding the write side, never for a reader or another thread.
TEST(RwLockTest, KnowsWhichThreadHoldsItExclusively) {
  RwLock lock;
  EXPECT_FALSE(lock.HeldExclusively());
  {
    std::unique_lock held(lock);
    EXPECT_TRUE(lock.HeldExclusively());
    bool elsewhere = true;
    std::thread([&] { elsewhere = lock.HeldExclusively(); }).join();
    EXPECT_FALSE(elsewhere);
  }
  EXPECT_FALSE(lock.HeldExclusively());
  {
    std::shared_lock reading(lock);
    EXPECT_FALSE(lock.HeldExclusively());
  }
  ASSERT_TRUE(lock.try_lock());
  EXPECT_TRUE(lock.HeldExclusively());
  lock.unlock();
  EXPECT_FALSE(lock.HeldExclusively());
}

}  // namespace
}  // namespace hotrow
