// The point card on the embedded SQLite database.
//
// Online point use
// ----------------
// One WriteOp on the group-commit writer: read the balance and the card's
// applied grant credit, refuse if the payment does not fit, fold the credit
// (step 5 below), write BALANCE and LAST_UPDATE, append the history row,
// record the idempotency key -- all in the op's savepoint of the batch
// transaction. All writes of the database go through the one writer thread,
// in one order, so every write transaction is serializable by construction:
// the batch order is the serial order. PAYMENT_TIME comes from the writer's
// clock (max(wall clock, previous + 1 us)), so it strictly increases.
//
// Point grant: the protocol
// -------------------------
// A grant is atomic and serializable with the point uses, and stalls none
// of them: no step holds the writer for longer than one small op.
//
//   1. Begin. One WriteOp takes a time T_b from the writer's clock and
//      records the grant in P_GRANT as 'staging'. T_b >= the wall clock >=
//      `to` (the period must have ended). Every op that took a time before
//      it committed in an earlier batch or in its own; every later op takes
//      a time > T_b >= `to`. So once it has committed, the rows of [from, to)
//      are complete and can never change again.
//   2. Query, outside the writer, on a read snapshot taken after the begin
//      (WAL readers neither block the writer nor wait for it): the charges
//      (KIND 'charge') in [from, to) summed per card; each bonus is
//      floor(sum * rate / 100).
//   3. Stage, in writer ops of options.stage_chunk cards each: the bonuses go into
//      P_GRANT_CREDIT, away from S_ACCOUNT. Nobody reads them yet: every
//      reader of credit joins P_GRANT on STATE = 'applied'.
//   4. Apply: one small WriteOp decides the overlap rule, waits (outside
//      the writer) for the previous grant's fold to end, and turns the grant
//      'applied'. From that commit on, every card's balance is its
//      S_ACCOUNT.BALANCE plus its applied credit. The 201 answers here.
//   5. Fold, in the background, in writer ops of options.fold_chunk cards: write each
//      credit into the card (BALANCE, LAST_UPDATE, a history row with
//      STORE_ID 0 and KIND 'grant' at the chunk's time) and delete it; the
//      last chunk marks the grant 'folded'. A point use on a card first
//      folds that card's applied credit itself (the grant row at one time,
//      then its own row at a later one), in its own op.
//
// Why it is serializable: the grant reads the period's history (fixed after
// step 1, so reading it at step 2 equals reading it at step 4) and adds to
// balances; it writes nothing a point use reads until step 4, and from
// step 4 on every reader and writer sees the whole credit. So it behaves as
// if it ran entirely at its apply, between two batches of the writer's
// serial order. Folding changes where a credit is kept, never the sum a
// reader sees: each fold op moves credit from P_GRANT_CREDIT into
// S_ACCOUNT and H_TRANSACTION in one transaction, and a write to the card
// that moves it first (so nothing adds it twice). Why it is atomic: step 4
// is one commit; before it nothing of the grant is visible, and a crash
// before it leaves staged rows of a 'staging' grant, which every reader
// ignores and Open deletes. After it, a crash leaves an 'applied' grant
// whose fold resumes at the next start. docs/pointcard.md has the
// argument in full and the failpoint tests for each phase.
//
// What waits for what: the grant waits for one batch per step; point uses
// wait for the chunks in their batch (at most two staging chunks and one
// fold chunk: milliseconds); reads never wait.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include "base/periodic_task.h"
#include "db/sqlite_database.h"
#include "pointcard/store.h"

