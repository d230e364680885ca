#include "pointcard/sqlite_store.h"

#include <algorithm>
#include <chrono>
#include <future>

#include "base/await.h"
#include "ops/failpoint.h"
#include "ops/log.h"

namespace hotrow::pointcard {

namespace sqlite = db::sqlite;

namespace {

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Status CreatePointCardSchema(sqlite::Connection& conn) {
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

Result<std::unique_ptr<SqlitePointCardStore>> SqlitePointCardStore::Open(db::sqlite::Database& db) {
  auto& conn = db.writer().connection();
  if (Status s = CreatePointCardSchema(conn); !s.ok()) return s;
  // The point-card file's own record (pointcard/sqlite_file.h); no step yet.
  if (Status s = sqlite::Migrate(conn, {}, "point card"); !s.ok()) return s;
  std::unique_ptr<SqlitePointCardStore> store(new SqlitePointCardStore(db));
  auto history = sqlite::QueryInt(conn, "SELECT COALESCE(MAX(PAYMENT_TIME), 0) FROM H_TRANSACTION");
  auto accounts = sqlite::QueryInt(conn, "SELECT COALESCE(MAX(LAST_UPDATE), 0) FROM S_ACCOUNT");
  if (!history.ok()) return history.status();
  if (!accounts.ok()) return accounts.status();
  store->clock_last_us_ = std::max(*history, *accounts);
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
  if (purger_) purger_->Stop();
  // Joined outside grant_mutex_: a grant still running takes it to finish.
  std::thread grant;
  {
    std::lock_guard lock(grant_mutex_);
    grant = std::move(grant_thread_);
  }
  if (grant.joinable()) grant.join();
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
  auto q = (*conn)->Prepare("SELECT BALANCE, REGION_ID, LAST_UPDATE FROM S_ACCOUNT WHERE CARD_ID = ?1");
  if (!q.ok()) return done(q.status());
  q->Bind(1, card_id);
  auto row = q->Step();
  if (!row.ok()) return done(row.status());
  if (!*row) return done(NoSuchCard(card_id));
  Card card{card_id, q->Int(0), q->Int(1), q->Int(2)};
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
  PaymentOutcome out;
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
        "INSERT INTO H_TRANSACTION (PAYMENT_TIME, CARD_ID, STORE_ID, AMOUNT, BALANCE) VALUES (?1, ?2, ?3, ?4, ?5)");
    if (!insert.ok()) return insert.status();
    if (Status s = insert->Bind(1, now)
                       .Bind(2, p.card_id)
                       .Bind(3, p.store_id)
                       .Bind(4, p.amount)
                       .Bind(5, out.row.balance)
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

// Step 3: every bonus in one WriteOp, so in one transaction.
class GrantOp final : public db::sqlite::WriteOp {
 public:
  GrantOp(std::function<int64_t()> clock, GrantRequest request, std::string fingerprint, std::vector<Bonus> bonuses,
          double query_ms, std::function<void(Result<GrantOutcome>)> done)
      : clock_(std::move(clock)),
        request_(std::move(request)),
        fingerprint_(std::move(fingerprint)),
        bonuses_(std::move(bonuses)),
        query_ms_(query_ms),
        done_(std::move(done)) {}

  Status Apply(sqlite::Connection& c, std::span<WriteOp* const>) override {
    auto start = std::chrono::steady_clock::now();
    if (request_.idempotency_key) {  // a twin that got here first
      auto q = c.Prepare(
          "SELECT GRANT_ID, CARDS, POINTS, QUERY_MS, UPDATE_MS, COMMIT_MS, FINGERPRINT FROM P_GRANT "
          "WHERE IDEMPOTENCY_KEY = ?1");
      if (!q.ok()) return q.status();
      auto row = q->Bind(1, *request_.idempotency_key).Step();
      if (!row.ok()) return row.status();
      if (*row) {
        if (q->Text(6) != fingerprint_)
          return {ErrorCode::kIdempotencyMismatch, "Idempotency-Key was used for a different grant", "Idempotency-Key"};
        outcome_ = {q->Int(0), q->Int(1), q->Int(2), q->Double(3), q->Double(4), q->Double(5), true};
        return Status::Ok();
      }
    }
    int64_t now = clock_();
    if (!request_.allow_overlap) {  // on the writer thread: no other grant can pass in between
      auto q = c.Prepare(
          "SELECT GRANT_ID, FROM_TIME, TO_TIME FROM P_GRANT WHERE FROM_TIME < ?1 AND TO_TIME > ?2 "
          "ORDER BY GRANT_ID LIMIT 1");
      if (!q.ok()) return q.status();
      auto row = q->Bind(1, request_.to_us).Bind(2, request_.from_us).Step();
      if (!row.ok()) return row.status();
      if (*row) return PeriodAlreadyGranted(q->Int(0), q->Int(1), q->Int(2));
    }
    // Read, then write the computed balance: two plain statements are
    // cheaper in SQLite than one UPDATE ... RETURNING, which buffers.
    auto read = c.Prepare("SELECT BALANCE FROM S_ACCOUNT WHERE CARD_ID = ?1");
    auto update = c.Prepare("UPDATE S_ACCOUNT SET BALANCE = ?1, LAST_UPDATE = ?2 WHERE CARD_ID = ?3");
    auto insert = c.Prepare(
        "INSERT INTO H_TRANSACTION (PAYMENT_TIME, CARD_ID, STORE_ID, AMOUNT, BALANCE) VALUES (?1, ?2, 0, ?3, ?4)");
    if (!read.ok()) return read.status();
    if (!update.ok()) return update.status();
    if (!insert.ok()) return insert.status();
    int64_t points = 0, cards = 0;
    for (const Bonus& b : bonuses_) {
      read->Reset();
      update->Reset();
      insert->Reset();
      auto row = read->Bind(1, b.card_id).Step();
      if (!row.ok()) return row.status();
      if (!*row) continue;  // cards are never deleted; a missing one gets nothing
      int64_t balance = read->Int(0) + b.points;
      if (Status s = update->Bind(1, balance).Bind(2, now).Bind(3, b.card_id).Run(); !s.ok()) return s;
      if (Status s = insert->Bind(1, now).Bind(2, b.card_id).Bind(3, b.points).Bind(4, balance).Run(); !s.ok())
        return s;
      points += b.points;
      ++cards;
      failpoint::MaybeCrash("grant.write", cards);
    }
    double update_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    auto record = c.Prepare(
        "INSERT INTO P_GRANT (GRANT_TIME, FROM_TIME, TO_TIME, RATE_PERCENT, CARDS, POINTS, QUERY_MS, UPDATE_MS, "
        "IDEMPOTENCY_KEY, FINGERPRINT) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
    if (!record.ok()) return record.status();
    record->Bind(1, now).Bind(2, request_.from_us).Bind(3, request_.to_us).Bind(4, request_.rate_percent);
    record->Bind(5, cards).Bind(6, points);
    record->BindDouble(7, query_ms_).BindDouble(8, update_ms);
    if (request_.idempotency_key)
      record->Bind(9, *request_.idempotency_key).Bind(10, fingerprint_);
    else
      record->BindNull(9).BindNull(10);
    if (Status s = record->Run(); !s.ok()) return s;
    outcome_ = {c.LastInsertRowid(), cards, points, query_ms_, update_ms, 0, false};
    return Status::Ok();
  }

  void Finish(const Status& status) override {
    if (!status.ok()) return done_(status);
    failpoint::MaybeCrash("grant.commit");
    if (!outcome_.replayed) outcome_.commit_ms = static_cast<double>(commit_duration().count()) / 1000.0;
    done_(outcome_);
  }

 private:
  std::function<int64_t()> clock_;
  GrantRequest request_;
  std::string fingerprint_;
  std::vector<Bonus> bonuses_;
  double query_ms_;
  std::function<void(Result<GrantOutcome>)> done_;
  GrantOutcome outcome_;
};

// Runs `apply` on the writer and waits for its commit.
template <typename T, typename Apply>
Result<T> OnWriter(db::sqlite::GroupWriter& writer, Apply apply) {
  return Await<Result<T>>([&](auto done) { db::sqlite::SubmitCall<T>(writer, std::move(apply), done); });
}

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
  // 1. Barrier: after it, no row with PAYMENT_TIME < to can still appear.
  auto barrier = OnWriter<int64_t>(db_.writer(), [this](sqlite::Connection&) -> Result<int64_t> { return NextTime(); });
  if (!barrier.ok()) return done(barrier.status());
  // The writer's clock stamps every payment: a period it has not passed
  // has not ended.
  if (*barrier < request.to_us) return done(PeriodNotEnded());

  failpoint::MaybeDelay("grant.slow");
  // 2. Query on a snapshot taken after the barrier.
  std::vector<Bonus> sums;
  {
    auto conn = db_.Reader();
    if (!conn.ok()) return done(conn.status());
    if (Status s = (*conn)->Exec("BEGIN"); !s.ok()) return done(s);
    auto q = (*conn)->Prepare(
        "SELECT CARD_ID, AMOUNT FROM H_TRANSACTION "
        "WHERE PAYMENT_TIME >= ?1 AND PAYMENT_TIME < ?2 AND AMOUNT > 0 AND STORE_ID > 0");
    if (!q.ok()) return done(q.status());
    q->Bind(1, request.from_us).Bind(2, request.to_us);
    while (true) {
      auto row = q->Step();
      if (!row.ok()) return done(row.status());
      if (!*row) break;
      sums.push_back({q->Int(0), q->Int(1)});
    }
  }
  // Sum per card in card order (which is also the order the write phase
  // visits S_ACCOUNT's B-tree in: sequential pages, not random ones).
  std::sort(sums.begin(), sums.end(), [](const Bonus& a, const Bonus& b) { return a.card_id < b.card_id; });
  std::vector<Bonus> bonuses;
  for (size_t i = 0; i < sums.size();) {
    int64_t card = sums[i].card_id, total = 0;
    for (; i < sums.size() && sums[i].card_id == card; ++i) total += sums[i].points;
    int64_t bonus = total * request.rate_percent / 100;  // floor: amounts and rate are positive
    if (bonus > 0) bonuses.push_back({card, bonus});
  }
  sums = {};
  double query_ms = MsSince(start);

  // 3. Write phase.
  auto outcome = Await<Result<GrantOutcome>>([&](auto done) {
    db_.writer().Submit(db::sqlite::MakeOp<GrantOp>([this] { return NextTime(); }, request, fingerprint,
                                                    std::move(bonuses), query_ms, done));
  });
  if (outcome.ok() && !outcome->replayed) {
    // Keep the commit time with the grant, so a replay answers the same.
    double commit_ms = outcome->commit_ms;
    int64_t id = outcome->grant_id;
    db::sqlite::SubmitCall<db::sqlite::Unit>(
        db_.writer(),
        [id, commit_ms](sqlite::Connection& c) -> Result<db::sqlite::Unit> {
          auto q = c.Prepare("UPDATE P_GRANT SET COMMIT_MS = ?1 WHERE GRANT_ID = ?2");
          if (!q.ok()) return q.status();
          q->BindDouble(1, commit_ms).Bind(2, id);
          if (Status s = q->Run(); !s.ok()) return s;
          return db::sqlite::Unit{};
        },
        [id](const Result<db::sqlite::Unit>& r) {
          // The grant has committed: only its recorded commit time is lost.
          if (!r.ok()) log::Warn("grant {}: cannot record its commit time: {}", id, r.status().ToString());
        });
    log::Info("grant {}: {} card(s), {} point(s); query {:.0f} ms, update {:.0f} ms, commit {:.0f} ms",
              outcome->grant_id, outcome->cards, outcome->points, outcome->query_ms, outcome->update_ms,
              outcome->commit_ms);
  }
  done(std::move(outcome));
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
