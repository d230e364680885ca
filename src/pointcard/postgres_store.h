// The point card on PostgreSQL, SERIALIZABLE, shared by any number of
// hotrow instances.
//
// Online point use: one round trip (libpq pipeline mode) of
//   BEGIN ISOLATION LEVEL SERIALIZABLE;
//   LOCK TABLE S_ACCOUNT IN ROW EXCLUSIVE MODE;
//   SELECT * FROM hotrow_pay(card, store, amount, key, fingerprint);
//   COMMIT;
// hotrow_pay (PL/pgSQL, created at start-up) is the reference's point use
// plus the idempotency key. Serialization failures (40001) and deadlocks
// (40P01) -- two payments on one card at once -- are retried with the
// reference's policy: up to 3 tries, with jittered backoff.
//
// Grant: the protocol
// -------------------
// PostgreSQL's reference run failed every grant: one SERIALIZABLE
// transaction whose read set (the whole period of H_TRANSACTION and every
// balance) overlapped the online writes became the pivot of a dangerous
// structure and was cancelled. v0.5.0 ordered the two with LOCK TABLE
// S_ACCOUNT IN EXCLUSIVE MODE, so every point use that met a grant waited
// for all of it (6-7 s on 1M cards). Now a grant runs in five steps, and no
// step holds a lock a point use needs for longer than one small commit
// (postgres_grant_sql.cc has the SQL, postgres_grant.cc its driver;
// docs/pointcard.md the measurements):
//   1. begin (READ COMMITTED, pg_advisory_xact_lock(kGrantLock)): the key
//      and overlap checks, `to` <= the database's clock, and a P_GRANT row
//      with STATE 'staging' and a lease (LEASE_UNTIL), renewed every
//      lease/5 by a heartbeat while the grant stages and waits. A grant
//      whose lease ran out (its instance died) is deleted with its credits
//      by the next begin or by any instance's folder within a second. Only
//      one grant stages at a time, cluster-wide (grant_in_progress).
//   2. barrier: waits for every transaction holding S_ACCOUNT ROW EXCLUSIVE
//      (each point use takes it before it reads the clock) to end, as
//      CREATE INDEX CONCURRENTLY waits; it blocks nobody. Afterwards every
//      row stamped before `to` has committed, and no later one can be.
//   3. query and stage (REPEATABLE READ, one snapshot): the period's
//      KIND = 'charge' rows summed per card into P_GRANT_CREDIT, by
//      stage_workers backends over card ranges, each importing the
//      snapshot a leader transaction exported while it holds the grant's
//      row. Not SERIALIZABLE, so SSI does not track it; it writes only its
//      own credit rows, which nobody reads while the grant is staging, and
//      its snapshot has the whole closed period: exactly what a grant run
//      alone at `to` would read.
//   4. apply (SERIALIZABLE, behind a session lock on kGrantLock): waits
//      (up to 60 s) until the previous grant has folded, so at most one
//      grant has unfolded credit; the overlap rule again; then, under
//      S_ACCOUNT SHARE (which waits out the point uses in flight and holds
//      new ones for this commit), STATE 'applied' -- one row, one small
//      commit -- and the 201.
//   5. fold (READ COMMITTED, chunks of fold_chunk cards, fold_workers at
//      once, on any instance): reads the next credits unlocked, locks their
//      cards' rows FOR UPDATE SKIP LOCKED, deletes the credits of the cards
//      it holds and writes them as the grant's rows (STORE_ID 0, KIND
//      'grant'); a pass that finds none left
//      sets STATE 'folded' with FOLD_MS. Progress is the credits' deletion,
//      so any instance resumes a fold a dead one left.
// Why it is serializable and atomic:
//   - Reads (GET card) add the applied credit in one statement, one
//     snapshot; the apply is one commit and each fold chunk moves credit
//     into balances in one commit, so a reader sees all of the grant or
//     none of it.
//   - Every writer of a card locks its S_ACCOUNT row first: a point use
//     (SELECT ... FOR UPDATE, hotrow_pay_v4) and the fold. A point use
//     folds its card's applied credit itself -- the grant's row, then its
//     own, each at its own time -- so no balance is written with credit
//     still staged, and the row lock makes the credit consumed once.
//   - No point use straddles the apply (its SHARE lock): each one commits
//     before it, and saw the grant staging, or starts after it and sees it
//     applied. Commit order is the serial order, for every reader.
//   - The grant's period is closed and its rows final after the barrier, so
//     its query is equivalent to running alone at `to`.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "base/periodic_task.h"
#include "db/postgres.h"
#include "pointcard/check.h"
#include "pointcard/seed.h"
#include "pointcard/store.h"

