// The point card's invariants, checked on one consistent snapshot (a read
// transaction), so the check may run beside a live server:
//   1. every card's BALANCE equals the sum of its history's AMOUNTs;
//   2. each history row's BALANCE is the running sum of its card's AMOUNTs
//      in PAYMENT_TIME order;
//   3. no balance (card or row) is below zero;
//   4. a card's LAST_UPDATE equals the time of its newest history row (cards
//      without history are not held to this: their LAST_UPDATE is the time
//      they were issued);
//   5. every history row belongs to a card, and a card's times are distinct;
//   6. every row's KIND matches it (grant: STORE_ID 0; charge: a store and a
//      positive amount; payment: a store and a negative one);
//   7. every staged credit (P_GRANT_CREDIT) belongs to a card and to a grant
//      that is staging or applied -- a folded grant's credit would be added
//      twice -- and is positive.
// Balances are checked as written: an applied grant's credit not yet folded
// is counted apart (pending_points), as reads add it.
// Cost: one pass over S_ACCOUNT by id merged with one pass over
// H_TRANSACTION by (CARD_ID, PAYMENT_TIME) -- its index -- so linear.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "db/sqlite.h"

namespace hotrow::pointcard {

struct CheckReport {
  int64_t cards = 0;
  int64_t rows = 0;
  int64_t pending_points = 0;                 // applied grant credit not yet folded
  std::map<std::string, int64_t> violations;  // kind -> count
  std::vector<std::string> examples;          // the first kExamplesMax, precisely
  bool ok() const { return violations.empty(); }
};

inline constexpr size_t kCheckExamplesMax = 50;

Result<CheckReport> CheckInvariants(db::sqlite::Connection& conn);

}  // namespace hotrow::pointcard
