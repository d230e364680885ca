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
//   6. every row's KIND matches it (grant: STORE_ID 0 and a positive
//      amount; charge and refund: a store and a positive amount; payment
//      and capture: a store and a negative one);
//   7. every staged credit (P_GRANT_CREDIT) belongs to a card and to a grant
//      that is staging or applied -- a folded grant's credit would be added
//      twice -- and is positive;
//   8. every grant the snapshot sees applied gave each card exactly its
//      bonus, recomputed from the period's charges, floor(sum x rate / 100):
//      its grant rows (KIND 'grant', written from its apply on and before the
//      next grant's) plus its credit not yet folded. A grant half applied, a
//      credit folded twice or lost, a bonus given to the wrong card: each
//      shows here. With the whole card range, the totals the grant recorded
//      (CARDS, POINTS) must match too. Grants made before the staged
//      protocol (0.5.0; their APPLIED_TIME is their GRANT_TIME) bound the
//      windows but are not recomputed: PostgreSQL's rounded half up. Grant
//      rows from the first staged grant's begin on must lie in a window;
//      earlier ones (seeds, a simulation of the reference's own grant,
//      which P_GRANT does not record) are not attributed, and neither are
//      the rows of a grant whose P_GRANT row was deleted. At most 1,000 such
//      rows are listed per check. On PostgreSQL the windows assume a clock
//      that does not step back between a grant's apply and its fold: rows
//      stamped before the apply would count for the grant before it.
//   9. every row's own fields: a positive TRANSACTION_ID, a known ACTOR
//      (system on grant rows and only there), REFERENCE and REASON within
//      their bounds, REFUND_OF on refunds and only there;
//   10. every card's state: STATUS active or closed, CLOSED_TIME set
//      exactly when closed, EXTERNAL_REF 1-64 characters without a space,
//      and no payment or charge on a closed card after its close; a card
//      closed before a grant applied is owed nothing by it (8.);
//   11. every row a store key wrote (ACTOR key:<KEY_ID>, point-card schema
//      4) names a key of M_STORE_KEY, of the row's store, made before the
//      row and not revoked before it;
//   12. every refund (KIND refund, 0.11.0) returns part of a payment of its
//      own card, at that payment's store and after it, and a payment's
//      refunds together return at most what it took (captures, 0.12.0,
//      are refundable as payments are);
//   13. every hold (P_HOLD, 0.12.0) in order: an amount from -1,000,000 to
//      -1, made before it expires, captured or voided before it expired
//      (an expiry stamped at EXPIRES_TIME), a captured one's row a capture
//      of its card and store within its amount, at or after its end; every
//      capture row named by one captured hold; and no card holding more in
//      open, unexpired holds than its balance with its pending credit.
//   14. every lot (P_LOT, 0.13.0, SQLite) adds up: REMAINING = AMOUNT + its
//      uses, RESERVED = what open holds keep of it, 0 <= RESERVED <=
//      REMAINING, written out (EXPIRED_TIME) at or after its expiry with
//      only the reserved part left; each use a row of the lot's card of the
//      right sign, an expiry row exactly what it took; each reservation an
//      open hold's; and no card whose lots have more than its balance less
//      what open holds keep of its never-expiring points. Expiry rows are
//      KIND 'expiry', store 0, negative, ACTOR system (6., 9.).
// Balances are checked as written: an applied grant's credit not yet folded
// is counted apart (pending_points), as reads add it.
// Cost: one pass over S_ACCOUNT by id merged with one pass over
// H_TRANSACTION by (CARD_ID, PAYMENT_TIME) -- its index -- so linear; a few
// scans of H_TRANSACTION (KIND, row fields, refunds); then per applied
// grant, its period's charges and its window's grant rows.
//
// A scope of card ids [card_first, card_last] checks only those cards (ids need
// not be dense), in one read transaction all the same, and recomputes only
// the newest two grants (kSampledGrantsMax): what
// `hotrow check pointcard --sample-cards N` repeats beside a running grant,
// to prove it atomic while it runs.
#pragma once

#include <climits>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "db/sqlite.h"

namespace hotrow::pointcard {

struct CheckScope {
  int64_t card_first = INT64_MIN;  // the cards with card_first <= CARD_ID <= card_last
  int64_t card_last = INT64_MAX;
  bool whole() const { return card_first == INT64_MIN && card_last == INT64_MAX; }
};

struct CheckReport {
  int64_t cards = 0;
  int64_t rows = 0;
  int64_t pending_points = 0;                 // applied grant credit not yet folded
  int64_t grants_checked = 0;                 // applied or folded grants recomputed (8.)
  int64_t grants_staging = 0;                 // grants the snapshot saw staging
  int64_t grants_folding = 0;                 // ... applied and not yet folded
  std::map<std::string, int64_t> violations;  // kind -> count
  std::vector<std::string> examples;          // the first kExamplesMax, precisely
  bool ok() const { return violations.empty(); }
};

inline constexpr size_t kCheckExamplesMax = 50;

Result<CheckReport> CheckInvariants(db::sqlite::Connection& conn, const CheckScope& scope = {});

// Invariant 8's bookkeeping, shared by both backends. A grant as P_GRANT
// holds it (times in microseconds; applied_us is APPLIED_TIME, or
// GRANT_TIME where that is NULL), in the order of applied_us.
struct GrantRecord {
  int64_t grant_id = 0;
  std::string state;
  int64_t grant_us = 0, applied_us = 0, from_us = 0, to_us = 0, rate_percent = 0, cards = 0, points = 0;
};
// An applied or folded grant to recompute, and the window its rows take:
// [applied_us, the next applied grant's applied_us).
struct GrantWindow {
  GrantRecord grant;
  int64_t window_end_us = INT64_MAX;
};
// The grants of the staged protocol to recompute, and the grant rows no
// window can hold: [begin, end) from the first staged grant's begin to the
// first window (a credit folded before its grant applied lands there, or in
// the window before, whose recomputation then finds it). Counts the staging
// and folding grants into `report`.
struct GrantWindows {
  std::vector<GrantWindow> windows;
  int64_t unattributed_begin_us = INT64_MAX, unattributed_end_us = INT64_MAX;
};
// A scoped check keeps the newest kSampledGrantsMax windows only.
GrantWindows WindowsOf(const std::vector<GrantRecord>& grants, const CheckScope& scope, CheckReport& report);
inline constexpr size_t kSampledGrantsMax = 2;
// The example for a grant row outside every window.
std::string UnattributedRow(int64_t card_id, int64_t time_us, int64_t amount);
// A card's points: its bonus (pending 0), or what a grant gave it, of
// which `pending` is credit not yet folded.
struct CardPoints {
  int64_t card_id = 0, points = 0, pending = 0;
};
// Invariant 8 for one window: `expected` and `delivered`, each in card
// order, must agree card for card, and (with `totals`, for the whole card
// range) add up to the grant's recorded CARDS and POINTS.
void CompareGrant(const GrantWindow& w, const std::vector<CardPoints>& expected,
                  const std::vector<CardPoints>& delivered, bool totals, CheckReport& report);

}  // namespace hotrow::pointcard
