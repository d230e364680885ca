// The point-card contract, store keys (0.10.0): made, listed, revoked, and
// checked inside the payment's transaction on every backend.
#include <atomic>
#include <thread>
#include <vector>

#include "contract/pointcard_contract.h"
#include "contract/pointcard_helpers.h"

namespace hotrow::testing {

using pointcard::KeyUse;
using pointcard::PointCardService;
using pointcard::StoreKey;

namespace {

using MadeKey = Result<std::pair<StoreKey, std::string>>;
MadeKey MakeKey(PointCardService& s, int64_t store) {
  return Wait<MadeKey>([&](auto done) { s.CreateStoreKey(store, done); });
}
Result<std::vector<StoreKey>> Keys(PointCardService& s, int64_t store) {
  return Wait<Result<std::vector<StoreKey>>>([&](auto done) { s.ListStoreKeys(store, done); });
}
Result<StoreKey> Revoke(PointCardService& s, int64_t store, const std::string& key_id) {
  return Wait<Result<StoreKey>>([&](auto done) { s.RevokeStoreKey(store, key_id, done); });
}
// A payment with the key as a client sends it ("<keyId>.<secret>").
Result<PaymentOutcome> PayWithKey(PointCardService& s, int64_t card, int64_t store, int64_t amount,
                                  const std::string& key, std::optional<std::string> idempotency_key = std::nullopt) {
  auto use = PointCardService::ParseStoreKey(key);
  EXPECT_TRUE(use) << key;
  Payment p{card, store, amount, std::move(idempotency_key)};
  p.key = use;
  p.actor = pointcard::KeyActor(use ? use->key_id : "");
  return Wait<Result<PaymentOutcome>>([&](auto done) { s.Pay(std::move(p), done); });
}

}  // namespace

// A key is shown once, as "<keyId>.<secret>"; the list has its metadata
// only; it pays at its own store, its rows name it; another store's
// payment is 403 and a wrong secret 401, neither writing anything.
TEST_P(PointCardContract, AStoreKeyPaysAtItsStoreOnly) {
  auto made = MakeKey(*service, 3);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  const StoreKey& key = made->first;
  const std::string& shown = made->second;
  EXPECT_EQ(key.key_id.size(), pointcard::kKeyIdLength);
  EXPECT_EQ(key.store_id, 3);
  EXPECT_GT(key.created_us, 0);
  EXPECT_FALSE(key.last_used_us);
  EXPECT_EQ(shown.substr(0, key.key_id.size() + 1), key.key_id + ".");
  EXPECT_EQ(shown.size(), pointcard::kKeyIdLength + 1 + pointcard::kKeySecretLength);

  auto listed = Keys(*service, 3);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].key_id, key.key_id);
  EXPECT_EQ((*listed)[0].created_us, key.created_us);
  EXPECT_FALSE((*listed)[0].revoked_us);
  auto none = Keys(*service, 4);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(Keys(*service, kContractStores + 1).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(MakeKey(*service, kContractStores + 1).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(MakeKey(*service, int64_t{1} << 40).status().code(), ErrorCode::kNotFound);

  const int64_t balance = GetCard(*service, 9)->balance;
  auto paid = PayWithKey(*service, 9, 3, 250, shown);
  ASSERT_TRUE(paid.ok()) << paid.status().ToString();
  EXPECT_EQ(paid->row.actor, "key:" + key.key_id);
  auto rows = AllRows(*service, 9);
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows.back().actor, "key:" + key.key_id) << "the history names the key";
  auto used = Keys(*service, 3);
  ASSERT_TRUE(used.ok());
  ASSERT_TRUE((*used)[0].last_used_us) << "a used key shows when";
  EXPECT_GE(*(*used)[0].last_used_us, key.created_us);

  auto elsewhere = PayWithKey(*service, 9, 4, -1, shown);
  EXPECT_EQ(elsewhere.status().code(), ErrorCode::kForbidden);
  EXPECT_EQ(elsewhere.status().field(), "Authorization");
  std::string wrong = shown;
  wrong.back() = wrong.back() == '0' ? '1' : '0';
  EXPECT_EQ(PayWithKey(*service, 9, 3, -1, wrong).status().code(), ErrorCode::kUnauthorized);
  std::string unknown = shown;
  unknown[0] = unknown[0] == '0' ? '1' : '0';
  EXPECT_EQ(PayWithKey(*service, 9, 3, -1, unknown).status().code(), ErrorCode::kUnauthorized);
  EXPECT_EQ(GetCard(*service, 9)->balance, balance + 250) << "refused keys write nothing";
  EXPECT_EQ(AllRows(*service, 9).size(), rows.size());

  // Shapes that are no store key.
  EXPECT_FALSE(PointCardService::ParseStoreKey(""));
  EXPECT_FALSE(PointCardService::ParseStoreKey(key.key_id));
  EXPECT_FALSE(PointCardService::ParseStoreKey(shown + "0"));
  std::string upper = shown;
  for (char& c : upper) c = static_cast<char>(toupper(c));
  EXPECT_FALSE(PointCardService::ParseStoreKey(upper));
}

