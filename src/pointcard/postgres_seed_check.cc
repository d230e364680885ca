// Seeding and checking the point card on PostgreSQL: for `hotrow seed
// pointcard` and `hotrow check pointcard`, not for serving (the store is in
// postgres_store.cc).
#include <algorithm>
#include <cstdio>

#include "ops/log.h"
#include "pointcard/postgres_store.h"

namespace hotrow::pointcard {

namespace pg = db::pg;

}  // namespace hotrow::pointcard

namespace hotrow::pointcard {

namespace {

// Buffers rows as COPY text and sends them in chunks.
class CopySink final : public PointCardSink {
 public:
  explicit CopySink(pg::Connection& conn) : conn_(conn) {}
  Status AddRegion(const Region& r) override {
    regions_ += std::to_string(r.region_id) + "\t";
    pg::AppendCopyText(regions_, r.name);
    regions_ += "\n";
    return Status::Ok();
  }
  Status AddStore(const StoreInfo& s) override {
    stores_ += std::to_string(s.store_id) + "\t";
    pg::AppendCopyText(stores_, s.zipcode);
    stores_ += "\t";
    pg::AppendCopyText(stores_, s.address);
    stores_ += "\t";
    pg::AppendCopyText(stores_, s.name);
    char coords[64];
    std::snprintf(coords, sizeof coords, "\t%lld\t%.6f\t%.6f\n", static_cast<long long>(s.region_id), s.latitude,
                  s.longitude);
    stores_ += coords;
    return Status::Ok();
  }
  Status AddCard(const Card& c) override {
    cards_ += std::to_string(c.card_id) + "\t" + std::to_string(c.balance) + "\t" + std::to_string(c.region_id) + "\t" +
              Timestamp(c.last_update_us) + "\n";
    return cards_.size() > kChunk ? Flush(cards_, kCards) : Status::Ok();
  }
  Status AddHistory(const HistoryRow& r) override {
    if (!cards_.empty()) {  // cards first: a history row refers to its card
      if (Status s = Flush(cards_, kCards); !s.ok()) return s;
    }
    history_ += Timestamp(r.payment_time_us) + "\t" + std::to_string(r.card_id) + "\t" + std::to_string(r.store_id) +
                "\t" + std::to_string(r.amount) + "\t" + std::to_string(r.balance) +
                (r.amount > 0 ? "\tcharge\tanonymous\n" : "\tpayment\tanonymous\n");
    return history_.size() > kChunk ? Flush(history_, kHistory) : Status::Ok();
  }
  Status Finish() override {
    if (Status s = Flush(regions_, "COPY M_REGION (REGION_ID, REGION_NAME) FROM STDIN"); !s.ok()) return s;
    if (Status s = Flush(stores_,
                         "COPY M_STORE (STORE_ID, STORE_ZIPCODE, STORE_ADDRESS, STORE_NAME, REGION_ID, "
                         "S_LATITUDE, S_LONGITUDE) FROM STDIN");
        !s.ok())
      return s;
    if (Status s = Flush(cards_, kCards); !s.ok()) return s;
    return Flush(history_, kHistory);
  }

