#include "pointcard/check.h"

#include <algorithm>
#include <cctype>

#include "ops/log.h"
#include "pointcard/check_probes.h"
#include "pointcard/model.h"

namespace hotrow::pointcard {

namespace sqlite = db::sqlite;

namespace {

// H_TRANSACTION's plans, which SQLite (no statistics) would guess wrong
// either way. A check of a few cards reads their rows by the card index
// (INDEXED BY); a check of every card must not (one table lookup per row: the
// KIND check took 8.5 s that way on 3.5M rows, 0.33 s as a scan), so its
// card-range terms `X.CARD_ID >= ?` and `X.CARD_ID <= ?` get a unary `+`,
// which keeps them off every index.
std::string ForScope(std::string sql, const CheckScope& scope) {
  if (scope.whole()) {
    for (const char* term : {"CARD_ID >= ?", "CARD_ID <= ?"}) {
      for (size_t at = sql.find(term); at != std::string::npos; at = sql.find(term, at + 2)) {
        size_t start = at;  // back over a table alias and its dot
        while (start > 0 && (std::isalnum(static_cast<unsigned char>(sql[start - 1])) || sql[start - 1] == '_' ||
                             sql[start - 1] == '.'))
          --start;
        sql.insert(start, "+");
        at += 1;
      }
    }
    return sql;
  }
  const std::string from = "FROM H_TRANSACTION", by = " INDEXED BY H_TRANSACTION_CARD_TIME";
  for (size_t at = sql.find(from); at != std::string::npos; at = sql.find(from, at + from.size() + by.size())) {
    size_t end = at + from.size();
    if (sql.compare(end, 2, " h") == 0) end += 2;  // after its alias
    sql.insert(end, by);
  }
  return sql;
}

using checking::CheckHolds;
using checking::CheckLots;
using checking::Reporter;

// 6. every row's KIND matches it (grant rows have STORE_ID 0, charges and
//    refunds a positive amount); 7. every credit belongs to a card and to a grant
//    that is staging or applied (a folded grant's credit would count twice),
//    and is positive.
Status CheckCredits(sqlite::Connection& conn, const CheckScope& scope, CheckReport& report, Reporter& problem) {
  auto kinds = conn.Prepare(ForScope(
      "SELECT PAYMENT_TIME, CARD_ID, STORE_ID, AMOUNT, COALESCE(KIND, 'NULL') FROM H_TRANSACTION "
      "WHERE CARD_ID >= ?1 AND CARD_ID <= ?2 AND (KIND IS NULL OR CASE KIND WHEN 'grant' THEN STORE_ID <> 0 OR AMOUNT "
      "<= 0 "
      "WHEN 'charge' THEN STORE_ID = 0 OR AMOUNT <= 0 WHEN 'payment' THEN STORE_ID = 0 OR AMOUNT >= 0 "
      "WHEN 'refund' THEN STORE_ID = 0 OR AMOUNT <= 0 WHEN 'capture' THEN STORE_ID = 0 OR AMOUNT >= 0 "
      "WHEN 'expiry' THEN STORE_ID <> 0 OR AMOUNT >= 0 ELSE 1 END)",
      scope));
  if (!kinds.ok()) return kinds.status();
  kinds->Bind(1, scope.card_first).Bind(2, scope.card_last);
  while (true) {
    auto row = kinds->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    problem("kind", "card " + std::to_string(kinds->Int(1)) + " row at " + FormatTime(kinds->Int(0)) + " (store " +
                        std::to_string(kinds->Int(2)) + ", amount " + std::to_string(kinds->Int(3)) + ") has KIND " +
                        std::string(kinds->Text(4)));
  }
  auto credits = conn.Prepare(
      "SELECT c.CARD_ID, c.GRANT_ID, c.POINTS, COALESCE(g.STATE, ''), a.CARD_ID IS NOT NULL "
      "FROM P_GRANT_CREDIT c LEFT JOIN P_GRANT g ON g.GRANT_ID = c.GRANT_ID "
      "LEFT JOIN S_ACCOUNT a ON a.CARD_ID = c.CARD_ID WHERE c.CARD_ID >= ?1 AND c.CARD_ID <= ?2");
  if (!credits.ok()) return credits.status();
  credits->Bind(1, scope.card_first).Bind(2, scope.card_last);
  while (true) {
    auto row = credits->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    std::string what =
        "credit of grant " + std::to_string(credits->Int(1)) + " to card " + std::to_string(credits->Int(0));
    std::string state(credits->Text(3));
    if (credits->Int(4) == 0) problem("orphan credit", what + ", which does not exist");
    if (state != "staging" && state != "applied") {
      std::string stale = what;
      stale += state.empty() ? ": no such grant" : ": the grant is ";
      stale += state;
      problem("stale credit", stale);
    }
    if (credits->Int(2) <= 0) problem("credit", what + " is " + std::to_string(credits->Int(2)) + " points");
    if (state == "applied") report.pending_points += credits->Int(2);
  }
  return Status::Ok();
}

// 9. every row's own fields (point-card schema 2): TRANSACTION_ID, ACTOR
//    (system for a grant's rows and only for them), REFERENCE (its length,
//    no space), REASON (its length, one line) and REFUND_OF (on refunds,
//    and only on them): the WHERE clause is the
//    rule, kept in step with the PostgreSQL checker's. The full text rules
//    are the service's; this catches a path that wrote around them.
constexpr const char* kRowFieldsWhere =
    "(TRANSACTION_ID IS NULL OR TRANSACTION_ID <= 0 OR ACTOR IS NULL "
    "OR NOT (ACTOR IN ('admin', 'system', 'anonymous') OR ACTOR GLOB 'key:?*') "
    "OR (KIND IN ('grant', 'expiry')) <> (ACTOR = 'system') OR length(REFERENCE) NOT BETWEEN 1 AND 64 "
    "OR instr(REFERENCE, ' ') > 0 OR length(REASON) NOT BETWEEN 1 AND 200 OR instr(REASON, char(10)) > 0 "
    "OR instr(REASON, char(13)) > 0 OR (REFUND_OF IS NOT NULL) <> (COALESCE(KIND, '') = 'refund'))";

Status CheckRowFields(sqlite::Connection& conn, const CheckScope& scope, Reporter& problem) {
  auto q = conn.Prepare(ForScope(
      "SELECT CARD_ID, PAYMENT_TIME, COALESCE(TRANSACTION_ID, 'NULL'), COALESCE(ACTOR, 'NULL'), "
      "COALESCE(length(REFERENCE) || ' character(s)', 'none'), COALESCE(length(REASON) || ' character(s)', 'none'), "
      "COALESCE(REFUND_OF, 'none') "
      "FROM H_TRANSACTION WHERE CARD_ID >= ?1 AND CARD_ID <= ?2 AND " +
          std::string(kRowFieldsWhere),
      scope));
  if (!q.ok()) return q.status();
  q->Bind(1, scope.card_first).Bind(2, scope.card_last);
  while (true) {
    auto row = q->Step();
    if (!row.ok()) return row.status();
    if (!*row) return Status::Ok();
    problem("row fields", "card " + std::to_string(q->Int(0)) + " row at " + FormatTime(q->Int(1)) +
                              " has TRANSACTION_ID " + std::string(q->Text(2)) + ", ACTOR " + std::string(q->Text(3)) +
                              ", REFERENCE " + std::string(q->Text(4)) + ", REASON " + std::string(q->Text(5)) +
                              ", REFUND_OF " + std::string(q->Text(6)));
  }
}

// 12. every refund returns part of a payment of its own card, at that
//     payment's store and after it, and a payment's refunds together
//     return at most what it took. Kept in step with the PostgreSQL
//     checker's "refund" probe. A check of every card scans the table once
//     (the `+` on the GROUP BY keeps SQLite from walking the card index for
//     its order, with a table lookup per row: 5-6 s on 1M rows, 0.2 s as a
//     scan).
Status CheckRefunds(sqlite::Connection& conn, const CheckScope& scope, Reporter& problem) {
  auto q = conn.Prepare(
      ForScope("SELECT h.CARD_ID, h.REFUND_OF, COUNT(*), SUM(h.AMOUNT), MIN(h.STORE_ID), MAX(h.STORE_ID), "
               "COALESCE(o.KIND, 'none'), COALESCE(o.CARD_ID, 0), COALESCE(o.STORE_ID, 0), COALESCE(-o.AMOUNT, 0), "
               "COALESCE(MIN(h.PAYMENT_TIME) > o.PAYMENT_TIME, 1) "
               "FROM H_TRANSACTION h LEFT JOIN H_TRANSACTION o ON o.TRANSACTION_ID = h.REFUND_OF "
               "WHERE h.CARD_ID >= ?1 AND h.CARD_ID <= ?2 AND h.KIND = 'refund' GROUP BY +h.CARD_ID, +h.REFUND_OF "
               "HAVING o.CARD_ID IS NULL OR o.CARD_ID <> h.CARD_ID OR o.KIND NOT IN ('payment', 'capture') OR "
               "MIN(h.STORE_ID) <> o.STORE_ID "
               "OR MAX(h.STORE_ID) <> o.STORE_ID OR MIN(h.PAYMENT_TIME) <= o.PAYMENT_TIME OR SUM(h.AMOUNT) > -o.AMOUNT",
               scope));
  if (!q.ok()) return q.status();
  q->Bind(1, scope.card_first).Bind(2, scope.card_last);
  while (true) {
    auto row = q->Step();
    if (!row.ok()) return row.status();
    if (!*row) return Status::Ok();
    const std::string what =
        q->Text(6) == "none" ? "not in the history"
                             : "a " + std::string(q->Text(6)) + " of " + std::to_string(q->Int(9)) +
                                   " point(s) on card " + std::to_string(q->Int(7)) + " at store " +
                                   std::to_string(q->Int(8)) + (q->Int(10) != 0 ? "" : ", made after its first refund");
    problem("refund", "card " + std::to_string(q->Int(0)) + " has " + std::to_string(q->Int(2)) +
                          " refund(s) of transaction " + std::to_string(q->Int(1)) + " returning " +
                          std::to_string(q->Int(3)) + " point(s) at stores " + std::to_string(q->Int(4)) + "-" +
                          std::to_string(q->Int(5)) + "; it is " + what);
  }
}

// 10. every card's state (point-card schema 3): STATUS active or closed,
//     CLOSED_TIME set exactly when closed, EXTERNAL_REF 1-64 characters with
//     no space; and no payment or charge on a closed card after its close.
//     Kept in step with the PostgreSQL checker's "card state" and "closed
//     card" probes.
Status CheckCardStates(sqlite::Connection& conn, const CheckScope& scope, Reporter& problem) {
  auto states = conn.Prepare(
      "SELECT CARD_ID, COALESCE(STATUS, 'NULL'), COALESCE(CLOSED_TIME, 'NULL'), "
      "COALESCE(length(EXTERNAL_REF) || ' character(s)', 'none') FROM S_ACCOUNT WHERE CARD_ID >= ?1 AND CARD_ID <= ?2 "
      "AND (STATUS IS NULL OR STATUS NOT IN ('active', 'closed') OR (STATUS = 'closed') <> (CLOSED_TIME IS NOT NULL) "
      "OR length(EXTERNAL_REF) NOT BETWEEN 1 AND 64 OR instr(EXTERNAL_REF, ' ') > 0) ORDER BY CARD_ID");
  if (!states.ok()) return states.status();
  states->Bind(1, scope.card_first).Bind(2, scope.card_last);
  while (true) {
    auto row = states->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    problem("card state", "card " + std::to_string(states->Int(0)) + " has STATUS " + std::string(states->Text(1)) +
                              ", CLOSED_TIME " + std::string(states->Text(2)) + ", EXTERNAL_REF " +
                              std::string(states->Text(3)));
  }
  auto after = conn.Prepare(
      "SELECT h.CARD_ID, h.KIND, h.PAYMENT_TIME, a.CLOSED_TIME FROM S_ACCOUNT a JOIN H_TRANSACTION h "
      "ON h.CARD_ID = a.CARD_ID AND h.PAYMENT_TIME > a.CLOSED_TIME WHERE a.STATUS = 'closed' AND a.CARD_ID >= ?1 "
      "AND a.CARD_ID <= ?2 AND h.KIND IN ('payment', 'charge') ORDER BY h.CARD_ID");
  if (!after.ok()) return after.status();
  after->Bind(1, scope.card_first).Bind(2, scope.card_last);
  while (true) {
    auto row = after->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    problem("closed card", "card " + std::to_string(after->Int(0)) + " has a " + std::string(after->Text(1)) + " at " +
                               FormatTime(after->Int(2)) + ", after its close at " + FormatTime(after->Int(3)));
  }
  return Status::Ok();
}

// 11. every row a store key wrote names a key of its store that existed and
//     was not revoked at the row's time (point-card schema 4). Kept in step
//     with the PostgreSQL checker's "store key" probe.
Status CheckKeyRows(sqlite::Connection& conn, const CheckScope& scope, Reporter& problem) {
  auto rows = conn.Prepare(
      "SELECT h.CARD_ID, h.PAYMENT_TIME, h.ACTOR, h.STORE_ID, COALESCE(k.STORE_ID, 'none'), "
      "COALESCE(k.CREATED_TIME, 'none'), COALESCE(k.REVOKED_TIME, 'none') FROM H_TRANSACTION h "
      "LEFT JOIN M_STORE_KEY k ON k.KEY_ID = substr(h.ACTOR, 5) WHERE h.CARD_ID >= ?1 AND h.CARD_ID <= ?2 "
      "AND h.ACTOR GLOB 'key:*' AND (k.KEY_ID IS NULL OR k.STORE_ID <> h.STORE_ID OR k.CREATED_TIME > h.PAYMENT_TIME "
      "OR k.REVOKED_TIME <= h.PAYMENT_TIME) ORDER BY h.CARD_ID");
  if (!rows.ok()) return rows.status();
  rows->Bind(1, scope.card_first).Bind(2, scope.card_last);
  while (true) {
    auto row = rows->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    problem("store key", "card " + std::to_string(rows->Int(0)) + " has a row at " + FormatTime(rows->Int(1)) +
                             " at store " + std::to_string(rows->Int(3)) + " by " + std::string(rows->Text(2)) +
                             ", whose key is of store " + std::string(rows->Text(4)) + ", made at " +
                             std::string(rows->Text(5)) + ", revoked at " + std::string(rows->Text(6)));
  }
  return Status::Ok();
}

// Invariant 8 (check.h) for one window: each card's bonus, recomputed from
// the period's charges, and what the grant gave it (its rows in the window
// plus its credit not yet folded), both in card order for a merge.
// Existence is checked per card after the sums (per row, in time order, it
// cost 1.1 s of random reads on 1M cards); every card reads its rows by the
// time-ordered primary key (0.3 s where a card index scan took 3 s), and a
// scope's few by the card index (ForScope).
// A card closed before the grant applied (?6) is owed nothing (point-card
// schema 3: `closable`).
std::string GrantExpectedSql(bool closable) {
  return std::string(
             "SELECT e.CARD_ID, e.PTS FROM (SELECT h.CARD_ID, SUM(h.AMOUNT) * ?1 / 100 AS PTS FROM H_TRANSACTION h "
             "WHERE h.KIND = 'charge' AND h.PAYMENT_TIME >= ?2 AND h.PAYMENT_TIME < ?3 AND h.CARD_ID >= ?4 AND "
             "h.CARD_ID <= ?5 GROUP BY h.CARD_ID HAVING SUM(h.AMOUNT) * ?1 / 100 > 0) e "
             "WHERE EXISTS (SELECT 1 FROM S_ACCOUNT a WHERE a.CARD_ID = e.CARD_ID") +
         (closable ? " AND NOT (a.STATUS = 'closed' AND a.CLOSED_TIME < ?6))" : " AND ?6 IS NOT NULL)");
}
constexpr const char* kGrantDelivered = R"sql(
  SELECT CARD_ID, SUM(PTS), SUM(PENDING) FROM (
    SELECT CARD_ID, AMOUNT AS PTS, 0 AS PENDING FROM H_TRANSACTION
    WHERE KIND = 'grant' AND PAYMENT_TIME >= ?1 AND PAYMENT_TIME < ?2 AND CARD_ID >= ?4 AND CARD_ID <= ?5
    UNION ALL
    SELECT CARD_ID, POINTS, POINTS FROM P_GRANT_CREDIT WHERE GRANT_ID = ?3 AND CARD_ID >= ?4 AND CARD_ID <= ?5)
  GROUP BY CARD_ID ORDER BY CARD_ID)sql";

// Steps through `q`, rows of (card, points[, pending]), into card order.
Result<std::vector<CardPoints>> ReadPoints(sqlite::Query& q, bool with_pending) {
  std::vector<CardPoints> out;
  while (true) {
    auto row = q.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    out.push_back({q.Int(0), q.Int(1), with_pending ? q.Int(2) : 0});
  }
  std::sort(out.begin(), out.end(), [](const CardPoints& a, const CardPoints& b) { return a.card_id < b.card_id; });
  return out;
}

Status CheckGrants(sqlite::Connection& conn, const CheckScope& scope, bool closable, CheckReport& report) {
  auto list = conn.Prepare(
      "SELECT GRANT_ID, STATE, GRANT_TIME, COALESCE(APPLIED_TIME, GRANT_TIME), FROM_TIME, TO_TIME, RATE_PERCENT, "
      "CARDS, POINTS FROM P_GRANT ORDER BY COALESCE(APPLIED_TIME, GRANT_TIME), GRANT_ID");
  if (!list.ok()) return list.status();
  std::vector<GrantRecord> grants;
  while (true) {
    auto row = list->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    grants.push_back({list->Int(0), std::string(list->Text(1)), list->Int(2), list->Int(3), list->Int(4), list->Int(5),
                      list->Int(6), list->Int(7), list->Int(8)});
  }
  GrantWindows windows = WindowsOf(grants, scope, report);
  if (windows.unattributed_begin_us < windows.unattributed_end_us) {
    auto q = conn.Prepare(
        ForScope("SELECT CARD_ID, PAYMENT_TIME, AMOUNT FROM H_TRANSACTION WHERE KIND = 'grant' AND PAYMENT_TIME >= ?1 "
                 "AND PAYMENT_TIME < ?2 AND CARD_ID >= ?3 AND CARD_ID <= ?4 ORDER BY PAYMENT_TIME LIMIT 1000",
                 scope));
    if (!q.ok()) return q.status();
    q->Bind(1, windows.unattributed_begin_us).Bind(2, windows.unattributed_end_us);
    q->Bind(3, scope.card_first).Bind(4, scope.card_last);
    Reporter problem{&report};
    while (true) {
      auto row = q->Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      problem("grant row", UnattributedRow(q->Int(0), q->Int(1), q->Int(2)));
    }
  }
  for (const GrantWindow& w : windows.windows) {
    auto e = conn.Prepare(ForScope(GrantExpectedSql(closable), scope));
    auto d = conn.Prepare(ForScope(kGrantDelivered, scope));
    if (!e.ok()) return e.status();
    if (!d.ok()) return d.status();
    e->Bind(1, w.grant.rate_percent).Bind(2, w.grant.from_us).Bind(3, w.grant.to_us).Bind(6, w.grant.applied_us);
    d->Bind(1, w.grant.applied_us).Bind(2, w.window_end_us).Bind(3, w.grant.grant_id);
    for (auto* q : {&*e, &*d}) q->Bind(4, scope.card_first).Bind(5, scope.card_last);
    auto expected = ReadPoints(*e, false);
    if (!expected.ok()) return expected.status();
    auto delivered = ReadPoints(*d, true);
    if (!delivered.ok()) return delivered.status();
    CompareGrant(w, *expected, *delivered, scope.whole(), report);
  }
  return Status::Ok();
}

}  // namespace