namespace hotrow::pointcard {

struct PostgresPointCardOptions {
  // Cards per fold chunk (each one commit holding its cards' rows); tests
  // use small ones to cross chunk boundaries on small data.
  int64_t fold_chunk = 4096;
  // Workers folding one grant at once on this instance, each over its own
  // range of cards (without a lane, at most half the pool)
  // (docs/pointcard.md#the-grant-on-postgresql). One: every other backend
  // the grant keeps busy takes CPU from the payments beside it.
  int64_t fold_workers = 1;
  // Backends staging one grant at once, each over its own range of cards
  // on one exported snapshot, fewer than the pool.
  int64_t stage_workers = 1;
  // A staging grant's lease; its heartbeat renews it every lease/5.
  std::chrono::milliseconds lease{10000};
  // The grant's lane: when set, the store opens connections of its own
  // with these options (stage_workers + fold_workers + 1 of them, named
  // "grants") for the grant's jobs: begin, barrier, staging, heartbeat,
  // apply and fold. They then never queue behind requests on a saturated
  // pool, where a heartbeat could miss its lease and a fold chunk waited
  // for a connection. Unset: the grant shares the store's pool.
  std::optional<db::pg::PoolOptions> lane = std::nullopt;
};

// The lane's size: room for every job a grant and a fold run at once (the
// staging ranges, the leader's included, or the grant thread; the fold
// workers, or the folder's own queries; and a heartbeat, which one sent
// just before the staging paused it waits on the leader's row lock).
int LaneSize(const PostgresPointCardOptions& options);

class PostgresPointCardStore final : public PointCardStore {
 public:
  // Creates the schema and functions if needed, and starts the folder.
  static Result<std::unique_ptr<PostgresPointCardStore>> Open(db::pg::Pool& pool,
                                                              PostgresPointCardOptions options = {});
  ~PostgresPointCardStore() override;
  void Stop() override;

  Status LoadRegions(std::vector<Region>* out) override;
  Status LoadStores(std::vector<StoreInfo>* out) override;
  void CreateStore(NewStore store, std::string fingerprint,
                   std::function<void(Result<std::pair<StoreInfo, bool>>)> done) override;
  void GetStore(int64_t store_id, std::function<void(Result<StoreInfo>)> done) override;
  void ListStores(int64_t region_id, std::function<void(Result<std::vector<StoreInfo>>)> done) override;
  void CreateStoreKey(StoreKey key, std::string secret_sha256, std::function<void(Result<StoreKey>)> done) override;
  void ListStoreKeys(int64_t store_id, std::function<void(Result<std::vector<StoreKey>>)> done) override;
  void RevokeStoreKey(int64_t store_id, std::string key_id, std::function<void(Result<StoreKey>)> done) override;
  void GetCard(int64_t card_id, StoreCallback<Result<Card>> done) override;
  void CreateCard(NewCard card, std::string fingerprint, std::function<void(Result<Card>)> done) override;
  void FindCard(std::string external_ref, std::function<void(Result<std::optional<Card>>)> done) override;
  void CloseCard(CardClose close, std::string fingerprint, std::function<void(Result<Card>)> done) override;
  void GetGrant(int64_t grant_id, std::function<void(Result<GrantInfo>)> done) override;
  void BalanceAt(int64_t card_id, int64_t as_of_us, std::function<void(Result<BalanceAsOf>)> done) override;
  void History(int64_t card_id, int64_t limit, std::optional<int64_t> before_us,
               std::function<void(Result<HistoryPage>)> done) override;
  void Pay(Payment payment, std::string fingerprint, StoreCallback<Result<PaymentOutcome>> done) override;
  void Refund(RefundRequest refund, std::string fingerprint, StoreCallback<Result<PaymentOutcome>> done) override;
  void CreateHold(NewHold hold, std::string fingerprint, std::function<void(Result<HoldOutcome>)> done) override;
  void EndHold(HoldAction action, std::string fingerprint, std::function<void(Result<HoldOutcome>)> done) override;
  void ListHolds(int64_t card_id, int64_t limit, std::optional<int64_t> before_id,
                 std::function<void(Result<HoldPage>)> done) override;
  // No lots on PostgreSQL yet (0.13.0): every point never expires.
  void ListLots(int64_t card_id, int64_t limit, std::optional<int64_t> after_id,
                std::function<void(Result<LotPage>)> done) override;
  void Grant(GrantRequest request, std::string fingerprint, std::function<void(Result<GrantOutcome>)> done) override;

