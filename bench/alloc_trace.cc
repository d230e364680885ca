// Prints the stack of every allocation one steady-state request makes on a
// path: bench/alloc_trace '/datePlan/' (GET) or bench/alloc_trace POST
// /datePlan/1/like ''. A tool for finding allocations, not a test.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>

#include "http/server.h"
#include "ops/alloc_counter.h"
#include "request_app.h"

// Over a real socket: the server on a loopback port, requests written and
// read with plain syscalls (no allocating client in this process).
int ServeAndTrace(hotrow::bench::RequestApp& app, const std::string& raw) {
  using namespace hotrow;
  http::ServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.threads = 1;
  options.handle_signals = false;
  http::Server server(options, app.handler());
  if (!server.Listen().ok()) return 1;
  std::thread runner([&] { server.Run({}); });
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(server.port());
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return 1;
  char buf[65536];
  auto exchange = [&] {
    if (write(fd, raw.data(), raw.size()) < 0) return;
    ssize_t n = read(fd, buf, sizeof buf);  // responses here fit one read
    (void)n;
  };
  for (int i = 0; i < 2000; ++i) exchange();
  uint64_t own = alloc::Own();
  for (int i = 0; i < 1000; ++i) exchange();
  std::fprintf(stderr, "socket: %.3f allocation(s) of hotrow's own per request over 1000\n",
               static_cast<double>(alloc::Own() - own) / 1000.0);
  alloc::SetTracing(true);
  exchange();
  alloc::SetTracing(false);
  close(fd);
  server.Shutdown();
  runner.join();
  return 0;
}

int main(int argc, char** argv) {
  using namespace hotrow;
  if (argc > 1 && std::string(argv[1]) == "--socket") {
    bench::RequestApp app;
    std::string m = argv[2], t = argv[3], b = argc > 4 ? argv[4] : "";
    return ServeAndTrace(app, m == "GET" ? bench::GetRequest(t) : bench::PostRequest(t, b));
  }
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
