// JSON for plans. A plan's text fields change only on an edit while its
// like count changes all the time, so the Catalog renders everything up to
// the count once per edit (RenderPlanHead, through RapidJSON) and a read
// appends the count: {"id":1,...,"like": + 42 + }.
#pragma once

#include <string>

#include "dateplan/plan.h"
#include "http/json.h"

namespace hotrow::dateplan {

// {"id":1,"title":"...","content":"...","category":"...","like":
std::string RenderPlanHead(const Plan& plan);

// The plan's full JSON, appended to `out` (uses plan.json_head when set).
void AppendPlanJson(std::string& out, const Plan& plan);

}  // namespace hotrow::dateplan
