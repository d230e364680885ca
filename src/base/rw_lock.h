// A readers-writer lock that prefers writers.
//
// glibc's default rwlock (and so std::shared_mutex) prefers readers: under a
// steady stream of overlapping readers -- exactly what a hot GET endpoint
// produces -- a writer can wait indefinitely. Read models are written by the
// commit thread, which must not starve, so they use this lock. It satisfies
// SharedMutex, so std::shared_lock and std::unique_lock work with it.
#pragma once

#include <pthread.h>

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

  void lock() { pthread_rwlock_wrlock(&lock_); }
  void unlock() { pthread_rwlock_unlock(&lock_); }
  bool try_lock() { return pthread_rwlock_trywrlock(&lock_) == 0; }
  void lock_shared() { pthread_rwlock_rdlock(&lock_); }
  void unlock_shared() { pthread_rwlock_unlock(&lock_); }
  bool try_lock_shared() { return pthread_rwlock_tryrdlock(&lock_) == 0; }

 private:
  pthread_rwlock_t lock_;
};

}  // namespace hotrow