GrantWindows WindowsOf(const std::vector<GrantRecord>& grants, const CheckScope& scope, CheckReport& report) {
  GrantWindows out;
  // Before 0.5.0 a grant was one transaction: the migration set its
  // APPLIED_TIME to its GRANT_TIME. It bounds the window before it.
  auto staged = [](const GrantRecord& g) { return g.state == "staging" || g.applied_us > g.grant_us; };
  for (const GrantRecord& g : grants)
    if (staged(g)) out.unattributed_begin_us = std::min(out.unattributed_begin_us, g.grant_us);
  bool open = false;  // the last window runs on
  for (const GrantRecord& g : grants) {
    if (g.state == "staging") {
      ++report.grants_staging;
      continue;  // invisible: no window, nothing delivered
    }
    if (g.state == "applied") ++report.grants_folding;
    // The first window at or after the first staged begin ends the rows no
    // window holds (a legacy grant's, earlier, does not).
    if (g.applied_us >= out.unattributed_begin_us)
      out.unattributed_end_us = std::min(out.unattributed_end_us, g.applied_us);
    if (open) out.windows.back().window_end_us = g.applied_us;
    open = staged(g);
    if (open) out.windows.push_back({g, INT64_MAX});
  }
  // A check of a few cards, repeated beside a running server, recomputes
  // the grants it can catch in the act: the newest two (the one applied,
  // the one folded before it). Every earlier window is closed, and the
  // check of every card recomputes it.
  if (!scope.whole() && out.windows.size() > kSampledGrantsMax)
    out.windows.erase(out.windows.begin(), out.windows.end() - kSampledGrantsMax);
  return out;
}

