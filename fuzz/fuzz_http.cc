// libFuzzer target: the HTTP/1.1 request codec (Beast's parser with
// hotrow's framing rules: Transfer-Encoding, chunked bodies, Host, the
// header and body limits), through the same path a connection uses, with a
// handler that answers every request. An input may hold several pipelined
// requests: each is answered in turn, as on one keep-alive connection.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "http/server.h"

namespace {
hotrow::http::InProcessConnection& Connection() {
  static auto* conn =
      new hotrow::http::InProcessConnection([](hotrow::http::Request& req, hotrow::http::Responder res) {
        hotrow::http::Response r;
        r.body = std::string(req.body.substr(0, 64));
        res.Send(std::move(r));
      });
  return *conn;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  std::string out;
  for (int i = 0; i < 64 && !rest.empty(); ++i) {
    size_t used = 0;
    if (Connection().Exchange(rest, &out, &used) == 0) break;
    if (used == 0 || used > rest.size()) std::abort();  // a request takes bytes, and only the input's
    rest.remove_prefix(used);
  }
  return 0;
}