namespace hotrow::pointcard {

struct SqlitePointCardOptions {
  // Cards per staging and per fold op: each holds the writer for a few ms
  // at these sizes (docs/pointcard.md); the tests use small ones to cross
  // chunk boundaries on small data.
  int64_t stage_chunk = 4096;  // two in flight (kStageInFlight)
  int64_t fold_chunk = 1024;
};

class SqlitePointCardStore final : public PointCardStore {
 public:
  // Creates or migrates the schema, reads the clock's starting point,
  // deletes what grants that never applied staged, and starts the fold (it
  // resumes an applied grant's). Must run before db.writer().Start().
  static Result<std::unique_ptr<SqlitePointCardStore>> Open(db::sqlite::Database& db,
                                                            SqlitePointCardOptions options = {});
  ~SqlitePointCardStore() override;
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
  void BalanceAt(int64_t card_id, int64_t as_of_us, std::function<void(Result<BalanceAsOf>)> done) override;
  void History(int64_t card_id, int64_t limit, std::optional<int64_t> before_us,
               std::function<void(Result<HistoryPage>)> done) override;
  void Pay(Payment payment, std::string fingerprint, StoreCallback<Result<PaymentOutcome>> done) override;
  void Refund(RefundRequest refund, std::string fingerprint, StoreCallback<Result<PaymentOutcome>> done) override;
  // The point use inside the writer's transaction (PayOp runs it).
  Result<PaymentOutcome> ApplyPayment(db::sqlite::Connection& c, const Payment& p, const std::string& fingerprint);
  // The refund inside the writer's transaction (sqlite_refunds.cc; RefundOp).
  Result<PaymentOutcome> ApplyRefund(db::sqlite::Connection& c, const RefundRequest& r, const std::string& fingerprint);
  void Grant(GrantRequest request, std::string fingerprint, std::function<void(Result<GrantOutcome>)> done) override;
  void GetGrant(int64_t grant_id, std::function<void(Result<GrantInfo>)> done) override;
  void CreateHold(NewHold hold, std::string fingerprint, std::function<void(Result<HoldOutcome>)> done) override;
  void EndHold(HoldAction action, std::string fingerprint, std::function<void(Result<HoldOutcome>)> done) override;
  void ListHolds(int64_t card_id, int64_t limit, std::optional<int64_t> before_id,
                 std::function<void(Result<HoldPage>)> done) override;
  void ListLots(int64_t card_id, int64_t limit, std::optional<int64_t> after_id,
                std::function<void(Result<LotPage>)> done) override;
  // A hold's writes inside the writer's transaction (sqlite_holds.cc).
  Result<HoldOutcome> ApplyCreateHold(db::sqlite::Connection& c, const NewHold& h, const std::string& fingerprint);
  Result<HoldOutcome> ApplyEndHold(db::sqlite::Connection& c, const HoldAction& a, const std::string& fingerprint);

  static constexpr size_t kStageInFlight = 2;
  // Lots due the sweep looks at per op, settling their cards (it chains ops
  // while more may be due).
  static constexpr int64_t kSweepCardsMax = 256;
  // How long a grant waits at its apply for the previous grant's fold.
  static constexpr std::chrono::seconds kFoldWaitMax{60};

