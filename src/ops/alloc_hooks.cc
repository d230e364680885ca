// Counts every heap allocation of the process: the global operator new is
// replaced and malloc/calloc/realloc are interposed (forwarding to glibc's
// allocator), each counting into ops/alloc_counter. Linked only into the
// hotrow binary (non-sanitizer builds), bench/request_bench and the
// allocation tests. Cost: one relaxed atomic add on a per-thread cache line.
#include <execinfo.h>
#include <unistd.h>

#include <cstdlib>
#include <new>

#include "ops/alloc_counter.h"

namespace {
thread_local bool in_trace = false;
void Trace() {
  if (!hotrow::alloc::Tracing() || in_trace) return;
  in_trace = true;
  void* frames[24];
  int n = backtrace(frames, 24);
  static const char kLine[] = "---- allocation\n";
  ssize_t ignored = write(2, kLine, sizeof kLine - 1);
  (void)ignored;
  backtrace_symbols_fd(frames, n, 2);
  in_trace = false;
}
}  // namespace

extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t n, size_t size);
void* __libc_realloc(void* p, size_t size);
void* __libc_memalign(size_t alignment, size_t size);
void __libc_free(void* p);

void* malloc(size_t size) {
  hotrow::alloc::RecordAllocation();
  Trace();
  return __libc_malloc(size);
}
void* calloc(size_t n, size_t size) {
  hotrow::alloc::RecordAllocation();
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t size) {
  hotrow::alloc::RecordAllocation();
  return __libc_realloc(p, size);
}
}

namespace {
struct Mark {
  Mark() { hotrow::alloc::MarkCounting(); }
} mark;

void* Allocate(size_t size) {
  if (size == 0) size = 1;
  hotrow::alloc::RecordAllocation();
  Trace();
  if (void* p = __libc_malloc(size)) return p;
  throw std::bad_alloc();
}
void* AllocateAligned(size_t size, std::align_val_t align) {
  hotrow::alloc::RecordAllocation();
  if (void* p = __libc_memalign(static_cast<size_t>(align), size ? size : 1)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(size_t size) { return Allocate(size); }
void* operator new[](size_t size) { return Allocate(size); }
void* operator new(size_t size, const std::nothrow_t&) noexcept {
  hotrow::alloc::RecordAllocation();
  return __libc_malloc(size ? size : 1);
}
void* operator new[](size_t size, const std::nothrow_t&) noexcept {
  hotrow::alloc::RecordAllocation();
  return __libc_malloc(size ? size : 1);
}
void* operator new(size_t size, std::align_val_t align) { return AllocateAligned(size, align); }
void* operator new[](size_t size, std::align_val_t align) { return AllocateAligned(size, align); }
void operator delete(void* p) noexcept { __libc_free(p); }
void operator delete[](void* p) noexcept { __libc_free(p); }
void operator delete(void* p, size_t) noexcept { __libc_free(p); }
void operator delete[](void* p, size_t) noexcept { __libc_free(p); }
void operator delete(void* p, std::align_val_t) noexcept { __libc_free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { __libc_free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { __libc_free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { __libc_free(p); }
