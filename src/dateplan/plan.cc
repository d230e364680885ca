#include "dateplan/plan.h"

#include "base/text.h"

namespace hotrow::dateplan {

Status ValidatePlanFields(const PlanFields& f) {
  if (Status s = CheckUserText(f.title, {.field = "title", .code_points_max = kTitleCodePointsMax}); !s.ok()) return s;
  if (Status s = CheckUserText(
          f.content,
          {.field = "content", .code_points_min = 0, .code_points_max = kContentCodePointsMax, .multiline = true});
      !s.ok())
    return s;
  // A category is a name other requests look up: "Indoor " beside "Indoor"
  // would be a second category nobody meant.
  return CheckUserText(f.category, {.field = "category", .code_points_max = kCategoryCodePointsMax, .trimmed = true});
}

}  // namespace hotrow::dateplan
