#include "http/message.h"

#include <cassert>

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