std::string UnattributedRow(int64_t card_id, int64_t time_us, int64_t amount) {
  return "card " + std::to_string(card_id) + " row at " + FormatTime(time_us) + " grants " + std::to_string(amount) +
         " point(s) but no applied grant's window holds it";
}

void CompareGrant(const GrantWindow& w, const std::vector<CardPoints>& expected,
                  const std::vector<CardPoints>& delivered, bool totals, CheckReport& report) {
  ++report.grants_checked;
  Reporter problem{&report};
  std::string grant = "grant " + std::to_string(w.grant.grant_id);
  int64_t cards = 0, points = 0;
  const CardPoints none;
  for (size_t i = 0, j = 0; i < expected.size() || j < delivered.size();) {
    bool take_e = i < expected.size() && (j == delivered.size() || expected[i].card_id <= delivered[j].card_id);
    bool take_d = j < delivered.size() && (i == expected.size() || delivered[j].card_id <= expected[i].card_id);
    const CardPoints& e = take_e ? expected[i++] : none;
    const CardPoints& d = take_d ? delivered[j++] : none;
    int64_t card = take_e ? e.card_id : d.card_id;
    if (d.points != 0) ++cards, points += d.points;
    if (e.points != d.points)
      problem("grant", "card " + std::to_string(card) + ": " + grant + " owes it " + std::to_string(e.points) +
                           " point(s) but gave " + std::to_string(d.points) + " (" +
                           std::to_string(d.points - d.pending) + " in its history, " + std::to_string(d.pending) +
                           " pending)");
  }
  if (totals && (cards != w.grant.cards || points != w.grant.points))
    problem("grant total", grant + " recorded " + std::to_string(w.grant.cards) + " card(s) and " +
                               std::to_string(w.grant.points) + " point(s) but delivered " + std::to_string(cards) +
                               " and " + std::to_string(points));
}

