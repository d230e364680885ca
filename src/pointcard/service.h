// The point-card service: input rules, the master data in memory, the
// one-grant-at-a-time gate, and the store for everything else. Thin enough
// that the HTTP handlers and the simulator call the very same functions.
//
// Stop waits for a running grant, which answers through the writer or the
// pool (both still run then): a grant is admin batch work, exempt from the
// shutdown grace period.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/auth.h"
#include "base/domain.h"
#include "pointcard/store.h"

namespace hotrow::pointcard {

class PointCardService final : public DomainService {
 public:
  explicit PointCardService(PointCardStore& store) : store_(store) {}
  ~PointCardService() override { Stop(); }

  // DomainService. Load: regions and stores into memory (they do not change
  // while serving, so there is no change feed). Stop: waits for a running
  // grant to answer, refuses later ones, then stops the store.
  std::string_view name() const override { return "point card"; }
  Status Load() override;
  size_t entries() const override { return store_region_.size(); }
  Status Follow(std::string_view) override { return Status::Ok(); }
  void Stop() override;

  const std::vector<Region>& regions() const { return regions_; }
  bool IsRegion(int64_t region_id) const;
  // The stores as Load found them (the simulator picks its stores there):
  // a region's; not_found for an unknown region. Stores made since are in
  // the database only (ListStores, FindStore).
  Result<const std::vector<StoreInfo>*> StoresOf(int64_t region_id) const;
  size_t store_count() const { return store_region_.size(); }
  // One store as Load found it; not_found for an unknown id.
  Result<const StoreInfo*> Store(int64_t store_id) const;

  // POST /api/v1/stores (admin; routes.cc checks the token): name 1-100 and
  // address 1-200 code points on one line, zipcode 7 digits, a known
  // region, latitude -90..90 and longitude -180..180. The store and
  // whether it was replayed.
  void CreateStore(NewStore store, std::function<void(Result<std::pair<StoreInfo, bool>>)> done);
  // From the database: a store made on another instance is there at once.
  void FindStore(int64_t store_id, std::function<void(Result<StoreInfo>)> done);
  // A region's stores, from the database; not_found for an unknown region.
  void ListStores(int64_t region_id, std::function<void(Result<std::vector<StoreInfo>>)> done);

  // POST /api/v1/stores/{id}/keys (admin): a new key, "<keyId>.<secret>",
  // its secret from the OS CSPRNG; only its SHA-256 is kept, so the answer
  // is the one time the key is seen. not_found for an unknown store.
  void CreateStoreKey(int64_t store_id, std::function<void(Result<std::pair<StoreKey, std::string>>)> done);
  void ListStoreKeys(int64_t store_id, std::function<void(Result<std::vector<StoreKey>>)> done);
  // Idempotent; not_found when the store has no such key.
  void RevokeStoreKey(int64_t store_id, std::string key_id, std::function<void(Result<StoreKey>)> done);
  // "Bearer <keyId>.<secret>" as a KeyUse (the secret hashed), or nullopt
  // when `bearer` does not have a store key's shape.
  static std::optional<KeyUse> ParseStoreKey(std::string_view bearer);

  void GetCard(int64_t card_id, Callback<Result<Card>> done);
  // as_of_us at least the settle time in the past (invalid_field "asOf"
  // otherwise): a write stamped before a later time may still be committing
  // (a PostgreSQL payment takes its time before its COMMIT), so an answer
  // for it could change. serve sets the settle time to its handler timeout,
  // the longest a write's request lives.
  void BalanceAt(int64_t card_id, int64_t as_of_us, std::function<void(Result<BalanceAsOf>)> done);
  static constexpr int64_t kAsOfSettleDefaultUs = 10'000'000;
  void set_as_of_settle_us(int64_t us) { as_of_settle_us_ = us; }
  // POST /api/v1/cards: regionId a known region (invalid_field), externalRef
  // an identifier as a payment's reference is (1-64 visible code points, no
  // space).
  void CreateCard(NewCard card, std::function<void(Result<Card>)> done);
  // GET /api/v1/cards?externalRef=: the card, or nullopt.
  void FindCard(std::string external_ref, std::function<void(Result<std::optional<Card>>)> done);
  // POST /api/v1/cards/{id}/close (admin; routes.cc checks the token).
  void CloseCard(CardClose close, std::function<void(Result<Card>)> done);
  // limit 1-100.
  void History(int64_t card_id, int64_t limit, std::optional<int64_t> before_us,
               std::function<void(Result<HistoryPage>)> done);
  // amount != 0 and |amount| <= 1,000,000; the store must exist (not_found,
  // decided in the store's transaction).
  void Pay(Payment payment, Callback<Result<PaymentOutcome>> done);
  // amount, when given, 1 to 1,000,000; an Idempotency-Key is required
  // (invalid_field Idempotency-Key without one: a refund retried without
  // one could pay back twice). The rest is the store's (store.h).
  void Refund(RefundRequest refund, Callback<Result<PaymentOutcome>> done);
  // Holds: amount -1,000,000..-1, expiresInSeconds 1..604,800, a store id
  // a store can have; the rest is the store's (store.h). Keys scoped to the
  // card with its payments' ("hold", "capture", "void" keep the
  // fingerprints apart).
  void CreateHold(NewHold hold, std::function<void(Result<HoldOutcome>)> done);
  // A capture's amount, when given, -1,000,000..-1.
  void EndHold(HoldAction action, std::function<void(Result<HoldOutcome>)> done);
  // limit 1-100.
  void ListHolds(int64_t card_id, int64_t limit, std::optional<int64_t> before_id,
                 std::function<void(Result<HoldPage>)> done);
  // limit 1-100.
  void ListLots(int64_t card_id, int64_t limit, std::optional<int64_t> after_id,
                std::function<void(Result<LotPage>)> done);
  // from < to <= now, rate 1-100; grant_in_progress while one runs.
  void Grant(GrantRequest request, std::function<void(Result<GrantOutcome>)> done);
  // not_found for an unknown grant.
  void GetGrant(int64_t grant_id, std::function<void(Result<GrantInfo>)> done);

 private:
  PointCardStore& store_;
  std::vector<Region> regions_;
  std::unordered_map<int64_t, std::vector<StoreInfo>> stores_by_region_;
  std::unordered_map<int64_t, int64_t> store_region_;
  int64_t as_of_settle_us_ = kAsOfSettleDefaultUs;

  std::mutex grant_mutex_;
  std::condition_variable grant_finished_;
  bool grant_running_ = false;   // guarded by grant_mutex_
  bool grants_stopped_ = false;  // guarded by grant_mutex_
};

}  // namespace hotrow::pointcard