 private:
  static constexpr size_t kChunk = 8 << 20;
  static constexpr const char* kCards = "COPY S_ACCOUNT (CARD_ID, BALANCE, REGION_ID, LAST_UPDATE) FROM STDIN";
  static constexpr const char* kHistory =
      "COPY H_TRANSACTION (PAYMENT_TIME, CARD_ID, STORE_ID, AMOUNT, BALANCE, KIND, ACTOR) FROM STDIN";
  static std::string Timestamp(int64_t us) {
    std::string t = FormatTime(us);  // 2026-11-30T06:00:00.123456Z
    t[10] = ' ';
    t.pop_back();
    return t;
  }
  Status Flush(std::string& buffer, const char* copy) {
    if (buffer.empty()) return Status::Ok();
    Status s = conn_.CopyIn(copy, buffer);
    buffer.clear();
    return s;
  }
  pg::Connection& conn_;
  std::string regions_, stores_, cards_, history_;
};

}  // namespace

Status SeedPostgresPointCard(pg::Connection& conn, const SeedOptions& options,
                             const std::function<void(int64_t, int64_t)>& progress) {
  if (Status s = CreatePostgresPointCardSchema(conn); !s.ok()) return s;
  auto existing = conn.Query("SELECT COUNT(*) FROM S_ACCOUNT");
  if (!existing.ok()) return existing.status();
  if (existing->Int(0, 0) > 0)
    return Status::Conflict("the database already holds " + std::to_string(existing->Int(0, 0)) +
                            " card(s); seed a fresh database or pass --replace");
  if (Status s = conn.Exec("BEGIN"); !s.ok()) return s;
  CopySink sink(conn);
  Status s = GeneratePointCard(options, sink, progress);
  if (!s.ok()) {
    log::WarnIfFailed(conn.Exec("ROLLBACK"), "ROLLBACK");
    return s;
  }
  // Issued cards (POST /cards) take their ids after the seeded ones.
  if (s.ok())
    s = conn.Exec(
        "SELECT setval('S_ACCOUNT_CARD_ID_SEQ', COALESCE((SELECT MAX(CARD_ID) FROM S_ACCOUNT), 1), "
        "EXISTS (SELECT 1 FROM S_ACCOUNT))");
  if (!s.ok()) {
    log::WarnIfFailed(conn.Exec("ROLLBACK"), "ROLLBACK");
    return s;
  }
  if (Status c = conn.Exec("COMMIT"); !c.ok()) return c;
  return conn.Exec("ANALYZE S_ACCOUNT; ANALYZE H_TRANSACTION; ANALYZE M_STORE;");
}

namespace {

// Invariant 8 (check.h) for one window, as on SQLite (check.cc): each
// card's bonus, and what the grant gave it, in card order; times in
// microseconds.
// A card closed before the grant applied ($6) is owed nothing (point-card
// schema 3: `closable`).
std::string GrantExpectedSql(bool closable) {
  return std::string(R"sql(
  SELECT h.CARD_ID, SUM(h.AMOUNT)::bigint * $1::int / 100 FROM H_TRANSACTION h
  WHERE h.KIND = 'charge' AND h.PAYMENT_TIME >= hotrow_ts($2) AND h.PAYMENT_TIME < hotrow_ts($3)
    AND h.CARD_ID >= $4 AND h.CARD_ID <= $5 AND EXISTS (SELECT 1 FROM S_ACCOUNT a WHERE a.CARD_ID = h.CARD_ID))sql") +
         (closable ? " AND NOT EXISTS (SELECT 1 FROM S_ACCOUNT a WHERE a.CARD_ID = h.CARD_ID AND a.STATUS = 'closed' "
                     "AND a.CLOSED_TIME < hotrow_ts($6))"
                   : " AND $6::bigint IS NOT NULL") +
         " GROUP BY h.CARD_ID HAVING SUM(h.AMOUNT)::bigint * $1::int / 100 > 0 ORDER BY h.CARD_ID";
}
constexpr const char* kGrantDelivered = R"sql(
  SELECT CARD_ID, SUM(PTS)::bigint, SUM(PENDING)::bigint FROM (
    SELECT CARD_ID, AMOUNT AS PTS, 0 AS PENDING FROM H_TRANSACTION
    WHERE KIND = 'grant' AND PAYMENT_TIME >= hotrow_ts($1) AND PAYMENT_TIME < hotrow_ts($2)
      AND CARD_ID >= $4 AND CARD_ID <= $5
    UNION ALL
    SELECT CARD_ID, POINTS, POINTS FROM P_GRANT_CREDIT WHERE GRANT_ID = $3 AND CARD_ID >= $4 AND CARD_ID <= $5) x
  GROUP BY CARD_ID ORDER BY CARD_ID)sql";

// The end of a window that runs on: hotrow_ts of INT64_MAX would overflow.
constexpr int64_t kWindowEndMaxUs = kHistoryCursorMaxUs;

Status CheckPostgresGrants(pg::Connection& conn, const CheckScope& scope, bool closable, CheckReport& report) {
  auto list = conn.Query(
      "SELECT GRANT_ID, STATE, hotrow_us(GRANT_TIME), hotrow_us(COALESCE(APPLIED_TIME, GRANT_TIME)), "
      "hotrow_us(FROM_TIME), hotrow_us(TO_TIME), RATE_PERCENT, CARDS, POINTS FROM P_GRANT "
      "ORDER BY COALESCE(APPLIED_TIME, GRANT_TIME), GRANT_ID");
  if (!list.ok()) return list.status();
  std::vector<GrantRecord> grants;
  for (int i = 0; i < list->size(); ++i)
    grants.push_back({list->Int(i, 0), std::string(list->Text(i, 1)), list->Int(i, 2), list->Int(i, 3), list->Int(i, 4),
                      list->Int(i, 5), list->Int(i, 6), list->Int(i, 7), list->Int(i, 8)});
  auto text = [](int64_t v) -> pg::Param { return std::to_string(v); };
  GrantWindows windows = WindowsOf(grants, scope, report);
  if (windows.unattributed_begin_us < windows.unattributed_end_us) {
    auto rows = conn.Query(
        "SELECT CARD_ID, hotrow_us(PAYMENT_TIME), AMOUNT FROM H_TRANSACTION WHERE KIND = 'grant' "
        "AND PAYMENT_TIME >= hotrow_ts($1) AND PAYMENT_TIME < hotrow_ts($2) AND CARD_ID >= $3 AND CARD_ID <= $4 "
        "ORDER BY PAYMENT_TIME LIMIT 1000",
        {text(windows.unattributed_begin_us), text(std::min(windows.unattributed_end_us, kWindowEndMaxUs)),
         text(scope.card_first), text(scope.card_last)});
    if (!rows.ok()) return rows.status();
    for (int i = 0; i < rows->size(); ++i) {
      ++report.violations["grant row"];
      if (report.examples.size() < kCheckExamplesMax)
        report.examples.push_back("grant row: " + UnattributedRow(rows->Int(i, 0), rows->Int(i, 1), rows->Int(i, 2)));
    }
  }
  for (const GrantWindow& w : windows.windows) {
    int64_t end = std::min(w.window_end_us, kWindowEndMaxUs);
    auto e = conn.Query(GrantExpectedSql(closable),
                        {text(w.grant.rate_percent), text(w.grant.from_us), text(w.grant.to_us), text(scope.card_first),
                         text(scope.card_last), text(w.grant.applied_us)});
    if (!e.ok()) return e.status();
    auto d = conn.Query(kGrantDelivered, {text(w.grant.applied_us), text(end), text(w.grant.grant_id),
                                          text(scope.card_first), text(scope.card_last)});
    if (!d.ok()) return d.status();
    std::vector<CardPoints> expected, delivered;
    for (int i = 0; i < e->size(); ++i) expected.push_back({e->Int(i, 0), e->Int(i, 1), 0});
    for (int i = 0; i < d->size(); ++i) delivered.push_back({d->Int(i, 0), d->Int(i, 1), d->Int(i, 2)});
    CompareGrant(w, expected, delivered, scope.whole(), report);
  }
  return Status::Ok();
}

}  // namespace

