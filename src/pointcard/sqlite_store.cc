#include "pointcard/sqlite_store.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <future>
#include <memory>

#include "base/await.h"
#include "ops/failpoint.h"
#include "ops/log.h"
#include "ops/metrics.h"

namespace hotrow::pointcard {

namespace sqlite = db::sqlite;

namespace {

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Status CreatePointCardTables(sqlite::Connection& conn) {
  return conn.Exec(R"sql(
    CREATE TABLE IF NOT EXISTS M_REGION (
      REGION_ID   INTEGER PRIMARY KEY,
      REGION_NAME TEXT    NOT NULL
    );
    CREATE TABLE IF NOT EXISTS M_STORE (
      STORE_ID      INTEGER PRIMARY KEY,
      STORE_ZIPCODE TEXT,
      STORE_ADDRESS TEXT,
      STORE_NAME    TEXT,
      REGION_ID     INTEGER NOT NULL,
      S_LATITUDE    REAL,
      S_LONGITUDE   REAL
    );
    -- The stores of one region (the reference's "stores by REGION_ID" query).
    CREATE INDEX IF NOT EXISTS M_STORE_REGION ON M_STORE (REGION_ID);
    -- Times are UTC microseconds since the epoch.
    CREATE TABLE IF NOT EXISTS S_ACCOUNT (
      CARD_ID     INTEGER PRIMARY KEY,
      BALANCE     INTEGER NOT NULL,
      REGION_ID   INTEGER NOT NULL,
      LAST_UPDATE INTEGER NOT NULL
    );
    -- Append-only. The primary key (the reference's) orders by time, which is
    -- what the grant's period scan needs.
    CREATE TABLE IF NOT EXISTS H_TRANSACTION (
      PAYMENT_TIME INTEGER NOT NULL,
      CARD_ID      INTEGER NOT NULL,
      STORE_ID     INTEGER NOT NULL,
      AMOUNT       INTEGER NOT NULL,
      BALANCE      INTEGER NOT NULL,
      PRIMARY KEY (PAYMENT_TIME, CARD_ID, STORE_ID)
    ) WITHOUT ROWID;
    -- A card's history newest first (GET .../transactions) and the invariant
    -- checker's per-card scan in time order.
    CREATE INDEX IF NOT EXISTS H_TRANSACTION_CARD_TIME ON H_TRANSACTION (CARD_ID, PAYMENT_TIME);
    -- Idempotency keys of point uses, with the outcome they got. CREATED
    -- (indexed) drives the purge of keys older than the retention.
    CREATE TABLE IF NOT EXISTS P_IDEMPOTENCY (
      CARD_ID      INTEGER NOT NULL,
      KEY          TEXT    NOT NULL,
      FINGERPRINT  TEXT    NOT NULL,
      CREATED      INTEGER NOT NULL,
      REFUSED      INTEGER NOT NULL,
      PAYMENT_TIME INTEGER NOT NULL,
      STORE_ID     INTEGER NOT NULL,
      AMOUNT       INTEGER NOT NULL,
      BALANCE      INTEGER NOT NULL,
      PRIMARY KEY (CARD_ID, KEY)
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS P_IDEMPOTENCY_CREATED ON P_IDEMPOTENCY (CREATED);
    -- One row per completed grant; its idempotency key, if any, is unique.
    CREATE TABLE IF NOT EXISTS P_GRANT (
      GRANT_ID        INTEGER PRIMARY KEY,
      GRANT_TIME      INTEGER NOT NULL,
      FROM_TIME       INTEGER NOT NULL,
      TO_TIME         INTEGER NOT NULL,
      RATE_PERCENT    INTEGER NOT NULL,
      CARDS           INTEGER NOT NULL,
      POINTS          INTEGER NOT NULL,
      QUERY_MS        REAL    NOT NULL,
      UPDATE_MS       REAL    NOT NULL,
      COMMIT_MS       REAL    NOT NULL DEFAULT 0,
      IDEMPOTENCY_KEY TEXT UNIQUE,
      FINGERPRINT     TEXT
    );
  )sql");
}

Status CreatePointCardSchema(sqlite::Connection& conn) {
  // As v0.1.0 made them; the steps below bring them forward.
  if (Status s = CreatePointCardTables(conn); !s.ok()) return s;
  // The point-card file's own record (pointcard/sqlite_file.h).
  return sqlite::Migrate(conn,
                         {
                             // 1 (v0.5.0): stall-free grants (the protocol in sqlite_store.h).
                             //  - KIND says what a history row is; a grant counts charges only.
                             //  - P_GRANT's STATE: staging (credits being written, invisible),
                             //    applied (visible, history rows being folded), folded.
                             //  - P_GRANT_CREDIT: a grant's credit per card until it is folded.
                             {.sql = R"sql(
                               ALTER TABLE H_TRANSACTION ADD COLUMN KIND TEXT;
                               UPDATE H_TRANSACTION SET KIND = CASE WHEN STORE_ID = 0 THEN 'grant'
                                 WHEN AMOUNT > 0 THEN 'charge' ELSE 'payment' END;
                               ALTER TABLE P_GRANT ADD COLUMN STATE TEXT NOT NULL DEFAULT 'folded';
                               ALTER TABLE P_GRANT ADD COLUMN APPLIED_TIME INTEGER;
                               ALTER TABLE P_GRANT ADD COLUMN FOLDED_TIME INTEGER;
                               ALTER TABLE P_GRANT ADD COLUMN FOLD_MS REAL NOT NULL DEFAULT 0;
                               UPDATE P_GRANT SET APPLIED_TIME = GRANT_TIME, FOLDED_TIME = GRANT_TIME;
                               CREATE INDEX P_GRANT_UNFOLDED ON P_GRANT (STATE) WHERE STATE <> 'folded';
                               CREATE TABLE P_GRANT_CREDIT (
                                 CARD_ID  INTEGER NOT NULL,
                                 GRANT_ID INTEGER NOT NULL,
                                 POINTS   INTEGER NOT NULL,
                                 PRIMARY KEY (CARD_ID, GRANT_ID)
                               ) WITHOUT ROWID;
                             )sql"},
                         },
                         "point card");
}

Result<std::unique_ptr<SqlitePointCardStore>> SqlitePointCardStore::Open(db::sqlite::Database& db,
                                                                         SqlitePointCardOptions options) {
  auto& conn = db.writer().connection();
  if (Status s = CreatePointCardSchema(conn); !s.ok()) return s;
  std::unique_ptr<SqlitePointCardStore> store(new SqlitePointCardStore(db, options));
  // Grants that never applied (a crash, a failed write) leave staged
  // credits nobody reads; they go now, in one transaction.
  auto staged = sqlite::QueryInt(conn, "SELECT COUNT(*) FROM P_GRANT WHERE STATE = 'staging'");
  if (!staged.ok()) return staged.status();
  if (*staged > 0) {
    Status s = conn.Exec(
        "BEGIN IMMEDIATE; "
        "DELETE FROM P_GRANT_CREDIT WHERE GRANT_ID IN (SELECT GRANT_ID FROM P_GRANT WHERE STATE = 'staging'); "
        "DELETE FROM P_GRANT WHERE STATE = 'staging'; COMMIT;");
    if (!s.ok()) {
      log::WarnIfFailed(conn.Exec("ROLLBACK"), "SQLite: ROLLBACK");
      return s;
    }
    log::Info("point card: deleted the staged credits of {} grant(s) that never applied", *staged);
  }
  auto applied = sqlite::QueryInt(conn, "SELECT COUNT(*) FROM P_GRANT WHERE STATE = 'applied'");
  if (!applied.ok()) return applied.status();
  store->credit_possible_ = *applied > 0;
  store->fold_requests_ = *applied > 0 ? 1 : 0;  // resumed once the writer runs
  store->folder_ = std::thread([p = store.get()] { p->FoldLoop(); });
  auto history = sqlite::QueryInt(conn, "SELECT COALESCE(MAX(PAYMENT_TIME), 0) FROM H_TRANSACTION");
  auto accounts = sqlite::QueryInt(conn, "SELECT COALESCE(MAX(LAST_UPDATE), 0) FROM S_ACCOUNT");
  // And past every grant's times and period: a wall clock stepped back
  // (NTP, a restore on another host) must not stamp a payment inside a
  // period already granted, even one whose grant left no row.
  auto grants = sqlite::QueryInt(conn,
                                 "SELECT COALESCE(MAX(MAX(GRANT_TIME, TO_TIME, COALESCE(APPLIED_TIME, 0), "
                                 "COALESCE(FOLDED_TIME, 0))), 0) FROM P_GRANT");
  if (!history.ok()) return history.status();
  if (!accounts.ok()) return accounts.status();
  if (!grants.ok()) return grants.status();
  store->clock_last_us_ = std::max({*history, *accounts, *grants});
  // Idempotency keys are kept at least 24 h: every hour, those older go;
  // the first pass shortly after start-up (the writer starts after Open).
  store->purger_ = std::make_unique<PeriodicTask>(std::chrono::seconds(10), std::chrono::hours(1),
                                                  [p = store.get()] { p->Purge(); });
  return store;
}

SqlitePointCardStore::~SqlitePointCardStore() { Stop(); }

void SqlitePointCardStore::Stop() {
  {
    std::lock_guard lock(grant_mutex_);
    grants_stopped_ = true;
  }
  {
    // A grant waiting for a fold gives up; the fold stops between chunks
    // (the next start resumes it).
    std::lock_guard lock(fold_mutex_);
    fold_stopped_ = true;
  }
  fold_cv_.notify_all();
  if (purger_) purger_->Stop();
  // Joined outside grant_mutex_: a grant still running takes it to finish.
  std::thread grant;
  {
    std::lock_guard lock(grant_mutex_);
    grant = std::move(grant_thread_);
  }
  if (grant.joinable()) grant.join();
  if (folder_.joinable()) folder_.join();
}

int64_t SqlitePointCardStore::NextTime() {
  clock_last_us_ = std::max(NowUs(), clock_last_us_ + 1);
  return clock_last_us_;
}

Status SqlitePointCardStore::LoadRegions(std::vector<Region>* out) {
  auto conn = db_.Reader();
  if (!conn.ok()) return conn.status();
  auto q = (*conn)->Prepare("SELECT REGION_ID, REGION_NAME FROM M_REGION ORDER BY REGION_ID");
  if (!q.ok()) return q.status();
  while (true) {
    auto row = q->Step();
    if (!row.ok()) return row.status();
    if (!*row) return Status::Ok();
    out->push_back({q->Int(0), std::string(q->Text(1))});
  }
}

Status SqlitePointCardStore::LoadStores(std::vector<StoreInfo>* out) {
  auto conn = db_.Reader();
  if (!conn.ok()) return conn.status();
  auto q = (*conn)->Prepare(
      "SELECT STORE_ID, STORE_ZIPCODE, STORE_ADDRESS, STORE_NAME, REGION_ID, S_LATITUDE, S_LONGITUDE "
      "FROM M_STORE ORDER BY STORE_ID");
  if (!q.ok()) return q.status();
  while (true) {
    auto row = q->Step();
    if (!row.ok()) return row.status();
    if (!*row) return Status::Ok();
    out->push_back({q->Int(0), std::string(q->Text(1)), std::string(q->Text(2)), std::string(q->Text(3)), q->Int(4),
                    q->Double(5), q->Double(6)});
  }
}

void SqlitePointCardStore::GetCard(int64_t card_id, StoreCallback<Result<Card>> done) {
  auto conn = db_.Reader();
  if (!conn.ok()) return done(conn.status());
  // One statement, one snapshot: the balance and the applied credit.
  auto q = (*conn)->Prepare(
      "SELECT a.BALANCE, a.REGION_ID, a.LAST_UPDATE, "
      "(SELECT COALESCE(SUM(c.POINTS), 0) FROM P_GRANT_CREDIT c JOIN P_GRANT g ON g.GRANT_ID = c.GRANT_ID "
      "WHERE c.CARD_ID = a.CARD_ID AND g.STATE = 'applied') "
      "FROM S_ACCOUNT a WHERE a.CARD_ID = ?1");
  if (!q.ok()) return done(q.status());
  q->Bind(1, card_id);
  auto row = q->Step();
  if (!row.ok()) return done(row.status());
  if (!*row) return done(NoSuchCard(card_id));
  Card card{.card_id = card_id,
            .balance = q->Int(0) + q->Int(3),
            .region_id = q->Int(1),
            .last_update_us = q->Int(2),
            .pending_points = q->Int(3)};
  done(card);
}

void SqlitePointCardStore::History(int64_t card_id, int64_t limit, std::optional<int64_t> before_us,
                                   std::function<void(Result<HistoryPage>)> done) {
  auto conn = db_.Reader();
  if (!conn.ok()) return done(conn.status());
  // One read transaction: the existence check and the page see one snapshot.
  if (Status s = (*conn)->Exec("BEGIN"); !s.ok()) return done(s);
  auto exists = (*conn)->Prepare("SELECT 1 FROM S_ACCOUNT WHERE CARD_ID = ?1");
  if (!exists.ok()) return done(exists.status());
  auto found = exists->Bind(1, card_id).Step();
  if (!found.ok()) return done(found.status());
  if (!*found) return done(NoSuchCard(card_id));
  auto q = (*conn)->Prepare(
      "SELECT PAYMENT_TIME, STORE_ID, AMOUNT, BALANCE FROM H_TRANSACTION "
      "WHERE CARD_ID = ?1 AND PAYMENT_TIME < ?2 ORDER BY PAYMENT_TIME DESC LIMIT ?3");
  if (!q.ok()) return done(q.status());
  q->Bind(1, card_id).Bind(2, before_us.value_or(INT64_MAX)).Bind(3, limit + 1);
  HistoryPage page;
  while (true) {
    auto row = q->Step();
    if (!row.ok()) return done(row.status());
    if (!*row) break;
    page.rows.push_back(HistoryRow{.payment_time_us = q->Int(0),
                                   .card_id = card_id,
                                   .store_id = q->Int(1),
                                   .amount = q->Int(2),
                                   .balance = q->Int(3)});
  }
  if (static_cast<int64_t>(page.rows.size()) > limit) {
    page.rows.pop_back();
    page.next_before_us = page.rows.back().payment_time_us;
  }
  done(std::move(page));
}

namespace {

// The stored outcome of an earlier request with the same key, if any.
Result<std::optional<PaymentOutcome>> FindKey(sqlite::Connection& c, const Payment& p, const std::string& fp) {
  auto q = c.Prepare(
      "SELECT FINGERPRINT, REFUSED, PAYMENT_TIME, STORE_ID, AMOUNT, BALANCE FROM P_IDEMPOTENCY "
      "WHERE CARD_ID = ?1 AND KEY = ?2");
  if (!q.ok()) return q.status();
  q->Bind(1, p.card_id).Bind(2, *p.idempotency_key);
  auto row = q->Step();
  if (!row.ok()) return row.status();
  if (!*row) return std::optional<PaymentOutcome>();
  if (q->Text(0) != fp)
    return Status(ErrorCode::kIdempotencyMismatch,
                  "Idempotency-Key '" + *p.idempotency_key + "' was used for a different request on this card",
                  "Idempotency-Key");
  PaymentOutcome out;
  out.refused = q->Int(1) != 0;
  out.row = {.payment_time_us = q->Int(2),
             .card_id = p.card_id,
             .store_id = q->Int(3),
             .amount = q->Int(4),
             .balance = q->Int(5)};
  out.replayed = true;
  return std::optional<PaymentOutcome>(out);
}

// The card's applied, unfolded grant credit.
Result<int64_t> PendingCredit(sqlite::Connection& c, int64_t card_id) {
  auto q = c.Prepare(
      "SELECT COALESCE(SUM(c.POINTS), 0) FROM P_GRANT_CREDIT c JOIN P_GRANT g ON g.GRANT_ID = c.GRANT_ID "
      "WHERE c.CARD_ID = ?1 AND g.STATE = 'applied'");
  if (!q.ok()) return q.status();
  auto row = q->Bind(1, card_id).Step();
  if (!row.ok()) return row.status();
  int64_t credit = q->Int(0);
  if (Status s = q->Run(); !s.ok()) return s;
  return credit;
}

Status RememberKey(sqlite::Connection& c, const Payment& p, const std::string& fp, const PaymentOutcome& o,
                   int64_t now_us) {
  auto q = c.Prepare(
      "INSERT INTO P_IDEMPOTENCY (CARD_ID, KEY, FINGERPRINT, CREATED, REFUSED, PAYMENT_TIME, STORE_ID, AMOUNT, "
      "BALANCE) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
  if (!q.ok()) return q.status();
  return q->Bind(1, p.card_id)
      .Bind(2, *p.idempotency_key)
      .Bind(3, fp)
      .Bind(4, now_us)
      .Bind(5, o.refused ? 1 : 0)
      .Bind(6, o.row.payment_time_us)
      .Bind(7, o.row.store_id)
      .Bind(8, o.row.amount)
      .Bind(9, o.row.balance)
      .Run();
}

}  // namespace

// The point use as a WriteOp (one allocation per payment; pooling it was
// measured and bought nothing, docs/design.md#allocation-free-requests).
class PayOp final : public db::sqlite::WriteOp {
 public:
  PayOp(SqlitePointCardStore* store, Payment p, std::string fp, StoreCallback<Result<PaymentOutcome>> done)
      : store_(store), payment_(std::move(p)), fingerprint_(std::move(fp)), done_(std::move(done)) {}
  static db::sqlite::OpPtr Make(SqlitePointCardStore* store, Payment p, std::string fp,
                                StoreCallback<Result<PaymentOutcome>> done) {
    return db::sqlite::MakeOp<PayOp>(store, std::move(p), std::move(fp), std::move(done));
  }

  Status Apply(sqlite::Connection& c, std::span<WriteOp* const>) override {
    result_ = store_->ApplyPayment(c, payment_, fingerprint_);
    return result_.status();
  }
  void Finish(const Status& status) override {
    if (status.ok() && result_.ok())
      done_(std::move(result_));
    else
      done_(status.ok() ? result_.status() : status);
  }

 private:
  SqlitePointCardStore* store_ = nullptr;
  Payment payment_;
  std::string fingerprint_;
  StoreCallback<Result<PaymentOutcome>> done_;
  Result<PaymentOutcome> result_ = Status::Internal("not applied");
};

Result<PaymentOutcome> SqlitePointCardStore::ApplyPayment(sqlite::Connection& c, const Payment& p,
                                                          const std::string& fp) {
  if (p.idempotency_key) {
    auto earlier = FindKey(c, p, fp);
    if (!earlier.ok()) return earlier.status();
    if (*earlier) return **earlier;
  }
  auto read = c.Prepare("SELECT BALANCE FROM S_ACCOUNT WHERE CARD_ID = ?1");
  if (!read.ok()) return read.status();
  auto row = read->Bind(1, p.card_id).Step();
  if (!row.ok()) return row.status();
  if (!*row) return NoSuchCard(p.card_id);
  int64_t balance = read->Int(0);
  if (Status s = read->Run(); !s.ok()) return s;
  int64_t credit = 0;
  if (credit_possible_) {
    auto pending = PendingCredit(c, p.card_id);
    if (!pending.ok()) return pending.status();
    credit = *pending;
  }
  PaymentOutcome out;
  if (balance + credit + p.amount < 0) {
    balance += credit;  // what the card holds, as a read shows it
  } else if (credit > 0) {
    auto folded = FoldCard(c, p.card_id, balance);  // the grant's row first, at its own time
    if (!folded.ok()) return folded.status();
    balance = *folded;
  }
  int64_t now = NextTime();
  if (balance + p.amount < 0) {
    out.refused = true;
    out.row = {
        .payment_time_us = 0, .card_id = p.card_id, .store_id = p.store_id, .amount = p.amount, .balance = balance};
  } else {
    out.row = {.payment_time_us = now,
               .card_id = p.card_id,
               .store_id = p.store_id,
               .amount = p.amount,
               .balance = balance + p.amount};
    auto update = c.Prepare("UPDATE S_ACCOUNT SET BALANCE = ?1, LAST_UPDATE = ?2 WHERE CARD_ID = ?3");
    if (!update.ok()) return update.status();
    if (Status s = update->Bind(1, out.row.balance).Bind(2, now).Bind(3, p.card_id).Run(); !s.ok()) return s;
    auto insert = c.Prepare(
        "INSERT INTO H_TRANSACTION (PAYMENT_TIME, CARD_ID, STORE_ID, AMOUNT, BALANCE, KIND) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
    if (!insert.ok()) return insert.status();
    if (Status s = insert->Bind(1, now)
                       .Bind(2, p.card_id)
                       .Bind(3, p.store_id)
                       .Bind(4, p.amount)
                       .Bind(5, out.row.balance)
                       .Bind(6, std::string_view(p.amount > 0 ? "charge" : "payment"))
                       .Run();
        !s.ok())
      return s;
  }
  if (p.idempotency_key) {
    if (Status s = RememberKey(c, p, fp, out, now); !s.ok()) return s;
  }
  return out;
}

void SqlitePointCardStore::Pay(Payment payment, std::string fingerprint, StoreCallback<Result<PaymentOutcome>> done) {
  db_.writer().Submit(PayOp::Make(this, std::move(payment), std::move(fingerprint), std::move(done)));
}

// ---------------------------------------------------------------------------
// The point grant (see the protocol in sqlite_store.h).
// ---------------------------------------------------------------------------

namespace {

struct Bonus {
  int64_t card_id;
  int64_t points;
};

// Runs `apply` on the writer and waits for its commit.
template <typename T, typename Apply>
Result<T> OnWriter(db::sqlite::GroupWriter& writer, Apply apply) {
  return Await<Result<T>>([&](auto done) { db::sqlite::SubmitCall<T>(writer, std::move(apply), done); });
}

// An earlier grant with this key, answered again (or idempotency_mismatch).
Result<std::optional<GrantOutcome>> FindGrantKey(sqlite::Connection& c, const std::string& key,
                                                 const std::string& fingerprint) {
  auto q = c.Prepare(
      "SELECT GRANT_ID, CARDS, POINTS, QUERY_MS, UPDATE_MS, COMMIT_MS, FINGERPRINT FROM P_GRANT "
      "WHERE IDEMPOTENCY_KEY = ?1 AND STATE <> 'staging'");
  if (!q.ok()) return q.status();
  auto row = q->Bind(1, key).Step();
  if (!row.ok()) return row.status();
  if (!*row) return std::optional<GrantOutcome>();
  if (q->Text(6) != fingerprint)
    return Status(ErrorCode::kIdempotencyMismatch, "Idempotency-Key was used for a different grant", "Idempotency-Key");
  GrantOutcome out{q->Int(0), q->Int(1), q->Int(2), q->Double(3), q->Double(4), q->Double(5), true};
  if (Status s = q->Run(); !s.ok()) return s;
  return std::optional<GrantOutcome>(out);
}

// period_already_granted when an applied or folded grant overlaps.
Status CheckOverlap(sqlite::Connection& c, const GrantRequest& r) {
  if (r.allow_overlap) return Status::Ok();
  auto q = c.Prepare(
      "SELECT GRANT_ID, FROM_TIME, TO_TIME FROM P_GRANT WHERE FROM_TIME < ?1 AND TO_TIME > ?2 "
      "AND STATE <> 'staging' ORDER BY GRANT_ID LIMIT 1");
  if (!q.ok()) return q.status();
  auto row = q->Bind(1, r.to_us).Bind(2, r.from_us).Step();
  if (!row.ok()) return row.status();
  if (*row) return PeriodAlreadyGranted(q->Int(0), q->Int(1), q->Int(2));
  return q->Run();
}

// Writes a grant's credit into a card: its balance and LAST_UPDATE, and
// the history row (STORE_ID 0, KIND 'grant'), both at `now`.
class GrantRowWriter {
 public:
  static Result<GrantRowWriter> Prepare(sqlite::Connection& c) {
    auto update = c.Prepare("UPDATE S_ACCOUNT SET BALANCE = ?1, LAST_UPDATE = ?2 WHERE CARD_ID = ?3");
    if (!update.ok()) return update.status();
    auto insert = c.Prepare(
        "INSERT INTO H_TRANSACTION (PAYMENT_TIME, CARD_ID, STORE_ID, AMOUNT, BALANCE, KIND) "
        "VALUES (?1, ?2, 0, ?3, ?4, 'grant')");
    if (!insert.ok()) return insert.status();
    return GrantRowWriter(std::move(update).value(), std::move(insert).value());
  }
  Status Write(int64_t card_id, int64_t points, int64_t balance_after, int64_t now) {
    update_.Reset();
    insert_.Reset();
    if (Status s = update_.Bind(1, balance_after).Bind(2, now).Bind(3, card_id).Run(); !s.ok()) return s;
    return insert_.Bind(1, now).Bind(2, card_id).Bind(3, points).Bind(4, balance_after).Run();
  }

 private:
  GrantRowWriter(sqlite::Query update, sqlite::Query insert) : update_(std::move(update)), insert_(std::move(insert)) {}
  sqlite::Query update_, insert_;
};

struct Begun {
  int64_t grant_id = 0;
  std::optional<GrantOutcome> replay;  // a twin with this key answered before
};

struct Applied {
  GrantOutcome outcome;
  bool wait_for_fold = false;  // the previous grant is still folding: nothing was written
};

// Step 4 as an op of its own: its commit time is the grant's commit_ms.
class ApplyOp final : public db::sqlite::WriteOp {
 public:
  ApplyOp(std::function<Result<Applied>(sqlite::Connection&)> apply, std::function<void(Result<Applied>)> done)
      : apply_(std::move(apply)), done_(std::move(done)) {}
  Status Apply(sqlite::Connection& c, std::span<WriteOp* const>) override {
    result_ = apply_(c);
    return result_.status();
  }
  void Finish(const Status& status) override {
    if (!status.ok()) return done_(status);
    if (!result_->wait_for_fold) {
      failpoint::MaybeCrash("grant.commit");
      result_->outcome.commit_ms = static_cast<double>(commit_duration().count()) / 1000.0;
    }
    done_(std::move(result_));
  }

 private:
  std::function<Result<Applied>(sqlite::Connection&)> apply_;
  std::function<void(Result<Applied>)> done_;
  Result<Applied> result_ = Status::Internal("not applied");
};

}  // namespace

void SqlitePointCardStore::Grant(GrantRequest request, std::string fingerprint,
                                 std::function<void(Result<GrantOutcome>)> done) {
  // One at a time: the service's gate (service.h) admits a grant only when
  // the previous one has answered.
  std::lock_guard lock(grant_mutex_);
  if (grants_stopped_) return done(Status::Unavailable("the server is shutting down"));
  if (grant_thread_.joinable()) grant_thread_.join();  // the previous one, finished
  // The query phase takes a while: it runs on its own thread, never on an
  // event loop.
  grant_thread_ = std::thread([this, r = std::move(request), fp = std::move(fingerprint),
                               done = std::move(done)]() mutable { RunGrant(std::move(r), std::move(fp), done); });
}

void SqlitePointCardStore::RunGrant(GrantRequest request, std::string fingerprint,
                                    const std::function<void(Result<GrantOutcome>)>& done) {
  auto start = std::chrono::steady_clock::now();
  // 1. Begin: after it, no row with PAYMENT_TIME < to can still appear.
  auto begun = OnWriter<Begun>(db_.writer(), [&](sqlite::Connection& c) -> Result<Begun> {
    int64_t now = NextTime();
    // The writer's clock stamps every payment: a period it has not passed
    // has not ended.
    if (now < request.to_us) return PeriodNotEnded();
    if (request.idempotency_key) {
      auto twin = FindGrantKey(c, *request.idempotency_key, fingerprint);
      if (!twin.ok()) return twin.status();
      if (*twin) return Begun{0, **twin};
    }
    if (Status s = CheckOverlap(c, request); !s.ok()) return s;  // early; decided again at the apply
    auto q = c.Prepare(
        "INSERT INTO P_GRANT (GRANT_TIME, FROM_TIME, TO_TIME, RATE_PERCENT, CARDS, POINTS, QUERY_MS, UPDATE_MS, "
        "STATE) VALUES (?1, ?2, ?3, ?4, 0, 0, 0, 0, 'staging')");
    if (!q.ok()) return q.status();
    q->Bind(1, now).Bind(2, request.from_us).Bind(3, request.to_us).Bind(4, request.rate_percent);
    if (Status s = q->Run(); !s.ok()) return s;
    return Begun{c.LastInsertRowid(), std::nullopt};
  });
  if (!begun.ok()) return done(begun.status());
  if (begun->replay) return done(*begun->replay);
  const int64_t grant_id = begun->grant_id;
  auto fail = [&](Status s) {
    Discard(grant_id);
    done(std::move(s));
  };

  failpoint::MaybeDelay("grant.slow");
  // 2. Query on a snapshot taken after the begin.
  std::vector<Bonus> sums, bonuses;
  {
    auto conn = db_.Reader();
    if (!conn.ok()) return fail(conn.status());
    if (Status s = (*conn)->Exec("BEGIN"); !s.ok()) return fail(s);
    auto q = (*conn)->Prepare(
        "SELECT CARD_ID, AMOUNT FROM H_TRANSACTION "
        "WHERE PAYMENT_TIME >= ?1 AND PAYMENT_TIME < ?2 AND KIND = 'charge' AND AMOUNT > 0");
    if (!q.ok()) return fail(q.status());
    q->Bind(1, request.from_us).Bind(2, request.to_us);
    while (true) {
      auto row = q->Step();
      if (!row.ok()) return fail(row.status());
      if (!*row) break;
      sums.push_back({q->Int(0), q->Int(1)});
    }
    // Sum per card in card order (the order of P_GRANT_CREDIT's and
    // S_ACCOUNT's B-trees: sequential pages, not random ones).
    std::sort(sums.begin(), sums.end(), [](const Bonus& a, const Bonus& b) { return a.card_id < b.card_id; });
    for (size_t i = 0; i < sums.size();) {
      int64_t card = sums[i].card_id, total = 0;
      for (; i < sums.size() && sums[i].card_id == card; ++i) total += sums[i].points;
      int64_t bonus = total * request.rate_percent / 100;  // floor: amounts and rate are positive
      if (bonus > 0) bonuses.push_back({card, bonus});
    }
    sums = {};
    // Cards are never deleted; a history row without its card (which
    // `hotrow check` reports) gets nothing and is not counted. Checked here,
    // on the snapshot, by one merge with S_ACCOUNT's ids: off the writer.
    if (!bonuses.empty()) {
      auto ids = (*conn)->Prepare("SELECT CARD_ID FROM S_ACCOUNT WHERE CARD_ID >= ?1 ORDER BY CARD_ID");
      if (!ids.ok()) return fail(ids.status());
      ids->Bind(1, bonuses.front().card_id);
      size_t kept = 0;
      auto row = ids->Step();
      for (const Bonus& b : bonuses) {
        while (row.ok() && *row && ids->Int(0) < b.card_id) row = ids->Step();
        if (!row.ok()) return fail(row.status());
        if (*row && ids->Int(0) == b.card_id) bonuses[kept++] = b;
      }
      bonuses.resize(kept);
    }
  }
  int64_t points = 0;
  for (const Bonus& b : bonuses) points += b.points;
  const auto cards = static_cast<int64_t>(bonuses.size());
  double query_ms = MsSince(start);

  // 3. Stage the credits, a chunk per op: point uses run between chunks.
  // Two chunks in flight, so that the next is queued while one commits (a
  // batch may carry both: 8,192 cards, a few ms), without a round trip
  // between them.
  auto stage_start = std::chrono::steady_clock::now();
  std::deque<std::future<Result<db::sqlite::Unit>>> in_flight;
  Status staging;
  auto collect = [&] {
    auto r = in_flight.front().get();
    in_flight.pop_front();
    if (!r.ok() && staging.ok()) staging = r.status();
  };
  for (size_t at = 0; at < bonuses.size() && staging.ok(); at += static_cast<size_t>(options_.stage_chunk)) {
    size_t end = std::min(bonuses.size(), at + static_cast<size_t>(options_.stage_chunk));
    auto promise = std::make_shared<std::promise<Result<db::sqlite::Unit>>>();
    in_flight.push_back(promise->get_future());
    db::sqlite::SubmitCall<db::sqlite::Unit>(
        db_.writer(),
        [&bonuses, at, end, grant_id](sqlite::Connection& c) -> Result<db::sqlite::Unit> {
          auto q = c.Prepare("INSERT INTO P_GRANT_CREDIT (CARD_ID, GRANT_ID, POINTS) VALUES (?1, ?2, ?3)");
          if (!q.ok()) return q.status();
          for (size_t i = at; i < end; ++i) {
            q->Reset();
            if (Status s = q->Bind(1, bonuses[i].card_id).Bind(2, grant_id).Bind(3, bonuses[i].points).Run(); !s.ok())
              return s;
            failpoint::MaybeCrash("grant.write", static_cast<int64_t>(i + 1));
          }
          return db::sqlite::Unit{};
        },
        [promise](Result<db::sqlite::Unit> r) { promise->set_value(std::move(r)); });
    if (in_flight.size() >= kStageInFlight) collect();
  }
  while (!in_flight.empty()) collect();
  if (!staging.ok()) return fail(staging);
  double update_ms = MsSince(stage_start);
  bonuses = {};

  // 4. Apply: one small commit makes all of it visible.
  Result<Applied> applied = Status::Internal("not applied");
  while (true) {
    if (Status s = WaitForFold(); !s.ok()) return fail(s);
    applied = Await<Result<Applied>>([&](auto answer) {
      db_.writer().Submit(db::sqlite::MakeOp<ApplyOp>(
          [&](sqlite::Connection& c) -> Result<Applied> {
            auto folding = sqlite::QueryInt(c, "SELECT COUNT(*) FROM P_GRANT WHERE STATE = 'applied'");
            if (!folding.ok()) return folding.status();
            if (*folding > 0) return Applied{{}, true};
            if (Status s = CheckOverlap(c, request); !s.ok()) return s;  // decided here, on the writer
            int64_t now = NextTime();
            auto q = c.Prepare(
                "UPDATE P_GRANT SET STATE = 'applied', APPLIED_TIME = ?1, CARDS = ?2, POINTS = ?3, QUERY_MS = ?4, "
                "UPDATE_MS = ?5, IDEMPOTENCY_KEY = ?6, FINGERPRINT = ?7 WHERE GRANT_ID = ?8 AND STATE = 'staging'");
            if (!q.ok()) return q.status();
            q->Bind(1, now).Bind(2, cards).Bind(3, points).BindDouble(4, query_ms).BindDouble(5, update_ms);
            if (request.idempotency_key)
              q->Bind(6, *request.idempotency_key).Bind(7, fingerprint);
            else
              q->BindNull(6).BindNull(7);
            if (Status s = q->Bind(8, grant_id).Run(); !s.ok()) return s;
            if (c.Changes() != 1) return Status::Internal("grant " + std::to_string(grant_id) + " is not staging");
            credit_possible_ = true;  // from this op on, point uses fold first
            ++credit_epoch_;
            return Applied{{grant_id, cards, points, query_ms, update_ms, 0, false}, false};
          },
          answer));
    });
    if (!applied.ok() || !applied->wait_for_fold) break;
    WakeFolder();  // the writer says a grant is still applied: make sure the fold sees it
  }
  if (!applied.ok()) return fail(applied.status());
  GrantOutcome outcome = applied->outcome;
  WakeFolder();
  // Keep the commit time with the grant, so a replay answers the same.
  db::sqlite::SubmitCall<db::sqlite::Unit>(
      db_.writer(),
      [id = grant_id, commit_ms = outcome.commit_ms](sqlite::Connection& c) -> Result<db::sqlite::Unit> {
        auto q = c.Prepare("UPDATE P_GRANT SET COMMIT_MS = ?1 WHERE GRANT_ID = ?2");
        if (!q.ok()) return q.status();
        q->BindDouble(1, commit_ms).Bind(2, id);
        if (Status s = q->Run(); !s.ok()) return s;
        return db::sqlite::Unit{};
      },
      [id = grant_id](const Result<db::sqlite::Unit>& r) {
        // The grant has committed: only its recorded commit time is lost.
        if (!r.ok()) log::Warn("grant {}: cannot record its commit time: {}", id, r.status().ToString());
      });
  log::Info("grant {}: {} card(s), {} point(s); query {:.0f} ms, staging {:.0f} ms, apply commit {:.0f} ms",
            outcome.grant_id, outcome.cards, outcome.points, outcome.query_ms, outcome.update_ms, outcome.commit_ms);
  done(outcome);
}

void SqlitePointCardStore::Discard(int64_t grant_id) {
  // In chunks along the key, like the fold: point uses run between them.
  // If the writer fails now, Open deletes what is left at the next start;
  // until then every reader ignores a grant that is not applied.
  struct Gone {
    int64_t cards = 0, last_card = 0;
  };
  int64_t after = INT64_MIN;
  while (true) {
    auto gone = OnWriter<Gone>(db_.writer(), [this, grant_id, after](sqlite::Connection& c) -> Result<Gone> {
      auto q = c.Prepare(
          "SELECT CARD_ID FROM P_GRANT_CREDIT WHERE CARD_ID > ?1 AND GRANT_ID = ?2 ORDER BY CARD_ID LIMIT ?3");
      if (!q.ok()) return q.status();
      q->Bind(1, after).Bind(2, grant_id).Bind(3, options_.stage_chunk);
      Gone out{0, after};
      while (true) {
        auto row = q->Step();
        if (!row.ok()) return row.status();
        if (!*row) break;
        ++out.cards;
        out.last_card = q->Int(0);
      }
      if (out.cards > 0) {
        auto del = c.Prepare("DELETE FROM P_GRANT_CREDIT WHERE CARD_ID > ?1 AND CARD_ID <= ?2 AND GRANT_ID = ?3");
        if (!del.ok()) return del.status();
        if (Status s = del->Bind(1, after).Bind(2, out.last_card).Bind(3, grant_id).Run(); !s.ok()) return s;
      }
      if (out.cards < options_.stage_chunk) {
        auto row = c.Prepare("DELETE FROM P_GRANT WHERE GRANT_ID = ?1 AND STATE = 'staging'");
        if (!row.ok()) return row.status();
        if (Status s = row->Bind(1, grant_id).Run(); !s.ok()) return s;
      }
      return out;
    });
    if (!gone.ok()) {
      log::Warn("grant {}: cannot delete its staged credits now (the next start does): {}", grant_id,
                gone.status().ToString());
      return;
    }
    if (gone->cards < options_.stage_chunk) return;
    after = gone->last_card;
  }
}

Result<int64_t> SqlitePointCardStore::FoldCard(sqlite::Connection& c, int64_t card_id, int64_t balance) {
  auto q = c.Prepare(
      "SELECT c.GRANT_ID, c.POINTS FROM P_GRANT_CREDIT c JOIN P_GRANT g ON g.GRANT_ID = c.GRANT_ID "
      "WHERE c.CARD_ID = ?1 AND g.STATE = 'applied' ORDER BY c.GRANT_ID");
  if (!q.ok()) return q.status();
  q->Bind(1, card_id);
  struct Credit {
    int64_t grant_id, points;
  };
  std::vector<Credit> credits;  // one, almost always
  while (true) {
    auto row = q->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    credits.push_back({q->Int(0), q->Int(1)});
  }
  auto writer = GrantRowWriter::Prepare(c);
  if (!writer.ok()) return writer.status();
  auto consume = c.Prepare("DELETE FROM P_GRANT_CREDIT WHERE CARD_ID = ?1 AND GRANT_ID = ?2");
  if (!consume.ok()) return consume.status();
  for (const Credit& credit : credits) {
    balance += credit.points;
    if (Status s = writer->Write(card_id, credit.points, balance, NextTime()); !s.ok()) return s;
    consume->Reset();
    if (Status s = consume->Bind(1, card_id).Bind(2, credit.grant_id).Run(); !s.ok()) return s;
  }
  return balance;
}

void SqlitePointCardStore::WakeFolder() {
  {
    std::lock_guard lock(fold_mutex_);
    ++fold_requests_;
  }
  fold_cv_.notify_all();
}

Status SqlitePointCardStore::WaitForFold() {
  std::unique_lock lock(fold_mutex_);
  if (!fold_cv_.wait_for(lock, kFoldWaitMax, [this] { return fold_stopped_ || fold_served_ == fold_requests_; }))
    return Status::Unavailable("the previous grant is still writing its history rows; retry later");
  if (fold_served_ == fold_requests_) return Status::Ok();  // nothing to wait for, stopping or not
  return Status::Unavailable("the server is shutting down");
}

// Step 5. One op per chunk of cards; the chunk that finds fewer than a full
// chunk left marks the grant folded in the same commit. One grant's fold in progress: its chunks chain on the writer
// (each submits the next from its Finish, so consecutive batches carry one each with no thread's round trip between
// them); the folder waits for `done`.
struct SqlitePointCardStore::FoldRun {
  int64_t grant_id = 0;
  int64_t applied_at = 0;
  int64_t after_card = INT64_MIN;  // the cursor: every credit up to it is folded
  int64_t folded_cards = 0;
};

Result<SqlitePointCardStore::FoldChunk> SqlitePointCardStore::ApplyFoldChunk(sqlite::Connection& c, FoldRun& run) {
  const int64_t grant_id = run.grant_id, after_card = run.after_card, folded_cards = run.folded_cards,
                applied_at = run.applied_at;
  auto q = c.Prepare(
      "SELECT CARD_ID, POINTS FROM P_GRANT_CREDIT WHERE CARD_ID > ?1 AND GRANT_ID = ?2 ORDER BY CARD_ID LIMIT ?3");
  if (!q.ok()) return q.status();
  q->Bind(1, after_card).Bind(2, grant_id).Bind(3, options_.fold_chunk);
  std::vector<Bonus> credits;
  while (true) {
    auto row = q->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    credits.push_back({q->Int(0), q->Int(1)});
  }
  int64_t now = NextTime();
  auto read = c.Prepare("SELECT BALANCE FROM S_ACCOUNT WHERE CARD_ID = ?1");
  if (!read.ok()) return read.status();
  auto writer = GrantRowWriter::Prepare(c);
  if (!writer.ok()) return writer.status();
  for (const Bonus& b : credits) {
    read->Reset();
    auto row = read->Bind(1, b.card_id).Step();
    if (!row.ok()) return row.status();
    if (*row) {  // cards are never deleted; a missing one gets nothing
      if (Status s = writer->Write(b.card_id, b.points, read->Int(0) + b.points, now); !s.ok()) return s;
    }
    failpoint::MaybeCrash("grant.fold", folded_cards + 1 + (&b - credits.data()));
  }
  if (!credits.empty()) {  // consumed: one range of the key, not a delete per card
    auto consume = c.Prepare("DELETE FROM P_GRANT_CREDIT WHERE CARD_ID > ?1 AND CARD_ID <= ?2 AND GRANT_ID = ?3");
    if (!consume.ok()) return consume.status();
    if (Status s = consume->Bind(1, after_card).Bind(2, credits.back().card_id).Bind(3, grant_id).Run(); !s.ok())
      return s;
  }
  FoldChunk out{credits.empty() ? after_card : credits.back().card_id, static_cast<int64_t>(credits.size()),
                static_cast<int64_t>(credits.size()) < options_.fold_chunk, credit_epoch_};
  if (out.finished) {
    auto done = c.Prepare("UPDATE P_GRANT SET STATE = 'folded', FOLDED_TIME = ?1, FOLD_MS = ?2 WHERE GRANT_ID = ?3");
    if (!done.ok()) return done.status();
    // From the apply to now, wall clock: a fold a restart interrupted
    // counts whole, downtime included.
    done->Bind(1, now).BindDouble(2, static_cast<double>(now - applied_at) / 1000.0).Bind(3, grant_id);
    if (Status s = done->Run(); !s.ok()) return s;
  }
  return out;
}

void SqlitePointCardStore::SubmitFoldChunk(const std::shared_ptr<FoldRun>& run, const FoldDone& done) {
  db::sqlite::SubmitCall<FoldChunk>(
      db_.writer(), [this, run](sqlite::Connection& c) { return ApplyFoldChunk(c, *run); },
      [this, run, done](Result<FoldChunk> r) {
        // On the writer thread, after the commit (or on the submitting
        // thread, if the writer refused the op).
        if (!r.ok()) return done->set_value(r.status());
        run->after_card = r->last_card;
        run->folded_cards += r->cards;
        if (r->finished) {
          // No credit is left once the applied grant has folded (grants
          // apply one at a time), unless another applied after the chunk
          // ran, in its batch.
          if (credit_epoch_ == r->epoch) credit_possible_ = false;
          return done->set_value(true);
        }
        bool stopping;
        {
          std::lock_guard lock(fold_mutex_);
          stopping = fold_stopped_;
        }
        if (stopping) return done->set_value(false);  // between chunks; the next start resumes
        SubmitFoldChunk(run, done);
      });
}

// The folder: finds the applied grant and runs its chunks.
void SqlitePointCardStore::FoldLoop() {
  auto pause = [this] {
    std::unique_lock lock(fold_mutex_);
    fold_cv_.wait_for(lock, std::chrono::milliseconds(200), [this] { return fold_stopped_; });
  };
  std::shared_ptr<FoldRun> run;  // the grant being folded, kept across a paused attempt
  uint64_t seen = 0;             // fold_requests_ when this pass began looking
  auto started = std::chrono::steady_clock::now();
  while (true) {
    {
      std::unique_lock lock(fold_mutex_);
      if (!run) fold_cv_.wait(lock, [this] { return fold_stopped_ || fold_served_ != fold_requests_; });
      if (fold_stopped_) return;
      if (!run) seen = fold_requests_;
    }
    if (!run) {
      if (!db_.writer().started()) {  // Open runs before the writer starts
        pause();
        continue;
      }
      struct Next {
        int64_t grant_id = 0, applied_at = 0;
      };
      auto next = OnWriter<Next>(db_.writer(), [](sqlite::Connection& c) -> Result<Next> {
        auto q =
            c.Prepare("SELECT GRANT_ID, APPLIED_TIME FROM P_GRANT WHERE STATE = 'applied' ORDER BY GRANT_ID LIMIT 1");
        if (!q.ok()) return q.status();
        auto row = q->Step();
        if (!row.ok()) return row.status();
        Next out;
        if (*row) out = {q->Int(0), q->Int(1)};
        if (Status s = q->Run(); !s.ok()) return s;
        return out;
      });
      if (!next.ok()) {  // the writer fails: try again
        pause();
        continue;
      }
      if (next->grant_id == 0) {  // nothing to fold for the requests seen so far
        {
          std::lock_guard lock(fold_mutex_);
          fold_served_ = seen;
        }
        fold_cv_.notify_all();
        continue;
      }
      run = std::make_shared<FoldRun>();
      run->grant_id = next->grant_id;
      run->applied_at = next->applied_at;
      started = std::chrono::steady_clock::now();
    }
    // One promise per attempt, held by its chain: a paused attempt's last
    // callback may still be returning from it.
    auto done = std::make_shared<std::promise<Result<bool>>>();
    auto future = done->get_future();
    SubmitFoldChunk(run, done);
    auto folded = future.get();
    if (!folded.ok()) {
      log::Warn("grant {}: folding paused (it resumes): {}", run->grant_id, folded.status().ToString());
      pause();
      continue;
    }
    if (!*folded) return;  // stopping
    double ms = MsSince(started);
    GrantFoldSeconds().Observe(static_cast<uint64_t>(ms * 1e6));
    log::Info("grant {}: {} history row(s) written (folded) in {:.0f} ms", run->grant_id, run->folded_cards, ms);
    run.reset();  // look again: the requests seen are served only when none is left
  }
}

void SqlitePointCardStore::GetGrant(int64_t grant_id, std::function<void(Result<GrantInfo>)> done) {
  auto conn = db_.Reader();
  if (!conn.ok()) return done(conn.status());
  auto q = (*conn)->Prepare(
      "SELECT CARDS, POINTS, QUERY_MS, UPDATE_MS, COMMIT_MS, FROM_TIME, TO_TIME, RATE_PERCENT, APPLIED_TIME, "
      "FOLDED_TIME, FOLD_MS, STATE FROM P_GRANT WHERE GRANT_ID = ?1 AND STATE <> 'staging'");
  if (!q.ok()) return done(q.status());
  auto row = q->Bind(1, grant_id).Step();
  if (!row.ok()) return done(row.status());
  if (!*row) return done(NoSuchGrant(grant_id));
  GrantInfo g;
  g.outcome = {grant_id, q->Int(0), q->Int(1), q->Double(2), q->Double(3), q->Double(4), false};
  g.from_us = q->Int(5);
  g.to_us = q->Int(6);
  g.rate_percent = q->Int(7);
  g.applied_at_us = q->Int(8);
  if (q->Text(11) == "folded") {
    g.folded_at_us = q->Int(9);
    g.fold_ms = q->Double(10);
  }
  done(std::move(g));
}

void SqlitePointCardStore::Purge() {
  int64_t cutoff = NowUs() - kIdempotencyRetentionUs;
  db::sqlite::SubmitCall<db::sqlite::Unit>(
      db_.writer(),
      [cutoff](sqlite::Connection& c) -> Result<db::sqlite::Unit> {
        auto q = c.Prepare("DELETE FROM P_IDEMPOTENCY WHERE CREATED < ?1");
        if (!q.ok()) return q.status();
        if (Status s = q->Bind(1, cutoff).Run(); !s.ok()) return s;
        return db::sqlite::Unit{};
      },
      [](const Result<db::sqlite::Unit>& r) {
        if (!r.ok()) log::Warn("idempotency purge failed (the next pass retries): {}", r.status().ToString());
      });
}

}  // namespace hotrow::pointcard
