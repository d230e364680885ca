// Pooling: reuse what each request would otherwise allocate.
//
// Every pool here is bounded: it keeps at most its capacity of free objects
// or bytes, and past that it falls back to plain allocation (still correct,
// just not free), so memory stays bounded whatever the load. The switch
// below exists to measure the difference (bench/request_bench, docs/
// benchmarks.md): HOTROW_POOLING=off at start-up disables every pool and
// arena and makes each request allocate as it would without them.
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

namespace hotrow::pooling {

// False when HOTROW_POOLING=off (read once).
bool Enabled();

// A bounded free list of T. Acquire() reuses a free object or makes one;
// Release() keeps it for reuse while fewer than `capacity` are free, else
// deletes it. Thread-safe: objects are acquired on event-loop threads and
// released on the writer thread.
template <typename T>
class ObjectPool {
 public:
  explicit ObjectPool(size_t capacity) : capacity_(capacity) { free_.reserve(capacity); }
  ~ObjectPool() {
    for (T* t : free_) delete t;
  }
  ObjectPool(const ObjectPool&) = delete;
  ObjectPool& operator=(const ObjectPool&) = delete;

  T* Acquire() {
    if (Enabled()) {
      std::lock_guard lock(mutex_);
      if (!free_.empty()) {
        T* t = free_.back();
        free_.pop_back();
        return t;
      }
    }
    return new T();
  }

  void Release(T* t) {
    if (Enabled()) {
      std::lock_guard lock(mutex_);
      if (free_.size() < capacity_) {
        free_.push_back(t);
        return;
      }
    }
    delete t;
  }

 private:
  const size_t capacity_;
  std::mutex mutex_;
  std::vector<T*> free_;
};

}  // namespace hotrow::pooling
