// libFuzzer target: the --db and --redis URL parsers, and the redaction
// that every printed URL goes through: a password must never survive it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "db/store_url.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  (void)hotrow::db::ParseStoreUrl(text);
  std::string redacted = hotrow::db::RedactUrl(text);
  (void)redacted;
  return 0;
}
