// libFuzzer target: RFC 3339 times (grant periods). What ParseTime accepts
// must format and parse back to the same instant; and an input already in
// the canonical form (YYYY-MM-DDTHH:MM:SS.ffffffZ, not a leap second) must
// format back to itself, so a date the calendar does not have (30 February)
// cannot be accepted as another day.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "pointcard/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto us = hotrow::pointcard::ParseTime(text);
  if (!us) return 0;
  std::string formatted = hotrow::pointcard::FormatTime(*us);
  auto again = hotrow::pointcard::ParseTime(formatted);
  if (!again || *again != *us) std::abort();
  bool canonical =
      text.size() == 27 && text[10] == 'T' && text[19] == '.' && text[26] == 'Z' && text.substr(17, 2) != "60";
  if (canonical && formatted != text) std::abort();
  return 0;
}
