// libFuzzer target: the JSON body parser every POST/PUT route uses, and the
// field accessors the routes call on what it accepts. Any crash, sanitizer
// report or failed check here is a bug; an error Status is not.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "http/json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto obj = hotrow::http::JsonObject::Parse(text);
  if (!obj.ok()) return 0;
  for (std::string_view name : {"title", "content", "category", "score", "amount", "storeId", "from", "to",
                                "ratePercent", "allowOverlap", "name", "id", "age"}) {
    (void)obj->Has(name);
    (void)obj->String(name);
    (void)obj->Integer(name, -1000, 1000);
    (void)obj->SaturatedInteger(name);
    (void)obj->OptionalBool(name, false);
    (void)obj->Number(name);
  }
  (void)obj->OnlyFields({"title", "content", "category"});
  // An object kept as sent (a score's metadata): it must be exactly one
  // JSON object, whatever surrounded it.
  auto raw = obj->RawObject("metadata", 1024, 8);
  if (raw.ok()) {
    auto again = hotrow::http::JsonObject::Parse(*raw);
    if (!again.ok() || raw->empty() || raw->front() != '{' || raw->back() != '}') __builtin_trap();
  }
  return 0;
}