 private:
  PostgresPointCardStore(db::pg::Pool& pool, PostgresPointCardOptions options)
      : pool_(pool), options_(std::move(options)) {}
  void Purge();
  // postgres_grant.cc: steps 1-4 on the grant's thread, and the folder.
  Result<GrantOutcome> RunGrant(const GrantRequest& request, const std::string& fingerprint);
  struct StageTotals {
    int64_t cards = 0;
    int64_t points = 0;
    double query_ms = 0;   // the slowest range's
    double update_ms = 0;  // the slowest range's
  };
  // Step 3 over StageWorkers() card ranges on one snapshot; `clear_first`
  // drops what an earlier attempt committed.
  Result<StageTotals> Stage(int64_t id, const GrantRequest& request, const std::string& lease_ms, bool clear_first);
  int64_t StageWorkers() const;
  enum class FoldStep { kMore, kRangeDone, kDone, kBusy, kFailed };
  // One chunk of the cards in (after, before); moves `after` past it.
  FoldStep FoldChunk(int64_t grant_id, int64_t* after, std::optional<int64_t> before);
  // Chunks until the range is empty (kRangeDone; a full pass: kDone) or
  // `stopping` or repeated failures (kFailed).
  FoldStep FoldRange(int64_t grant_id, int64_t after, std::optional<int64_t> before,
                     const std::function<bool()>& stopping);
  // Until the grant is folded (true) or `stopping` or repeated failures.
  bool FoldToEnd(int64_t grant_id, const std::function<bool()>& stopping);
  void FoldLoop();
  void KickFolder();
  // Writes out the lots due (and releases what holds past their expiry
  // reserved), a batch of cards per transaction, until none is left or
  // `stopping` (postgres_lots.cc). Any instance's folder runs it, every
  // second: cards another transaction holds are skipped.
  void SweepLots(const std::function<bool()>& stopping);

  // The pool the grant's jobs run on: the lane, or the shared pool.
  db::pg::Pool& grants() const { return lane_ ? *lane_ : pool_; }

