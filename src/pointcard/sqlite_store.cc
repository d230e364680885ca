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

// A card's history page, newest first: ?1 the card, ?2 the cursor, ?3 the
// rows; the columns as ReadHistoryRow reads them.
constexpr const char* kSelectHistory =
    "SELECT PAYMENT_TIME, CARD_ID, STORE_ID, AMOUNT, BALANCE, TRANSACTION_ID, KIND, ACTOR, REFERENCE, REASON, "
    "REFUND_OF FROM H_TRANSACTION WHERE CARD_ID = ?1 AND PAYMENT_TIME < ?2 ORDER BY PAYMENT_TIME DESC LIMIT ?3";

HistoryRow ReadHistoryRow(const sqlite::Query& q) {
  HistoryRow r{.payment_time_us = q.Int(0),
               .card_id = q.Int(1),
               .store_id = q.Int(2),
               .amount = q.Int(3),
               .balance = q.Int(4),
               .transaction_id = q.Int(5),
               .kind = std::string(q.Text(6)),
               .actor = std::string(q.Text(7))};
  if (!q.IsNull(8)) r.reference = std::string(q.Text(8));
  if (!q.IsNull(9)) r.reason = std::string(q.Text(9));
  if (!q.IsNull(10)) r.refund_of = q.Int(10);
  return r;
}

}  // namespace

