#include "dateplan/plan.h"

#include "ops/text.h"

namespace hotrow::dateplan {

namespace {
Status CheckText(const std::string& value, const char* name, size_t min, size_t max, bool allow_newlines) {
  if (!IsValidUtf8(value)) return Status::InvalidField(name, std::string(name) + " must be valid UTF-8");
  size_t n = CountCodePoints(value);
  if (n < min || n > max)
    return Status::InvalidField(name, std::string(name) + " must be " + std::to_string(min) + "-" +
                                          std::to_string(max) + " characters");
  if (HasControlCharacters(value, allow_newlines))
    return Status::InvalidField(name, std::string(name) + " must not contain control characters");
  return Status::Ok();
}
}  // namespace

Status ValidatePlanFields(const PlanFields& f) {
  if (Status s = CheckText(f.title, "title", 1, kTitleCodePointsMax, false); !s.ok()) return s;
  if (Status s = CheckText(f.content, "content", 0, kContentCodePointsMax, true); !s.ok()) return s;
  return CheckText(f.category, "category", 1, kCategoryCodePointsMax, false);
}

}  // namespace hotrow::dateplan
