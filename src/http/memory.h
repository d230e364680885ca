// Where a connection's per-request memory comes from (see ops/pooling.h):
// an arena for the parsed request, fixed slots for Asio's operations, and
// one standard allocator over either. Internal to src/http.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

#include "ops/pooling.h"

namespace hotrow::http {

// Arena: one 4 KiB block per connection for Beast's header fields and the
// request body, reset per request; what does not fit goes to the heap.
class Arena {
 public:
  static constexpr size_t kBytes = 4096;
  void* Allocate(size_t n, size_t align) {
    if (pooling::Enabled()) {
      if (!block_) block_.reset(new char[kBytes]);
      size_t at = (used_ + align - 1) & ~(align - 1);
      if (at + n <= kBytes) {
        used_ = at + n;
        return block_.get() + at;
      }
    }
    return ::operator new(n);
  }
  void Deallocate(void* p) {
    if (!Owns(p)) ::operator delete(p);
  }
  void Reset() { used_ = 0; }

 private:
  bool Owns(void* p) const {
    auto* c = static_cast<char*>(p);
    return block_ && c >= block_.get() && c < block_.get() + kBytes;
  }
  std::unique_ptr<char[]> block_;
  size_t used_ = 0;
};

// ---------------------------------------------------------------------------
// Handler memory: where a connection's asynchronous operations live.
//
// Asio allocates each pending operation (a socket read or write, a dispatch
// from another thread) through the handler's associated allocator. Boost
// 1.74's default keeps one recycled block per thread and purpose, so with
// several connections per thread operations often found it taken, and a
// response posted from the writer thread always allocated. Here every
// handler of a session carries an allocator over a few fixed slots inside
// the session; a request beyond them (or a larger operation) falls back to
// the heap. Slots are claimed with an atomic bitmap because the
// writer thread posts into them too. Safe lifetime: each handler holds the
// session (a shared_ptr), and Asio moves the handler out of an operation
// before it frees the operation's memory.
// ---------------------------------------------------------------------------

class HandlerMemory {
 public:
  static constexpr size_t kSlots = 4;
  static constexpr size_t kSlotBytes = 1024;

  void* Allocate(size_t n, size_t /*align: slots are max-aligned*/) {
    if (n <= kSlotBytes && pooling::Enabled()) {
      uint32_t used = used_.load(std::memory_order_relaxed);
      while (true) {
        uint32_t free_bits = ~used & ((1u << kSlots) - 1);
        if (!free_bits) break;
        uint32_t bit = free_bits & (~free_bits + 1);
        if (used_.compare_exchange_weak(used, used | bit, std::memory_order_acquire)) return slots_[__builtin_ctz(bit)];
      }
    }
    return ::operator new(n);
  }
  void Deallocate(void* p) {
    auto* c = static_cast<unsigned char*>(p);
    if (c >= &slots_[0][0] && c < &slots_[0][0] + sizeof slots_) {
      size_t i = static_cast<size_t>(c - &slots_[0][0]) / kSlotBytes;
      used_.fetch_and(~(1u << i), std::memory_order_release);
      return;
    }
    ::operator delete(p);
  }

 private:
  alignas(std::max_align_t) unsigned char slots_[kSlots][kSlotBytes];
  std::atomic<uint32_t> used_{0};
};

// A standard allocator over a Pool (Arena or HandlerMemory).
template <typename Pool, typename T>
struct PoolAllocator {
  using value_type = T;
  Pool* pool;
  explicit PoolAllocator(Pool* p) : pool(p) {}
  template <typename U>
  PoolAllocator(const PoolAllocator<Pool, U>& other) : pool(other.pool) {}  // NOLINT: allocator rebinding
  template <typename U>
  struct rebind {
    using other = PoolAllocator<Pool, U>;
  };
  T* allocate(size_t n) { return static_cast<T*>(pool->Allocate(n * sizeof(T), alignof(T))); }
  void deallocate(T* p, size_t) { pool->Deallocate(p); }
  template <typename U>
  bool operator==(const PoolAllocator<Pool, U>& o) const {
    return pool == o.pool;
  }
  template <typename U>
  bool operator!=(const PoolAllocator<Pool, U>& o) const {
    return pool != o.pool;
  }
};

// A handler with HandlerMemory as its associated allocator.
template <typename Handler>
struct AllocHandler {
  HandlerMemory* memory;
  Handler handler;
  using allocator_type = PoolAllocator<HandlerMemory, Handler>;
  allocator_type get_allocator() const noexcept { return allocator_type(memory); }
  template <typename... Args>
  void operator()(Args&&... args) {
    handler(std::forward<Args>(args)...);
  }
};

template <typename Handler>
AllocHandler<std::decay_t<Handler>> WithMemory(HandlerMemory& memory, Handler&& handler) {
  return {&memory, std::forward<Handler>(handler)};
}

}  // namespace hotrow::http
