// Query strings: "limit=10&category=%E5%B1%8B%E5%86%85" -> decoded pairs.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace hotrow::http {

class Query {
 public:
  // Splits and percent-decodes `query` ('+' is a space). Fails with
  // bad_request on a malformed escape or a value that is not valid UTF-8,
  // and with invalid_field naming a parameter that appears twice (which
  // value wins would be a guess).
  static Result<Query> Parse(std::string_view query);

  // The value of the first occurrence of `key`, if present.
  std::optional<std::string_view> Get(std::string_view key) const;

  // An integer parameter within [min, max]; `fallback` when absent;
  // invalid_field naming the parameter otherwise.
  Result<int64_t> Int(std::string_view key, int64_t fallback, int64_t min, int64_t max) const;
  // An integer for a service that checks the range itself: one beyond
  // int64 saturates to INT64_MIN or INT64_MAX (so that check names its
  // bounds); invalid_field "<key> must be an integer" when it is not one.
  Result<int64_t> Int(std::string_view key, int64_t fallback) const;

 private:
  std::vector<std::pair<std::string, std::string>> params_;
};

// Percent-decodes `in` into `out` (with '+' as space when plus_is_space);
// false on a malformed escape.
bool PercentDecode(std::string_view in, std::string& out, bool plus_is_space);

}  // namespace hotrow::http
