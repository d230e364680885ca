// A date plan and the rules for its fields.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace hotrow::dateplan {

// Field bounds, in Unicode code points.
inline constexpr size_t kTitleCodePointsMax = 100;
inline constexpr size_t kContentCodePointsMax = 2000;
inline constexpr size_t kCategoryCodePointsMax = 30;
// Ranking page size.
inline constexpr int64_t kRankingLimitMax = 100;
inline constexpr int64_t kRankingLimitDefault = 10;
// Random bytes in an edit token (192 bits; shown once, stored as SHA-256).
inline constexpr size_t kEditTokenBytes = 24;

// What a client sets: title, content and category.
struct PlanFields {
  std::string title;
  std::string content;
  std::string category;
};

// A stored plan. edit_token_hash is the SHA-256 of the plan's edit token, or
// empty for plans without one (seeded plans: only the admin edits those).
struct Plan {
  int64_t id = 0;
  std::string title;
  std::string content;
  std::string category;
  int64_t like = 0;
  std::string edit_token_hash;
  // Bumped by every edit, in the store's transaction: a read model never
  // replaces a plan with an older version of it (an edit's completion can
  // arrive after another instance's later edit was applied). Likes do not
  // bump it: counts only grow, and the catalog keeps the larger.
  int64_t version = 1;
  // Set by the Catalog: the plan's JSON up to its like count (plan_json.h).
  std::string json_head = {};
};

// invalid_field naming the first field that breaks its rule: title 1-100 code
// points, content 0-2,000, category 1-30, all valid UTF-8; no control
// characters in title or category (content may hold newlines and tabs).
Status ValidatePlanFields(const PlanFields& fields);

// The error every backend and layer answers for an unknown plan.
inline Status NoSuchPlan(int64_t id) { return Status::NotFound("no date plan with id " + std::to_string(id)); }

}  // namespace hotrow::dateplan