Result<CheckReport> CheckInvariants(sqlite::Connection& conn, const CheckScope& scope) {
  CheckReport report;
  Reporter problem{&report};
  if (Status s = conn.Exec("BEGIN"); !s.ok()) return s;
  auto cards = conn.Prepare(
      "SELECT CARD_ID, BALANCE, LAST_UPDATE FROM S_ACCOUNT WHERE CARD_ID >= ?1 AND CARD_ID <= ?2 ORDER BY CARD_ID");
  auto rows = conn.Prepare(
      "SELECT CARD_ID, PAYMENT_TIME, STORE_ID, AMOUNT, BALANCE FROM H_TRANSACTION WHERE CARD_ID >= ?1 AND CARD_ID <= "
      "?2 "
      "ORDER BY CARD_ID, PAYMENT_TIME");
  if (!cards.ok()) return cards.status();
  if (!rows.ok()) return rows.status();
  cards->Bind(1, scope.card_first).Bind(2, scope.card_last);
  rows->Bind(1, scope.card_first).Bind(2, scope.card_last);

  auto next_row = rows->Step();
  if (!next_row.ok()) return next_row.status();
  bool have_row = *next_row;
  auto advance = [&]() -> Status {
    ++report.rows;
    auto r = rows->Step();
    if (!r.ok()) return r.status();
    have_row = *r;
    return Status::Ok();
  };

  while (true) {
    auto c = cards->Step();
    if (!c.ok()) return c.status();
    if (!*c) break;
    int64_t card = cards->Int(0), balance = cards->Int(1), last_update = cards->Int(2);
    ++report.cards;
    // History rows of cards that do not exist (ids below this card).
    while (have_row && rows->Int(0) < card) {
      problem("orphan history", "row at " + FormatTime(rows->Int(1)) + " for card " + std::to_string(rows->Int(0)) +
                                    ", which does not exist");
      if (Status s = advance(); !s.ok()) return s;
    }
    int64_t running = 0, last_time = INT64_MIN, count = 0;
    while (have_row && rows->Int(0) == card) {
      int64_t time = rows->Int(1), amount = rows->Int(3), row_balance = rows->Int(4);
      running += amount;
      std::string where = "card " + std::to_string(card) + " row at " + FormatTime(time);
      if (time == last_time) problem("duplicate time", where + " shares its time with another row");
      if (row_balance != running)
        problem("running balance", where + " says BALANCE " + std::to_string(row_balance) + " but the running sum is " +
                                       std::to_string(running));
      if (running < 0) problem("negative balance", where + " takes the balance to " + std::to_string(running));
      last_time = time;
      ++count;
      if (Status s = advance(); !s.ok()) return s;
    }
    std::string who = "card " + std::to_string(card);
    if (balance != running)
      problem("balance",
              who + " has BALANCE " + std::to_string(balance) + " but its history sums to " + std::to_string(running));
    if (balance < 0) problem("negative balance", who + " has BALANCE " + std::to_string(balance));
    if (count > 0 && last_update != last_time)
      problem("last update", who + " has LAST_UPDATE " + FormatTime(last_update) + " but its newest row is at " +
                                 FormatTime(last_time));
  }
  while (have_row) {
    problem("orphan history", "row at " + FormatTime(rows->Int(1)) + " for card " + std::to_string(rows->Int(0)) +
                                  ", which does not exist");
    if (Status s = advance(); !s.ok()) return s;
  }
  // Card states (a file migrated to point-card schema 3).
  auto closable = sqlite::QueryInt(conn, "SELECT COUNT(*) FROM pragma_table_info('S_ACCOUNT') WHERE name = 'STATUS'");
  if (!closable.ok()) return closable.status();
  if (*closable > 0) {
    if (Status s = CheckCardStates(conn, scope, problem); !s.ok()) return s;
  }
  // Store keys (a file migrated to point-card schema 4).
  auto keyed = sqlite::QueryInt(conn, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'M_STORE_KEY'");
  if (!keyed.ok()) return keyed.status();
  if (*keyed > 0) {
    if (Status s = CheckKeyRows(conn, scope, problem); !s.ok()) return s;
  }
  // The stall-free grants' tables (a file migrated to point-card schema 1).
  auto staged_tables = sqlite::QueryInt(conn, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'P_GRANT_CREDIT'");
  if (!staged_tables.ok()) return staged_tables.status();
  if (*staged_tables > 0) {
    if (Status s = CheckCredits(conn, scope, report, problem); !s.ok()) return s;
    if (Status s = CheckGrants(conn, scope, *closable > 0, report); !s.ok()) return s;
  }
  // Rows' own fields (a file migrated to point-card schema 2).
  auto numbered =
      sqlite::QueryInt(conn, "SELECT COUNT(*) FROM pragma_table_info('H_TRANSACTION') WHERE name = 'TRANSACTION_ID'");
  if (!numbered.ok()) return numbered.status();
  if (*numbered > 0) {
    if (Status s = CheckRowFields(conn, scope, problem); !s.ok()) return s;
    if (Status s = CheckRefunds(conn, scope, problem); !s.ok()) return s;
  }
  // Holds (a file migrated to point-card schema 5).
  auto holds = sqlite::QueryInt(conn, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'P_HOLD'");
  if (!holds.ok()) return holds.status();
  if (*holds > 0) {
    if (Status s = CheckHolds(conn, scope, problem); !s.ok()) return s;
  }
  // Lots (a file migrated to point-card schema 6).
  auto lots = sqlite::QueryInt(conn, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'P_LOT'");
  if (!lots.ok()) return lots.status();
  if (*lots > 0) {
    if (Status s = CheckLots(conn, scope, problem); !s.ok()) return s;
  }
  log::WarnIfFailed(conn.Exec("COMMIT"), "check: ending the read transaction");
  return report;
}

}  // namespace hotrow::pointcard
