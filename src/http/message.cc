#include "http/message.h"

#include <cassert>

#include <boost/asio/ip/address.hpp>

#include "base/auth.h"
#include "ops/pooling.h"

namespace hotrow::http {

std::string_view MethodName(Method m) {
  switch (m) {
    case Method::kGet:
      return "GET";
    case Method::kHead:
      return "HEAD";
    case Method::kPost:
      return "POST";
    case Method::kPut:
      return "PUT";
    case Method::kPatch:
      return "PATCH";
    case Method::kDelete:
      return "DELETE";
    case Method::kOptions:
      return "OPTIONS";
    case Method::kOther:
      return "OTHER";
  }
  return "OTHER";
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

std::string_view Request::Header(std::string_view name) const {
  for (const auto& [n, v] : headers)
    if (EqualsIgnoreCase(n, name)) return v;
  return {};
}

bool Request::HasHeader(std::string_view name) const {
  for (const auto& [n, v] : headers)
    if (EqualsIgnoreCase(n, name)) return true;
  return false;
}

void ResponseHeaders::Add(std::string_view name, std::string value) {
  assert(size_ < kHeadersMax && "raise ResponseHeaders::kHeadersMax");
  if (size_ < kHeadersMax) items_[size_++] = {name, std::move(value)};
}

std::string TakeSpareBody(Request& request) {
  std::string body;
  if (request.spare_body && pooling::Enabled()) {
    body.swap(*request.spare_body);
    body.clear();
  }
  return body;
}

Response NewResponse(Request& request, int status) { return ResponseWithBody(TakeSpareBody(request), status); }

Response ResponseWithBody(std::string body, int status) {
  Response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

std::string AuthThrottleClient(const Request& request) {
  std::string_view peer = request.peer;
  std::string client;
  if (!peer.empty() && peer[0] == '[') {
    size_t end = peer.find(']');
    std::string_view text = peer.substr(1, end == std::string_view::npos ? std::string_view::npos : end - 1);
    boost::system::error_code ec;
    auto v6 = boost::asio::ip::make_address_v6(std::string(text), ec);
    if (ec) {
      client = std::string(text);
    } else if (v6.is_v4_mapped()) {
      client = boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, v6).to_string();
    } else {
      auto bytes = v6.to_bytes();
      std::fill(bytes.begin() + 8, bytes.end(), 0);
      client = boost::asio::ip::address_v6(bytes).to_string() + "/64";
    }
  } else {
    size_t colon = peer.rfind(':');
    client = std::string(colon == std::string_view::npos ? peer : peer.substr(0, colon));
  }
  auto bearer = BearerToken(request);
  if (bearer && NamedCredentialId(*bearer)) client.append(AuthFailureThrottle::kStoreKeySuffix);
  return client;
}

std::optional<std::string_view> BearerToken(const Request& request) {
  std::string_view v = request.Header("Authorization");
  constexpr std::string_view kScheme = "Bearer ";
  if (v.size() <= kScheme.size() || !EqualsIgnoreCase(v.substr(0, kScheme.size()), kScheme)) return std::nullopt;
  v.remove_prefix(kScheme.size());
  while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
  while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
  if (v.empty()) return std::nullopt;
  return v;
}

}  // namespace hotrow::http
