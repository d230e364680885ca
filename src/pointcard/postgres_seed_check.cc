// Seeding and checking the point card on PostgreSQL: for `hotrow seed
// pointcard` and `hotrow check pointcard`, not for serving (the store is in
// postgres_store.cc).
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
                (r.amount > 0 ? "\tcharge\n" : "\tpayment\n");
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
      "COPY H_TRANSACTION (PAYMENT_TIME, CARD_ID, STORE_ID, AMOUNT, BALANCE, KIND) FROM STDIN";
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
  if (Status c = conn.Exec("COMMIT"); !c.ok()) return c;
  return conn.Exec("ANALYZE S_ACCOUNT; ANALYZE H_TRANSACTION; ANALYZE M_STORE;");
}

Result<CheckReport> CheckPostgresInvariants(pg::Connection& conn) {
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
  const Probe probes[] = {
      {"balance",
       "SELECT a.CARD_ID, 'has BALANCE ' || a.BALANCE || ' but its history sums to ' || COALESCE(SUM(h.AMOUNT), 0) "
       "FROM S_ACCOUNT a LEFT JOIN H_TRANSACTION h ON h.CARD_ID = a.CARD_ID "
       "GROUP BY a.CARD_ID, a.BALANCE HAVING a.BALANCE <> COALESCE(SUM(h.AMOUNT), 0) ORDER BY a.CARD_ID"},
      {"running balance",
       "SELECT CARD_ID, 'row at ' || PAYMENT_TIME || ' says BALANCE ' || BALANCE || ' but the running sum is ' || run "
       "FROM (SELECT *, SUM(AMOUNT) OVER (PARTITION BY CARD_ID ORDER BY PAYMENT_TIME, STORE_ID) AS run "
       "FROM H_TRANSACTION) r WHERE BALANCE <> run ORDER BY CARD_ID"},
      {"negative balance",
       "SELECT CARD_ID, 'has BALANCE ' || BALANCE FROM S_ACCOUNT WHERE BALANCE < 0 UNION ALL "
       "SELECT CARD_ID, 'row at ' || PAYMENT_TIME || ' takes the balance to ' || BALANCE FROM H_TRANSACTION "
       "WHERE BALANCE < 0"},
      {"last update",
       "SELECT a.CARD_ID, 'has LAST_UPDATE ' || a.LAST_UPDATE || ' but its newest row is at ' || h.t "
       "FROM S_ACCOUNT a JOIN (SELECT CARD_ID, MAX(PAYMENT_TIME) t FROM H_TRANSACTION GROUP BY CARD_ID) h "
       "ON h.CARD_ID = a.CARD_ID WHERE a.LAST_UPDATE <> h.t ORDER BY a.CARD_ID"},
      {"orphan history",
       "SELECT h.CARD_ID, 'row at ' || h.PAYMENT_TIME || ' for a card that does not exist' FROM H_TRANSACTION h "
       "WHERE NOT EXISTS (SELECT 1 FROM S_ACCOUNT a WHERE a.CARD_ID = h.CARD_ID)"},
      {"duplicate time",
       "SELECT CARD_ID, 'has ' || COUNT(*) || ' rows at ' || PAYMENT_TIME FROM H_TRANSACTION "
       "GROUP BY CARD_ID, PAYMENT_TIME HAVING COUNT(*) > 1"},
      {"kind",
       "SELECT CARD_ID, 'row at ' || PAYMENT_TIME || ' (store ' || STORE_ID || ', amount ' || AMOUNT || ') has KIND ' "
       "|| KIND FROM H_TRANSACTION WHERE KIND <> CASE WHEN STORE_ID = 0 THEN 'grant' WHEN AMOUNT > 0 THEN 'charge' "
       "ELSE 'payment' END ORDER BY CARD_ID"},
      {"orphan credit",
       "SELECT c.CARD_ID, 'credit of grant ' || c.GRANT_ID || ' to a card that does not exist' FROM P_GRANT_CREDIT c "
       "WHERE NOT EXISTS (SELECT 1 FROM S_ACCOUNT a WHERE a.CARD_ID = c.CARD_ID) ORDER BY c.CARD_ID"},
      {"stale credit",
       "SELECT c.CARD_ID, 'credit of grant ' || c.GRANT_ID || COALESCE(': the grant is ' || g.STATE, ': no such "
       "grant') "
       "FROM P_GRANT_CREDIT c LEFT JOIN P_GRANT g ON g.GRANT_ID = c.GRANT_ID "
       "WHERE g.STATE IS NULL OR g.STATE NOT IN ('staging', 'applied') ORDER BY c.CARD_ID"},
      {"credit",
       "SELECT CARD_ID, 'credit of grant ' || GRANT_ID || ' is ' || POINTS || ' points' FROM P_GRANT_CREDIT "
       "WHERE POINTS <= 0 ORDER BY CARD_ID"},
  };
  for (const auto& p : probes) {
    auto rows = conn.Query(p.sql);
    if (!rows.ok()) {
      log::WarnIfFailed(conn.Exec("ROLLBACK"), "ROLLBACK");
      return rows.status();
    }
    for (int i = 0; i < rows->size(); ++i)
      add(p.kind, "card " + std::string(rows->Text(i, 0)) + " " + std::string(rows->Text(i, 1)));
  }
  auto counts = conn.Query(
      "SELECT (SELECT COUNT(*) FROM S_ACCOUNT), (SELECT COUNT(*) FROM H_TRANSACTION), "
      "(SELECT COALESCE(SUM(c.POINTS), 0) FROM P_GRANT_CREDIT c JOIN P_GRANT g ON g.GRANT_ID = c.GRANT_ID "
      "WHERE g.STATE = 'applied')");
  log::WarnIfFailed(conn.Exec("COMMIT"), "check: ending the read transaction");
  if (!counts.ok()) return counts.status();
  report.cards = counts->Int(0, 0);
  report.rows = counts->Int(0, 1);
  report.pending_points = counts->Int(0, 2);
  return report;
}

}  // namespace hotrow::pointcard