Result<CheckReport> CheckPostgresInvariants(pg::Connection& conn, const CheckScope& scope) {
  CheckReport report;
  auto add = [&report](const std::string& kind, const std::string& detail) {
    ++report.violations[kind];
    if (report.examples.size() < kCheckExamplesMax) report.examples.push_back(kind + ": " + detail);
  };
  if (Status s = conn.Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); !s.ok()) return s;
  struct Probe {
    const char* kind;
    const char* sql;  // rows of (card, detail)
  };
  // $1/$2: the scope's cards, a bound on every table scan (PostgreSQL does
  // not carry a range through a join, so each side states it).
  const Probe probes[] = {
      {"balance",
       "SELECT a.CARD_ID, 'has BALANCE ' || a.BALANCE || ' but its history sums to ' || COALESCE(SUM(h.AMOUNT), 0) "
       "FROM S_ACCOUNT a LEFT JOIN H_TRANSACTION h ON h.CARD_ID = a.CARD_ID AND h.CARD_ID >= $1 AND h.CARD_ID <= $2 "
       "WHERE a.CARD_ID >= $1 AND a.CARD_ID <= $2 "
       "GROUP BY a.CARD_ID, a.BALANCE HAVING a.BALANCE <> COALESCE(SUM(h.AMOUNT), 0) ORDER BY a.CARD_ID"},
      {"running balance",
       "SELECT CARD_ID, 'row at ' || PAYMENT_TIME || ' says BALANCE ' || BALANCE || ' but the running sum is ' || run "
       "FROM (SELECT *, SUM(AMOUNT) OVER (PARTITION BY CARD_ID ORDER BY PAYMENT_TIME, STORE_ID) AS run "
       "FROM H_TRANSACTION WHERE CARD_ID >= $1 AND CARD_ID <= $2) r WHERE BALANCE <> run ORDER BY CARD_ID"},
      {"negative balance",
       "SELECT CARD_ID, 'has BALANCE ' || BALANCE FROM S_ACCOUNT WHERE BALANCE < 0 AND CARD_ID >= $1 AND CARD_ID <= $2 "
       "UNION ALL SELECT CARD_ID, 'row at ' || PAYMENT_TIME || ' takes the balance to ' || BALANCE FROM H_TRANSACTION "
       "WHERE BALANCE < 0 AND CARD_ID >= $1 AND CARD_ID <= $2"},
      {"last update",
       "SELECT a.CARD_ID, 'has LAST_UPDATE ' || a.LAST_UPDATE || ' but its newest row is at ' || h.t "
       "FROM S_ACCOUNT a JOIN (SELECT CARD_ID, MAX(PAYMENT_TIME) t FROM H_TRANSACTION "
       "WHERE CARD_ID >= $1 AND CARD_ID <= $2 GROUP BY CARD_ID) h "
       "ON h.CARD_ID = a.CARD_ID WHERE a.LAST_UPDATE <> h.t ORDER BY a.CARD_ID"},
      {"orphan history",
       "SELECT h.CARD_ID, 'row at ' || h.PAYMENT_TIME || ' for a card that does not exist' FROM H_TRANSACTION h "
       "WHERE h.CARD_ID >= $1 AND h.CARD_ID <= $2 AND NOT EXISTS (SELECT 1 FROM S_ACCOUNT a WHERE a.CARD_ID = "
       "h.CARD_ID)"},
      {"duplicate time",
       "SELECT CARD_ID, 'has ' || COUNT(*) || ' rows at ' || PAYMENT_TIME FROM H_TRANSACTION "
       "WHERE CARD_ID >= $1 AND CARD_ID <= $2 GROUP BY CARD_ID, PAYMENT_TIME HAVING COUNT(*) > 1"},
      {"kind",
       "SELECT CARD_ID, 'row at ' || PAYMENT_TIME || ' (store ' || STORE_ID || ', amount ' || AMOUNT || ') has KIND ' "
       "|| KIND FROM H_TRANSACTION WHERE CARD_ID >= $1 AND CARD_ID <= $2 AND CASE KIND WHEN 'grant' THEN "
       "STORE_ID <> 0 OR AMOUNT <= 0 WHEN 'charge' THEN STORE_ID = 0 OR AMOUNT <= 0 WHEN 'payment' THEN STORE_ID = 0 "
       "OR AMOUNT >= 0 WHEN 'refund' THEN STORE_ID = 0 OR AMOUNT <= 0 WHEN 'capture' THEN STORE_ID = 0 OR "
       "AMOUNT >= 0 WHEN 'expiry' THEN STORE_ID <> 0 OR AMOUNT >= 0 ELSE true END ORDER BY CARD_ID"},
      {"row fields",
       "SELECT CARD_ID, 'row at ' || PAYMENT_TIME || ' has TRANSACTION_ID ' || TRANSACTION_ID || ', ACTOR ' || "
       "COALESCE(ACTOR, 'NULL') || ', REFERENCE ' || COALESCE(length(REFERENCE) || ' character(s)', 'none') || "
       "', REASON ' || COALESCE(length(REASON) || ' character(s)', 'none') || ', REFUND_OF ' || "
       "COALESCE(REFUND_OF::text, 'none') FROM H_TRANSACTION WHERE CARD_ID >= $1 AND CARD_ID <= $2 AND "
       "(TRANSACTION_ID <= 0 OR ACTOR IS NULL OR NOT (ACTOR IN ('admin', 'system', 'anonymous') OR ACTOR LIKE "
       "'key:_%') OR (KIND IN ('grant', 'expiry')) <> (ACTOR = 'system') OR length(REFERENCE) NOT BETWEEN 1 AND 64 "
       "OR strpos(REFERENCE, ' ') > 0 OR length(REASON) NOT BETWEEN 1 AND 200 OR strpos(REASON, chr(10)) > 0 "
       "OR strpos(REASON, chr(13)) > 0 OR (REFUND_OF IS NOT NULL) <> (KIND = 'refund')) ORDER BY CARD_ID"},
      {"refund",
       "SELECT h.CARD_ID, 'has ' || COUNT(*) || ' refund(s) of transaction ' || COALESCE(h.REFUND_OF::text, 'none') "
       "|| ' returning ' || SUM(h.AMOUNT) || ' point(s) at stores ' || MIN(h.STORE_ID) || '-' || MAX(h.STORE_ID) || "
       "'; it is ' || COALESCE('a ' || MIN(o.KIND) || ' of ' || -MIN(o.AMOUNT) || ' point(s) on card ' || "
       "MIN(o.CARD_ID) || ' at store ' || MIN(o.STORE_ID) || ' at ' || MIN(o.PAYMENT_TIME), 'not in the history') "
       "|| ', its first refund at ' || MIN(h.PAYMENT_TIME) "
       "FROM H_TRANSACTION h LEFT JOIN H_TRANSACTION o ON o.TRANSACTION_ID = h.REFUND_OF "
       "WHERE h.CARD_ID >= $1 AND h.CARD_ID <= $2 AND h.KIND = 'refund' GROUP BY h.CARD_ID, h.REFUND_OF "
       "HAVING MIN(o.CARD_ID) IS NULL OR MIN(o.CARD_ID) <> h.CARD_ID OR MIN(o.KIND) NOT IN ('payment', 'capture') "
       "OR MIN(h.STORE_ID) <> MIN(o.STORE_ID) OR MAX(h.STORE_ID) <> MIN(o.STORE_ID) "
       "OR MIN(h.PAYMENT_TIME) <= MIN(o.PAYMENT_TIME) OR SUM(h.AMOUNT) > -MIN(o.AMOUNT) ORDER BY h.CARD_ID"},
      {"card state",
       "SELECT CARD_ID, 'has STATUS ' || COALESCE(STATUS, 'NULL') || ', CLOSED_TIME ' || "
       "COALESCE(CLOSED_TIME::text, 'NULL') || ', EXTERNAL_REF ' || COALESCE(length(EXTERNAL_REF) || ' character(s)', "
       "'none') FROM S_ACCOUNT WHERE CARD_ID >= $1 AND CARD_ID <= $2 AND (STATUS IS NULL OR STATUS NOT IN ('active', "
       "'closed') OR (STATUS = 'closed') <> (CLOSED_TIME IS NOT NULL) OR length(EXTERNAL_REF) NOT BETWEEN 1 AND 64 "
       "OR strpos(EXTERNAL_REF, ' ') > 0) ORDER BY CARD_ID"},
      {"closed card",
       "SELECT h.CARD_ID, 'has a ' || h.KIND || ' at ' || h.PAYMENT_TIME || ', after its close at ' || a.CLOSED_TIME "
       "FROM S_ACCOUNT a JOIN H_TRANSACTION h ON h.CARD_ID = a.CARD_ID AND h.PAYMENT_TIME > a.CLOSED_TIME "
       "AND h.CARD_ID >= $1 AND h.CARD_ID <= $2 WHERE a.STATUS = 'closed' AND a.CARD_ID >= $1 AND a.CARD_ID <= $2 "
       "AND h.KIND IN ('payment', 'charge') ORDER BY h.CARD_ID"},
      {"store key",
       "SELECT h.CARD_ID, 'has a row at ' || h.PAYMENT_TIME || ' at store ' || h.STORE_ID || ' by ' || h.ACTOR || "
       "', whose key is of store ' || COALESCE(k.STORE_ID::text, 'none') || ', made at ' || "
       "COALESCE(k.CREATED_TIME::text, 'none') || ', revoked at ' || COALESCE(k.REVOKED_TIME::text, 'none') "
       "FROM H_TRANSACTION h LEFT JOIN M_STORE_KEY k ON k.KEY_ID = substr(h.ACTOR, 5) "
       "WHERE h.CARD_ID >= $1 AND h.CARD_ID <= $2 AND h.ACTOR LIKE 'key:%' AND (k.KEY_ID IS NULL "
       "OR k.STORE_ID <> h.STORE_ID OR k.CREATED_TIME > h.PAYMENT_TIME OR k.REVOKED_TIME <= h.PAYMENT_TIME) "
       "ORDER BY h.CARD_ID"},
      // 13. holds (check.cc, kHoldProbes, in step with these; and the card's
      // HOLD_TIME at or after each hold's decisions, which SQLite has no
      // need of). "held" counts at the card's time: never before its last
      // decision, whatever the clock does.
      {"hold",
       "SELECT h.CARD_ID, 'hold ' || h.HOLD_ID || ' (' || h.STATUS || ', amount ' || h.AMOUNT || ', made ' || "
       "h.CREATED_TIME || ', expiring ' || h.EXPIRES_TIME || ', ended ' || COALESCE(h.ENDED_TIME::text, 'never') || "
       "', capture ' || COALESCE(h.CAPTURE_ID::text, 'none') || ' of ' || COALESCE(h.CAPTURED_AMOUNT::text, 'none') "
       "|| ') is out of order, or its capture row ' || COALESCE('is a ' || x.KIND || ' of ' || x.AMOUNT || ' on card ' "
       "|| x.CARD_ID || ' at store ' || x.STORE_ID || ' at ' || x.PAYMENT_TIME, 'is not in the history') "
       "|| ', the card''s HOLD_TIME ' || COALESCE(a.HOLD_TIME::text, 'NULL') "
       "FROM P_HOLD h LEFT JOIN H_TRANSACTION x ON x.TRANSACTION_ID = h.CAPTURE_ID "
       "LEFT JOIN S_ACCOUNT a ON a.CARD_ID = h.CARD_ID "
       "WHERE h.CARD_ID >= $1 AND h.CARD_ID <= $2 AND (h.AMOUNT NOT BETWEEN -1000000 AND -1 "
       "OR h.CREATED_TIME >= h.EXPIRES_TIME OR a.CARD_ID IS NULL OR a.HOLD_TIME IS NULL "
       "OR a.HOLD_TIME < COALESCE(h.ENDED_TIME, h.CREATED_TIME) "
       "OR CASE h.STATUS WHEN 'open' THEN h.ENDED_TIME IS NOT NULL OR h.CAPTURE_ID IS NOT NULL "
       "WHEN 'voided' THEN h.ENDED_TIME IS NULL OR h.ENDED_TIME < h.CREATED_TIME OR h.ENDED_TIME >= h.EXPIRES_TIME "
       "OR h.CAPTURE_ID IS NOT NULL "
       "WHEN 'expired' THEN h.ENDED_TIME IS DISTINCT FROM h.EXPIRES_TIME OR h.CAPTURE_ID IS NOT NULL "
       "WHEN 'captured' THEN h.ENDED_TIME IS NULL OR h.ENDED_TIME < h.CREATED_TIME OR h.ENDED_TIME >= h.EXPIRES_TIME "
       "OR x.TRANSACTION_ID IS NULL OR x.KIND <> 'capture' OR x.CARD_ID <> h.CARD_ID OR x.STORE_ID <> h.STORE_ID "
       "OR h.CAPTURED_AMOUNT IS NULL OR x.AMOUNT <> h.CAPTURED_AMOUNT OR h.CAPTURED_AMOUNT NOT BETWEEN h.AMOUNT AND -1 "
       "OR x.PAYMENT_TIME < h.ENDED_TIME ELSE true END) ORDER BY h.CARD_ID"},
      {"capture",
       "SELECT x.CARD_ID, 'capture at ' || x.PAYMENT_TIME || ' (transaction ' || x.TRANSACTION_ID || ') is named by ' "
       "|| COUNT(h.HOLD_ID) || ' captured hold(s)' FROM H_TRANSACTION x LEFT JOIN P_HOLD h "
       "ON h.CAPTURE_ID = x.TRANSACTION_ID AND h.STATUS = 'captured' WHERE x.CARD_ID >= $1 AND x.CARD_ID <= $2 "
       "AND x.KIND = 'capture' GROUP BY x.CARD_ID, x.PAYMENT_TIME, x.TRANSACTION_ID HAVING COUNT(h.HOLD_ID) <> 1"},
      {"held",
       "SELECT a.CARD_ID, 'holds ' || SUM(-h.AMOUNT) || ' point(s) in open holds but has ' || a.BALANCE || ' and ' || "
       "(SELECT COALESCE(SUM(c.POINTS), 0) FROM P_GRANT_CREDIT c JOIN P_GRANT g ON g.GRANT_ID = c.GRANT_ID "
       "WHERE c.CARD_ID = a.CARD_ID AND g.STATE = 'applied') || ' pending' FROM S_ACCOUNT a JOIN P_HOLD h "
       "ON h.CARD_ID = a.CARD_ID AND h.STATUS = 'open' AND h.EXPIRES_TIME > GREATEST(clock_timestamp() AT TIME ZONE "
       "'UTC', a.LAST_UPDATE + interval '1 microsecond', a.HOLD_TIME + interval '1 microsecond') "
       "WHERE a.CARD_ID >= $1 AND a.CARD_ID <= $2 GROUP BY a.CARD_ID, a.BALANCE HAVING SUM(-h.AMOUNT) > a.BALANCE + "
       "(SELECT COALESCE(SUM(c.POINTS), 0) FROM P_GRANT_CREDIT c JOIN P_GRANT g ON g.GRANT_ID = c.GRANT_ID "
       "WHERE c.CARD_ID = a.CARD_ID AND g.STATE = 'applied')"},
      // 14. lots (check_holds.cc, kLotProbes, in step with these). "lot
      // sum" counts holds unexpired at the card's time.
      {"lot",
       "SELECT l.CARD_ID, 'lot ' || l.LOT_ID || ' (grant ' || l.GRANT_ID || ', amount ' || l.AMOUNT || ', remaining ' "
       "|| l.REMAINING || ', reserved ' || l.RESERVED || ', expiring ' || l.EXPIRES_TIME || ', expired ' || "
       "COALESCE(l.EXPIRED_TIME::text, 'never') || ') does not add up: its uses come to ' || "
       "COALESCE((SELECT SUM(u.AMOUNT) FROM P_LOT_USE u WHERE u.LOT_ID = l.LOT_ID), 0) || ', its holds keep ' || "
       "COALESCE((SELECT SUM(r.AMOUNT) FROM P_LOT_HOLD r WHERE r.LOT_ID = l.LOT_ID), 0) FROM P_LOT l "
       "LEFT JOIN P_GRANT g ON g.GRANT_ID = l.GRANT_ID LEFT JOIN H_TRANSACTION x ON x.TRANSACTION_ID = l.SOURCE_ID "
       "WHERE l.CARD_ID >= $1 AND l.CARD_ID <= $2 AND (l.AMOUNT <= 0 OR l.RESERVED < 0 OR l.RESERVED > l.REMAINING "
       "OR l.EXPIRES_TIME <= g.GRANT_TIME OR g.GRANT_ID IS NULL OR g.EXPIRES_TIME IS DISTINCT FROM l.EXPIRES_TIME "
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
       "WHERE COALESCE(x.CARD_ID, l.CARD_ID, 0) BETWEEN $1 AND $2 AND (x.TRANSACTION_ID IS NULL OR l.LOT_ID IS NULL "
       "OR x.CARD_ID <> l.CARD_ID OR u.AMOUNT = 0 OR CASE x.KIND WHEN 'refund' THEN u.AMOUNT < 0 "
       "WHEN 'payment' THEN u.AMOUNT > 0 WHEN 'capture' THEN u.AMOUNT > 0 WHEN 'expiry' THEN u.AMOUNT > 0 "
       "OR l.EXPIRED_TIME IS NULL OR l.EXPIRED_TIME > x.PAYMENT_TIME ELSE true END) ORDER BY 1"},
      {"lot use",
       "SELECT x.CARD_ID, 'transaction ' || x.TRANSACTION_ID || ' (' || x.KIND || ' of ' || x.AMOUNT || ') uses lots "
       "by ' || SUM(u.AMOUNT) FROM H_TRANSACTION x JOIN P_LOT_USE u ON u.TRANSACTION_ID = x.TRANSACTION_ID "
       "WHERE x.CARD_ID >= $1 AND x.CARD_ID <= $2 GROUP BY x.TRANSACTION_ID, x.CARD_ID, x.KIND, x.AMOUNT "
       "HAVING abs(SUM(u.AMOUNT)) > abs(x.AMOUNT) OR (x.KIND = 'expiry' AND SUM(u.AMOUNT) <> x.AMOUNT)"},
      {"expiry",
       "SELECT x.CARD_ID, 'expiry at ' || x.PAYMENT_TIME || ' (transaction ' || x.TRANSACTION_ID || ', ' || x.AMOUNT "
       "|| ') takes from no lot' FROM H_TRANSACTION x WHERE x.CARD_ID >= $1 AND x.CARD_ID <= $2 "
       "AND x.KIND = 'expiry' AND NOT EXISTS (SELECT 1 FROM P_LOT_USE u WHERE u.TRANSACTION_ID = x.TRANSACTION_ID)"},
      {"lot hold",
       "SELECT COALESCE(l.CARD_ID, h.CARD_ID, 0), 'hold ' || r.HOLD_ID || ' (' || COALESCE(h.STATUS, 'missing') || "
       "', amount ' || COALESCE(h.AMOUNT, 0) || ') reserves ' || r.AMOUNT || ' of lot ' || r.LOT_ID || "
       "COALESCE(' of card ' || l.CARD_ID, ', which is missing') || ', ' || (SELECT SUM(o.AMOUNT) FROM P_LOT_HOLD o "
       "WHERE o.HOLD_ID = r.HOLD_ID) || ' in all' FROM P_LOT_HOLD r LEFT JOIN P_HOLD h ON h.HOLD_ID = r.HOLD_ID "
       "LEFT JOIN P_LOT l ON l.LOT_ID = r.LOT_ID WHERE COALESCE(l.CARD_ID, h.CARD_ID, 0) BETWEEN $1 AND $2 "
       "AND (h.HOLD_ID IS NULL OR l.LOT_ID IS NULL OR h.CARD_ID <> l.CARD_ID OR h.STATUS <> 'open' OR r.AMOUNT <= 0 "
       "OR r.EXPIRES_TIME <> h.EXPIRES_TIME "
       "OR (SELECT SUM(o.AMOUNT) FROM P_LOT_HOLD o WHERE o.HOLD_ID = r.HOLD_ID) > -h.AMOUNT) ORDER BY 1"},
      {"lot sum",
       "SELECT a.CARD_ID, 'has ' || a.BALANCE || ' point(s), of which its lots have ' || s.LEFT_IN || ' and its open "
       "holds keep ' || s.NEVER_HELD || ' of the rest' FROM S_ACCOUNT a JOIN (SELECT l.CARD_ID AS CARD_ID, "
       "SUM(l.REMAINING) AS LEFT_IN, COALESCE((SELECT SUM(-h.AMOUNT - COALESCE((SELECT SUM(r.AMOUNT) FROM P_LOT_HOLD r "
       "WHERE r.HOLD_ID = h.HOLD_ID), 0)) FROM P_HOLD h JOIN S_ACCOUNT c ON c.CARD_ID = h.CARD_ID "
       "WHERE h.CARD_ID = l.CARD_ID AND h.STATUS = 'open' AND h.EXPIRES_TIME > GREATEST(clock_timestamp() AT TIME "
       "ZONE 'UTC', c.LAST_UPDATE + interval '1 microsecond', c.HOLD_TIME + interval '1 microsecond')), 0) "
       "AS NEVER_HELD FROM P_LOT l WHERE l.CARD_ID >= $1 AND l.CARD_ID <= $2 GROUP BY l.CARD_ID) s "
       "ON s.CARD_ID = a.CARD_ID WHERE a.BALANCE + (SELECT COALESCE(SUM(c.POINTS), 0) FROM P_GRANT_CREDIT c "
       "JOIN P_GRANT g ON g.GRANT_ID = c.GRANT_ID WHERE c.CARD_ID = a.CARD_ID AND g.STATE = 'applied') - s.LEFT_IN "
       "< s.NEVER_HELD"},
      {"orphan credit",
       "SELECT c.CARD_ID, 'credit of grant ' || c.GRANT_ID || ' to a card that does not exist' FROM P_GRANT_CREDIT c "
       "WHERE c.CARD_ID >= $1 AND c.CARD_ID <= $2 AND NOT EXISTS (SELECT 1 FROM S_ACCOUNT a WHERE a.CARD_ID = "
       "c.CARD_ID) ORDER BY c.CARD_ID"},
      {"stale credit",
       "SELECT c.CARD_ID, 'credit of grant ' || c.GRANT_ID || COALESCE(': the grant is ' || g.STATE, ': no such "
       "grant') "
       "FROM P_GRANT_CREDIT c LEFT JOIN P_GRANT g ON g.GRANT_ID = c.GRANT_ID "
       "WHERE c.CARD_ID >= $1 AND c.CARD_ID <= $2 AND (g.STATE IS NULL OR g.STATE NOT IN ('staging', 'applied')) "
       "ORDER BY c.CARD_ID"},
      {"credit",
       "SELECT CARD_ID, 'credit of grant ' || GRANT_ID || ' is ' || POINTS || ' points' FROM P_GRANT_CREDIT "
       "WHERE POINTS <= 0 AND CARD_ID >= $1 AND CARD_ID <= $2 ORDER BY CARD_ID"},
  };
  const std::vector<pg::Param> bounds = {std::to_string(scope.card_first), std::to_string(scope.card_last)};
  // What the schema has: a database an older release made, not migrated
  // yet, is checked without the probes of later steps.
  auto has = [&](const char* sql) -> Result<bool> {
    auto rows = conn.Query(std::string("SELECT COUNT(*) FROM information_schema.") + sql);
    if (!rows.ok()) return rows.status();
    return rows->Int(0, 0) > 0;
  };
  auto numbered =
      has("columns WHERE table_schema = current_schema() AND table_name = 'h_transaction' "
          "AND column_name = 'transaction_id'");  // schema 2
  auto closable =
      has("columns WHERE table_schema = current_schema() AND table_name = 's_account' "
          "AND column_name = 'status'");                                                            // schema 3
  auto keyed = has("tables WHERE table_schema = current_schema() AND table_name = 'm_store_key'");  // schema 4
  auto holding = has("tables WHERE table_schema = current_schema() AND table_name = 'p_hold'");     // schema 5
  auto lotted = has("tables WHERE table_schema = current_schema() AND table_name = 'p_lot'");       // schema 6
  for (const auto* r : {&numbered, &closable, &keyed, &holding, &lotted}) {
    if (!r->ok()) {
      log::WarnIfFailed(conn.Exec("ROLLBACK"), "ROLLBACK");
      return r->status();
    }
  }
  const bool has_states = *closable;
  for (const auto& p : probes) {
    if ((std::string_view(p.kind) == "row fields" || std::string_view(p.kind) == "refund") && !*numbered) continue;
    if ((std::string_view(p.kind) == "card state" || std::string_view(p.kind) == "closed card") && !has_states)
      continue;
    if (std::string_view(p.kind) == "store key" && !*keyed) continue;
    const std::string_view kind(p.kind);
    if ((kind == "hold" || kind == "capture" || kind == "held") && !*holding) continue;
    if (kind.starts_with("lot") || kind == "expiry") {
      if (!*lotted) continue;
    }
    auto rows = conn.Query(p.sql, bounds);
    if (!rows.ok()) {
      log::WarnIfFailed(conn.Exec("ROLLBACK"), "ROLLBACK");
      return rows.status();
    }
    for (int i = 0; i < rows->size(); ++i)
      add(p.kind, "card " + std::string(rows->Text(i, 0)) + " " + std::string(rows->Text(i, 1)));
  }
  if (Status s = CheckPostgresGrants(conn, scope, has_states, report); !s.ok()) {
    log::WarnIfFailed(conn.Exec("ROLLBACK"), "ROLLBACK");
    return s;
  }
  auto counts = conn.Query(
      "SELECT (SELECT COUNT(*) FROM S_ACCOUNT WHERE CARD_ID >= $1 AND CARD_ID <= $2), "
      "(SELECT COUNT(*) FROM H_TRANSACTION WHERE CARD_ID >= $1 AND CARD_ID <= $2), "
      "(SELECT COALESCE(SUM(c.POINTS), 0) FROM P_GRANT_CREDIT c JOIN P_GRANT g ON g.GRANT_ID = c.GRANT_ID "
      "WHERE g.STATE = 'applied' AND c.CARD_ID >= $1 AND c.CARD_ID <= $2)",
      bounds);
  log::WarnIfFailed(conn.Exec("COMMIT"), "check: ending the read transaction");
  if (!counts.ok()) return counts.status();
  report.cards = counts->Int(0, 0);
  report.rows = counts->Int(0, 1);
  report.pending_points = counts->Int(0, 2);
  return report;
}

}  // namespace hotrow::pointcard
