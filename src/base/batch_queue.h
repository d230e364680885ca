// BatchQueue: the bounded queue in front of every store thread -- the SQLite
// group-commit writer, the PostgreSQL pool's connections, the Redis client,
// the PostgreSQL like loop. Many threads push; consumer threads take what
// is waiting, up to a batch at a time.
//
//   Push      queues one item, or refuses it without touching it: overloaded
//             when `items_max` are waiting (the caller answers 503 with
//             Retry-After), unavailable after Stop (shutting down). The
//             caller fails a refused item itself, outside the lock.
//   PopBatch  waits until something is queued or the queue stopped, then
//             moves up to `batch_max` items, oldest first, into `out`. False
//             only when the queue stopped and is empty: what was queued
//             before Stop is still handed out (drained), never dropped.
//   TakeAll   moves everything queued into `out` now.
//   Pause     refuses later pushes with `reason` and moves everything queued
//             into `out`, in one step (a consumer that lost its server fails
//             them all, and nothing can slip in behind it); Resume ends it.
//
// The ring of slots starts small and doubles when full, up to items_max:
// memory follows the load actually seen (a slot of the pool's queue is
// about 0.5 KiB, and items_max follows --max-connections), and once warm,
// queuing allocates nothing. Thread-safe.
#pragma once

#include <algorithm>
#include <cassert>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"

namespace hotrow {

template <typename T>
class BatchQueue {
 public:
  BatchQueue(size_t items_max, std::string overloaded_message)
      : items_max_(items_max), ring_(std::min(items_max, kInitialSlots)), overloaded_(std::move(overloaded_message)) {
    assert(items_max > 0);
  }
  BatchQueue(const BatchQueue&) = delete;
  BatchQueue& operator=(const BatchQueue&) = delete;

  // Moves from `item` only when it returns OK.
  [[nodiscard]] Status Push(T& item) {
    {
      std::unique_lock lock(mutex_);
      if (stopped_) return Status::Unavailable("the server is shutting down");
      if (paused_) return pause_reason_;
      if (size_ == ring_.size()) {
        if (ring_.size() == items_max_) return Status::Overloaded(overloaded_);
        Grow(lock);
      }
      ring_[(head_ + size_++) % ring_.size()] = std::move(item);
    }
    wake_.notify_one();
    return Status::Ok();
  }

  bool PopBatch(std::vector<T>& out, size_t batch_max) {
    assert(batch_max > 0);
    std::unique_lock lock(mutex_);
    wake_.wait(lock, [&] { return size_ > 0 || stopped_; });
    if (size_ == 0) return false;  // stopped, and drained
    MoveOut(lock, out, batch_max);
    return true;
  }

  void TakeAll(std::vector<T>& out) {
    std::unique_lock lock(mutex_);
    MoveOut(lock, out, size_);
  }

  void Pause(Status reason, std::vector<T>& out) {
    std::unique_lock lock(mutex_);
    paused_ = true;
    pause_reason_ = std::move(reason);
    MoveOut(lock, out, size_);
  }
  void Resume() {
    std::lock_guard lock(mutex_);
    paused_ = false;
  }

  // Later pushes are refused; consumers drain what is queued, then stop.
  // Idempotent.
  void Stop() {
    {
      std::lock_guard lock(mutex_);
      stopped_ = true;
    }
    wake_.notify_all();
  }

  bool stopped() const {
    std::lock_guard lock(mutex_);
    return stopped_;
  }
  size_t size() const {
    std::lock_guard lock(mutex_);
    return size_;
  }

 private:
  static constexpr size_t kInitialSlots = 64;

  // The helpers below run under mutex_; the caller proves it with its lock.
  void AssertHeld(const std::unique_lock<std::mutex>& held) const {
    assert(held.mutex() == &mutex_ && held.owns_lock() && "BatchQueue: mutex_ not held");
    (void)held;  // NDEBUG builds
  }

  void Grow(const std::unique_lock<std::mutex>& held) {  // the ring is full
    AssertHeld(held);
    std::vector<T> bigger(std::min(ring_.size() * 2, items_max_));
    for (size_t i = 0; i < size_; ++i) bigger[i] = std::move(ring_[(head_ + i) % ring_.size()]);
    ring_.swap(bigger);
    head_ = 0;
  }

  void MoveOut(const std::unique_lock<std::mutex>& held, std::vector<T>& out, size_t n) {
    AssertHeld(held);
    n = std::min(n, size_);
    for (size_t i = 0; i < n; ++i) {
      out.push_back(std::move(ring_[head_]));
      ring_[head_] = T();
      head_ = (head_ + 1) % ring_.size();
    }
    size_ -= n;
  }

  const size_t items_max_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<T> ring_;         // guarded by mutex_
  size_t head_ = 0, size_ = 0;  // guarded by mutex_
  bool stopped_ = false;        // guarded by mutex_
  bool paused_ = false;         // guarded by mutex_
  Status pause_reason_;         // guarded by mutex_
  const std::string overloaded_;
};

}  // namespace hotrow
