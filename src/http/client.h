// A small blocking HTTP/1.1 client (Boost.Beast inside) for the command-line
// tools (`hotrow grant`, `hotrow simulate --url`) and the tests. One
// keep-alive connection per client; not thread-safe. I/O errors throw
// std::runtime_error.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hotrow::http {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct ClientResponse {
  int status = 0;
  std::string body;
  Headers headers;
  // The named header's value (case-insensitive), or "".
  std::string Header(std::string_view name) const;
};

class HttpClient {
 public:
  HttpClient(std::string host, uint16_t port, std::chrono::milliseconds timeout = std::chrono::seconds(30));
  explicit HttpClient(uint16_t port, std::chrono::milliseconds timeout = std::chrono::seconds(30))
      : HttpClient("127.0.0.1", port, timeout) {}
  ~HttpClient();
  HttpClient(HttpClient&&) noexcept;

  // Sends one request on the kept-alive connection (reconnecting once when
  // the server closed it in between). A JSON Content-Type is added to a
  // non-empty body unless `headers` sets one.
  ClientResponse Request(std::string_view method, std::string_view target, std::string_view body = {},
                         const Headers& headers = {});
  ClientResponse Get(std::string_view target, const Headers& headers = {}) {
    return Request("GET", target, {}, headers);
  }
  ClientResponse Post(std::string_view target, std::string_view body = {}, const Headers& headers = {}) {
    return Request("POST", target, body, headers);
  }
  ClientResponse Put(std::string_view target, std::string_view body, const Headers& headers = {}) {
    return Request("PUT", target, body, headers);
  }
  ClientResponse Delete(std::string_view target, const Headers& headers = {}) {
    return Request("DELETE", target, {}, headers);
  }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Splits "http://host:port" into host and port (port 80 when absent).
bool ParseHttpUrl(const std::string& url, std::string* host, uint16_t* port);

}  // namespace hotrow::http