Result<std::unique_ptr<SqlitePointCardStore>> SqlitePointCardStore::Open(db::sqlite::Database& db,
                                                                         SqlitePointCardOptions options) {
  auto& conn = db.writer().connection();
  if (Status s = CreatePointCardSchema(conn); !s.ok()) return s;
  if (Status s = NumberNewRows(conn); !s.ok()) return s;
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
  // CLOSED_TIME too: a grant applied after a close must be stamped after it
  // (the checker's invariant 8 orders them so).
  auto accounts =
      sqlite::QueryInt(conn, "SELECT COALESCE(MAX(MAX(LAST_UPDATE, COALESCE(CLOSED_TIME, 0))), 0) FROM S_ACCOUNT");
  // And past every grant's times and period: a wall clock stepped back
  // (NTP, a restore on another host) must not stamp a payment inside a
  // period already granted, even one whose grant left no row.
  auto grants = sqlite::QueryInt(conn,
                                 "SELECT COALESCE(MAX(MAX(GRANT_TIME, TO_TIME, COALESCE(APPLIED_TIME, 0), "
                                 "COALESCE(FOLDED_TIME, 0))), 0) FROM P_GRANT");
  if (!history.ok()) return history.status();
  if (!accounts.ok()) return accounts.status();
  if (!grants.ok()) return grants.status();
  // And past every store key's times (point-card schema 4): a key's rows
  // come after its creation and before its revocation.
  auto keys = sqlite::QueryInt(conn,
                               "SELECT COALESCE(MAX(MAX(CREATED_TIME, COALESCE(LAST_USED_TIME, 0), "
                               "COALESCE(REVOKED_TIME, 0))), 0) FROM M_STORE_KEY");
  if (!keys.ok()) return keys.status();
  // And past every hold's (point-card schema 5): a capture or void comes
  // after its hold's creation, and an expiry stamped is a decision taken.
  auto holds =
      sqlite::QueryInt(conn, "SELECT COALESCE(MAX(MAX(CREATED_TIME, COALESCE(ENDED_TIME, 0))), 0) FROM P_HOLD");
  if (!holds.ok()) return holds.status();
  auto open_holds = sqlite::QueryInt(conn, "SELECT EXISTS (SELECT 1 FROM P_HOLD WHERE STATUS = 'open')");
  if (!open_holds.ok()) return open_holds.status();
  store->holds_possible_ = *open_holds != 0;
  // And past every lot's written-out expiry (point-card schema 6).
  auto lots = sqlite::QueryInt(conn, "SELECT COALESCE(MAX(COALESCE(EXPIRED_TIME, 0)), 0) FROM P_LOT");
  if (!lots.ok()) return lots.status();
  auto expiring = sqlite::QueryInt(conn,
                                   "SELECT EXISTS (SELECT 1 FROM P_LOT) OR EXISTS (SELECT 1 FROM P_GRANT "
                                   "WHERE EXPIRES_TIME IS NOT NULL)");
  if (!expiring.ok()) return expiring.status();
  if (*expiring != 0) {
    store->LotsPossible();
    store->next_due_us_ = 0;  // the first sweep finds out
  }
  store->clock_last_us_ = std::max({*history, *accounts, *grants, *keys, *holds, *lots});
  store->clock_published_us_.store(store->clock_last_us_, std::memory_order_relaxed);
  // Lots due are written out within a second or so of their expiry, if no
  // write to their card does it first (reads leave them out at once).
  store->sweeper_ = std::make_unique<PeriodicTask>(std::chrono::seconds(1), std::chrono::seconds(1), [p = store.get()] {
    if (p->lots_seen_.load() && p->db_.writer().started() && p->ReadTime() >= p->next_due_us_.load()) p->StartSweep();
  });
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
  if (sweeper_) sweeper_->Stop();
  {
    // A sweep's ops run on the writer, which still runs: wait for its chain
    // to end (the next op sees sweep_stopped_ and ends it).
    // The writer finishes every op it was given, run or refused, so this
    // ends; unbounded, as a store freed under a queued op would not be.
    std::unique_lock lock(sweep_mutex_);
    sweep_stopped_ = true;
    sweep_cv_.wait(lock, [this] { return !sweeping_; });
  }
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
  clock_published_us_.store(clock_last_us_, std::memory_order_relaxed);
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

void SqlitePointCardStore::BalanceAt(int64_t card_id, int64_t as_of_us, std::function<void(Result<BalanceAsOf>)> done) {
  auto conn = db_.Reader();
  if (!conn.ok()) return done(conn.status());
  // One statement, one snapshot: the card's existence and its newest row at
  // or before the time (the card index, newest first).
  auto q = (*conn)->Prepare(
      "SELECT (SELECT COALESCE((SELECT h.BALANCE FROM H_TRANSACTION h WHERE h.CARD_ID = a.CARD_ID "
      "AND h.PAYMENT_TIME <= ?2 ORDER BY h.PAYMENT_TIME DESC LIMIT 1), 0)) FROM S_ACCOUNT a WHERE a.CARD_ID = ?1");
  if (!q.ok()) return done(q.status());
  auto row = q->Bind(1, card_id).Bind(2, as_of_us).Step();
  if (!row.ok()) return done(row.status());
  if (!*row) return done(NoSuchCard(card_id));
  done(BalanceAsOf{.card_id = card_id, .as_of_us = as_of_us, .balance = q->Int(0)});
}

void SqlitePointCardStore::History(int64_t card_id, int64_t limit, std::optional<int64_t> before_us,
                                   std::function<void(Result<HistoryPage>)> done) {
  auto conn = db_.Reader();
  if (!conn.ok()) return done(conn.status());
  if (Status s = BeginCardRead(**conn, card_id); !s.ok()) return done(s);
  auto q = (*conn)->Prepare(kSelectHistory);
  if (!q.ok()) return done(q.status());
  q->Bind(1, card_id).Bind(2, before_us.value_or(INT64_MAX)).Bind(3, limit + 1);
  HistoryPage page;
  while (true) {
    auto row = q->Step();
    if (!row.ok()) return done(row.status());
    if (!*row) break;
    page.rows.push_back(ReadHistoryRow(*q));
  }
  if (static_cast<int64_t>(page.rows.size()) > limit) {
    page.rows.pop_back();
    page.next_before_us = page.rows.back().payment_time_us;
  }
  done(std::move(page));
}

Status BeginCardRead(sqlite::Connection& c, int64_t card_id) {
  if (Status s = c.Exec("BEGIN"); !s.ok()) return s;
  auto exists = c.Prepare("SELECT 1 FROM S_ACCOUNT WHERE CARD_ID = ?1");
  if (!exists.ok()) return exists.status();
  auto found = exists->Bind(1, card_id).Step();
  if (!found.ok()) return found.status();
  if (!*found) return NoSuchCard(card_id);
  return exists->Run();
}

// A key of a release before 0.8.0 too: the row is found by its primary key.
Result<std::optional<PaymentOutcome>> FindCardKey(sqlite::Connection& c, int64_t card_id, const std::string& key,
                                                  const std::string& fp) {
  auto q = c.Prepare(
      "SELECT k.FINGERPRINT, k.REFUSED, k.PAYMENT_TIME, k.STORE_ID, k.AMOUNT, k.BALANCE, h.TRANSACTION_ID, h.KIND, "
      "h.ACTOR, h.REFERENCE, h.REASON, h.REFUND_OF FROM P_IDEMPOTENCY k LEFT JOIN H_TRANSACTION h "
      "ON NOT k.REFUSED AND h.PAYMENT_TIME = k.PAYMENT_TIME AND h.CARD_ID = k.CARD_ID AND h.STORE_ID = k.STORE_ID "
      "WHERE k.CARD_ID = ?1 AND k.KEY = ?2");
  if (!q.ok()) return q.status();
  q->Bind(1, card_id).Bind(2, key);
  auto row = q->Step();
  if (!row.ok()) return row.status();
  if (!*row) return std::optional<PaymentOutcome>();
  if (q->Text(0) != fp) return CardKeyMismatch(key);
  PaymentOutcome out;
  out.refused = q->Int(1) != 0;
  out.row = {.payment_time_us = q->Int(2),
             .card_id = card_id,
             .store_id = q->Int(3),
             .amount = q->Int(4),
             .balance = q->Int(5)};
  if (!out.refused) {
    if (q->IsNull(6))  // history is append-only: only a hand edit gets here
      return Status::Internal("the history row of Idempotency-Key '" + key + "' on card " + std::to_string(card_id) +
                              " is missing");
    out.row.transaction_id = q->Int(6);
    out.row.kind = q->Text(7);
    out.row.actor = q->Text(8);
    if (!q->IsNull(9)) out.row.reference = std::string(q->Text(9));
    if (!q->IsNull(10)) out.row.reason = std::string(q->Text(10));
    if (!q->IsNull(11)) out.row.refund_of = q->Int(11);
  }
  out.replayed = true;
  if (Status s = q->Run(); !s.ok()) return s;
  return std::optional<PaymentOutcome>(out);
}

Result<int64_t> SqlitePointCardStore::PendingCredit(sqlite::Connection& c, int64_t card_id) {
  if (!credit_possible_) return 0;
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

Status RememberCardKey(sqlite::Connection& c, int64_t card_id, const std::string& key, const std::string& fp,
                       const PaymentOutcome& o, int64_t now_us) {
  auto q = c.Prepare(
      "INSERT INTO P_IDEMPOTENCY (CARD_ID, KEY, FINGERPRINT, CREATED, REFUSED, PAYMENT_TIME, STORE_ID, AMOUNT, "
      "BALANCE) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
  if (!q.ok()) return q.status();
  return q->Bind(1, card_id)
      .Bind(2, key)
      .Bind(3, fp)
      .Bind(4, now_us)
      .Bind(5, o.refused ? 1 : 0)
      .Bind(6, o.row.payment_time_us)
      .Bind(7, o.row.store_id)
      .Bind(8, o.row.amount)
      .Bind(9, o.row.balance)
      .Run();
}

Status SqlitePointCardStore::AppendRow(sqlite::Connection& c, HistoryRow& row) {
  row.payment_time_us = NextTime();
  auto update = c.Prepare("UPDATE S_ACCOUNT SET BALANCE = ?1, LAST_UPDATE = ?2 WHERE CARD_ID = ?3");
  if (!update.ok()) return update.status();
  if (Status s = update->Bind(1, row.balance).Bind(2, row.payment_time_us).Bind(3, row.card_id).Run(); !s.ok())
    return s;
  auto id = LastTransactionId(c);
  if (!id.ok()) return id.status();
  row.transaction_id = *id + 1;
  auto insert = c.Prepare(
      "INSERT INTO H_TRANSACTION (PAYMENT_TIME, CARD_ID, STORE_ID, AMOUNT, BALANCE, KIND, TRANSACTION_ID, ACTOR, "
      "REFERENCE, REASON, REFUND_OF) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)");
  if (!insert.ok()) return insert.status();
  insert->Bind(1, row.payment_time_us).Bind(2, row.card_id).Bind(3, row.store_id).Bind(4, row.amount);
  insert->Bind(5, row.balance).Bind(6, row.kind).Bind(7, row.transaction_id).Bind(8, row.actor);
  if (row.reference) insert->Bind(9, *row.reference);
  if (row.reason) insert->Bind(10, *row.reason);
  if (row.refund_of) insert->Bind(11, *row.refund_of);
  return insert->Run();
}

// A point use, a refund or a hold's write as a WriteOp (one allocation per
// request; pooling it was measured and bought nothing,
// docs/design.md#allocation-free-requests).
template <typename Request, typename Outcome, typename Done,
          Result<Outcome> (SqlitePointCardStore::*ApplyFn)(sqlite::Connection&, const Request&, const std::string&)>
class CardOp final : public db::sqlite::WriteOp {
 public:
  CardOp(SqlitePointCardStore* store, Request r, std::string fp, Done done)
      : store_(store), request_(std::move(r)), fingerprint_(std::move(fp)), done_(std::move(done)) {}
  static db::sqlite::OpPtr Make(SqlitePointCardStore* store, Request r, std::string fp, Done done) {
    return db::sqlite::MakeOp<CardOp>(store, std::move(r), std::move(fp), std::move(done));
  }

  Status Apply(sqlite::Connection& c, std::span<WriteOp* const>) override {
    result_ = (store_->*ApplyFn)(c, request_, fingerprint_);
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
  Request request_;
  std::string fingerprint_;
  Done done_;
  Result<Outcome> result_ = Status::Internal("not applied");
};
using PayOp =
    CardOp<Payment, PaymentOutcome, StoreCallback<Result<PaymentOutcome>>, &SqlitePointCardStore::ApplyPayment>;
using RefundOp =
    CardOp<RefundRequest, PaymentOutcome, StoreCallback<Result<PaymentOutcome>>, &SqlitePointCardStore::ApplyRefund>;
using HoldDone = std::function<void(Result<HoldOutcome>)>;
using CreateHoldOp = CardOp<NewHold, HoldOutcome, HoldDone, &SqlitePointCardStore::ApplyCreateHold>;
using EndHoldOp = CardOp<HoldAction, HoldOutcome, HoldDone, &SqlitePointCardStore::ApplyEndHold>;

// A hold's refusal that committed (hold_expired) reaches the caller as its
// error.
HoldDone RefusalAsError(HoldDone done) {
  return [done = std::move(done)](Result<HoldOutcome> r) {
    if (r.ok() && !r->refusal.ok()) return done(r->refusal);
    done(std::move(r));
  };
}

Result<PaymentOutcome> SqlitePointCardStore::ApplyPayment(sqlite::Connection& c, const Payment& p,
                                                          const std::string& fp) {
  // The key first (who asks, then what), in this transaction: a key
  // revoked a moment ago, on any instance, no longer pays.
  if (p.key) {
    auto key_store = CheckStoreKey(c, *p.key, NextTime());  // the writer's clock, as the key's own times
    if (!key_store.ok()) return key_store.status();
    if (*key_store != p.store_id) return KeyOfAnotherStore(*key_store, p.store_id);
  }
  // Then the store, as the service did when stores lived in its memory:
  // one made a moment ago counts.
  if (Status s = StoreExists(c, p.store_id); !s.ok()) return s;
  if (p.idempotency_key) {
    auto earlier = FindCardKey(c, p.card_id, *p.idempotency_key, fp);
    if (!earlier.ok()) return earlier.status();
    if (*earlier) return **earlier;
  }
  auto read = c.Prepare("SELECT BALANCE, STATUS FROM S_ACCOUNT WHERE CARD_ID = ?1");
  if (!read.ok()) return read.status();
  auto row = read->Bind(1, p.card_id).Step();
  if (!row.ok()) return row.status();
  if (!*row) return NoSuchCard(p.card_id);
  if (read->Text(1) != kCardActive) return CardIsClosed(p.card_id);
  int64_t balance = read->Int(0);
  if (Status s = read->Run(); !s.ok()) return s;
  // With lots, the card is settled first: what expired by now leaves it
  // (its expiry rows before this payment's row). No lot ever made: nothing
  // to settle, as before 0.13.0.
  std::optional<int64_t> settled_at;
  if (lots_possible_) {
    settled_at = NextTime();
    if (Status s = SettleCard(c, p.card_id, *settled_at, balance); !s.ok()) return s;
  }
  auto pending = PendingCredit(c, p.card_id);
  if (!pending.ok()) return pending.status();
  const int64_t credit = *pending;
  // A payment takes from what is available: the balance less the open
  // holds, at the writer's time (which only moves forward). A charge is
  // never refused. No hold ever open: nothing to read.
  int64_t held = 0;
  if (p.amount < 0 && holds_possible_) {
    auto open = HeldAt(c, p.card_id, settled_at ? *settled_at : NextTime());  // the row's time comes after it
    if (!open.ok()) return open.status();
    held = *open;
  }
  PaymentOutcome out;
  if (p.amount < 0 && balance + credit - held + p.amount < 0) {
    // What the card has available, as a read shows it; nothing is written.
    out.refused = true;
    out.row = {.payment_time_us = 0,
               .card_id = p.card_id,
               .store_id = p.store_id,
               .amount = p.amount,
               .balance = balance + credit - held};
  } else {
    // The grant's row first, at its own time.
    auto folded = credit > 0 ? FoldCard(c, p.card_id, balance) : Result<int64_t>(balance);
    if (!folded.ok()) return folded.status();
    out.row = {.card_id = p.card_id,
               .store_id = p.store_id,
               .amount = p.amount,
               .balance = *folded + p.amount,
               .kind = std::string(KindOfAmount(p.amount)),
               .actor = p.actor,
               .reference = p.reference,
               .reason = p.reason};
    if (Status s = AppendRow(c, out.row); !s.ok()) return s;
    if (p.amount < 0)
      if (Status s = TakeFromLots(c, p.card_id, -p.amount, out.row.transaction_id); !s.ok()) return s;
  }
  if (p.idempotency_key) {
    const int64_t now = out.refused ? NextTime() : out.row.payment_time_us;
    if (Status s = RememberCardKey(c, p.card_id, *p.idempotency_key, fp, out, now); !s.ok()) return s;
  }
  return out;
}

void SqlitePointCardStore::Pay(Payment payment, std::string fingerprint, StoreCallback<Result<PaymentOutcome>> done) {
  db_.writer().Submit(PayOp::Make(this, std::move(payment), std::move(fingerprint), std::move(done)));
}

void SqlitePointCardStore::Refund(RefundRequest refund, std::string fingerprint,
                                  StoreCallback<Result<PaymentOutcome>> done) {
  db_.writer().Submit(RefundOp::Make(this, std::move(refund), std::move(fingerprint), std::move(done)));
}

void SqlitePointCardStore::CreateHold(NewHold hold, std::string fingerprint,
                                      std::function<void(Result<HoldOutcome>)> done) {
  db_.writer().Submit(CreateHoldOp::Make(this, std::move(hold), std::move(fingerprint), std::move(done)));
}

void SqlitePointCardStore::EndHold(HoldAction action, std::string fingerprint,
                                   std::function<void(Result<HoldOutcome>)> done) {
  db_.writer().Submit(
      EndHoldOp::Make(this, std::move(action), std::move(fingerprint), RefusalAsError(std::move(done))));
}

void SqlitePointCardStore::GetGrant(int64_t grant_id, std::function<void(Result<GrantInfo>)> done) {
  auto conn = db_.Reader();
  if (!conn.ok()) return done(conn.status());
  auto q = (*conn)->Prepare(
      "SELECT CARDS, POINTS, QUERY_MS, UPDATE_MS, COMMIT_MS, FROM_TIME, TO_TIME, RATE_PERCENT, APPLIED_TIME, "
      "FOLDED_TIME, FOLD_MS, STATE, EXPIRES_TIME FROM P_GRANT WHERE GRANT_ID = ?1 AND STATE <> 'staging'");
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
  if (!q->IsNull(12)) g.expires_us = q->Int(12);
  done(g);
}

void SqlitePointCardStore::Purge() {
  int64_t cutoff = NowUs() - kIdempotencyRetentionUs;
  db::sqlite::SubmitCall<db::sqlite::Unit>(
      db_.writer(),
      [cutoff](sqlite::Connection& c) -> Result<db::sqlite::Unit> {
        for (const char* sql :
             {"DELETE FROM P_IDEMPOTENCY WHERE CREATED < ?1", "DELETE FROM P_REQUEST_KEY WHERE CREATED < ?1"}) {
          auto q = c.Prepare(sql);
          if (!q.ok()) return q.status();
          if (Status s = q->Bind(1, cutoff).Run(); !s.ok()) return s;
        }
        return db::sqlite::Unit{};
      },
      [](const Result<db::sqlite::Unit>& r) {
        if (!r.ok()) log::Warn("idempotency purge failed (the next pass retries): {}", r.status().ToString());
      });
}

}  // namespace hotrow::pointcard
