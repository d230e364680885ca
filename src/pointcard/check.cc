#include "pointcard/check.h"

#include "ops/log.h"
#include "pointcard/model.h"

namespace hotrow::pointcard {

namespace sqlite = db::sqlite;

namespace {
struct Reporter {
  CheckReport* report;
  void operator()(const std::string& kind, const std::string& detail) {
    ++report->violations[kind];
    if (report->examples.size() < kCheckExamplesMax) report->examples.push_back(kind + ": " + detail);
  }
};
// 6. every row's KIND matches it (grant rows have STORE_ID 0, charges a
//    positive amount); 7. every credit belongs to a card and to a grant
//    that is staging or applied (a folded grant's credit would count twice),
//    and is positive.
Status CheckCredits(sqlite::Connection& conn, CheckReport& report, Reporter& problem) {
  auto kinds = conn.Prepare(
      "SELECT PAYMENT_TIME, CARD_ID, STORE_ID, AMOUNT, COALESCE(KIND, 'NULL') FROM H_TRANSACTION "
      "WHERE KIND IS NULL OR CASE KIND WHEN 'grant' THEN STORE_ID <> 0 WHEN 'charge' THEN STORE_ID = 0 OR AMOUNT <= 0 "
      "WHEN 'payment' THEN STORE_ID = 0 OR AMOUNT >= 0 ELSE 1 END");
  if (!kinds.ok()) return kinds.status();
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
      "LEFT JOIN S_ACCOUNT a ON a.CARD_ID = c.CARD_ID");
  if (!credits.ok()) return credits.status();
  while (true) {
    auto row = credits->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    std::string what =
        "credit of grant " + std::to_string(credits->Int(1)) + " to card " + std::to_string(credits->Int(0));
    std::string state(credits->Text(3));
    if (credits->Int(4) == 0) problem("orphan credit", what + ", which does not exist");
    if (state != "staging" && state != "applied")
      problem("stale credit", what + (state.empty() ? ": no such grant" : ": the grant is " + state));
    if (credits->Int(2) <= 0) problem("credit", what + " is " + std::to_string(credits->Int(2)) + " points");
    if (state == "applied") report.pending_points += credits->Int(2);
  }
  return Status::Ok();
}

}  // namespace

Result<CheckReport> CheckInvariants(sqlite::Connection& conn) {
  CheckReport report;
  Reporter problem{&report};
  if (Status s = conn.Exec("BEGIN"); !s.ok()) return s;
  auto cards = conn.Prepare("SELECT CARD_ID, BALANCE, LAST_UPDATE FROM S_ACCOUNT ORDER BY CARD_ID");
  auto rows = conn.Prepare(
      "SELECT CARD_ID, PAYMENT_TIME, STORE_ID, AMOUNT, BALANCE FROM H_TRANSACTION ORDER BY CARD_ID, PAYMENT_TIME");
  if (!cards.ok()) return cards.status();
  if (!rows.ok()) return rows.status();

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
  // The stall-free grants' tables (a file migrated to point-card schema 1).
  auto staged_tables = sqlite::QueryInt(conn, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'P_GRANT_CREDIT'");
  if (!staged_tables.ok()) return staged_tables.status();
  if (*staged_tables > 0) {
    if (Status s = CheckCredits(conn, report, problem); !s.ok()) return s;
  }
  log::WarnIfFailed(conn.Exec("COMMIT"), "check: ending the read transaction");
  return report;
}

}  // namespace hotrow::pointcard