 private:
  SqlitePointCardStore(db::sqlite::Database& db, SqlitePointCardOptions options) : db_(db), options_(options) {}
  // The writer's clock; only the writer thread calls it.
  int64_t NextTime();
  // The time a read counts open holds at: now, but never before the
  // writer's last decision (a clock stepped back does not reopen a hold a
  // payment found expired). Any thread.
  int64_t ReadTime() const { return std::max(NowUs(), clock_published_us_.load(std::memory_order_relaxed) + 1); }
  void RunGrant(GrantRequest request, std::string fingerprint, const std::function<void(Result<GrantOutcome>)>& done);
  // Deletes a grant that never applied: its staged credits, then its row.
  void Discard(int64_t grant_id);
  // The card's applied credit written into it (writer thread, inside the
  // op's transaction): its new balance.
  Result<int64_t> FoldCard(db::sqlite::Connection& c, int64_t card_id, int64_t balance);
  // The card's applied, unfolded grant credit (0 when no grant can be
  // applied), which a write folds first (FoldCard).
  Result<int64_t> PendingCredit(db::sqlite::Connection& c, int64_t card_id);
  // Writes `row` (card, store, amount, its new balance, kind, actor, texts,
  // refundOf) at the writer's next time with the next TRANSACTION_ID, and
  // the card's balance and LAST_UPDATE: sets the row's time and id.
  Status AppendRow(db::sqlite::Connection& c, HistoryRow& row);
  // Lots (sqlite_lots.cc), on the writer thread inside the op's
  // transaction; `balance` is the card's BALANCE, kept up to date as rows
  // are written.
  //
  // Before a write to the card decides at t: its pending grant credit
  // folded (an expiring grant's becomes its lot), its open holds past
  // their expiry stamped (what they reserve released), and its lots due at
  // t written out: one "expiry" row each of what no open hold reserves,
  // EXPIRED_TIME set in the same transaction. Without lots (never one
  // made), it stamps holds only, as 0.12.0 did.
  Status SettleCard(db::sqlite::Connection& c, int64_t card_id, int64_t t, int64_t& balance);
  // A payment's `points` taken from the card's free lot parts in order
  // (P_LOT_USE of its row); the rest is never-expiring.
  Status TakeFromLots(db::sqlite::Connection& c, int64_t card_id, int64_t points, int64_t transaction_id);
  // A new hold's `points` reserved in the same order (P_LOT_HOLD, with the
  // hold's expiry for the sweep).
  Status ReserveLots(db::sqlite::Connection& c, int64_t card_id, int64_t hold_id, int64_t points, int64_t expires_us);
  // A hold's end: `taken` of what it reserved taken by its capture row
  // (0: a void or an expiry), the rest released; released from a lot
  // written out already, it leaves in an expiry row.
  Status EndReservations(db::sqlite::Connection& c, int64_t card_id, int64_t hold_id, int64_t taken,
                         int64_t transaction_id, int64_t& balance);
  // A refund's `amount` given back to what its original took: the
  // never-expiring part first, then the lots, latest-expiring first; a lot
  // written out already takes it and lets it leave in an expiry row.
  Status RestoreLots(db::sqlite::Connection& c, int64_t card_id, int64_t original_id, int64_t original_amount,
                     int64_t refunded_before, int64_t amount, int64_t refund_id, int64_t& balance);
  // One expiry row of `points` from the lot (its first sets EXPIRY_ID).
  Status LeaveLot(db::sqlite::Connection& c, int64_t card_id, int64_t lot_id, int64_t points, int64_t& balance);
  // The sweep: settles cards whose lots are due, or whose holds past their
  // expiry still reserve part of a lot, kSweepCardsMax of each per op.
  void SweepLots();
  void FoldLoop();
  struct FoldRun;  // one grant's fold in progress (sqlite_grant.cc)
  struct FoldChunk {
    int64_t last_card = 0;
    int64_t cards = 0;
    bool finished = false;
    uint64_t epoch = 0;  // credit_epoch_ when the chunk ran
  };
  Result<FoldChunk> ApplyFoldChunk(db::sqlite::Connection& c, FoldRun& run);
  // Its answer: true, folded; false, stopped between chunks; or the error
  // that paused it.
  using FoldDone = std::shared_ptr<std::promise<Result<bool>>>;
  void SubmitFoldChunk(const std::shared_ptr<FoldRun>& run, const FoldDone& done);
  void WakeFolder();
  // Until the folder has served every request (no grant is applied and
  // unfolded); unavailable past kFoldWaitMax, or when it would have to wait
  // while stopping.
  Status WaitForFold();
  void Purge();

  db::sqlite::Database& db_;
  const SqlitePointCardOptions options_;
  int64_t clock_last_us_ = 0;
  std::atomic<int64_t> clock_published_us_{0};  // clock_last_us_, for readers (ReadTime)
  // Writer thread only: an applied grant may have credit left. Set when one
  // applies (and at Open), cleared after the commit that folded it unless
  // another applied meanwhile (credit_epoch_ counts the applies).
  bool credit_possible_ = false;
  uint64_t credit_epoch_ = 0;
  // Writer thread only: some hold may be open (set at Open when one is, and
  // by every new hold; never cleared). False: a payment reads no P_HOLD.
  bool holds_possible_ = false;
  // Writer thread only: some lot may exist or be folded in (set at Open
  // when one does, and by every expiring grant's apply; never cleared).
  // False: writes touch no P_LOT, as before 0.13.0.
  bool lots_possible_ = false;
  void LotsPossible() {
    lots_possible_ = true;
    lots_seen_.store(true);
  }
  // lots_possible_ for the sweep's timer: no lot, no sweep op (an idle
  // server writes nothing, and a request allocates nothing on its behalf).
  std::atomic<bool> lots_seen_{false};
  // The earliest time a lot, or a hold's reservation of one, may fall due
  // (INT64_MAX: none): the timer sweeps only from then. Written on the
  // writer thread only: each sweep op sets it from the tables, and every
  // op that makes a lot or a reservation lowers it (DueAt).
  std::atomic<int64_t> next_due_us_{INT64_MAX};
  void DueAt(int64_t t) {
    if (t < next_due_us_.load()) next_due_us_.store(t);
  }
  // One sweep at a time: a chain of ops runs until no full batch is due;
  // the timer starts one only when none runs, and Stop waits for it (its
  // ops use this store).
  void StartSweep();
  void EndSweep();
  std::mutex sweep_mutex_;
  std::condition_variable sweep_cv_;
  bool sweeping_ = false;       // guarded by sweep_mutex_
  bool sweep_stopped_ = false;  // guarded by sweep_mutex_