// A revoked key pays no more, on the next payment (it is checked in the
// payment's transaction); revoking twice answers the same; the key stays
// listed, with revokedAt. A retried payment of a revoked key is refused
// too: the key comes before the replay.
TEST_P(PointCardContract, ARevokedStoreKeyPaysNoMore) {
  auto made = MakeKey(*service, 5);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  const std::string key_id = made->first.key_id;
  ASSERT_TRUE(PayWithKey(*service, 11, 5, 100, made->second, std::string("k-1")).ok());
  auto revoked = Revoke(*service, 5, key_id);
  ASSERT_TRUE(revoked.ok()) << revoked.status().ToString();
  ASSERT_TRUE(revoked->revoked_us);
  auto again = Revoke(*service, 5, key_id);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->revoked_us, revoked->revoked_us) << "revoking is idempotent";
  EXPECT_EQ(Revoke(*service, 6, key_id).status().code(), ErrorCode::kNotFound) << "another store's key";
  EXPECT_EQ(Revoke(*service, 5, "0123456789abcdef").status().code(), ErrorCode::kNotFound);

  EXPECT_EQ(PayWithKey(*service, 11, 5, -1, made->second).status().code(), ErrorCode::kUnauthorized);
  EXPECT_EQ(PayWithKey(*service, 11, 5, 100, made->second, std::string("k-1")).status().code(),
            ErrorCode::kUnauthorized);
  auto listed = Keys(*service, 5);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].revoked_us, revoked->revoked_us);

  // A new key of the store pays; the old one stays refused.
  auto fresh = MakeKey(*service, 5);
  ASSERT_TRUE(fresh.ok());
  EXPECT_NE(fresh->first.key_id, key_id);
  EXPECT_TRUE(PayWithKey(*service, 11, 5, -1, fresh->second).ok());
  EXPECT_EQ(Keys(*service, 5)->size(), 2u);
}

