// Where cards live for good. The service (service.h) validates input,
// holds the master data (regions, stores) in memory and lets one grant run
// at a time; the store keeps cards and history and runs the two
// SERIALIZABLE transactions of the reference: the online point use and the
// point-grant batch. Its lifecycle is every store's (leaderboard/store.h);
// nothing here changes while serving, so it has no change feed.
//
// Every call is asynchronous: `done` runs exactly once, inline (reads served
// from a local snapshot) or later on a store thread (writes, after their
// commit). A backend with real concurrency control (PostgreSQL) retries
// serialization failures inside the store, so callers never see them.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/inline_function.h"
#include "pointcard/model.h"

namespace hotrow::pointcard {

class PointCardStore {
 public:
  virtual ~PointCardStore() = default;

  // Master data, for the service's in-memory copy.
  virtual Status LoadRegions(std::vector<Region>* out) = 0;
  virtual Status LoadStores(std::vector<StoreInfo>* out) = 0;

  // A new store with the next id (one past the largest), in one
  // transaction with its key (P_REQUEST_KEY, route "stores"): a key seen
  // before answers the store it made (replayed), or idempotency_mismatch.
  virtual void CreateStore(NewStore store, std::string fingerprint,
                           std::function<void(Result<std::pair<StoreInfo, bool>>)> done) = 0;
  // Read from the database, so a store another instance made is there at
  // once. not_found for an unknown store.
  virtual void GetStore(int64_t store_id, std::function<void(Result<StoreInfo>)> done) = 0;
  // A region's stores in id order (the region is the caller's to check).
  virtual void ListStores(int64_t region_id, std::function<void(Result<std::vector<StoreInfo>>)> done) = 0;

  // Store keys (M_STORE_KEY). A new key of the store, its secret's SHA-256
  // (hex) kept: not_found for an unknown store, conflict when it has
  // kStoreKeysMax keys not revoked.
  virtual void CreateStoreKey(StoreKey key, std::string secret_sha256, std::function<void(Result<StoreKey>)> done) = 0;
  // The store's keys, revoked ones too, oldest first; not_found for an
  // unknown store.
  virtual void ListStoreKeys(int64_t store_id, std::function<void(Result<std::vector<StoreKey>>)> done) = 0;
  // Revokes the key (idempotent: a revoked key answers as it is); not_found
  // when the store has no such key.
  virtual void RevokeStoreKey(int64_t store_id, std::string key_id, std::function<void(Result<StoreKey>)> done) = 0;

  // not_found for an unknown card.
  virtual void GetCard(int64_t card_id, StoreCallback<Result<Card>> done) = 0;
  // A new card, balance 0, with the next id (one past the largest on
  // SQLite; a sequence on PostgreSQL), in one transaction with its key
  // (P_REQUEST_KEY, route "cards"): a key seen before answers the card it
  // made (replayed), or idempotency_mismatch for another fingerprint.
  // already_exists (field externalRef) for an external reference in use.
  virtual void CreateCard(NewCard card, std::string fingerprint, std::function<void(Result<Card>)> done) = 0;
  // The card with this external reference, if any.
  virtual void FindCard(std::string external_ref, std::function<void(Result<std::optional<Card>>)> done) = 0;
  // Closes the card (idempotent: a closed card answers as it is), under its
  // lock, at a time after its newest row. A grant still staging gives it
  // nothing: the grant's apply drops the staged credit of every card closed
  // by then (docs/pointcard.md#closing-a-card). With a key (scoped to the
  // card, as a payment's) the close is remembered; not_found for an unknown
  // card.
  virtual void CloseCard(CardClose close, std::string fingerprint, std::function<void(Result<Card>)> done) = 0;
  // The card's balance at `as_of_us` from its history: the BALANCE of its
  // newest row with PAYMENT_TIME <= as_of_us, 0 when none; one snapshot
  // with the card's existence (not_found).
  virtual void BalanceAt(int64_t card_id, int64_t as_of_us, std::function<void(Result<BalanceAsOf>)> done) = 0;
  // Rows newest first, at most `limit`, older than `before_us` when given.
  virtual void History(int64_t card_id, int64_t limit, std::optional<int64_t> before_us,
                       std::function<void(Result<HistoryPage>)> done) = 0;

