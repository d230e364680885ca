// The point card's checks of holds (invariant 13) and lots (14) on SQLite
// (check.h lists every invariant; check.cc runs them).
#include <algorithm>
#include <string>

#include "pointcard/check_probes.h"
#include "pointcard/model.h"

namespace hotrow::pointcard::checking {

namespace sqlite = db::sqlite;

namespace {

// 13. holds (point-card schema 5), kept in step with the PostgreSQL
//     checker's "hold", "capture" and "held" probes: each hold's amount,
//     status and times in order (made before it expires; captured or voided
//     before it expired; an expiry stamped at EXPIRES_TIME), a captured
//     hold's row a capture of its card and store, of its CAPTURED_AMOUNT
//     (from the hold's amount to -1), at or after its end; every capture row
//     named by exactly one captured hold; and no card holding more in open,
//     unexpired holds (at ?3, now) than its balance with its pending credit.
constexpr const char* kHoldProbes[][2] = {
    {"hold",
     "SELECT h.CARD_ID, 'hold ' || h.HOLD_ID || ' (' || h.STATUS || ', amount ' || h.AMOUNT || ', made ' || "
     "h.CREATED_TIME || ', expiring ' || h.EXPIRES_TIME || ', ended ' || COALESCE(h.ENDED_TIME, 'never') || "
     "', capture ' || COALESCE(h.CAPTURE_ID, 'none') || ' of ' || COALESCE(h.CAPTURED_AMOUNT, 'none') || ') is out "
     "of order, or its capture row ' || COALESCE('is a ' || x.KIND || ' of ' || x.AMOUNT || ' on card ' || x.CARD_ID "
     "|| ' at store ' || x.STORE_ID || ' at ' || x.PAYMENT_TIME, 'is not in the history') "
     "FROM P_HOLD h LEFT JOIN H_TRANSACTION x ON x.TRANSACTION_ID = h.CAPTURE_ID "
     "WHERE h.CARD_ID >= ?1 AND h.CARD_ID <= ?2 AND (h.AMOUNT NOT BETWEEN -1000000 AND -1 "
     "OR h.CREATED_TIME >= h.EXPIRES_TIME OR NOT EXISTS (SELECT 1 FROM S_ACCOUNT a WHERE a.CARD_ID = h.CARD_ID) "
     "OR CASE h.STATUS WHEN 'open' THEN h.ENDED_TIME IS NOT NULL OR h.CAPTURE_ID IS NOT NULL "
     "WHEN 'voided' THEN h.ENDED_TIME IS NULL OR h.ENDED_TIME < h.CREATED_TIME OR h.ENDED_TIME >= h.EXPIRES_TIME "
     "OR h.CAPTURE_ID IS NOT NULL "
     "WHEN 'expired' THEN h.ENDED_TIME IS NOT h.EXPIRES_TIME OR h.CAPTURE_ID IS NOT NULL "
     "WHEN 'captured' THEN h.ENDED_TIME IS NULL OR h.ENDED_TIME < h.CREATED_TIME OR h.ENDED_TIME >= h.EXPIRES_TIME "
     "OR x.TRANSACTION_ID IS NULL OR x.KIND <> 'capture' OR x.CARD_ID <> h.CARD_ID OR x.STORE_ID <> h.STORE_ID "
     "OR h.CAPTURED_AMOUNT IS NULL OR x.AMOUNT <> h.CAPTURED_AMOUNT OR h.CAPTURED_AMOUNT NOT BETWEEN h.AMOUNT AND -1 "
     "OR x.PAYMENT_TIME < h.ENDED_TIME ELSE 1 END) ORDER BY h.CARD_ID"},
    {"capture",
     "SELECT x.CARD_ID, 'capture at ' || x.PAYMENT_TIME || ' (transaction ' || x.TRANSACTION_ID || ') is named by ' "
     "|| COUNT(h.HOLD_ID) || ' captured hold(s)' FROM H_TRANSACTION x LEFT JOIN P_HOLD h "
     "ON h.CAPTURE_ID = x.TRANSACTION_ID AND h.STATUS = 'captured' WHERE x.CARD_ID >= ?1 AND x.CARD_ID <= ?2 "
     "AND x.KIND = 'capture' GROUP BY x.CARD_ID, x.PAYMENT_TIME, x.TRANSACTION_ID HAVING COUNT(h.HOLD_ID) <> 1"},
    {"held",
     "SELECT a.CARD_ID, 'holds ' || SUM(-h.AMOUNT) || ' point(s) in open holds but has ' || a.BALANCE || ' and ' || "
     "(SELECT COALESCE(SUM(c.POINTS), 0) FROM P_GRANT_CREDIT c JOIN P_GRANT g ON g.GRANT_ID = c.GRANT_ID "
     "WHERE c.CARD_ID = a.CARD_ID AND g.STATE = 'applied') || ' pending' FROM S_ACCOUNT a JOIN P_HOLD h "
     "ON h.CARD_ID = a.CARD_ID AND h.STATUS = 'open' AND h.EXPIRES_TIME > ?3 WHERE a.CARD_ID >= ?1 "
     "AND a.CARD_ID <= ?2 GROUP BY a.CARD_ID, a.BALANCE HAVING SUM(-h.AMOUNT) > a.BALANCE + "
     "(SELECT COALESCE(SUM(c.POINTS), 0) FROM P_GRANT_CREDIT c JOIN P_GRANT g ON g.GRANT_ID = c.GRANT_ID "
     "WHERE c.CARD_ID = a.CARD_ID AND g.STATE = 'applied')"},
};

// 14. every lot (P_LOT, 0.13.0): a grant's credit to its card, named by
//     that grant's row, expiring when the grant says; 0 <= RESERVED <=
//     REMAINING; REMAINING = AMOUNT + what its uses took and gave back;
//     RESERVED = what open holds keep of it; written out (EXPIRED_TIME) at
//     or after its expiry with only the reserved part left. Every use a
//     row of the lot's card, of its sign (payments, captures and expiries
//     take, refunds give back), no row taking more than its amount and an
//     expiry row exactly its amount; every reservation an open hold's of
//     the lot's card, within its amount; and no card whose lots have more
//     than its balance (with its pending credit, which a hold may count on)
//     less what its open holds keep of its never-expiring points. A lot may
//     be made after its expiry (a fold that ran late): only its grant's time
//     comes before its expiry.
constexpr const char* kLotProbes[][2] = {
    {"lot",
     "SELECT l.CARD_ID, 'lot ' || l.LOT_ID || ' (grant ' || l.GRANT_ID || ', amount ' || l.AMOUNT || ', remaining ' || "
     "l.REMAINING || ', reserved ' || l.RESERVED || ', expiring ' || l.EXPIRES_TIME || ', expired ' || "
     "COALESCE(l.EXPIRED_TIME, 'never') || ') does not add up: its uses come to ' || "
     "COALESCE((SELECT SUM(u.AMOUNT) FROM P_LOT_USE u WHERE u.LOT_ID = l.LOT_ID), 0) || ', its holds keep ' || "
     "COALESCE((SELECT SUM(r.AMOUNT) FROM P_LOT_HOLD r WHERE r.LOT_ID = l.LOT_ID), 0) FROM P_LOT l "
     "LEFT JOIN P_GRANT g ON g.GRANT_ID = l.GRANT_ID LEFT JOIN H_TRANSACTION x ON x.TRANSACTION_ID = l.SOURCE_ID "
     "WHERE l.CARD_ID >= ?1 AND l.CARD_ID <= ?2 AND (l.AMOUNT <= 0 OR l.RESERVED < 0 OR l.RESERVED > l.REMAINING "
     "OR l.EXPIRES_TIME <= g.GRANT_TIME OR g.GRANT_ID IS NULL OR g.EXPIRES_TIME IS NOT l.EXPIRES_TIME "
     "OR x.TRANSACTION_ID IS NULL OR x.KIND <> 'grant' OR x.CARD_ID <> l.CARD_ID OR x.AMOUNT <> l.AMOUNT "
     "OR l.REMAINING <> l.AMOUNT + COALESCE((SELECT SUM(u.AMOUNT) FROM P_LOT_USE u WHERE u.LOT_ID = l.LOT_ID), 0) "
     "OR l.RESERVED <> COALESCE((SELECT SUM(r.AMOUNT) FROM P_LOT_HOLD r WHERE r.LOT_ID = l.LOT_ID), 0) "
     "OR (l.EXPIRED_TIME IS NOT NULL AND (l.EXPIRED_TIME < l.EXPIRES_TIME OR l.REMAINING <> l.RESERVED))) "
     "ORDER BY l.CARD_ID"},
    {"lot use",
     "SELECT COALESCE(x.CARD_ID, l.CARD_ID, 0), 'transaction ' || u.TRANSACTION_ID || ' (' || COALESCE(x.KIND, "
     "'missing') || ' of ' || COALESCE(x.AMOUNT, 0) || ') uses lot ' || u.LOT_ID || ' by ' || u.AMOUNT || "
     "COALESCE(' of card ' || l.CARD_ID, ', which is missing') FROM P_LOT_USE u "
     "LEFT JOIN H_TRANSACTION x ON x.TRANSACTION_ID = u.TRANSACTION_ID LEFT JOIN P_LOT l ON l.LOT_ID = u.LOT_ID "
     "WHERE COALESCE(x.CARD_ID, l.CARD_ID, 0) BETWEEN ?1 AND ?2 AND (x.TRANSACTION_ID IS NULL OR l.LOT_ID IS NULL "
     "OR x.CARD_ID <> l.CARD_ID OR u.AMOUNT = 0 OR CASE x.KIND WHEN 'refund' THEN u.AMOUNT < 0 "
     "WHEN 'payment' THEN u.AMOUNT > 0 WHEN 'capture' THEN u.AMOUNT > 0 WHEN 'expiry' THEN u.AMOUNT > 0 "
     "OR l.EXPIRED_TIME IS NULL OR l.EXPIRED_TIME > x.PAYMENT_TIME ELSE 1 END) ORDER BY 1"},
    {"lot use",
     "SELECT x.CARD_ID, 'transaction ' || x.TRANSACTION_ID || ' (' || x.KIND || ' of ' || x.AMOUNT || ') uses lots by "
     "' "
     "|| SUM(u.AMOUNT) FROM H_TRANSACTION x JOIN P_LOT_USE u ON u.TRANSACTION_ID = x.TRANSACTION_ID "
     "WHERE x.CARD_ID >= ?1 AND x.CARD_ID <= ?2 GROUP BY x.TRANSACTION_ID, x.CARD_ID, x.KIND, x.AMOUNT "
     "HAVING abs(SUM(u.AMOUNT)) > abs(x.AMOUNT) OR (x.KIND = 'expiry' AND SUM(u.AMOUNT) <> x.AMOUNT)"},
    {"expiry",
     "SELECT x.CARD_ID, 'expiry at ' || x.PAYMENT_TIME || ' (transaction ' || x.TRANSACTION_ID || ', ' || x.AMOUNT || "
     "') takes from no lot' FROM H_TRANSACTION x WHERE x.CARD_ID >= ?1 AND x.CARD_ID <= ?2 AND x.KIND = 'expiry' "
     "AND NOT EXISTS (SELECT 1 FROM P_LOT_USE u WHERE u.TRANSACTION_ID = x.TRANSACTION_ID)"},
    {"lot hold",
     "SELECT COALESCE(l.CARD_ID, h.CARD_ID, 0), 'hold ' || r.HOLD_ID || ' (' || COALESCE(h.STATUS, 'missing') || ', "
     "amount ' || COALESCE(h.AMOUNT, 0) || ') reserves ' || r.AMOUNT || ' of lot ' || r.LOT_ID || "
     "COALESCE(' of card ' || l.CARD_ID, ', which is missing') || ', ' || (SELECT SUM(o.AMOUNT) FROM P_LOT_HOLD o "
     "WHERE o.HOLD_ID = r.HOLD_ID) || ' in all' FROM P_LOT_HOLD r LEFT JOIN P_HOLD h ON h.HOLD_ID = r.HOLD_ID "
     "LEFT JOIN P_LOT l ON l.LOT_ID = r.LOT_ID WHERE COALESCE(l.CARD_ID, h.CARD_ID, 0) BETWEEN ?1 AND ?2 "
     "AND (h.HOLD_ID IS NULL OR l.LOT_ID IS NULL OR h.CARD_ID <> l.CARD_ID OR h.STATUS <> 'open' OR r.AMOUNT <= 0 "
     "OR r.EXPIRES_TIME <> h.EXPIRES_TIME "
     "OR (SELECT SUM(o.AMOUNT) FROM P_LOT_HOLD o WHERE o.HOLD_ID = r.HOLD_ID) > -h.AMOUNT) ORDER BY 1"},
    {"lot sum",
     "SELECT a.CARD_ID, 'has ' || a.BALANCE || ' point(s), of which its lots have ' || s.LEFT || ' and its open holds "
     "keep ' || s.NEVER_HELD || ' of the rest' FROM S_ACCOUNT a JOIN (SELECT l.CARD_ID AS CARD_ID, SUM(l.REMAINING) "
     "AS LEFT, COALESCE((SELECT SUM(-h.AMOUNT - COALESCE((SELECT SUM(r.AMOUNT) FROM P_LOT_HOLD r WHERE r.HOLD_ID = "
     "h.HOLD_ID), 0)) FROM P_HOLD h WHERE h.CARD_ID = l.CARD_ID AND h.STATUS = 'open' AND h.EXPIRES_TIME > ?3), 0) "
     "AS NEVER_HELD "
     "FROM P_LOT l WHERE l.CARD_ID >= ?1 AND l.CARD_ID <= ?2 GROUP BY l.CARD_ID) s ON s.CARD_ID = a.CARD_ID "
     "WHERE a.BALANCE + (SELECT COALESCE(SUM(c.POINTS), 0) FROM P_GRANT_CREDIT c JOIN P_GRANT g "
     "ON g.GRANT_ID = c.GRANT_ID WHERE c.CARD_ID = a.CARD_ID AND g.STATE = 'applied') - s.LEFT < s.NEVER_HELD"},
};

// The writer's time as a check sees it: never before its last decision,
// whatever the wall clock does (the writer's clock resumes after the
// largest time stored).
Result<int64_t> WriterTime(sqlite::Connection& conn) {
  auto last = sqlite::QueryInt(conn,
                               "SELECT MAX(COALESCE((SELECT MAX(PAYMENT_TIME) FROM H_TRANSACTION), 0), "
                               "COALESCE((SELECT MAX(MAX(CREATED_TIME, COALESCE(ENDED_TIME, 0))) FROM P_HOLD), 0))");
  if (!last.ok()) return last.status();
  return std::max(NowUs(), *last + 1);
}

// Each probe's rows, (card, what is wrong), as violations of its kind;
// ?1 and ?2 the scope's cards, ?3 the writer's time.
template <size_t N>
Status RunProbes(sqlite::Connection& conn, const char* const (&probes)[N][2], const CheckScope& scope,
                 Reporter& problem) {
  auto now = WriterTime(conn);
  if (!now.ok()) return now.status();
  for (const auto& probe : probes) {
    auto q = conn.Prepare(probe[1]);
    if (!q.ok()) return q.status();
    q->Bind(1, scope.card_first).Bind(2, scope.card_last).Bind(3, *now);
    while (true) {
      auto row = q->Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      problem(probe[0], "card " + std::to_string(q->Int(0)) + " " + std::string(q->Text(1)));
    }
  }
  return Status::Ok();
}

}  // namespace

// "held" counts at the writer's time.
Status CheckHolds(sqlite::Connection& conn, const CheckScope& scope, Reporter& problem) {
  return RunProbes(conn, kHoldProbes, scope, problem);
}

// "lot sum" counts holds unexpired at the writer's time.
Status CheckLots(sqlite::Connection& conn, const CheckScope& scope, Reporter& problem) {
  return RunProbes(conn, kLotProbes, scope, problem);
}

}  // namespace hotrow::pointcard::checking