  db::pg::Pool& pool_;
  const PostgresPointCardOptions options_;
  std::unique_ptr<db::pg::Pool> lane_;  // the grant's own connections, if options_.lane
  std::mutex grant_mutex_;
  bool grant_running_ = false;
  bool grants_stopped_ = false;             // Stop() was called: no new grant
  std::condition_variable grant_finished_;  // the destructor waits for a running grant
  std::thread grant_thread_;                // guarded by grant_mutex_
  std::mutex fold_mutex_;
  std::condition_variable fold_wake_;
  bool fold_kicked_ = false;             // guarded by fold_mutex_
  bool folder_stopped_ = false;          // guarded by fold_mutex_
  std::atomic<int64_t> fold_chunks_{0};  // committed by this process (the grant.fold failpoint)
  std::thread folder_;
  std::unique_ptr<PeriodicTask> purger_;  // last: stopped first
};

// postgres_grant_sql.cc: the grant's functions, (re)created at every start by
// CreatePostgresPointCardSchema.
Status CreatePostgresGrantFunctions(db::pg::Connection& conn);
// Shared by the grant's steps (postgres_grant.cc) and its fold
// (postgres_fold.cc):
//   `work` between BEGIN `begin` and COMMIT in one round trip; a failure
//   rolls back (a broken connection is replaced by the pool). Returns the
//   rows of work's last statement.
Result<db::pg::Rows> InTransaction(db::pg::Connection& c, const std::string& begin,
                                   std::vector<db::pg::Connection::Statement> work);
//   The width of each of `workers` ranges of card ids up to `top` (the last
//   range runs on to the largest id); without overflow when top is
//   INT64_MAX, a valid card id.
int64_t RangeSpan(int64_t top, int64_t workers);
inline constexpr db::pg::NamedSql kTopCard{"pointcard_top_card", "SELECT COALESCE(MAX(CARD_ID), 0) FROM S_ACCOUNT"};
inline constexpr db::pg::NamedSql kOldestApplied{
    "pointcard_grant_oldest_applied", "SELECT GRANT_ID FROM P_GRANT WHERE STATE = 'applied' ORDER BY GRANT_ID LIMIT 1"};
// Payments' and grants' retry wait: 1-10 ms jittered, doubling.
void RetryBackoff(int attempt);
// The transaction's isolation: SERIALIZABLE (SSI), or READ COMMITTED for a
// write whose every read is of data that only writers holding the card's
// lock change, or that never changes (a hold's: docs/pointcard.md#holds).
// The card's lock, held from before BEGIN to after COMMIT, and its
// S_ACCOUNT row FOR UPDATE, read before anything else of the card (every
// writer of a card's holds or balance updates that row), make such a write
// serializable (two-phase locking on the card; the row lock alone when the
// advisory lock was not taken, a timeout while queued, say); SSI's
// page-level read locks on P_HOLD's indexes would only abort it for other
// cards' holds (a hostile review measured 22-30% 503s with holds on 8-50
// cards at once).
enum class Isolation { kSerializable, kCardLocked };
// `call` in one transaction (SERIALIZABLE unless `isolation` says
// otherwise) behind the card's advisory lock (every writer of one card
// queues there, across instances), with S_ACCOUNT locked ROW EXCLUSIVE;
// its rows.
Result<db::pg::Rows> RunSerializable(db::pg::Connection& c, int64_t card_id, const db::pg::NamedSql& call,
                                     const std::vector<db::pg::Param>& params,
                                     Isolation isolation = Isolation::kSerializable);
// RunSerializable, retried on serialization failures and deadlocks (up to
// 3 tries, the reference's policy, RetryBackoff between them): payments,
// issues, closes, stores made and refunds. `retry_unique_race`: a unique
// violation (two first uses of one idempotency key; the retry finds the
// winner's answer) is retried too.
Result<db::pg::Rows> RunSerializableRetried(db::pg::Connection& c, int64_t lock_card, const db::pg::NamedSql& call,
                                            const std::vector<db::pg::Param>& params, bool retry_unique_race = false,
                                            Isolation isolation = Isolation::kSerializable);
// A text parameter, or NULL.
inline db::pg::Param OptionalParam(const std::optional<std::string>& v) {
  return v ? db::pg::Param(*v) : db::pg::Param();
}
// postgres_pay_sql.cc: the point use's functions (hotrow_pay_v7 and the
// versions older releases call), (re)created at every start.
Status CreatePostgresPaymentFunctions(db::pg::Connection& conn);
// postgres_cards.cc: issuing and closing cards, (re)created at every start.
Status CreatePostgresCardFunctions(db::pg::Connection& conn);
// postgres_stores.cc: making stores, (re)created at every start.
Status CreatePostgresStoreFunctions(db::pg::Connection& conn);

// postgres_keys.cc: store keys, (re)created at every start.
Status CreatePostgresKeyFunctions(db::pg::Connection& conn);
// postgres_refunds.cc: refunds, (re)created at every start.
Status CreatePostgresRefundFunctions(db::pg::Connection& conn);
// postgres_holds.cc: holds, (re)created at every start.
Status CreatePostgresHoldFunctions(db::pg::Connection& conn);
// postgres_cards.cc: a card as reads show it (NotFound for none).
Result<Card> PostgresCardById(db::pg::Connection& c, int64_t card_id);
// postgres_lots.cc: expiring lots, (re)created at every start.
Status CreatePostgresLotFunctions(db::pg::Connection& conn);

// postgres_schema.cc: tables, migrations and functions, under the schema
// lock (on one connection, or on one of the pool's at start-up).
Status CreatePostgresPointCardSchema(db::pg::Connection& conn);
Status CreatePostgresPointCardSchema(db::pg::Pool& pool);

// Fills empty point-card tables with the generator's data (seed.h) through
// COPY; conflict when S_ACCOUNT has rows.
Status SeedPostgresPointCard(db::pg::Connection& conn, const SeedOptions& options,
                             const std::function<void(int64_t, int64_t)>& progress);

// The invariants of check.h, as SQL on one REPEATABLE READ snapshot.
Result<CheckReport> CheckPostgresInvariants(db::pg::Connection& conn, const CheckScope& scope = {});

}  // namespace hotrow::pointcard
