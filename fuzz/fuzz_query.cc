// libFuzzer target: the query-string parser, its integer readers, and the
// history cursor (`before`, parsed by ParsePositiveId): the whole input as
// a cursor, and the cursor of the parsed query. An accepted cursor is a
// positive id that prints and parses back to itself.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "base/text.h"
#include "http/query.h"

namespace {
void CheckCursor(std::string_view text) {
  auto v = hotrow::ParsePositiveId(text);
  if (!v) return;
  if (*v <= 0) std::abort();
  auto again = hotrow::ParsePositiveId(std::to_string(*v));
  if (!again || *again != *v) std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  CheckCursor(text);
  auto q = hotrow::http::Query::Parse(text);
  if (!q.ok()) return 0;
  for (std::string_view key : {"limit", "offset", "around", "before", "category"}) {
    (void)q->Get(key);
    (void)q->Int(key, 10);
    (void)q->Int(key, 10, 1, 100);
  }
  if (auto cursor = q->Get("before")) CheckCursor(*cursor);
  return 0;
}
