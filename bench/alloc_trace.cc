// Prints the stack of every allocation one steady-state request makes on a
// path: bench/alloc_trace '/datePlan/' (GET) or bench/alloc_trace POST
// /datePlan/1/like ''. A tool for finding allocations, not a test.
#include <cstdio>
#include <string>

#include "ops/alloc_counter.h"
#include "request_app.h"

int main(int argc, char** argv) {
  using namespace hotrow;
  std::string method = argc > 2 ? argv[1] : "GET";
  std::string target = argc > 2 ? argv[2] : (argc > 1 ? argv[1] : "/datePlan/");
  std::string body = argc > 3 ? argv[3] : "";
  bench::RequestApp app;
  std::string raw = method == "GET" ? bench::GetRequest(target) : bench::PostRequest(target, body), out;
  for (int i = 0; i < 1000; ++i) app.Exchange(raw, &out);
  {
    uint64_t own = alloc::Own();
    for (int i = 0; i < 1000; ++i) app.Exchange(raw, &out);
    std::fprintf(stderr, "untraced: %.3f allocation(s) of hotrow's own per request over 1000\n",
                 static_cast<double>(alloc::Own() - own) / 1000.0);
  }
  uint64_t total = alloc::Total(), sqlite = alloc::Sqlite();
  alloc::SetTracing(true);
  int status = app.Exchange(raw, &out);
  alloc::SetTracing(false);
  std::fprintf(stderr, "status %d: %llu allocation(s), %llu by SQLite, %llu of hotrow's own; response:\n%s\n", status,
               static_cast<unsigned long long>(alloc::Total() - total),
               static_cast<unsigned long long>(alloc::Sqlite() - sqlite),
               static_cast<unsigned long long>(alloc::Total() - total - (alloc::Sqlite() - sqlite)), out.c_str());
}
