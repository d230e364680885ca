// LD_PRELOAD shim for counting a program's heap allocations from outside:
// every malloc/calloc/realloc (operator new calls malloc) increments a
// counter; SIGUSR1 writes it to $COUNT_MALLOC_FILE. Used by bench/alloc.sh
// to count allocations per request of a hotrow built before the counting
// hooks existed (the "before" column).
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);

static atomic_ulong count;

void* malloc(size_t n) {
  atomic_fetch_add_explicit(&count, 1, memory_order_relaxed);
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t s) {
  atomic_fetch_add_explicit(&count, 1, memory_order_relaxed);
  return __libc_calloc(n, s);
}
void* realloc(void* p, size_t n) {
  atomic_fetch_add_explicit(&count, 1, memory_order_relaxed);
  return __libc_realloc(p, n);
}

static void dump(int sig) {
  (void)sig;
  const char* path = getenv("COUNT_MALLOC_FILE");
  if (!path) return;
  char buf[32];
  int n = snprintf(buf, sizeof buf, "%lu\n", atomic_load(&count));
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    ssize_t w = write(fd, buf, (size_t)n);
    (void)w;
    close(fd);
  }
}

__attribute__((constructor)) static void init(void) { signal(SIGUSR1, dump); }
