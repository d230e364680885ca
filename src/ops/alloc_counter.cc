#include "ops/alloc_counter.h"

#include <cstddef>

namespace hotrow::alloc {

namespace {

// One padded slot per thread (hashed), so counting from several threads
// does not bounce one cache line between cores.
constexpr size_t kSlots = 64;
struct alignas(64) Slot {
  std::atomic<uint64_t> n{0};
};
Slot total_slots[kSlots];
std::atomic<uint64_t> sqlite_count{0};
std::atomic<bool> counting{false};
std::atomic<size_t> next_slot{0};

size_t MySlot() {
  thread_local size_t slot = next_slot.fetch_add(1, std::memory_order_relaxed) % kSlots;
  return slot;
}

}  // namespace

std::atomic<bool> tracing{false};
void SetTracing(bool on) { tracing.store(on); }
bool Tracing() { return tracing.load(std::memory_order_relaxed); }

bool Counting() { return counting.load(std::memory_order_relaxed); }
void MarkCounting() { counting.store(true, std::memory_order_relaxed); }

void RecordAllocation() { total_slots[MySlot()].n.fetch_add(1, std::memory_order_relaxed); }
void RecordSqliteAllocation() { sqlite_count.fetch_add(1, std::memory_order_relaxed); }

uint64_t Total() {
  uint64_t sum = 0;
  for (const auto& s : total_slots) sum += s.n.load(std::memory_order_relaxed);
  return sum;
}

uint64_t Sqlite() { return sqlite_count.load(std::memory_order_relaxed); }

}  // namespace hotrow::alloc
