#include <utility>  // before Asio (g++ 12, C++20)

#include "harness/http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <optional>
#include <stdexcept>

namespace hotrow::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;

namespace {
bool IEquals(std::string_view a, std::string_view b) { return beast::iequals(a, b); }
}  // namespace

std::string HttpResponse::Header(std::string_view name) const {
  for (const auto& [n, v] : headers)
    if (IEquals(n, name)) return v;
  return "";
}

struct HttpClient::Impl {
  uint16_t port;
  std::chrono::milliseconds timeout;
  asio::io_context io;
  std::optional<tcp::socket> socket;
  beast::flat_buffer buffer;

  void Connect() {
    socket.emplace(io);
    socket->connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    socket->set_option(tcp::no_delay(true));
    timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>((timeout.count() % 1000) * 1000)};
    setsockopt(socket->native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(socket->native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    buffer.clear();
  }
};

HttpClient::HttpClient(uint16_t port, std::chrono::milliseconds timeout) : impl_(std::make_unique<Impl>()) {
  impl_->port = port;
  impl_->timeout = timeout;
  impl_->Connect();
}
HttpClient::~HttpClient() = default;
HttpClient::HttpClient(HttpClient&&) noexcept = default;

HttpResponse HttpClient::Request(std::string_view method, std::string_view target, std::string_view body,
                                 const Headers& headers) {
  for (int attempt = 0;; ++attempt) {
    if (!impl_->socket || !impl_->socket->is_open()) impl_->Connect();
    bhttp::request<bhttp::string_body> req;
    req.method_string(method);
    req.target(target);
    req.version(11);
    req.set(bhttp::field::host, "127.0.0.1");
    bool has_ct = false;
    for (const auto& [n, v] : headers) {
      req.set(n, v);
      has_ct = has_ct || IEquals(n, "Content-Type");
    }
    if (!body.empty() && !has_ct) req.set(bhttp::field::content_type, "application/json");
    req.body() = std::string(body);
    req.prepare_payload();
    beast::error_code ec;
    bhttp::write(*impl_->socket, req, ec);
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(64 * 1024 * 1024);
    if (!ec) bhttp::read(*impl_->socket, impl_->buffer, parser, ec);
    if (ec) {
      impl_->socket.reset();
      // A kept-alive connection the server closed meanwhile: retry once on a
      // fresh one (the request was not processed, nothing was read).
      if (attempt == 0 && (ec == bhttp::error::end_of_stream || ec == asio::error::connection_reset ||
                           ec == asio::error::broken_pipe))
        continue;
      throw std::runtime_error("HTTP " + std::string(method) + " " + std::string(target) + ": " + ec.message());
    }
    auto& res = parser.get();
    HttpResponse out;
    out.status = static_cast<int>(res.result_int());
    out.body = res.body();
    for (const auto& f : res) out.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    if (!res.keep_alive()) impl_->socket.reset();
    return out;
  }
}

RawConnection::RawConnection(uint16_t port) {
  fd_ = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    throw std::runtime_error("connect to port " + std::to_string(port) + " failed");
}

RawConnection::~RawConnection() {
  if (fd_ >= 0) close(fd_);
}

bool RawConnection::Send(std::string_view bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

void RawConnection::ShutdownWrite() { shutdown(fd_, SHUT_WR); }

std::string RawConnection::ReadUntilClose(std::chrono::milliseconds timeout) {
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[8192];
  while (!closed_) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    ssize_t n = recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      closed_ = true;
      break;
    }
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

bool RawConnection::ClosedWithin(std::chrono::milliseconds timeout) {
  ReadUntilClose(timeout);
  return closed_;
}

int StatusOf(std::string_view raw) {
  if (raw.size() < 12 || raw.substr(0, 5) != "HTTP/") return 0;
  return std::atoi(std::string(raw.substr(9, 3)).c_str());
}

}  // namespace hotrow::testing
