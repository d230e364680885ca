// Small text utilities shared by the domains.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace hotrow {

// True when `s` is well-formed UTF-8 (no overlongs, no surrogates, <= U+10FFFF).
bool IsValidUtf8(std::string_view s);

// Unicode code points in `s`, which must be valid UTF-8.
size_t CountCodePoints(std::string_view s);

// True when `s` contains a C0 control character or DEL; with allow_newlines,
// '\n', '\r' and '\t' are not counted.
bool HasControlCharacters(std::string_view s, bool allow_newlines);

// Parses a decimal id in [1, 2^63-1]; nullopt for anything else ("", "0",
// "-1", "1e3", "01x", overflow).
std::optional<int64_t> ParsePositiveId(std::string_view s);

// Parses a decimal integer in [min, max] (an optional leading '-').
std::optional<int64_t> ParseInt(std::string_view s, int64_t min, int64_t max);

// Lower-case hexadecimal of `bytes`.
std::string HexEncode(std::string_view bytes);

}  // namespace hotrow
