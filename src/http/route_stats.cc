#include "http/route_stats.h"

#include <deque>
#include <mutex>

namespace hotrow::http {

namespace {

struct AllRoutes {
  std::mutex mutex;
  std::deque<RouteStats> routes;
  metrics::Registration collector;
};

void Write(AllRoutes& all, std::string& out) {
  std::lock_guard lock(all.mutex);
  out.append(
      "# HELP hotrow_http_requests_total HTTP requests answered, by route template, method and status.\n"
      "# TYPE hotrow_http_requests_total counter\n");
  std::string scratch;
  for (const auto& r : all.routes) {
    for (size_t m = 0; m < RouteStats::kMethods; ++m) {
      for (size_t slot = 0; slot < RouteStats::kSlots; ++slot) {
        uint64_t n = r.counts[m * RouteStats::kSlots + slot].load(std::memory_order_relaxed);
        if (n == 0) continue;
        std::string_view method =
            static_cast<Method>(m) == Method::kOther ? "other" : MethodName(static_cast<Method>(m));
        metrics::Labels labels = {{"route", r.route},
                                  {"method", std::string(method)},
                                  {"status", std::string(RouteStats::StatusLabel(slot, scratch))}};
        out.append("hotrow_http_requests_total");
        metrics::AppendLabels(out, labels);
        out.push_back(' ');
        out.append(std::to_string(n));
        out.push_back('\n');
      }
    }
  }
  out.append(
      "# HELP hotrow_http_request_duration_seconds Time from a request's complete header to its response, by route "
      "template.\n"
      "# TYPE hotrow_http_request_duration_seconds histogram\n");
  for (const auto& r : all.routes)
    metrics::AppendHistogram(out, "hotrow_http_request_duration_seconds", {{"route", r.route}}, r.latency);
}

AllRoutes& Routes() {
  static AllRoutes* all = [] {
    auto* a = new AllRoutes();  // never freed: requests may record until the process ends
    a->collector = metrics::Registry::Default().AddCollector([a](std::string& out) { Write(*a, out); });
    return a;
  }();
  return *all;
}

// Status code -> slot, built once.
struct SlotTable {
  std::array<uint8_t, 600> slot{};
  SlotTable() {
    for (size_t s = 0; s < slot.size(); ++s) {
      size_t v = RouteStats::kSlots - 1;  // other 5xx, and anything odd
      if (s == 502) v = RouteStats::kStatuses.size();
      if (s == 503) v = RouteStats::kStatuses.size() + 1;
      if (s == 504) v = RouteStats::kStatuses.size() + 2;
      for (size_t i = 0; i < RouteStats::kStatuses.size(); ++i)
        if (RouteStats::kStatuses[i] == static_cast<int>(s)) v = i;
      slot[s] = static_cast<uint8_t>(v);
    }
  }
};

const SlotTable kSlotTable;

}  // namespace

RouteStats::RouteStats(std::string route_pattern)
    : route(std::move(route_pattern)), latency(metrics::LatencyBuckets(), 1e9) {}

size_t RouteStats::SlotOf(int status) {
  if (status < 0 || static_cast<size_t>(status) >= kSlotTable.slot.size()) return kSlots - 1;
  return kSlotTable.slot[static_cast<size_t>(status)];
}

std::string_view RouteStats::StatusLabel(size_t slot, std::string& scratch) {
  if (slot < kStatuses.size())
    scratch = std::to_string(kStatuses[slot]);
  else if (slot == kStatuses.size())
    scratch = "502";
  else if (slot == kStatuses.size() + 1)
    scratch = "503";
  else if (slot == kStatuses.size() + 2)
    scratch = "504";
  else
    scratch = "other";
  return scratch;
}

RouteStats& RouteStatsFor(std::string_view pattern) {
  AllRoutes& all = Routes();
  std::lock_guard lock(all.mutex);
  for (auto& r : all.routes)
    if (r.route == pattern) return r;
  return all.routes.emplace_back(std::string(pattern));
}

RouteStats& UnmatchedRoute() {
  static RouteStats& none = RouteStatsFor("none");
  return none;
}

}  // namespace hotrow::http
