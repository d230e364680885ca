// Test helpers over HTTP: the blocking client (src/http/client.h) under the
// names the tests use, and raw TCP helpers for sending malformed or slow
// requests. Errors throw std::runtime_error: in a test, an I/O failure is a
// failure.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "http/client.h"

namespace hotrow::testing {

using Headers = http::Headers;
using HttpResponse = http::ClientResponse;
using http::HttpClient;

// A raw TCP connection to 127.0.0.1:port.
class RawConnection {
 public:
  explicit RawConnection(uint16_t port);
  ~RawConnection();
  // Sends bytes; false if the peer has closed or reset.
  bool Send(std::string_view bytes);
  // Reads until the peer closes or `timeout` passes; returns what arrived.
  std::string ReadUntilClose(std::chrono::milliseconds timeout);
  // Reads until one whole response (its head, and a body of its
  // Content-Length) is in, the peer closes or `timeout` passes; returns what
  // arrived (with anything past the response that came in the same read).
  std::string ReadResponse(std::chrono::milliseconds timeout);
  // True when the peer closed the connection within `timeout`.
  bool ClosedWithin(std::chrono::milliseconds timeout);

 private:
  // Reads until `done` holds for what arrived, the peer closes or `timeout`
  // passes.
  std::string ReadUntil(std::chrono::milliseconds timeout, const std::function<bool(const std::string&)>& done);
  int fd_ = -1;
  bool closed_ = false;
};

// The status code of the first response in raw HTTP text, or 0.
int StatusOf(std::string_view raw_response);

// The first "key":<integer> in a JSON body, or -1; the first "key":"<text>",
// or "". Enough for the flat answers the tests read.
int64_t JsonInt(const std::string& body, const std::string& key);
std::string JsonString(const std::string& body, const std::string& key);

// Polls `fn` until it is true or `bound` passes; returns its last answer.
bool Eventually(const std::function<bool()>& fn, std::chrono::milliseconds bound);

}  // namespace hotrow::testing
