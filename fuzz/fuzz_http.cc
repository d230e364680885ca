// libFuzzer target: the HTTP/1.1 request codec (Beast's parser with
// hotrow's framing rules: Transfer-Encoding, chunked bodies, Host, the
// header and body limits), through the same path a connection uses, with a
// handler that answers every request.
#include <cstddef>
#include <cstdint>
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
  std::string out;
  (void)Connection().Exchange(std::string_view(reinterpret_cast<const char*>(data), size), &out);
  return 0;
}
