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
//   BEGIN ISOLATION LEVEL SERIALIZABLE;
//   LOCK TABLE S_ACCOUNT IN EXCLUSIVE MODE;   -- before the first query
//   SELECT * FROM hotrow_grant(from, to, rate, key, fingerprint);
//   COMMIT;
// PostgreSQL's reference run failed every grant: the batch's SSI read set
// (the whole period of H_TRANSACTION and every balance) overlapped the
// online transactions' writes, so it became the pivot of a dangerous
// structure and was cancelled. Here the lock orders the two instead:
//   - EXCLUSIVE conflicts with the ROW EXCLUSIVE every point use takes
//     first, so the grant waits for the point uses in flight to commit, and
//     new point uses wait for the grant -- at their LOCK, before their
//     snapshot is taken. Plain reads (ACCESS SHARE) are not blocked.
//   - A SERIALIZABLE transaction takes its snapshot at its first query, not
//     at BEGIN, and LOCK is not a query: the grant's snapshot is taken after
//     the lock is granted, so it already includes every point use that
//     committed before it, and no point use runs concurrently with it.
// With no concurrent read-write transaction there is no rw-conflict for SSI
// to see: the grant cannot be chosen as a pivot, and it is serializable
// (equivalent to running alone between two point uses). It is atomic as one
// transaction. What waits: point uses, for the grant's whole transaction
// (query and update run under the lock here, unlike the embedded store's
// barrier protocol, because PostgreSQL's timestamps are not assigned in
// commit order); reads never wait. Measured in docs/benchmarks.md.
#pragma once

#include <condition_variable>
#include <mutex>
#include <thread>

#include "base/periodic_task.h"
#include "db/postgres.h"
#include "pointcard/check.h"
#include "pointcard/seed.h"
#include "pointcard/store.h"

namespace hotrow::pointcard {

class PostgresPointCardStore final : public PointCardStore {
 public:
  // Creates the schema and functions if needed.
  static Result<std::unique_ptr<PostgresPointCardStore>> Open(db::pg::Pool& pool);
  ~PostgresPointCardStore() override;
  void Stop() override;

  Status LoadRegions(std::vector<Region>* out) override;
  Status LoadStores(std::vector<StoreInfo>* out) override;
  void GetCard(int64_t card_id, StoreCallback<Result<Card>> done) override;
  void GetGrant(int64_t grant_id, std::function<void(Result<GrantInfo>)> done) override;
  void History(int64_t card_id, int64_t limit, std::optional<int64_t> before_us,
               std::function<void(Result<HistoryPage>)> done) override;
  void Pay(Payment payment, std::string fingerprint, StoreCallback<Result<PaymentOutcome>> done) override;
  void Grant(GrantRequest request, std::string fingerprint, std::function<void(Result<GrantOutcome>)> done) override;

 private:
  explicit PostgresPointCardStore(db::pg::Pool& pool) : pool_(pool) {}
  void Purge();

  db::pg::Pool& pool_;
  std::mutex grant_mutex_;
  bool grant_running_ = false;
  bool grants_stopped_ = false;             // Stop() was called: no new grant
  std::condition_variable grant_finished_;  // the destructor waits for a running grant
  std::unique_ptr<PeriodicTask> purger_;    // last: stopped first
};

Status CreatePostgresPointCardSchema(db::pg::Connection& conn);

// Fills empty point-card tables with the generator's data (seed.h) through
// COPY; conflict when S_ACCOUNT has rows.
Status SeedPostgresPointCard(db::pg::Connection& conn, const SeedOptions& options,
                             const std::function<void(int64_t, int64_t)>& progress);

// The invariants of check.h, as SQL on one REPEATABLE READ snapshot.
Result<CheckReport> CheckPostgresInvariants(db::pg::Connection& conn);

}  // namespace hotrow::pointcard
