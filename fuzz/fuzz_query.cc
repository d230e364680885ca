// libFuzzer target: the query-string parser and its integer readers.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "http/query.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto q = hotrow::http::Query::Parse(text);
  if (!q.ok()) return 0;
  for (std::string_view key : {"limit", "offset", "around", "before", "category"}) {
    (void)q->Get(key);
    (void)q->Int(key, 10);
    (void)q->Int(key, 10, 1, 100);
  }
  return 0;
}
