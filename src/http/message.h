// The request and response types that handlers see. They carry no Beast
// types, so domain code and unit tests build without Boost headers; the
// server (http/session.cc) fills a Request from the wire and writes a Response
// back.
#pragma once

#include <array>
#include <atomic>
#include <cassert>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hotrow::http {

enum class Method { kGet, kHead, kPost, kPut, kPatch, kDelete, kOptions, kOther };

std::string_view MethodName(Method m);

struct RouteStats;  // route_stats.h

inline constexpr std::string_view kJsonContentType = "application/json; charset=utf-8";

// A parsed request. Every string_view points into memory the server owns for
// as long as the request is being handled, that is until the Responder is
// used. An asynchronous handler copies what it needs before returning.
struct Request {
  Method method = Method::kGet;
  std::string_view method_name;  // as sent ("GET", "TRACE", "get")
  std::string_view target;       // as sent: path and query
  std::string_view path;         // target up to '?'
  std::string_view query;        // after '?', without it; empty when absent
  std::string_view body;
  // Header fields in arrival order; names as sent (compare case-insensitively).
  std::vector<std::pair<std::string_view, std::string_view>> headers;
  // Path parameters matched by the router ("{id}"), percent-decoded.
  std::vector<std::string> params;
  // The connection's spare response body: empty, with the capacity of an
  // earlier response. Take it with NewResponse() (pooling.h).
  std::string* spare_body = nullptr;
  // Set by a handler (before it returns) whose work is an admin batch that
  // may take longer than the per-request bound (a grant): the connection
  // then waits for its answer without a deadline.
  bool long_running = false;
  // X-Request-Id as sent (validated), or one the server made up; the
  // response echoes it, and log lines about this request carry it.
  std::string_view request_id;
  // The client's address and port ("203.0.113.7:51234", "[::1]:8080"), as
  // the connection saw it; "-" when unknown.
  std::string_view peer = "-";
  // Set by the router to the matched route's counters (null: none matched).
  RouteStats* route = nullptr;

  // The first value of the named header (case-insensitive), or empty.
  std::string_view Header(std::string_view name) const;
  bool HasHeader(std::string_view name) const;
};

// The extra headers of a response (Location, Allow, Retry-After,
// Cache-Control, ...), kept in place: at most kHeadersMax, names with static
// storage (string literals).
class ResponseHeaders {
 public:
  static constexpr size_t kHeadersMax = 8;
  void Add(std::string_view name, std::string value);
  const std::pair<std::string_view, std::string>* begin() const { return items_.data(); }
  const std::pair<std::string_view, std::string>* end() const { return items_.data() + size_; }
  size_t size() const { return size_; }
  const std::pair<std::string_view, std::string>& operator[](size_t i) const { return items_[i]; }

 private:
  std::array<std::pair<std::string_view, std::string>, kHeadersMax> items_;
  size_t size_ = 0;
};

struct Response {
  int status = 200;
  std::string body;
  std::string_view content_type = kJsonContentType;
  ResponseHeaders headers;
  // Close the connection after this response.
  bool close = false;
  // Made by ErrorResponse: the body is {"error":{...}}, and the connection
  // adds "requestId" to it. log_detail, when set, is logged under that id
  // (as an error when log_as_error, else a warning).
  // (A pointer: a Response is moved several times per request, and a
  // null pointer moves cheaper than an empty string.)
  bool error = false;
  bool log_as_error = false;
  std::unique_ptr<std::string> log_detail;

  void AddHeader(std::string_view name, std::string value) { headers.Add(name, std::move(value)); }
};

// A response whose body reuses the connection's spare buffer (no
// allocation once the connection has answered once).
Response NewResponse(Request& request, int status = 200);
// Just the spare buffer (empty), for a handler that answers later: a
// string is cheaper to carry in a callback than a whole Response.
std::string TakeSpareBody(Request& request);
// A response around a body taken with TakeSpareBody.
Response ResponseWithBody(std::string body, int status = 200);

