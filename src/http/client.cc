#include "http/client.h"

#include <sys/socket.h>

#include <optional>
#include <stdexcept>
#include <utility>  // before Asio (g++ 12, C++20)

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace hotrow::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;

namespace {
bool IEquals(std::string_view a, std::string_view b) { return beast::iequals(a, b); }
}  // namespace

std::string ClientResponse::Header(std::string_view name) const {
  for (const auto& [n, v] : headers)
    if (IEquals(n, name)) return v;
  return "";
}

struct HttpClient::Impl {
  std::string host;
  uint16_t port;
  std::chrono::milliseconds timeout;
  asio::io_context io;
  std::optional<tcp::socket> socket;
  beast::flat_buffer buffer;

  void Connect() {
    socket.emplace(io);
    tcp::resolver resolver(io);
    asio::connect(*socket, resolver.resolve(host, std::to_string(port)));
    socket->set_option(tcp::no_delay(true));
    timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>((timeout.count() % 1000) * 1000)};
    setsockopt(socket->native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(socket->native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    buffer.clear();
  }
};

HttpClient::HttpClient(std::string host, uint16_t port, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->host = std::move(host);
  impl_->port = port;
  impl_->timeout = timeout;
  impl_->Connect();
}
HttpClient::~HttpClient() = default;
HttpClient::HttpClient(HttpClient&&) noexcept = default;

ClientResponse HttpClient::Request(std::string_view method, std::string_view target, std::string_view body,
                                   const Headers& headers) {
  for (int attempt = 0;; ++attempt) {
    if (!impl_->socket || !impl_->socket->is_open()) impl_->Connect();
    bhttp::request<bhttp::string_body> req;
    req.method_string(method);
    req.target(target);
    req.version(11);
    req.set(bhttp::field::host, impl_->host);
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
    parser.skip(method == "HEAD");  // a response to HEAD has headers only
    if (!ec) bhttp::read(*impl_->socket, impl_->buffer, parser, ec);
    if (ec) {
      impl_->socket.reset();
      // A kept-alive connection the server closed meanwhile: retry once on a
      // fresh one (the request was not processed, nothing was read).
      if (attempt == 0 &&
          (ec == bhttp::error::end_of_stream || ec == asio::error::connection_reset || ec == asio::error::broken_pipe))
        continue;
      throw std::runtime_error("HTTP " + std::string(method) + " " + std::string(target) + ": " + ec.message());
    }
    auto& res = parser.get();
    ClientResponse out;
    out.status = static_cast<int>(res.result_int());
    out.body = res.body();
    for (const auto& f : res) out.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    if (!res.keep_alive()) impl_->socket.reset();
    return out;
  }
}

bool ParseHttpUrl(const std::string& url, std::string* host, uint16_t* port) {
  constexpr std::string_view kScheme = "http://";
  if (url.rfind(kScheme, 0) != 0) return false;
  std::string rest = url.substr(kScheme.size());
  rest = rest.substr(0, rest.find('/'));
  auto colon = rest.rfind(':');
  *host = rest.substr(0, colon);
  *port = 80;
  if (colon != std::string::npos) {
    try {
      int p = std::stoi(rest.substr(colon + 1));
      if (p <= 0 || p > 65535) return false;
      *port = static_cast<uint16_t>(p);
    } catch (...) {
      return false;
    }
  }
  return !host->empty();
}

}  // namespace hotrow::http