// Payments with a key racing its revocation, four cards at once so that
// several are in flight when it lands: each either lands before the
// revocation or is refused (401); no row of the key is stamped at or after
// it. Each payer pays until its first refusal (or a bound), so the
// revocation lands while they pay whatever the scheduler does.
TEST_P(PointCardContract, PaymentsRacingARevocationLandBeforeItOrAreRefused) {
  auto made = MakeKey(*service, 7);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  constexpr int kPayers = 4, kEachMax = 2000;
  int64_t before = 0;
  for (int t = 0; t < kPayers; ++t) before += GetCard(*service, 12 + t)->balance;
  std::atomic<int> paid{0}, refused{0}, other{0};
  std::vector<std::thread> payers;
  for (int t = 0; t < kPayers; ++t)
    payers.emplace_back([&, t] {
      for (int i = 0; i < kEachMax; ++i) {
        auto r = PayWithKey(*service, 12 + t, 7, 1, made->second);
        if (r.ok()) {
          ++paid;
          continue;
        }
        ++(r.status().code() == ErrorCode::kUnauthorized ? refused : other);
        return;
      }
    });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (paid + refused + other < 40 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto revoked = Revoke(*service, 7, made->first.key_id);
  for (auto& t : payers) t.join();
  ASSERT_TRUE(revoked.ok()) << revoked.status().ToString();
  EXPECT_EQ(other, 0);
  EXPECT_EQ(refused, kPayers) << "every payer met the revocation";
  int64_t after_balance = 0;
  int after = 0;
  for (int t = 0; t < kPayers; ++t) {
    after_balance += GetCard(*service, 12 + t)->balance;
    for (const auto& row : AllRows(*service, 12 + t))
      if (row.actor == "key:" + made->first.key_id && row.payment_time_us >= *revoked->revoked_us) ++after;
  }
  EXPECT_EQ(after_balance, before + paid);
  EXPECT_EQ(after, 0) << "no payment of the key is stamped at or after its revocation";
}

// Any store's key issues cards (a store signs up its customers); a wrong or
// revoked key issues nothing, and a refused issue keeps no idempotency key.
TEST_P(PointCardContract, AnyStoresKeyIssuesCards) {
  auto made = MakeKey(*service, 9);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  auto issue = [&](const std::string& key, std::optional<std::string> idempotency_key) {
    pointcard::NewCard card{.region_id = 13, .idempotency_key = std::move(idempotency_key)};
    card.key = PointCardService::ParseStoreKey(key);
    EXPECT_TRUE(card.key);
    return Wait<Result<Card>>([&](auto done) { service->CreateCard(std::move(card), done); });
  };
  auto card = issue(made->second, std::string("signup-1"));
  ASSERT_TRUE(card.ok()) << card.status().ToString();
  EXPECT_EQ(card->card_id, kContractCards + 1);
  std::string wrong = made->second;
  wrong.back() = wrong.back() == '0' ? '1' : '0';
  EXPECT_EQ(issue(wrong, std::string("signup-2")).status().code(), ErrorCode::kUnauthorized);
  ASSERT_TRUE(Revoke(*service, 9, made->first.key_id).ok());
  EXPECT_EQ(issue(made->second, std::nullopt).status().code(), ErrorCode::kUnauthorized);
  auto fresh = MakeKey(*service, 10);
  ASSERT_TRUE(fresh.ok());
  auto second = issue(fresh->second, std::string("signup-2"));
  ASSERT_TRUE(second.ok()) << "the refused request kept no key: " << second.status().ToString();
  EXPECT_FALSE(second->replayed);
  EXPECT_EQ(second->card_id, card->card_id + 1) << "refused issues take no id";
  // Idempotency keys are the store key's own: another store's till that
  // numbers its sign-ups alike gets its own card, and the admin's are apart.
  auto other_till = issue(fresh->second, std::string("signup-1"));
  ASSERT_TRUE(other_till.ok()) << other_till.status().ToString();
  EXPECT_FALSE(other_till->replayed) << "store 9's signup-1 is not store 10's";
  EXPECT_EQ(other_till->card_id, second->card_id + 1);
  auto again = issue(fresh->second, std::string("signup-1"));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->replayed);
  EXPECT_EQ(again->card_id, other_till->card_id);
  auto admin = Wait<Result<Card>>([&](auto done) {
    service->CreateCard(pointcard::NewCard{.region_id = 13, .idempotency_key = "signup-1"}, done);
  });
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();
  EXPECT_FALSE(admin->replayed);
}

// A store has at most kStoreKeysMax keys that are not revoked.
TEST_P(PointCardContract, AStoreHasAtMostAHundredLiveKeys) {
  std::string first;
  for (int64_t i = 0; i < pointcard::kStoreKeysMax; ++i) {
    auto k = MakeKey(*service, 8);
    ASSERT_TRUE(k.ok()) << i << ": " << k.status().ToString();
    if (i == 0) first = k->first.key_id;
  }
  EXPECT_EQ(MakeKey(*service, 8).status().code(), ErrorCode::kConflict);
  ASSERT_TRUE(Revoke(*service, 8, first).ok());
  EXPECT_TRUE(MakeKey(*service, 8).ok()) << "a revoked key leaves room";
}

}  // namespace hotrow::testing