// Where a response goes. The server implements it per connection.
//
// Every request gets exactly one answer. Its handler answers it, or the
// server does for it (the handler timed out, or threw) and then closes the
// connection, so no request follows one the server answered; a handler's
// answer that comes after the server's is expected and dropped. A handler that
// answers one request twice is a bug: the second answer could otherwise
// reach the connection's next request, so it stops the process (an assert,
// kept in release builds).
class ResponseSink {
 public:
  enum class By { kHandler, kServer };

  virtual ~ResponseSink() = default;

  // Numbers the next request on this sink; its Responder carries the
  // number. Called by the one thread that reads the requests.
  uint64_t BeginRequest() { return ++begun_; }
  // The number of the latest request begun; on that same thread only.
  uint64_t current_request() const { return begun_; }

  // Claims the answer to request n: true for the first claim, which then
  // delivers. Thread-safe.
  bool Claim(uint64_t n, By by) {
    uint64_t claimed = answered_.load(std::memory_order_acquire);
    for (;;) {
      if ((claimed >> 1) >= n) {
        // Answered already: fine when the server did it for this request
        // and the handler comes late, a bug when the handler answers twice.
        assert((by == By::kServer || ((claimed >> 1) == n && (claimed & 1) != 0)) &&
               "a handler answered one request twice");
        return false;
      }
      uint64_t mine = n << 1 | (by == By::kServer ? 1 : 0);
      if (answered_.compare_exchange_weak(claimed, mine, std::memory_order_acq_rel)) return true;
    }
  }

  // The handler's answer to request n (see Responder).
  void Answer(uint64_t n, Response&& response) {
    if (Claim(n, By::kHandler)) Deliver(std::move(response));
  }

 protected:
  // Writes the answer out; may be called from any thread.
  virtual void Deliver(Response&& response) = 0;

 private:
  uint64_t begun_ = 0;
  // The last request answered, shifted left by one, with the low bit set
  // when the server answered it.
  std::atomic<uint64_t> answered_{0};
};

// A handle that delivers the answer for one request. Copyable so it can
// travel through std::function callbacks; each copy carries the request's
// number, so a second Send through any copy is caught (ResponseSink).
class Responder {
 public:
  Responder() = default;
  Responder(std::shared_ptr<ResponseSink> sink, uint64_t request) : sink_(std::move(sink)), request_(request) {}
  Responder(const Responder&) = default;
  Responder& operator=(const Responder&) = default;
  // A moved-from Responder is an empty one, as before: its Send does nothing.
  Responder(Responder&& other) noexcept : sink_(std::move(other.sink_)), request_(std::exchange(other.request_, 0)) {}
  Responder& operator=(Responder&& other) noexcept {
    sink_ = std::move(other.sink_);
    request_ = std::exchange(other.request_, 0);
    return *this;
  }

  void Send(Response&& response) {
    assert((sink_ || request_ == 0) && "a Responder sent twice");
    if (auto sink = std::exchange(sink_, nullptr)) sink->Answer(request_, std::move(response));
  }
  explicit operator bool() const { return sink_ != nullptr; }

 private:
  std::shared_ptr<ResponseSink> sink_;
  uint64_t request_ = 0;
};

// The token of an "Authorization: Bearer <token>" header, or nullopt when
// there is no such header (or it uses another scheme).
std::optional<std::string_view> BearerToken(const Request& request);

// Who a request is for the failed-credential throttle (base/auth.h): its
// address (an IPv6 address by its /64, which one host can fill; an
// IPv4-mapped one as IPv4), and for a bearer with a store key's shape
// ("<16 hex>.<64 hex>") that address with AuthFailureThrottle's
// kStoreKeySuffix, a bucket of its own with a larger limit.
std::string AuthThrottleClient(const Request& request);

// Case-insensitive ASCII comparison, for header names and tokens.
bool EqualsIgnoreCase(std::string_view a, std::string_view b);

}  // namespace hotrow::http
