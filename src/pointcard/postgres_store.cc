#include "pointcard/postgres_store.h"

#include <chrono>
#include <random>
#include <thread>

#include "ops/log.h"

namespace hotrow::pointcard {

namespace pg = db::pg;

int LaneSize(const PostgresPointCardOptions& options) {
  return static_cast<int>(std::max<int64_t>(1, options.stage_workers) + std::max<int64_t>(1, options.fold_workers) + 1);
}

Result<std::unique_ptr<PostgresPointCardStore>> PostgresPointCardStore::Open(pg::Pool& pool,
                                                                             PostgresPointCardOptions options) {
  if (Status s = CreatePostgresPointCardSchema(pool); !s.ok()) return s;
  std::unique_ptr<PostgresPointCardStore> store(new PostgresPointCardStore(pool, options));
  if (options.lane) {
    pg::PoolOptions lane = *options.lane;
    lane.name = "grants";
    lane.size = LaneSize(options);
    // No bound on the wait or the statements: grant jobs are not requests
    // (each lifts or sets its own).
    lane.queue_wait_max = std::chrono::milliseconds(0);
    lane.statement_timeout = std::chrono::milliseconds(0);
    lane.on_connect = [then = std::move(lane.on_connect)](pg::Connection& c) {
      if (then) {
        if (Status s = then(c); !s.ok()) return s;
      }
      return c.Exec("SET application_name = 'hotrow-grants'");
    };
    auto opened = pg::Pool::Open(std::move(lane));
    if (!opened.ok()) {
      const Status& why = opened.status();
      return Status(why.code(), "the grant's " + std::to_string(LaneSize(options)) +
                                    " connection(s) of their own (2 x --grant-workers + 1, counted in PostgreSQL's "
                                    "max_connections): " +
                                    why.message())
          .WithDetail(why.detail());
    }
    store->lane_ = std::move(*opened);
  }
  // First: a fold an instance left unfinished resumes now.
  store->folder_ = std::thread([p = store.get()] { p->FoldLoop(); });
  store->KickFolder();
  store->purger_ = std::make_unique<PeriodicTask>(std::chrono::seconds(10), std::chrono::hours(1),
                                                  [p = store.get()] { p->Purge(); });
  return store;
}

PostgresPointCardStore::~PostgresPointCardStore() { Stop(); }

void PostgresPointCardStore::Stop() {
  {
    std::lock_guard lock(grant_mutex_);
    grants_stopped_ = true;
  }
  if (purger_) purger_->Stop();
  // A running grant answers first (it calls back into this store), then
  // the folder stops between two chunks; a fold left unfinished resumes at
  // the next start of any instance.
  std::thread grant;
  {
    std::unique_lock lock(grant_mutex_);
    grant_finished_.wait(lock, [this] { return !grant_running_; });
    grant = std::move(grant_thread_);
  }
  if (grant.joinable()) grant.join();
  {
    std::lock_guard lock(fold_mutex_);
    folder_stopped_ = true;
  }
  fold_wake_.notify_all();
  if (folder_.joinable()) folder_.join();
  if (lane_) lane_->Stop();  // nothing runs on it any more
}

namespace {

// The statements of the request path, prepared once per connection.
constexpr pg::NamedSql kLockCard{"pointcard_lock_card", "SELECT pg_advisory_lock($1::int, $2::int)"};
constexpr pg::NamedSql kUnlockCard{"pointcard_unlock_card", "SELECT pg_advisory_unlock($1::int, $2::int)"};
constexpr pg::NamedSql kPay{"pointcard_pay",
                            "SELECT outcome, time_us, new_balance, transaction_id, actor, reference, reason "
                            "FROM hotrow_pay_v7($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"};
// One statement, one snapshot: the card's existence and its balance at a
// time (its newest row at or before it, by the card index).
constexpr pg::NamedSql kSelectBalanceAt{"pointcard_balance_at", R"(
  SELECT COALESCE((SELECT h.BALANCE FROM H_TRANSACTION h WHERE h.CARD_ID = a.CARD_ID
                   AND h.PAYMENT_TIME <= hotrow_ts($2) ORDER BY h.PAYMENT_TIME DESC LIMIT 1), 0)
  FROM S_ACCOUNT a WHERE a.CARD_ID = $1)"};
// One statement, one snapshot: the card's existence and its page.
constexpr pg::NamedSql kSelectHistory{"pointcard_history", R"(
  SELECT hotrow_us(h.PAYMENT_TIME), h.STORE_ID, h.AMOUNT, h.BALANCE, h.TRANSACTION_ID, h.KIND, h.ACTOR, h.REFERENCE,
         h.REASON, h.REFUND_OF
  FROM S_ACCOUNT a LEFT JOIN LATERAL (
    SELECT * FROM H_TRANSACTION t WHERE t.CARD_ID = a.CARD_ID AND t.PAYMENT_TIME < hotrow_ts($2)
    ORDER BY t.PAYMENT_TIME DESC LIMIT $3) h ON true
  WHERE a.CARD_ID = $1 ORDER BY h.PAYMENT_TIME DESC)"};
// A staging grant has not answered yet: unknown. Grants of v0.5.0 and
// earlier (and of such instances during an upgrade) folded at GRANT_TIME.
constexpr pg::NamedSql kSelectGrant{"pointcard_grant_info", R"(
  SELECT CARDS, POINTS, QUERY_MS, UPDATE_MS, COMMIT_MS, hotrow_us(FROM_TIME), hotrow_us(TO_TIME), RATE_PERCENT,
         hotrow_us(COALESCE(APPLIED_TIME, GRANT_TIME)), STATE,
         hotrow_us(COALESCE(FOLDED_TIME, APPLIED_TIME, GRANT_TIME)), COALESCE(FOLD_MS, 0), hotrow_us(EXPIRES_TIME)
  FROM P_GRANT WHERE GRANT_ID = $1 AND STATE <> 'staging')"};
// Maintenance, not a request: without the request statement_timeout.
constexpr pg::NamedSql kPurgeKeys{"pointcard_purge_keys", "DELETE FROM P_IDEMPOTENCY WHERE CREATED < hotrow_ts($1)"};
constexpr pg::NamedSql kPurgeRequestKeys{"pointcard_purge_request_keys",
                                         "DELETE FROM P_REQUEST_KEY WHERE CREATED < hotrow_ts($1)"};

}  // namespace

// Idempotency keys are kept at least 24 h: every hour, those older than the
// retention go.
void PostgresPointCardStore::Purge() {
  pool_.Submit([](Result<pg::Connection*> c) {
    if (!c.ok()) return log::Warn("idempotency purge skipped (the next pass retries): {}", c.status().ToString());
    const std::string cutoff = std::to_string(NowUs() - kIdempotencyRetentionUs);
    auto done = (*c)->Pipeline({{"BEGIN"},
                                {"SET LOCAL statement_timeout = 0"},
                                {kPurgeKeys, {cutoff}},
                                {kPurgeRequestKeys, {cutoff}},
                                {"COMMIT"}});
    const Status& s = done.status();
    if (s.ok()) return;
    log::Warn("idempotency purge failed (the next pass retries): {}", s.ToString());
    if (Status rolled = (*c)->Exec("ROLLBACK"); !rolled.ok()) (*c)->MarkBroken();
  });
}

Status PostgresPointCardStore::LoadRegions(std::vector<Region>* out) {
  auto rows = pool_.Run<pg::Rows>(
      [](pg::Connection& c) { return c.Query("SELECT REGION_ID, REGION_NAME FROM M_REGION ORDER BY REGION_ID"); },
      /*unbounded=*/true);
  if (!rows.ok()) return rows.status();
  for (int i = 0; i < rows->size(); ++i)
    out->push_back(Region{.region_id = rows->Int(i, 0), .name = std::string(rows->Text(i, 1))});
  return Status::Ok();
}

Status PostgresPointCardStore::LoadStores(std::vector<StoreInfo>* out) {
  auto rows = pool_.Run<pg::Rows>(
      [](pg::Connection& c) {
        return c.Query(
            "SELECT STORE_ID, STORE_ZIPCODE, STORE_ADDRESS, STORE_NAME, REGION_ID, S_LATITUDE, S_LONGITUDE "
            "FROM M_STORE ORDER BY STORE_ID");
      },
      /*unbounded=*/true);
  if (!rows.ok()) return rows.status();
  for (int i = 0; i < rows->size(); ++i)
    out->push_back(StoreInfo{.store_id = rows->Int(i, 0),
                             .zipcode = std::string(rows->Text(i, 1)),
                             .address = std::string(rows->Text(i, 2)),
                             .name = std::string(rows->Text(i, 3)),
                             .region_id = rows->Int(i, 4),
                             .latitude = rows->Double(i, 5),
                             .longitude = rows->Double(i, 6)});
  return Status::Ok();
}

void PostgresPointCardStore::GetGrant(int64_t grant_id, std::function<void(Result<GrantInfo>)> done) {
  pool_.Submit([grant_id, done = std::move(done)](Result<pg::Connection*> c) {
    if (!c.ok()) return done(c.status());
    auto rows = (*c)->Query(kSelectGrant, {std::to_string(grant_id)});
    if (!rows.ok()) return done(rows.status());
    if (rows->empty()) return done(NoSuchGrant(grant_id));
    GrantInfo g;
    g.outcome = {grant_id, rows->Int(0, 0), rows->Int(0, 1), rows->Double(0, 2), rows->Double(0, 3), rows->Double(0, 4),
                 false};
    g.from_us = rows->Int(0, 5);
    g.to_us = rows->Int(0, 6);
    g.rate_percent = rows->Int(0, 7);
    g.applied_at_us = rows->Int(0, 8);
    if (rows->Text(0, 9) == "folded") {
      g.folded_at_us = rows->Int(0, 10);
      g.fold_ms = rows->Double(0, 11);
    }
    if (!rows->IsNull(0, 12)) g.expires_us = rows->Int(0, 12);
    done(std::move(g));
  });
}

void PostgresPointCardStore::BalanceAt(int64_t card_id, int64_t as_of_us,
                                       std::function<void(Result<BalanceAsOf>)> done) {
  pool_.Submit([card_id, as_of_us, done = std::move(done)](Result<pg::Connection*> c) {
    if (!c.ok()) return done(c.status());
    auto rows = (*c)->Query(kSelectBalanceAt, {std::to_string(card_id), std::to_string(as_of_us)});
    if (!rows.ok()) return done(rows.status());
    if (rows->empty()) return done(NoSuchCard(card_id));
    done(BalanceAsOf{.card_id = card_id, .as_of_us = as_of_us, .balance = rows->Int(0, 0)});
  });
}

void PostgresPointCardStore::History(int64_t card_id, int64_t limit, std::optional<int64_t> before_us,
                                     std::function<void(Result<HistoryPage>)> done) {
  pool_.Submit([card_id, limit, before_us, done = std::move(done)](Result<pg::Connection*> c) {
    if (!c.ok()) return done(c.status());
    auto rows = (*c)->Query(kSelectHistory, {std::to_string(card_id), std::to_string(before_us.value_or(INT64_MAX / 2)),
                                             std::to_string(limit + 1)});
    if (!rows.ok()) return done(rows.status());
    if (rows->empty()) return done(NoSuchCard(card_id));
    HistoryPage page;
    for (int i = 0; i < rows->size(); ++i) {
      if (rows->IsNull(i, 0)) continue;  // a card without (more) history
      HistoryRow& row = page.rows.emplace_back(HistoryRow{.payment_time_us = rows->Int(i, 0),
                                                          .card_id = card_id,
                                                          .store_id = rows->Int(i, 1),
                                                          .amount = rows->Int(i, 2),
                                                          .balance = rows->Int(i, 3),
                                                          .transaction_id = rows->Int(i, 4),
                                                          .kind = std::string(rows->Text(i, 5)),
                                                          .actor = std::string(rows->Text(i, 6))});
      if (!rows->IsNull(i, 7)) row.reference = std::string(rows->Text(i, 7));
      if (!rows->IsNull(i, 8)) row.reason = std::string(rows->Text(i, 8));
      if (!rows->IsNull(i, 9)) row.refund_of = rows->Int(i, 9);
    }
    if (static_cast<int64_t>(page.rows.size()) > limit) {
      page.rows.pop_back();
      page.next_before_us = page.rows.back().payment_time_us;
    }
    done(std::move(page));
  });
}

namespace {

// The outcome column of hotrow_pay_v7 (the numbers are the SQL function's
// contract, written beside it in postgres_schema.cc).
//
// Why the payment rule exists twice, here in PL/pgSQL and in C++ in
// sqlite_store.cc: on PostgreSQL it must run inside the database, in one
// round trip under SERIALIZABLE (a rule in C++ would hold the transaction
// open across three more round trips, widening every conflict window and
// the per-card lock); on SQLite it runs on the writer thread inside the
// batch transaction, where a round trip costs nothing. The contract suite
// (tests/contract/pointcard_contract.cc) runs the same cases against both:
// refusal, replay, mismatch, unknown card, the balance after each.
enum class PayResult : int64_t {
  kOk = 0,
  kRefused,
  kNoCard,
  kMismatch,
  kReplayed,
  kReplayedRefused,
  kClosed,
  kNoStore,
  kBadKey,
  kKeyOfAnotherStore
};

}  // namespace

// The reference's policy: up to 3 tries; here with 1-10 ms of jittered
// backoff, doubling, between them (capped at 64x for the grant's longer
// retries).
void RetryBackoff(int attempt) {
  thread_local std::mt19937 rng{std::random_device{}()};
  int base_ms = 1 << std::min(attempt, 6);
  std::this_thread::sleep_for(
      std::chrono::microseconds(std::uniform_int_distribution<int>(base_ms * 500, base_ms * 1500)(rng)));
}

namespace {

// One card's payments queue instead of aborting each other: a session
// advisory lock on the card is taken in its own segment, before the
// SERIALIZABLE transaction begins, so that transaction's snapshot is taken
// after the previous payment on the card committed and released it; the two
// cannot conflict, across instances too. (A SELECT ... FOR UPDATE inside
// the transaction would wait the same, then fail with 40001: its snapshot
// predates the other's commit.) The release runs in its own segment, after
// the transaction, whatever became of it; a lost connection releases it
// too. One round trip for the three. Measured (hey -c 24 on one card,
// docs/pointcard.md): 25% of payments answered 503 after three tries
// before, none after.
constexpr int64_t kCardLockSpace = 72720004;  // advisory lock key space: (this, card id)

}  // namespace

// `call` in one SERIALIZABLE transaction behind the card's advisory lock,
// with S_ACCOUNT locked ROW EXCLUSIVE (the grant's barrier and its apply's
// SHARE wait for it).
Result<pg::Rows> RunSerializable(pg::Connection& c, int64_t card_id, const pg::NamedSql& call,
                                 const std::vector<pg::Param>& params, Isolation isolation) {
  // Card ids past int4 fold onto others: harmless, they only queue together.
  const std::vector<pg::Param> key = {std::to_string(kCardLockSpace), std::to_string(card_id % 2147483647)};
  const pg::Connection::Statement take[] = {{kLockCard, key}};
  const pg::Connection::Statement work[] = {
      {isolation == Isolation::kSerializable ? "BEGIN ISOLATION LEVEL SERIALIZABLE"
                                             : "BEGIN ISOLATION LEVEL READ COMMITTED"},
      {"LOCK TABLE S_ACCOUNT IN ROW EXCLUSIVE MODE"},
      {call, params}};
  // The COMMIT in a segment of its own: it commits the work, or ends the
  // block a failed statement left aborted past its Sync (as a ROLLBACK,
  // silently), before the release, which would fail inside that block and
  // leave the lock taken. (A ROLLBACK there instead, after every
  // successful COMMIT, put "there is no transaction in progress" into the
  // server's log once per payment.)
  const pg::Connection::Statement end[] = {{"COMMIT"}};
  const pg::Connection::Statement release[] = {{kUnlockCard, key}};
  const std::span<const pg::Connection::Statement> segments[] = {take, work, end, release};
  auto results = c.PipelineSegments(segments);
  if (!results[0].ok()) log::Debug("card lock not taken: {}", results[0].status().ToString());
  if (!results[3].ok()) {
    // The session still holds the card's lock (a cancel landed on the
    // release, or on the COMMIT and left it inside the aborted block):
    // replaced, the connection lets it go; handed back, it would hold every
    // later payment on the card until the statement timeout.
    log::Warn("card lock not released (the connection is replaced): {}", results[3].status().ToString());
    c.MarkBroken();
  }
  if (!results[1].ok()) return results[1].status();
  if (!results[2].ok()) return results[2].status();  // the commit failed (a serialization failure, say)
  return std::move((*results[1])[2]);
}

void PostgresPointCardStore::Pay(Payment p, std::string fingerprint, StoreCallback<Result<PaymentOutcome>> done) {
  pool_.Submit([p = std::move(p), fp = std::move(fingerprint), done = std::move(done)](Result<pg::Connection*> c) {
    if (!c.ok()) return done(c.status());
    auto rows = RunSerializableRetried(
        **c, p.card_id, kPay,
        {std::to_string(p.card_id), std::to_string(p.store_id), std::to_string(p.amount),
         OptionalParam(p.idempotency_key), fp, p.actor, OptionalParam(p.reference), OptionalParam(p.reason),
         p.key ? pg::Param(p.key->key_id) : pg::Param(), p.key ? pg::Param(p.key->secret_sha256) : pg::Param()},
        /*retry_unique_race=*/true);
    if (!rows.ok()) return done(rows.status());
    auto outcome = static_cast<PayResult>(rows->Int(0, 0));
    if (outcome == PayResult::kNoCard) return done(NoSuchCard(p.card_id));
    if (outcome == PayResult::kClosed) return done(CardIsClosed(p.card_id));
    if (outcome == PayResult::kNoStore) return done(NoSuchStore(p.store_id));
    if (outcome == PayResult::kBadKey) return done(BadStoreKey());
    if (outcome == PayResult::kKeyOfAnotherStore) return done(KeyOfAnotherStore(rows->Int(0, 2), p.store_id));
    if (outcome == PayResult::kMismatch) return done(CardKeyMismatch(*p.idempotency_key));
    if (outcome < PayResult::kOk || outcome > PayResult::kReplayedRefused)
      return done(Status::Internal("hotrow_pay_v7 answered outcome " + std::to_string(rows->Int(0, 0))));
    PaymentOutcome out;
    out.replayed = outcome == PayResult::kReplayed || outcome == PayResult::kReplayedRefused;
    out.refused = outcome == PayResult::kRefused || outcome == PayResult::kReplayedRefused;
    int64_t balance = rows->Int(0, 2);
    if (!out.refused && rows->IsNull(0, 3))  // history is append-only: only a hand edit gets here
      return done(Status::Internal("the history row of Idempotency-Key '" + p.idempotency_key.value_or("") +
                                   "' on card " + std::to_string(p.card_id) + " is missing"));
    if (out.refused) {
      out.row = {
          .payment_time_us = 0, .card_id = p.card_id, .store_id = p.store_id, .amount = p.amount, .balance = balance};
    } else {
      out.row = {.payment_time_us = rows->Int(0, 1),
                 .card_id = p.card_id,
                 .store_id = p.store_id,
                 .amount = p.amount,
                 .balance = balance,
                 .transaction_id = rows->Int(0, 3),
                 .kind = std::string(KindOfAmount(p.amount)),
                 .actor = std::string(rows->Text(0, 4))};
      if (!rows->IsNull(0, 5)) out.row.reference = std::string(rows->Text(0, 5));
      if (!rows->IsNull(0, 6)) out.row.reason = std::string(rows->Text(0, 6));
    }
    done(out);
  });
}

void PostgresPointCardStore::Grant(GrantRequest r, std::string fingerprint,
                                   std::function<void(Result<GrantOutcome>)> done) {
  // One at a time: the service's gate (service.h) admits a grant only when
  // the previous one has answered; across instances, the begin step refuses
  // one while another stages. Its own thread: the staging statement holds
  // a pool connection for seconds, and the lease's heartbeat and the apply
  // take others.
  std::unique_lock lock(grant_mutex_);
  if (grants_stopped_) {
    lock.unlock();
    return done(Status::Unavailable("the server is shutting down"));
  }
  grant_running_ = true;
  std::thread previous = std::move(grant_thread_);
  grant_thread_ = std::thread([this, r = std::move(r), fp = std::move(fingerprint), done = std::move(done),
                               previous = std::move(previous)]() mutable {
    if (previous.joinable()) previous.join();  // it has answered: only its return is left
    Result<GrantOutcome> outcome = RunGrant(r, fp);
    {
      std::lock_guard l(grant_mutex_);
      grant_running_ = false;
      grant_finished_.notify_all();
    }
    done(std::move(outcome));
  });
}

}  // namespace hotrow::pointcard
