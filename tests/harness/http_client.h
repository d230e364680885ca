// A small blocking HTTP/1.1 client for tests (Boost.Beast inside), plus raw
// TCP helpers for sending malformed or slow requests. Errors throw
// std::runtime_error: in a test, an I/O failure is a failure.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hotrow::testing {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpResponse {
  int status = 0;
  std::string body;
  Headers headers;
  // The named header's value (case-insensitive), or "".
  std::string Header(std::string_view name) const;
};

class HttpClient {
 public:
  explicit HttpClient(uint16_t port, std::chrono::milliseconds timeout = std::chrono::seconds(30));
  ~HttpClient();
  HttpClient(HttpClient&&) noexcept;

  // Sends one request on the kept-alive connection (reconnecting when the
  // server closed it). A JSON Content-Type is added to a non-empty body
  // unless `headers` sets one.
  HttpResponse Request(std::string_view method, std::string_view target, std::string_view body = {},
                       const Headers& headers = {});
  HttpResponse Get(std::string_view target, const Headers& headers = {}) { return Request("GET", target, {}, headers); }
  HttpResponse Post(std::string_view target, std::string_view body = {}, const Headers& headers = {}) {
    return Request("POST", target, body, headers);
  }
  HttpResponse Put(std::string_view target, std::string_view body, const Headers& headers = {}) {
    return Request("PUT", target, body, headers);
  }
  HttpResponse Delete(std::string_view target, const Headers& headers = {}) {
    return Request("DELETE", target, {}, headers);
  }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A raw TCP connection to 127.0.0.1:port.
class RawConnection {
 public:
  explicit RawConnection(uint16_t port);
  ~RawConnection();
  // Sends bytes; false if the peer has closed or reset.
  bool Send(std::string_view bytes);
  // Reads until the peer closes or `timeout` passes; returns what arrived.
  std::string ReadUntilClose(std::chrono::milliseconds timeout);
  // True when the peer closed the connection within `timeout`.
  bool ClosedWithin(std::chrono::milliseconds timeout);
  void ShutdownWrite();

 private:
  int fd_ = -1;
  bool closed_ = false;
};

// The status code of the first response in raw HTTP text, or 0.
int StatusOf(std::string_view raw_response);

}  // namespace hotrow::testing
