// Rejector: answers one connection over --max-connections with a canned 503
// and closes it. Internal to src/http (server.cc).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <utility>  // before Asio: g++ 12 in C++20 mode needs it for awaitable.hpp

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>

#include "http/errors.h"

namespace hotrow::http {

class Rejector : public std::enable_shared_from_this<Rejector> {
 public:
  // `rejecting` counts the rejections in progress (the acceptor drops
  // connections instead past a bound).
  Rejector(boost::asio::ip::tcp::socket&& socket, std::atomic<int>& rejecting)
      : socket_(std::move(socket)), rejecting_(rejecting) {
    rejecting_.fetch_add(1, std::memory_order_relaxed);
    Response r = ErrorResponse(Status::Overloaded("too many open connections; retry later"));
    text_ =
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json; charset=utf-8\r\n"
        "Retry-After: 1\r\nConnection: close\r\nContent-Length: " +
        std::to_string(r.body.size()) + "\r\n\r\n" + r.body;
  }
  ~Rejector() { rejecting_.fetch_sub(1, std::memory_order_relaxed); }

  void Start() {
    boost::asio::async_write(socket_, boost::asio::buffer(text_),
                             [self = shared_from_this()](boost::system::error_code, size_t) {
                               boost::system::error_code ignored;
                               self->socket_.shutdown(boost::asio::ip::tcp::socket::shutdown_both, ignored);
                               self->socket_.close(ignored);
                             });
  }

 private:
  boost::asio::ip::tcp::socket socket_;
  std::atomic<int>& rejecting_;
  std::string text_;
};

}  // namespace hotrow::http
