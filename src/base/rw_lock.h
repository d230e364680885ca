// A readers-writer lock that prefers writers.
//
// glibc's default rwlock (and so std::shared_mutex) prefers readers: under a
// steady stream of overlapping readers -- exactly what a hot GET endpoint
// produces -- a writer can wait indefinitely. Read models are written by the
// commit thread, which must not starve, so they use this lock. It satisfies
// SharedMutex, so std::shared_lock and std::unique_lock work with it.
//
// It also knows which thread holds it exclusively, so that code written to
// run under the exclusive lock (the *Locked helpers) can assert that it does
// (kept in Release builds); the cost is one relaxed store per lock and
// unlock on the write side only.
#pragma once

#include <pthread.h>

#include <atomic>
#include <thread>

namespace hotrow {

class RwLock {
 public:
  RwLock() {
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&lock_, &attr);
    pthread_rwlockattr_destroy(&attr);
  }
  ~RwLock() { pthread_rwlock_destroy(&lock_); }
  RwLock(const RwLock&) = delete;
  RwLock& operator=(const RwLock&) = delete;

  void lock() {
    pthread_rwlock_wrlock(&lock_);
    writer_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  }
  void unlock() {
    writer_.store(std::thread::id(), std::memory_order_relaxed);
    pthread_rwlock_unlock(&lock_);
  }
  bool try_lock() {
    if (pthread_rwlock_trywrlock(&lock_) != 0) return false;
    writer_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    return true;
  }
  void lock_shared() { pthread_rwlock_rdlock(&lock_); }
  void unlock_shared() { pthread_rwlock_unlock(&lock_); }
  bool try_lock_shared() { return pthread_rwlock_tryrdlock(&lock_) == 0; }

  // True when the calling thread holds the lock exclusively. Only that
  // thread can make it true, so the relaxed load cannot be fooled.
  bool HeldExclusively() const { return writer_.load(std::memory_order_relaxed) == std::this_thread::get_id(); }

 private:
  pthread_rwlock_t lock_;
  std::atomic<std::thread::id> writer_{};
};

}  // namespace hotrow