  std::mutex grant_mutex_;
  bool grants_stopped_ = false;  // Stop() was called: no new grant
  std::thread grant_thread_;

  std::mutex fold_mutex_;
  std::condition_variable fold_cv_;
  // Guarded by fold_mutex_. Each apply (and Open, for a grant a crash left
  // applied) adds a request; the folder serves the requests it has seen
  // once it finds no applied grant left. Equal: nothing to fold.
  uint64_t fold_requests_ = 0;
  uint64_t fold_served_ = 0;
  bool fold_stopped_ = false;
  std::thread folder_;

  std::unique_ptr<PeriodicTask> sweeper_;  // lots due, every kSweepInterval
  std::unique_ptr<PeriodicTask> purger_;   // last: stopped first
};

// Creates the tables as v0.1.0 made them, then migrates them (the point
// card file's own steps).
Status CreatePointCardSchema(db::sqlite::Connection& conn);
// The tables alone, as v0.1.0 made them (the shape releases up to 0.4.0
// kept in the main file: pointcard/sqlite_file.h copies into it).
Status CreatePointCardTables(db::sqlite::Connection& conn);
// The largest H_TRANSACTION.TRANSACTION_ID (0 for none): a write numbers
// its rows after it, inside its transaction (an index seek; the one writer
// serialises every write, so no one takes the same number).
Result<int64_t> LastTransactionId(db::sqlite::Connection& conn);
// Rows a release before 0.8.0 wrote into a file this one had migrated (a
// downgrade, then this release again): numbered after every other row, in
// one transaction (Open runs it).
Status NumberNewRows(db::sqlite::Connection& conn);
// not_found unless the store exists (a primary-key lookup in M_STORE, in the
// caller's transaction: a store made a moment ago counts).
Status StoreExists(db::sqlite::Connection& c, int64_t store_id);
// Checks a write's store key inside its transaction (the writer's): the
// key's store, or BadStoreKey; its LAST_USED_TIME moves to now_us when it is
// kKeyUseResolutionUs old or unset.
Result<int64_t> CheckStoreKey(db::sqlite::Connection& c, const KeyUse& key, int64_t now_us);
// Begins a read transaction on a reader and checks that the card exists
// (not_found): what follows reads the same snapshot (a history or holds
// page).
Status BeginCardRead(db::sqlite::Connection& c, int64_t card_id);
// The card's open holds past their expiry at t_us stamped expired (at their
// EXPIRES_TIME), so no later decision finds them open (sqlite_holds.cc).
// SettleCard releases what they reserve of lots first.
Status StampExpiredHolds(db::sqlite::Connection& c, int64_t card_id, int64_t t_us);
// |amount| of the card's open holds unexpired at t_us (sqlite_holds.cc).
Result<int64_t> HeldAt(db::sqlite::Connection& c, int64_t card_id, int64_t t_us);
// The stored outcome of an earlier point use or refund on the card with
// this key (P_IDEMPOTENCY), if any; idempotency_mismatch for another
// fingerprint.
Result<std::optional<PaymentOutcome>> FindCardKey(db::sqlite::Connection& c, int64_t card_id, const std::string& key,
                                                  const std::string& fp);
// Keeps the outcome with its key: a retry gets the same answer.
Status RememberCardKey(db::sqlite::Connection& c, int64_t card_id, const std::string& key, const std::string& fp,
                       const PaymentOutcome& o, int64_t now_us);
// What an earlier request on `route` ("cards", "stores") with this key made
// (P_REQUEST_KEY.RESULT_ID: an id, or 0 for a refusal kept with the key),
// if any; idempotency_mismatch for another fingerprint.
Result<std::optional<int64_t>> FindRequestKey(db::sqlite::Connection& c, std::string_view route, const std::string& key,
                                              const std::string& fp);

}  // namespace hotrow::pointcard
