// The access log: one line per response (--access-log PATH|-|off,
// --log-format text|json), written off the request path.
//
// A request copies its line into a bounded ring (a lock-free MPMC queue,
// Vyukov's: one compare-and-swap and a few copies) and goes on; a thread
// of its own formats and writes the lines. When the ring is full the line is
// dropped and counted (hotrow_access_log_dropped_total): the log never
// blocks a request. Only the fields below are written: no header values, so
// no Authorization or ClientId; the target is the path and query as sent.
//
//   text: 2026-12-01T20:30:00.123456Z 9f86d081884c7d65 127.0.0.1:40112 GET /datePlan/1 200 143us in=78 out=312
//   json: {"time":"2026-12-01T20:30:00.123456Z","requestId":"9f86d081884c7d65","client":"127.0.0.1:40112",
//          "method":"GET","target":"/datePlan/1","status":200,"durationUs":143,"bytesIn":78,"bytesOut":312}
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "base/status.h"
#include "ops/metrics.h"

namespace hotrow::http {

class AccessLog {
 public:
  enum class Format { kText, kJson };
  struct Line {
    std::string_view request_id, method, target, peer;
    int status = 0;
    uint64_t duration_us = 0, bytes_in = 0, bytes_out = 0;
  };

  // "-" is stdout; anything else a file, appended to.
  static Result<std::unique_ptr<AccessLog>> Open(const std::string& where, Format format, size_t capacity = 8192);
  ~AccessLog();  // writes what the ring holds, then closes

  // Stops taking lines and writes what the ring holds, waiting at most
  // `bound`; false when the writer is stuck (a pipe nobody reads): then the
  // caller must not destroy the log (its thread still uses it) and leaks it
  // as the process ends.
  bool Close(std::chrono::milliseconds bound);

  // The log requests write to (null: none), set by hotrow serve.
  static AccessLog* Active() { return active_.load(std::memory_order_acquire); }
  static void SetActive(AccessLog* log) { active_.store(log, std::memory_order_release); }

  // Copies the line into the ring; drops it (counted) when the ring is full.
  void Push(const Line& line);

  uint64_t dropped() const { return dropped_->value(); }

  // The target is cut at this many bytes (marked with "..."); the other
  // fields at their own bounds.
  static constexpr size_t kTargetMax = 1024;

 private:
  struct Slot;
  AccessLog(std::FILE* out, bool owned, Format format, size_t capacity);
  void Run();
  bool Pop(std::string& out);
  void FormatLine(const Slot& slot, std::string& out) const;

  static std::atomic<AccessLog*> active_;

  std::FILE* out_;
  bool owned_;
  Format format_;
  size_t mask_;
  std::unique_ptr<Slot[]> slots_;
  alignas(64) std::atomic<size_t> head_{0};  // next slot to push
  alignas(64) std::atomic<size_t> tail_{0};  // next slot to pop
  std::atomic<bool> stop_{false};
  std::atomic<bool> finished_{false};  // the thread returned
  metrics::Counter* dropped_;
  metrics::Counter* written_;
  std::thread thread_;
};

}  // namespace hotrow::http
