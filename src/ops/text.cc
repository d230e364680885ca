#include "ops/text.h"

#include <charconv>

namespace hotrow {

bool IsValidUtf8(std::string_view s) {
  size_t i = 0, n = s.size();
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  while (i < n) {
    unsigned c = byte(i);
    if (c < 0x80) { ++i; continue; }
    size_t len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07;
    else return false;
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      unsigned cc = byte(i + k);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

size_t CountCodePoints(std::string_view s) {
  size_t count = 0;
  for (char ch : s)
    if ((static_cast<unsigned char>(ch) & 0xC0) != 0x80) ++count;
  return count;
}

bool HasControlCharacters(std::string_view s, bool allow_newlines) {
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c == 0x7F) return true;
    if (c < 0x20) {
      if (allow_newlines && (c == '\n' || c == '\r' || c == '\t')) continue;
      return true;
    }
  }
  return false;
}

std::optional<int64_t> ParseInt(std::string_view s, int64_t min, int64_t max) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  if (v < min || v > max) return std::nullopt;
  return v;
}

std::optional<int64_t> ParsePositiveId(std::string_view s) {
  if (s.empty() || s[0] < '0' || s[0] > '9') return std::nullopt;  // no sign, no space
  return ParseInt(s, 1, INT64_MAX);
}

std::string HexEncode(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char ch : bytes) {
    auto c = static_cast<unsigned char>(ch);
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

}  // namespace hotrow
