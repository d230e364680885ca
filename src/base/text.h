// Small text utilities shared by the domains.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace hotrow {

// True when `s` is well-formed UTF-8 (no overlongs, no surrogates, <= U+10FFFF).
bool IsValidUtf8(std::string_view s);

// The code point at s[*i], advancing *i past it; nullopt (and *i unmoved)
// when the bytes there are not well-formed UTF-8.
std::optional<uint32_t> NextCodePoint(std::string_view s, size_t* i);

// `s` with each byte that is not part of well-formed UTF-8 replaced by
// U+FFFD, so that text from the wire can be echoed in valid JSON.
std::string ToValidUtf8(std::string_view s);

// "Visible", defined once for every text field a user gives hotrow: a code
// point outside the Unicode categories Cc, Cf, Z* (separators), Mn and Me
// (combining marks) and unassigned code points. Categories come from ICU.
bool IsVisible(uint32_t cp);
// Mn, Mc and Me: marks that combine with the character before them
// (accents, Indic vowel signs, variation selectors).
bool IsCombiningMark(uint32_t cp);
// Unicode's Default_Ignorable_Code_Point: drawn as nothing (zero-width
// joiners, variation selectors, Hangul fillers, soft hyphens...).
bool IsDefaultIgnorable(uint32_t cp);
// The variation selectors: U+FE00 to U+FE0F, and the supplement from U+E0100.
bool IsVariationSelector(uint32_t cp);
// Unicode's Extended_Pictographic: emoji and the symbols they grew from.
bool IsPictographic(uint32_t cp);
// Whether `cp` draws as part of the character `previous` began: a
// combining mark that is not default-ignorable, or a variation selector
// after an emoji (U+2764 U+FE0F).
bool IsPartOfPrevious(uint32_t cp, uint32_t previous);

// The rules of one user-supplied text field.
struct TextRule {
  std::string_view field;  // the name errors carry ("title")
  size_t code_points_min = 1;
  size_t code_points_max = 100;
  bool multiline = false;  // newline (U+000A) and tab allowed; CR never is
  bool trimmed = false;    // must not begin or end with an invisible code point
};

// invalid_field naming rule.field unless `value` is valid UTF-8 of
// [min, max] code points with no C0/C1 control (but newline and tab when
// multiline), no bidirectional override or isolate (U+202A-202E,
// U+2066-2069; LRM/RLM stay, right-to-left text needs them), at least one
// visible code point when non-empty, not one line or paragraph separator
// (U+2028, U+2029) unless multiline, and (trimmed) nothing invisible at
// either end (combining marks after the last visible character are part
// of it).
Status CheckUserText(std::string_view value, const TextRule& rule);

// Unicode code points in `s`, which must be valid UTF-8.
size_t CountCodePoints(std::string_view s);

// `s` (valid UTF-8) in Unicode Normalization Form C: a precomposed é for
// "e" + U+0301, so an identifier spelled two ways is one key.
std::string ToNfc(std::string_view s);

// Parses a decimal id in [1, 2^63-1]; nullopt for anything else ("", "0",
// "-1", "1e3", "01x", overflow).
std::optional<int64_t> ParsePositiveId(std::string_view s);

// Parses a decimal integer in [min, max] (an optional leading '-').
std::optional<int64_t> ParseInt(std::string_view s, int64_t min, int64_t max);

// An Idempotency-Key header (payments, score posts): 1-200 visible ASCII
// characters; invalid_field naming the header otherwise.
inline constexpr size_t kIdempotencyKeyLengthMax = 200;
Status ValidateIdempotencyKey(std::string_view key);

// Lower-case hexadecimal of `bytes`.
std::string HexEncode(std::string_view bytes);
// The bytes of hexadecimal text (either case); nullopt for an odd length
// or a character that is not a hex digit.
std::optional<std::string> HexDecode(std::string_view hex);

}  // namespace hotrow
