// The point grant on SQLite, steps 2 and 3: the query and the staging
// (sqlite_grant_query.h).
#include "pointcard/sqlite_grant_query.h"

#include <algorithm>
#include <optional>
#include <string>

#include "ops/failpoint.h"

namespace hotrow::pointcard {

namespace sqlite = db::sqlite;

Result<std::vector<Bonus>> QueryBonuses(sqlite::Connection& c, const GrantRequest& r) {
  sqlite::ReadSnapshot snapshot(c);
  if (!snapshot.status().ok()) return snapshot.status();
  auto rows = c.Prepare(
      "SELECT CARD_ID, AMOUNT FROM H_TRANSACTION "
      "WHERE PAYMENT_TIME >= ?1 AND PAYMENT_TIME < ?2 AND KIND = 'charge' AND AMOUNT > 0");
  if (!rows.ok()) return rows.status();
  rows->Bind(1, r.from_us).Bind(2, r.to_us);
  std::vector<Bonus> totals;  // (card, amount), then (card, total)
  while (true) {
    auto row = rows->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    totals.push_back({rows->Int(0), rows->Int(1)});
  }
  // Summed in card order: the order of P_GRANT_CREDIT's and S_ACCOUNT's
  // B-trees (sequential pages, not random ones).
  std::sort(totals.begin(), totals.end(), [](const Bonus& a, const Bonus& b) { return a.card_id < b.card_id; });
  std::vector<Bonus> bonuses;
  for (size_t i = 0; i < totals.size();) {
    int64_t card = totals[i].card_id, total = 0;
    for (; i < totals.size() && totals[i].card_id == card; ++i) total += totals[i].points;
    int64_t bonus = total * r.rate_percent / 100;  // floor: amounts and rate are positive
    if (bonus > 0) bonuses.push_back({card, bonus});
  }
  totals = {};
  // Closed cards get nothing: those closed by this snapshot (taken after
  // the grant's begin) here, those closed later at the apply. The closed
  // cards' index holds their ids.
  {
    auto closed = c.Prepare("SELECT CARD_ID FROM S_ACCOUNT WHERE STATUS = 'closed' ORDER BY CARD_ID");
    if (!closed.ok()) return closed.status();
    std::vector<int64_t> ids;
    while (true) {
      auto row = closed->Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      ids.push_back(closed->Int(0));
    }
    if (!ids.empty())
      std::erase_if(bonuses, [&](const Bonus& b) { return std::binary_search(ids.begin(), ids.end(), b.card_id); });
  }
  if (bonuses.empty()) return bonuses;
  // Which cards exist. When the ids are every integer from the smallest to
  // the largest (the count says so; B-tree counts and ends cost a few ms),
  // that range is the answer; otherwise one merge with S_ACCOUNT's ids
  // (1M cards: ~150 ms idle, twice that beside 64 workers).
  auto count = sqlite::QueryInt(c, "SELECT COUNT(*) FROM S_ACCOUNT");
  auto low = sqlite::QueryInt(c, "SELECT MIN(CARD_ID) FROM S_ACCOUNT");
  auto high = sqlite::QueryInt(c, "SELECT MAX(CARD_ID) FROM S_ACCOUNT");
  for (const auto* v : {&count, &low, &high})
    if (!v->ok()) return v->status();
  // Unsigned: the distance between two int64 ids, without overflow.
  if (*count > 0 && static_cast<uint64_t>(*high) - static_cast<uint64_t>(*low) == static_cast<uint64_t>(*count - 1)) {
    std::erase_if(bonuses, [&](const Bonus& b) { return b.card_id < *low || b.card_id > *high; });
    return bonuses;
  }
  auto ids = c.Prepare("SELECT CARD_ID FROM S_ACCOUNT WHERE CARD_ID >= ?1 ORDER BY CARD_ID");
  if (!ids.ok()) return ids.status();
  ids->Bind(1, bonuses.front().card_id);
  size_t kept = 0;
  auto row = ids->Step();
  for (const Bonus& b : bonuses) {
    while (row.ok() && *row && ids->Int(0) < b.card_id) row = ids->Step();
    if (!row.ok()) return row.status();
    if (*row && ids->Int(0) == b.card_id) bonuses[kept++] = b;
  }
  bonuses.resize(kept);
  return bonuses;
}

// Inserts the staged credits [at, end) of a grant. kStageRows rows per
// statement: with one row per INSERT, half of the staging's writer time went
// to each statement's own start and end (613k credits in chunks of 4,096:
// 1.27 s one row per statement, 0.58 s with 64 in a bare loop; docs/pointcard.md).
constexpr size_t kStageRows = 64;

Status StageCredits(sqlite::Connection& c, const std::vector<Bonus>& bonuses, size_t at, size_t end, int64_t grant_id) {
  static const std::string kOneRow = "INSERT INTO P_GRANT_CREDIT (CARD_ID, GRANT_ID, POINTS) VALUES (?, ?, ?)";
  static const std::string kManyRows = [] {
    std::string sql = kOneRow;
    for (size_t i = 1; i < kStageRows; ++i) sql += ", (?, ?, ?)";
    return sql;
  }();
  for (size_t i = at; i < end;) {
    const size_t rows = end - i >= kStageRows ? kStageRows : 1;
    auto q = c.Prepare(rows == kStageRows ? kManyRows : kOneRow);
    if (!q.ok()) return q.status();
    for (size_t k = 0; k < rows; ++k) {
      const int base = static_cast<int>(3 * k);
      q->Bind(base + 1, bonuses[i + k].card_id).Bind(base + 2, grant_id).Bind(base + 3, bonuses[i + k].points);
    }
    if (Status s = q->Run(); !s.ok()) return s;
    // Inside the chunk's uncommitted transaction: a crash after any row
    // leaves the grant staging, which the next start deletes.
    for (size_t k = 0; k < rows; ++k) failpoint::MaybeCrash("grant.write", static_cast<int64_t>(i + k + 1));
    i += rows;
  }
  return Status::Ok();
}

}  // namespace hotrow::pointcard
