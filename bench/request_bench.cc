// Micro-benchmarks of the request path, in-process: raw HTTP bytes are
// parsed (Beast), routed, handled by the real services on SQLite, and the
// response written -- the same code a connection runs, without a socket.
// Each benchmark reports ns per request and hotrow's own heap allocations
// per request (SQLite's are counted apart). Run it twice to compare:
//
//   build/bench/request_bench                       # pooling on (default)
//   HOTROW_POOLING=off build/bench/request_bench    # every pool and arena off
//   HOTROW_BENCH_ACCESS_LOG=/dev/null build/bench/request_bench
//                                                   # with the access log on (text)
//
// bench/alloc.sh does both and writes the table into docs/benchmarks.md.
#include <cstdlib>
#include <memory>

#include <benchmark/benchmark.h>

#include "http/access_log.h"
#include "ops/alloc_counter.h"
#include "ops/pooling.h"
#include "request_app.h"

namespace {

hotrow::bench::RequestApp& App() {
  static hotrow::bench::RequestApp app;
  // The access log, as `hotrow serve --access-log PATH` runs it.
  static std::unique_ptr<hotrow::http::AccessLog> log = [] {
    std::unique_ptr<hotrow::http::AccessLog> l;
    if (const char* path = std::getenv("HOTROW_BENCH_ACCESS_LOG")) {
      auto opened = hotrow::http::AccessLog::Open(path, hotrow::http::AccessLog::Format::kText);
      if (opened.ok()) l = std::move(opened).value();
      hotrow::http::AccessLog::SetActive(l.get());
    }
    return l;
  }();
  return app;
}

void Run(benchmark::State& state, const std::string& raw) {
  auto& app = App();
  std::string out;
  for (int i = 0; i < 100; ++i) app.Exchange(raw, &out);  // warm up
  uint64_t own = hotrow::alloc::Own(), sqlite = hotrow::alloc::Sqlite();
  for (auto _ : state) {
    app.Exchange(raw, &out);
    benchmark::DoNotOptimize(out.data());
  }
  double n = static_cast<double>(state.iterations());
  state.counters["allocs"] = static_cast<double>(hotrow::alloc::Own() - own) / n;
  state.counters["sqlite_allocs"] = static_cast<double>(hotrow::alloc::Sqlite() - sqlite) / n;
  state.SetLabel(hotrow::pooling::Enabled() ? "pooling on" : "pooling off");
}

void BM_GetRandomPlan(benchmark::State& s) { Run(s, hotrow::bench::GetRequest("/datePlan/")); }
void BM_GetLeaderboard(benchmark::State& s) { Run(s, hotrow::bench::GetRequest("/api/v1/leaderboard")); }
void BM_Echo(benchmark::State& s) {
  Run(s, hotrow::bench::PostRequest("/api/v1/echo", R"({"name":"test","id":"id1","country":"testCountry","age":10})"));
}
void BM_Like(benchmark::State& s) { Run(s, hotrow::bench::PostRequest("/datePlan/1/like", "")); }
void BM_PointUse(benchmark::State& s) {
  Run(s, hotrow::bench::PostRequest("/api/v1/cards/1/transactions", R"({"storeId":1,"amount":100})"));
}

BENCHMARK(BM_GetRandomPlan);
BENCHMARK(BM_GetLeaderboard);
BENCHMARK(BM_Echo);
// The write paths wait for a group commit (an fsync) per request here: one
// request at a time, so their ns/op is mostly the disk.
BENCHMARK(BM_Like)->Iterations(2000);
BENCHMARK(BM_PointUse)->Iterations(2000);

}  // namespace

BENCHMARK_MAIN();
