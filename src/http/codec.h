// Codec: what a connection keeps from one request to the next, so that a
// request in steady state allocates nothing (see ops/pooling.h):
//   - an arena for Beast's header fields and the request body, reset per
//     request (anything larger than the arena falls back to the heap);
//   - the response head buffer and the spare response body, reused. The
//     head is written straight into its buffer (not through Beast's fields
//     container, which allocates per header) and goes out with the body as
//     two buffers of one write: one writev.
// Session (a socket, session.cc) and InProcessConnection (none,
// in_process.cc) share it, so the benchmarks measure the very code that
// serves requests. Internal to src/http.
#pragma once

#include <array>
#include <chrono>
#include <optional>
#include <string>
#include <utility>  // before Asio: g++ 12 in C++20 mode needs it for awaitable.hpp

#include <boost/asio/buffer.hpp>
#include <boost/beast/http.hpp>

#include "http/memory.h"
#include "http/message.h"
#include "http/server.h"

namespace hotrow::http {

using ArenaBody = boost::beast::http::basic_string_body<char, std::char_traits<char>, PoolAllocator<Arena, char>>;
using Parser = boost::beast::http::request_parser<ArenaBody, PoolAllocator<Arena, char>>;

class Codec {
 public:
  // A fresh parser for the next request; the previous request's memory is
  // released (back to the arena).
  Parser& Begin(const ServerOptions& options) {
    options_ = &options;
    request_id_size_ = 0;
    built_ = false;
    started_ = {};
    method_ = Method::kOther;
    bytes_in_ = 0;
    head_request_ = false;
    header_fields_ = 0;
    must_close_ = false;
    origin_ = {};
    preflight_ = false;
    parser_.reset();
    arena_.Reset();
    parser_.emplace(std::piecewise_construct, std::make_tuple(PoolAllocator<Arena, char>(&arena_)),
                    std::make_tuple(PoolAllocator<Arena, char>(&arena_)));
    parser_->header_limit(static_cast<uint32_t>(options.header_bytes_max));
    parser_->body_limit(options.body_bytes_max);
    return *parser_;
  }
  Parser& parser() { return *parser_; }

  // After the header: what RFC 9112 says must be refused before a body is
  // read. Transfer-Encoding other than one final "chunked" (400: its body
  // would run as the next request; 501 for a coding before "chunked"), an
  // HTTP/1.1 request without exactly one Host (400), a header that may
  // appear once appearing twice (400 naming it).
  // Also records what the rest of the exchange needs from the header
  // alone: how many fields it had (fields the parser adds later are chunked
  // trailers, which are not headers: RFC 9110 §6.5.1), whether the request
  // is HEAD, and whether the connection must close after the answer (any
  // "close" token on any Connection line; framing by Transfer-Encoding on
  // HTTP/1.0).
  Status CheckHeader();

  // The parsed request, as handlers see it.
  Request& BuildRequest();
  bool keep_alive() const { return keep_alive_; }

  // The response as two buffers (head, body), valid until Written().
  // A response to HEAD keeps its Content-Length and sends no body.
  std::array<boost::asio::const_buffer, 2> Serialize(Response&& r, bool close);

  // The response was sent: keep its body's buffer for the next one, unless
  // it is large (a rare long page should not pin its memory per connection).
  static constexpr size_t kSpareBodyMax = 64 * 1024;
  void Written() {
    if (pooling::Enabled()) {
      if (body_.capacity() > spare_.capacity() && body_.capacity() <= kSpareBodyMax) spare_.swap(body_);
      spare_.clear();
    }
    body_ = std::string();
  }

  static void AppendHead(std::string& out, const Response& r, bool close, bool keep_alive_header);

  // The client's address ("203.0.113.7:51234"), for the access log; the
  // connection keeps the text.
  void set_peer(std::string_view peer) { peer_ = peer; }

 private:
  using Clock = std::chrono::steady_clock;
  // CheckHeader's rules; `request_id` gets the X-Request-Id sent, if any.
  Status CheckFields(std::string_view* request_id);
  // `sent` (X-Request-Id) when it is valid, else a new id.
  void TakeRequestId(std::string_view sent);
  std::string_view request_id() const { return {request_id_.data(), request_id_size_}; }
  // Every response: the route's counters and latency, then the access log.
  void Observe(const Response& r, size_t bytes_out);

  // The CORS headers for the request's Origin, when it is one allowed.
  void AppendCors(const Response& r);

  Arena arena_;  // declared before parser_: the parser's memory lives here
  std::optional<Parser> parser_;
  Request request_;
  std::string head_, body_, spare_;
  bool keep_alive_ = true;
  bool http10_keep_alive_ = false;  // an HTTP/1.0 client asked for keep-alive
  const ServerOptions* options_ = nullptr;
  bool head_request_ = false;
  size_t header_fields_ = 0;  // fields of the header section (trailers follow)
  bool must_close_ = false;   // decided from the header by CheckHeader
  std::string_view origin_;   // the request's Origin (in the arena), or empty
  bool preflight_ = false;    // OPTIONS with Access-Control-Request-Method
  std::array<char, 64> request_id_{};
  size_t request_id_size_ = 0;
  bool built_ = false;         // BuildRequest ran for this request
  Clock::time_point started_;  // the header was complete (CheckHeader)
  Method method_ = Method::kOther;
  size_t bytes_in_ = 0;  // request line, header fields and body, as parsed
  std::string_view peer_ = "-";
};

}  // namespace hotrow::http
