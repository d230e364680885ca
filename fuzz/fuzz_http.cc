// libFuzzer target: the HTTP/1.1 request codec (Beast's parser with
// hotrow's framing rules: Transfer-Encoding, chunked bodies and trailers,
// Host and the headers that may appear once, HEAD, Connection: close, the
// header and body limits), through the path a connection takes, with a
// handler that answers every request. An input may hold several pipelined
// requests: each is answered in turn, as on one keep-alive connection,
// until one closes it. A fresh connection per input, so that a finding
// replays alone.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "http/server.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hotrow::http::InProcessConnection conn([](hotrow::http::Request& req, hotrow::http::Responder res) {
    hotrow::http::Response r;
    r.body = std::string(req.body.substr(0, 64));
    for (const auto& [name, value] : req.headers) r.body.append(name.substr(0, 8));
    res.Send(std::move(r));
  });
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  std::string out;
  for (int i = 0; i < 64 && !rest.empty(); ++i) {
    size_t used = 0;
    bool close = false;
    if (conn.Exchange(rest, &out, &used, &close) == 0) break;
    if (used == 0 || used > rest.size()) std::abort();  // a request takes bytes, and only the input's
    if (out.rfind("HTTP/1.1 ", 0) != 0) std::abort();   // every answer is a status line first
    if (close) break;
    rest.remove_prefix(used);
  }
  return 0;
}
