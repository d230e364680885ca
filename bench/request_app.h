// The in-process application the request benchmarks and the allocation
// tests drive: the real stores, services and routes on a SQLite database in
// a temporary directory, seeded, behind an InProcessConnection.
#pragma once

#include <memory>
#include <string>

#include "http/server.h"

namespace hotrow::bench {

struct AppOptions {
  int64_t plans = 10000;
  int64_t players = 10000;
  int64_t cards = 1000;
};

class RequestApp {
 public:
  explicit RequestApp(AppOptions options = {});
  ~RequestApp();
  // Sends one raw HTTP request; returns the status, the response in `out`.
  int Exchange(std::string_view raw, std::string* out);
  // The application's routes, for serving them on a real socket.
  http::Handler handler();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Raw requests for the hot paths.
std::string GetRequest(std::string_view target);
std::string PostRequest(std::string_view target, std::string_view body);

}  // namespace hotrow::bench
