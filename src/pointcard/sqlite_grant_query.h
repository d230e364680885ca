// The point grant on SQLite, steps 2 and 3 (sqlite_store.h has the
// protocol): the query of each card's bonus on a read snapshot, and the
// staging of those bonuses as credits on the writer. The rest of the grant
// is in sqlite_grant.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/status.h"
#include "db/sqlite.h"
#include "pointcard/model.h"

namespace hotrow::pointcard {

struct Bonus {
  int64_t card_id;
  int64_t points;
};

// The bonus of every card whose charges in [from, to) earn one, in card
// order, on one read snapshot of `c` (taken after the grant's begin). Cards
// are never deleted; a history row without its card (which `hotrow check`
// reports) earns nothing and is not counted.
Result<std::vector<Bonus>> QueryBonuses(db::sqlite::Connection& c, const GrantRequest& r);

// Inserts the credits bonuses[at, end) of grant `grant_id` into
// P_GRANT_CREDIT, inside the caller's writer op.
Status StageCredits(db::sqlite::Connection& c, const std::vector<Bonus>& bonuses, size_t at, size_t end,
                    int64_t grant_id);

}  // namespace hotrow::pointcard
