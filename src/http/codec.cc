#include "http/codec.h"

#include <array>
#include <atomic>
#include <charconv>
#include <cstring>
#include <ctime>
#include <random>

#include "http/access_log.h"
#include "http/route_stats.h"
#include "ops/log.h"

namespace hotrow::http {

namespace bhttp = boost::beast::http;
using namespace std::string_view_literals;  // appends of literals need no strlen

namespace {

Method ToMethod(bhttp::verb v) {
  switch (v) {
    case bhttp::verb::get:
      return Method::kGet;
    case bhttp::verb::head:
      return Method::kHead;
    case bhttp::verb::post:
      return Method::kPost;
    case bhttp::verb::put:
      return Method::kPut;
    case bhttp::verb::patch:
      return Method::kPatch;
    case bhttp::verb::delete_:
      return Method::kDelete;
    case bhttp::verb::options:
      return Method::kOptions;
    default:
      return Method::kOther;
  }
}

// The Date header, formatted once per second per thread.
std::string_view HttpDate() {
  thread_local std::time_t cached_second = 0;
  thread_local char buffer[40];
  std::time_t now = std::time(nullptr);
  if (now != cached_second) {
    cached_second = now;
    std::tm tm{};
    gmtime_r(&now, &tm);
    std::strftime(buffer, sizeof buffer, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  }
  return buffer;
}

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Headers whose meaning is one value: a second copy is refused rather than
// silently ignored (first-wins lets a proxy and hotrow read different values).
constexpr std::string_view kSingletonHeaders[] = {"Host",         "Content-Type",    "Authorization",
                                                  "ClientId",     "Idempotency-Key", "Origin",
                                                  "X-Request-Id", "X-Signature",     "X-Timestamp"};
constexpr size_t kRequestIdHeader = 6;  // its index above

// "http://host:port/path?q" -> "/path?q" (absolute-form, RFC 9112 §3.2.2).
std::string_view OriginFormOf(std::string_view target) {
  size_t scheme_end = target.find("://");
  if (scheme_end == std::string_view::npos || target.empty() || target[0] == '/') return target;
  std::string_view scheme = target.substr(0, scheme_end);
  if (!EqualsIgnoreCase(scheme, "http") && !EqualsIgnoreCase(scheme, "https")) return target;
  std::string_view rest = target.substr(scheme_end + 3);
  size_t path = rest.find_first_of("/?");
  if (path == std::string_view::npos) return "/";
  rest.remove_prefix(path);
  return rest.front() == '?' ? std::string_view("/") : rest;  // "?q" alone keeps no path: the root
}

}  // namespace

// True when the comma-separated list `value` holds `token` (any case).
bool ListHas(std::string_view value, std::string_view token) {
  while (true) {
    size_t comma = value.find(',');
    if (EqualsIgnoreCase(TrimOws(value.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) return false;
    value.remove_prefix(comma + 1);
  }
}

namespace {

bool IsRequestIdChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
         c == '.' || c == ':' || c == '+' || c == '/' || c == '=';
}

// 16 hex digits: a random prefix drawn once per process, then a count of
// the process's ids. Unique enough to find a request's lines, and one
// relaxed atomic add per request.
struct IdSource {
  char prefix[8];
  std::atomic<uint32_t> count{0};
  IdSource() {
    static constexpr char kHex[] = "0123456789abcdef";
    uint32_t r = std::random_device{}();
    for (int i = 7; i >= 0; --i, r >>= 4) prefix[i] = kHex[r & 15];
  }
};
IdSource ids;

size_t NewRequestId(char* out) {
  static constexpr char kHexPairs[] =
      "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
      "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"
      "404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f"
      "606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f"
      "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"
      "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf"
      "c0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf"
      "e0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";
  std::memcpy(out, ids.prefix, 8);
  uint32_t n = ids.count.fetch_add(1, std::memory_order_relaxed);
  for (int i = 14; i >= 8; i -= 2, n >>= 8) std::memcpy(out + i, kHexPairs + 2 * (n & 0xff), 2);
  return 16;
}

}  // namespace

void Codec::TakeRequestId(std::string_view sent) {
  bool valid = !sent.empty() && sent.size() <= request_id_.size();
  for (size_t i = 0; valid && i < sent.size(); ++i) valid = IsRequestIdChar(sent[i]);
  if (valid) {
    std::memcpy(request_id_.data(), sent.data(), sent.size());
    request_id_size_ = sent.size();
    return;
  }
  request_id_size_ = NewRequestId(request_id_.data());
}

Status Codec::CheckHeader() {
  std::string_view request_id;
  Status s = CheckFields(&request_id);
  TakeRequestId(request_id);
  return s;
}

Status Codec::CheckFields(std::string_view* request_id) {
  const auto& msg = parser_->get();
  head_request_ = msg.method() == bhttp::verb::head;
  started_ = Clock::now();
  method_ = ToMethod(msg.method());
  bytes_in_ = msg.method_string().size() + msg.target().size() + 12;  // "M T HTTP/1.1\r\n" and the blank line
  // Transfer-Encoding, over every field line that carries it, in order.
  int codings = 0, te_lines = 0;
  bool last_is_chunked = false;
  std::string_view first_other;
  int host_lines = 0;
  bool close = false, keep_alive = false;
  std::array<int, std::size(kSingletonHeaders)> singleton_seen{};
  for (const auto& field : msg) {
    ++header_fields_;
    std::string_view name(field.name_string().data(), field.name_string().size());
    bytes_in_ += name.size() + field.value().size() + 4;
    if (field.name() == bhttp::field::connection) {
      std::string_view value(field.value().data(), field.value().size());
      close = close || ListHas(value, "close");
      keep_alive = keep_alive || ListHas(value, "keep-alive");
      continue;
    }
    if (field.name() == bhttp::field::transfer_encoding) {
      ++te_lines;
      std::string_view value(field.value().data(), field.value().size());
      while (true) {
        size_t comma = value.find(',');
        std::string_view coding = TrimOws(value.substr(0, comma));
        if (!coding.empty()) {
          ++codings;
          last_is_chunked = EqualsIgnoreCase(coding, "chunked");
          if (!last_is_chunked && first_other.empty()) first_other = coding;
        }
        if (comma == std::string_view::npos) break;
        value.remove_prefix(comma + 1);
      }
      continue;
    }
    if (field.name() == bhttp::field::host) {
      ++host_lines;
      // uri-host [ ":" port ] (RFC 9112 §3.2): no list, no path, no userinfo.
      std::string_view host(field.value().data(), field.value().size());
      if (host.find_first_of(" ,/@\\?#") != std::string_view::npos)
        return Status::BadRequest("Host must be host[:port], not '" + std::string(host) + "'");
    }
    for (size_t i = 0; i < std::size(kSingletonHeaders); ++i) {
      if (!EqualsIgnoreCase(name, kSingletonHeaders[i])) continue;
      if (i == kRequestIdHeader && singleton_seen[i] == 0)
        *request_id = std::string_view(field.value().data(), field.value().size());
      if (++singleton_seen[i] > 1)
        return Status::BadRequest("header " + std::string(kSingletonHeaders[i]) + " appears more than once");
      break;
    }
  }
  // Beast reads only the first Connection line; any "close" closes.
  must_close_ = close || (msg.version() < 11 && (!keep_alive || te_lines > 0));
  if (te_lines > 0 && codings == 0) return Status::BadRequest("Transfer-Encoding is empty");
  if (codings > 0) {
    if (!last_is_chunked)
      return Status::BadRequest("Transfer-Encoding must end in chunked (a request's body length is unknown otherwise)");
    if (!first_other.empty())
      return {ErrorCode::kNotImplemented, "transfer coding '" + std::string(first_other) + "' is not implemented"};
    if (codings > 1) return Status::BadRequest("Transfer-Encoding names chunked more than once");
  }
  if (msg.version() >= 11 && host_lines == 0) return Status::BadRequest("an HTTP/1.1 request must have a Host header");
  return Status::Ok();
}

Request& Codec::BuildRequest() {
  auto& msg = parser_->get();
  request_.method = ToMethod(msg.method());
  request_.method_name = std::string_view(msg.method_string().data(), msg.method_string().size());
  std::string_view target = OriginFormOf(std::string_view(msg.target().data(), msg.target().size()));
  request_.target = target;
  size_t q = target.find('?');
  request_.path = target.substr(0, q);
  request_.query = q == std::string_view::npos ? std::string_view{} : target.substr(q + 1);
  request_.body = std::string_view(msg.body().data(), msg.body().size());
  request_.headers.clear();
  size_t n = 0;
  for (const auto& field : msg) {
    if (n++ == header_fields_) break;  // the rest are trailers
    request_.headers.emplace_back(std::string_view(field.name_string().data(), field.name_string().size()),
                                  std::string_view(field.value().data(), field.value().size()));
  }
  request_.spare_body = &spare_;
  request_.long_running = false;
  request_.request_id = request_id();
  request_.peer = peer_;
  request_.route = nullptr;
  built_ = true;
  bytes_in_ += request_.body.size();
  if (!options_->cors_origins.empty()) {
    origin_ = request_.Header("Origin");
    preflight_ = request_.method == Method::kOptions && request_.HasHeader("Access-Control-Request-Method");
  }
  keep_alive_ = msg.keep_alive() && !must_close_;
  http10_keep_alive_ = keep_alive_ && msg.version() < 11;
  return request_;
}

void Codec::AppendHead(std::string& out, const Response& r, bool close, bool keep_alive_header) {
  char number[24];
  auto append_number = [&](uint64_t v) {
    auto [end, ec] = std::to_chars(number, number + sizeof number, v);
    out.append(number, static_cast<size_t>(end - number));
  };
  out.append("HTTP/1.1 "sv);
  append_number(static_cast<uint64_t>(r.status));
  out.push_back(' ');
  auto reason = bhttp::obsolete_reason(static_cast<bhttp::status>(r.status));
  out.append(reason.data(), reason.size());
  out.append("\r\nServer: hotrow\r\nDate: "sv);
  out.append(HttpDate());
  out.append("\r\n"sv);
  bool bodiless = r.status == 204 || r.status == 304 || r.status < 200;
  if (!bodiless) {
    out.append("Content-Type: "sv);
    out.append(r.content_type);
    out.append("\r\nContent-Length: "sv);
    append_number(r.body.size());
    out.append("\r\n"sv);
  }
  for (const auto& [name, value] : r.headers) {
    out.append(name);
    out.append(": "sv);
    out.append(value);
    out.append("\r\n"sv);
  }
  if (close)
    out.append("Connection: close\r\n"sv);
  else if (keep_alive_header)
    out.append("Connection: keep-alive\r\n"sv);
}

std::array<boost::asio::const_buffer, 2> Codec::Serialize(Response&& r, bool close) {
  // The head is written here rather than through beast::http::response:
  // Beast's fields container allocates per header, and these few fixed
  // headers need no container.
  head_.clear();
  if (request_id_size_ == 0) {
    // CheckHeader did not run: the parser refused the header (a body over
    // the limit by its Content-Length, say) or never finished it. Take what
    // it read of it.
    std::string_view sent;
    if (parser_ && parser_->is_header_done()) {
      const auto& msg = parser_->get();
      method_ = ToMethod(msg.method());
      auto it = msg.find("X-Request-Id");
      if (it != msg.end()) sent = std::string_view(it->value().data(), it->value().size());
    }
    TakeRequestId(sent);
  }
  if (r.error && r.body.size() >= 2 && r.body.compare(r.body.size() - 2, 2, "}}") == 0) {
    // {"error":{...}} -> {"error":{...,"requestId":"..."}}; the id's
    // characters need no JSON escaping (IsRequestIdChar).
    std::string field = ",\"requestId\":\"";
    field.append(request_id());
    field.push_back('"');
    r.body.insert(r.body.size() - 2, field);
  }
  if (r.log_detail) {
    if (r.log_as_error)
      log::Error("request {}: {}", request_id(), *r.log_detail);
    else
      log::Warn("request {}: {}", request_id(), *r.log_detail);
  }
  AppendHead(head_, r, close, http10_keep_alive_ && !close);
  {
    // One append for the whole line.
    static constexpr std::string_view kName = "X-Request-Id: ";
    char line[kName.size() + sizeof request_id_ + 2];
    std::memcpy(line, kName.data(), kName.size());
    std::memcpy(line + kName.size(), request_id_.data(), request_id_size_);
    std::memcpy(line + kName.size() + request_id_size_, "\r\n", 2);
    head_.append(line, kName.size() + request_id_size_ + 2);
  }
  if (!options_->cors_origins.empty()) AppendCors(r);
  head_.append("\r\n"sv);
  body_ = std::move(r.body);
  Observe(r, head_.size() + (head_request_ ? 0 : body_.size()));
  return {boost::asio::buffer(head_), boost::asio::buffer(body_.data(), head_request_ ? 0 : body_.size())};
}

void Codec::Observe(const Response& r, size_t bytes_out) {
  auto now = Clock::now();
  uint64_t ns =
      started_ == Clock::time_point{}
          ? 0
          : static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(now - started_).count());
  RouteStats* route = built_ && request_.route ? request_.route : &UnmatchedRoute();
  route->Record(built_ ? request_.method : method_, r.status, ns);
  if (AuthFailureThrottle* throttle = options_->auth_throttle;
      throttle && built_ && (r.status == 401 || r.status == 403) && request_.HasHeader("Authorization")) {
    std::string client = AuthThrottleClient(request_);
    if (throttle->Failed(client))
      log::Warn(
          "{}: {} failed credentials within a minute; answering its requests with credentials 429 until the "
          "minute ends",
          client, throttle->LimitOf(client));
  }
  if (AccessLog* log = AccessLog::Active()) {
    AccessLog::Line line;
    line.request_id = request_id();
    line.method = built_ ? request_.method_name : MethodName(method_);
    line.target = built_ ? request_.target : std::string_view("-");
    line.status = r.status;
    line.duration_us = ns / 1000;
    line.bytes_in = bytes_in_;
    line.bytes_out = bytes_out;
    line.peer = peer_;
    log->Push(line);
  }
}

void Codec::AppendCors(const Response& r) {
  bool any = false, listed = false, specific = false;
  for (const auto& o : options_->cors_origins) {
    any = any || o == "*";
    specific = specific || o != "*";
    listed = listed || (!origin_.empty() && o == origin_);
  }
  if (origin_.empty() || (!any && !listed)) {
    // Whether CORS headers come depends on Origin: say so to caches.
    if (specific) head_.append("Vary: Origin\r\n");
    return;
  }
  head_.append("Access-Control-Allow-Origin: ");
  if (listed) {
    head_.append(origin_);
    head_.append("\r\nVary: Origin");
  } else {
    head_.append("*");
  }
  head_.append("\r\nAccess-Control-Expose-Headers: Idempotent-Replayed, Retry-After, Location, X-Request-Id\r\n");
  if (!preflight_) return;
  for (const auto& [name, value] : r.headers) {
    if (name != "Allow") continue;
    head_.append("Access-Control-Allow-Methods: ");
    head_.append(value);
    head_.append("\r\n");
  }
  head_.append(
      "Access-Control-Allow-Headers: Authorization, ClientId, Idempotency-Key, Content-Type, X-Signature, "
      "X-Timestamp, X-Request-Id\r\nAccess-Control-Max-Age: 600\r\n");
}

}  // namespace hotrow::http
