// libFuzzer target: RFC 3339 times (grant periods, history cursors). What
// ParseTime accepts must format and parse back to the same instant.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "pointcard/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto us = hotrow::pointcard::ParseTime(text);
  if (!us) return 0;
  auto again = hotrow::pointcard::ParseTime(hotrow::pointcard::FormatTime(*us));
  if (!again || *again != *us) std::abort();
  return 0;
}
