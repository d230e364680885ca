#include "base/text.h"

#include <charconv>

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

namespace hotrow {

std::optional<uint32_t> NextCodePoint(std::string_view s, size_t* i) {
  size_t n = s.size();
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned c = byte(*i);
  if (c < 0x80) return ++*i, c;
  size_t len;
  uint32_t cp;
  if ((c & 0xE0) == 0xC0)
    len = 2, cp = c & 0x1F;
  else if ((c & 0xF0) == 0xE0)
    len = 3, cp = c & 0x0F;
  else if ((c & 0xF8) == 0xF0)
    len = 4, cp = c & 0x07;
  else
    return std::nullopt;
  if (*i + len > n) return std::nullopt;
  for (size_t k = 1; k < len; ++k) {
    unsigned cc = byte(*i + k);
    if ((cc & 0xC0) != 0x80) return std::nullopt;
    cp = (cp << 6) | (cc & 0x3F);
  }
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return std::nullopt;
  *i += len;
  return cp;
}

bool IsValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    if (!NextCodePoint(s, &i)) return false;
  }
  return true;
}

std::string ToValidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t start = i;
    if (NextCodePoint(s, &i)) {
      out.append(s.substr(start, i - start));
    } else {
      out.append("\xEF\xBF\xBD");  // U+FFFD REPLACEMENT CHARACTER, one per bad byte
      i = start + 1;
    }
  }
  return out;
}

bool IsVisible(uint32_t cp) {
  switch (u_charType(static_cast<UChar32>(cp))) {
    case U_CONTROL_CHAR:         // Cc
    case U_FORMAT_CHAR:          // Cf
    case U_SPACE_SEPARATOR:      // Zs
    case U_LINE_SEPARATOR:       // Zl
    case U_PARAGRAPH_SEPARATOR:  // Zp
    case U_NON_SPACING_MARK:     // Mn
    case U_ENCLOSING_MARK:       // Me
    case U_UNASSIGNED:           // Cn: nothing a reader could see
      return false;
    default:
      return true;
  }
}

bool IsCombiningMark(uint32_t cp) {
  auto type = u_charType(static_cast<UChar32>(cp));
  return type == U_NON_SPACING_MARK || type == U_ENCLOSING_MARK || type == U_COMBINING_SPACING_MARK;
}

bool IsDefaultIgnorable(uint32_t cp) {
  return u_hasBinaryProperty(static_cast<UChar32>(cp), UCHAR_DEFAULT_IGNORABLE_CODE_POINT);
}

bool IsVariationSelector(uint32_t cp) { return (cp >= 0xFE00 && cp <= 0xFE0F) || (cp >= 0xE0100 && cp <= 0xE01EF); }

bool IsPictographic(uint32_t cp) { return u_hasBinaryProperty(static_cast<UChar32>(cp), UCHAR_EXTENDED_PICTOGRAPHIC); }

bool IsPartOfPrevious(uint32_t cp, uint32_t previous) {
  if (IsVariationSelector(cp)) return IsPictographic(previous);
  return IsCombiningMark(cp) && !IsDefaultIgnorable(cp);
}

Status CheckUserText(std::string_view value, const TextRule& rule) {
  const std::string name(rule.field);
  if (!IsValidUtf8(value)) return Status::InvalidField(name, name + " must be valid UTF-8");
  size_t count = 0;
  bool visible = false;
  // The last character, its marks included: "e" + U+0301, or a heart +
  // U+FE0F, end with a visible character; a mark that draws nothing (a
  // variation selector after a letter, U+034F) is itself the end, and
  // invisible.
  uint32_t first = 0, last = 0, previous = 0;
  for (size_t i = 0; i < value.size();) {
    uint32_t cp = *NextCodePoint(value, &i);
    if (count++ == 0) first = cp;
    if (count == 1 || !IsPartOfPrevious(cp, previous)) last = cp;
    previous = cp;
    if (!rule.multiline && (cp == 0x2028 || cp == 0x2029))
      return Status::InvalidField(name, name + " must be one line (no U+2028 or U+2029)");
    bool line_break = cp == '\n' || cp == '\t';
    if ((cp < 0x20 || (cp >= 0x7F && cp <= 0x9F)) && !(rule.multiline && line_break))
      return Status::InvalidField(name, name + " must not contain control characters (U+0000-001F, U+007F-009F" +
                                            std::string(rule.multiline ? "; newline and tab are allowed" : "") + ")");
    if ((cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069))
      return Status::InvalidField(name, name +
                                            " must not contain bidirectional overrides or isolates "
                                            "(U+202A-202E, U+2066-2069)");
    visible = visible || (IsVisible(cp) && !IsDefaultIgnorable(cp));  // Hangul fillers show nothing
  }
  if (count < rule.code_points_min || count > rule.code_points_max)
    return Status::InvalidField(name, name + " must be " + std::to_string(rule.code_points_min) + "-" +
                                          std::to_string(rule.code_points_max) + " characters");
  if (count > 0 && !visible) return Status::InvalidField(name, name + " must contain at least one visible character");
  auto shows = [](uint32_t cp) { return IsVisible(cp) && !IsDefaultIgnorable(cp); };
  if (rule.trimmed && count > 0 && (!shows(first) || !shows(last)))
    return Status::InvalidField(name, name + " must not begin or end with whitespace or an invisible character");
  return Status::Ok();
}

size_t CountCodePoints(std::string_view s) {
  size_t count = 0;
  for (char ch : s)
    if ((static_cast<unsigned char>(ch) & 0xC0) != 0x80) ++count;
  return count;
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

std::optional<std::string> HexDecode(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = digit(hex[i]), lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

Status ValidateIdempotencyKey(std::string_view key) {
  if (key.empty() || key.size() > kIdempotencyKeyLengthMax)
    return Status::InvalidField("Idempotency-Key", "Idempotency-Key must be 1-200 visible ASCII characters");
  for (char c : key)
    if (c < 0x21 || c > 0x7E)
      return Status::InvalidField("Idempotency-Key", "Idempotency-Key must be 1-200 visible ASCII characters");
  return Status::Ok();
}

std::string ToNfc(std::string_view s) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
  if (U_FAILURE(status)) return std::string(s);  // ICU's data is missing: as sent
  icu::UnicodeString text = icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), static_cast<int32_t>(s.size())));
  if (nfc->isNormalized(text, status) && U_SUCCESS(status)) return std::string(s);
  status = U_ZERO_ERROR;
  icu::UnicodeString normal = nfc->normalize(text, status);
  if (U_FAILURE(status)) return std::string(s);
  std::string out;
  normal.toUTF8String(out);
  return out;
}

}  // namespace hotrow
