#include "http/query.h"

#include <algorithm>
#include <charconv>

#include "base/text.h"

namespace hotrow::http {

namespace {
int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

bool PercentDecode(std::string_view in, std::string& out, bool plus_is_space) {
  out.clear();
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return false;
      int hi = HexValue(in[i + 1]), lo = HexValue(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return true;
}

Result<Query> Query::Parse(std::string_view query) {
  Query q;
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view part = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (part.empty()) continue;
    size_t eq = part.find('=');
    std::string key, value;
    if (!PercentDecode(part.substr(0, eq), key, true) ||
        (eq != std::string_view::npos && !PercentDecode(part.substr(eq + 1), value, true)))
      return Status::BadRequest("malformed percent-escape in the query string");
    if (!IsValidUtf8(key) || !IsValidUtf8(value)) return Status::BadRequest("query string is not valid UTF-8");
    if (q.Get(key)) return Status::InvalidField(key, "query parameter '" + key + "' appears more than once");
    q.params_.emplace_back(std::move(key), std::move(value));
  }
  return q;
}

std::optional<std::string_view> Query::Get(std::string_view key) const {
  for (const auto& [k, v] : params_)
    if (k == key) return std::string_view(v);
  return std::nullopt;
}

Result<int64_t> Query::Int(std::string_view key, int64_t fallback, int64_t min, int64_t max) const {
  auto raw = Get(key);
  if (!raw) return fallback;
  auto v = ParseInt(*raw, min, max);
  if (!v)
    return Status::InvalidField(std::string(key), std::string(key) + " must be an integer from " + std::to_string(min) +
                                                      " to " + std::to_string(max));
  return *v;
}

Result<int64_t> Query::Int(std::string_view key, int64_t fallback) const {
  auto raw = Get(key);
  if (!raw) return fallback;
  std::string_view text = *raw, digits = text.starts_with('-') ? text.substr(1) : text;
  bool integer =
      !digits.empty() && std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!integer) return Status::InvalidField(std::string(key), std::string(key) + " must be an integer");
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  // Beyond int64: saturate, so that the service's range check names its bounds.
  if (ec == std::errc::result_out_of_range) return text.starts_with('-') ? INT64_MIN : INT64_MAX;
  if (ec != std::errc() || end != text.data() + text.size())
    return Status::InvalidField(std::string(key), std::string(key) + " must be an integer");
  return v;
}

}  // namespace hotrow::http