  // One point use, one SERIALIZABLE transaction: check the store key, if
  // one came (BadStoreKey, KeyOfAnotherStore; a used key's LAST_USED_TIME
  // moves on), then the store (not_found:
  // a store made on another instance counts at once), read the balance, write
  // BALANCE + amount and LAST_UPDATE, append the history row. A payment
  // larger than the balance is refused and writes nothing (except, with an
  // idempotency key, the refusal itself, so a retry gets the same answer).
  // `fingerprint` identifies the request for idempotency: the same key with
  // another fingerprint is idempotency_mismatch. not_found for an unknown
  // card.
  virtual void Pay(Payment payment, std::string fingerprint, StoreCallback<Result<PaymentOutcome>> done) = 0;

  // A refund of one of the card's rows, one SERIALIZABLE transaction under
  // the card's lock (so two refunds of one payment are decided one after
  // the other): the store key (BadStoreKey), the card and the row
  // (not_found when the card has no row with that id), a grant's row
  // (not_refundable), the key's store against the row's
  // (KeyOfAnotherStore), its kind (not_refundable for any but payment),
  // the idempotency key (a replay answers the
  // row it made; another fingerprint is idempotency_mismatch), then
  // refund_exceeds_original past what is left of it. A closed card takes
  // refunds. Writes +amount as a "refund" row with REFUND_OF, after the
  // card's pending grant credit, as a payment does. A refusal keeps no key:
  // what is left of a payment only shrinks, so a retry is refused again
  // (a 404's retry would refund the row, should one with that id appear).
  virtual void Refund(RefundRequest refund, std::string fingerprint, StoreCallback<Result<PaymentOutcome>> done) = 0;

  // Holds (model.h, Hold), each one SERIALIZABLE transaction under the
  // card's lock, at the card's time t (one that only moves forward per
  // card). A new hold: the store key (BadStoreKey, KeyOfAnotherStore), the
  // store (not_found), the idempotency key (a replay answers the hold as it
  // is now), the card (not_found, card_closed), then |amount| <= available
  // at t (insufficient_balance, nothing written and no key kept). The
  // card's pending grant credit counts in its balance.
  virtual void CreateHold(NewHold hold, std::string fingerprint, std::function<void(Result<HoldOutcome>)> done) = 0;
  // A capture or void: the store key, the card and the hold (not_found),
  // the key's store against the hold's (KeyOfAnotherStore), the
  // idempotency key (a replay answers the hold as it is now), the hold's
  // status (hold_not_open), its expiry (t >= EXPIRES_TIME: hold_expired,
  // the hold stamped expired and no key kept), then a capture's amount
  // (hold.amount .. -1) and balance. A capture writes one "capture" row at
  // the hold's store (its pending grant credit folded first) and names it
  // in the hold. A closed card still captures and voids.
  virtual void EndHold(HoldAction action, std::string fingerprint, std::function<void(Result<HoldOutcome>)> done) = 0;
  // The card's holds newest first, at most `limit`, with ids below
  // `before_id` when given; not_found for an unknown card.
  virtual void ListHolds(int64_t card_id, int64_t limit, std::optional<int64_t> before_id,
                         std::function<void(Result<HoldPage>)> done) = 0;
  // The card's lots with points left at the read's time, in the order
  // payments take them, at most `limit`, after the lot `after_id` when
  // given (an applied, unfolded expiring credit, without an id yet, on the
  // first page), and its never-expiring rest; not_found for an unknown
  // card. One snapshot.
  virtual void ListLots(int64_t card_id, int64_t limit, std::optional<int64_t> after_id,
                        std::function<void(Result<LotPage>)> done) = 0;

  // The point grant: for every card, floor(sum of positive amounts from
  // stores > 0 in [from, to) * rate / 100) more points and one history row
  // with STORE_ID 0. Atomic, and serializable with the online point uses
  // that run meanwhile; it never fails because of them. One at a time: the
  // service's gate admits the next only after this one's `done` ran.
  virtual void Grant(GrantRequest request, std::string fingerprint, std::function<void(Result<GrantOutcome>)> done) = 0;

  // An applied grant; not_found for an unknown id (or one that never
  // applied).
  virtual void GetGrant(int64_t grant_id, std::function<void(Result<GrantInfo>)> done) = 0;

  // Waits for a running grant to answer and stops the background work;
  // later grants answer unavailable. Called at shutdown while the writer or
  // pool and the event loops still run (a grant answers through both);
  // idempotent, and the destructor calls it too.
  virtual void Stop() = 0;
};

}  // namespace hotrow::pointcard
