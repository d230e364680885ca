// Allocation counts, for the benchmarks and the allocation tests.
//
// The counting itself lives in src/ops/alloc_hooks.cc, which replaces the
// global operator new and interposes malloc/calloc/realloc; it is linked
// into the hotrow binary, bench/request_bench and the allocation tests (not
// into sanitizer builds, whose runtime owns malloc). Without it every count
// stays 0 and Counting() is false. SQLite's own allocations go through
// malloc too; db/sqlite.cc counts them separately, so that hotrow's own
// code can be told apart: Own() = Total() - Sqlite().
#pragma once

#include <atomic>
#include <cstdint>

namespace hotrow::alloc {

// True when the hooks are linked in.
bool Counting();

// Allocations so far, all threads: operator new plus malloc/calloc/realloc.
uint64_t Total();
// Of which SQLite made (through its memory methods).
uint64_t Sqlite();
// Total() - Sqlite().
inline uint64_t Own() { return Total() - Sqlite(); }

// While set, each allocation prints its stack to stderr (finding them).
void SetTracing(bool on);
bool Tracing();

// For the hooks and db/sqlite.cc.
void RecordAllocation();
void RecordSqliteAllocation();
void MarkCounting();

}  // namespace hotrow::alloc
