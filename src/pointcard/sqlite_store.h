// The point card on the embedded SQLite database.
//
// Online point use
// ----------------
// One WriteOp on the group-commit writer: read the balance, refuse if the
// payment does not fit, write BALANCE and LAST_UPDATE, append the history
// row, record the idempotency key -- all in the op's savepoint of the batch
// transaction. All writes of the database go through the one writer thread,
// in one order, so every write transaction is serializable by construction:
// the batch order is the serial order. PAYMENT_TIME comes from the writer's
// clock (max(wall clock, previous + 1 us)), so it strictly increases.
//
// Point grant: the protocol
// -------------------------
// The grant is one atomic transaction, as in the reference, but only its
// write phase runs on the writer:
//
//   1. Barrier. A no-op WriteOp goes through the writer and takes a time T_b
//      from the writer's clock. T_b >= the wall clock >= `to` (the period must
//      have ended). Every op that took a time before the barrier committed in
//      an earlier batch or in the barrier's own batch; every op after it
//      takes a time > T_b >= `to`. So once the barrier has committed, the set
//      of history rows in [from, to) is complete and can never change again.
//   2. Query, outside the writer, on a read snapshot taken after the barrier
//      (WAL readers do not block the writer, nor it them): sum the positive
//      amounts from stores > 0 per card in [from, to), compute each bonus.
//      Online payments keep committing meanwhile; they cannot change this
//      result (step 1).
//   3. Write phase: one WriteOp applies every bonus -- UPDATE ... BALANCE =
//      BALANCE + bonus ... RETURNING BALANCE, then the history row with that
//      balance -- and records the grant, in one transaction. Online ops
//      queued meanwhile wait for it (they are not refused) and run after it.
//
// Why it is serializable: the grant reads two things, the period's history
// (fixed after step 1, so reading it at step 2 equals reading it at step 3)
// and each card's balance (read at step 3, inside the writer, where it is
// current). So the grant behaves as if it ran entirely at its place in the
// writer's order, between two batches: a serial execution. Why it is
// atomic: step 3 is one SQLite transaction; a crash before its COMMIT
// leaves nothing (the WAL frames are not committed), after it everything.
// What waits for what: the grant waits for one batch (the barrier, a few
// ms); online writes wait for the write phase (measured in
// docs/benchmarks.md); reads never wait.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "base/periodic_task.h"
#include "db/sqlite_database.h"
#include "pointcard/store.h"

namespace hotrow::pointcard {

class SqlitePointCardStore final : public PointCardStore {
 public:
  // Creates the schema if needed and reads the clock's starting point. Must
  // run before db.writer().Start().
  static Result<std::unique_ptr<SqlitePointCardStore>> Open(db::sqlite::Database& db);
  ~SqlitePointCardStore() override;
  void Stop() override;

  Status LoadRegions(std::vector<Region>* out) override;
  Status LoadStores(std::vector<StoreInfo>* out) override;
  void GetCard(int64_t card_id, StoreCallback<Result<Card>> done) override;
  void History(int64_t card_id, int64_t limit, std::optional<int64_t> before_us,
               std::function<void(Result<HistoryPage>)> done) override;
  void Pay(Payment payment, std::string fingerprint, StoreCallback<Result<PaymentOutcome>> done) override;
  // The point use inside the writer's transaction (PayOp runs it).
  Result<PaymentOutcome> ApplyPayment(db::sqlite::Connection& c, const Payment& p, const std::string& fingerprint);
  void Grant(GrantRequest request, std::string fingerprint, std::function<void(Result<GrantOutcome>)> done) override;

 private:
  explicit SqlitePointCardStore(db::sqlite::Database& db) : db_(db) {}
  // The writer's clock; only the writer thread calls it.
  int64_t NextTime();
  void RunGrant(GrantRequest request, std::string fingerprint, const std::function<void(Result<GrantOutcome>)>& done);
  void Purge();

  db::sqlite::Database& db_;
  int64_t clock_last_us_ = 0;

  std::mutex grant_mutex_;
  bool grants_stopped_ = false;  // Stop() was called: no new grant
  std::thread grant_thread_;

  std::unique_ptr<PeriodicTask> purger_;  // last: stopped first
};

Status CreatePointCardSchema(db::sqlite::Connection& conn);

}  // namespace hotrow::pointcard
