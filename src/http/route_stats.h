// Per-route request counts and latencies, the HTTP part of GET /metrics:
//   hotrow_http_requests_total{route="/datePlan/{id}/like",method="PUT",status="200"}
//   hotrow_http_request_duration_seconds{route="/datePlan/{id}/like"} (histogram)
// The router resolves a route's RouteStats when the route is added; the
// codec records every response through it (requests that matched no route,
// or never became a request, under route="none"). Recording is two relaxed
// atomic adds and a histogram observation: no lock, no allocation.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "http/message.h"
#include "ops/metrics.h"

namespace hotrow::http {

struct RouteStats {
  // The statuses hotrow answers with get a counter each; any other counts
  // under status="other".
  static constexpr std::array<int, 26> kStatuses = {100, 200, 201, 204, 206, 301, 302, 304, 400, 401, 403, 404, 405,
                                                    406, 408, 409, 411, 412, 413, 414, 415, 422, 429, 431, 500, 501};
  static constexpr size_t kExtraStatuses = 4;  // 502, 503, 504, then other 5xx
  static constexpr size_t kSlots = kStatuses.size() + kExtraStatuses;
  static constexpr size_t kMethods = static_cast<size_t>(Method::kOther) + 1;

  explicit RouteStats(std::string route_pattern);

  void Record(Method method, int status, uint64_t duration_ns) {
    counts[static_cast<size_t>(method) * kSlots + SlotOf(status)].fetch_add(1, std::memory_order_relaxed);
    latency.Observe(duration_ns);
  }
  static size_t SlotOf(int status);
  static std::string_view StatusLabel(size_t slot, std::string& scratch);

  std::string route;
  std::array<std::atomic<uint64_t>, kMethods * kSlots> counts{};
  metrics::Histogram latency;
};

// The stats of a route pattern, the same object for every router that has
// it; never freed.
RouteStats& RouteStatsFor(std::string_view pattern);
// Responses to requests that matched no route (404, 501) or never became a
// request (400 malformed, 431).
RouteStats& UnmatchedRoute();

}  // namespace hotrow::http
