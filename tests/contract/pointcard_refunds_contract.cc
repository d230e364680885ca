// The point-card contract, refunds (0.11.0): a payment is refunded in parts
// up to what it took, decided under the card's lock, on every backend.
#include <atomic>
#include <thread>
#include <vector>

#include "contract/pointcard_contract.h"
#include "contract/pointcard_helpers.h"

namespace hotrow::testing {

using pointcard::CardClose;
using pointcard::KeyUse;
using pointcard::PointCardService;
using pointcard::RefundRequest;
using pointcard::StoreKey;

namespace {

Result<PaymentOutcome> Refund(PointCardService& s, RefundRequest r) {
  return Wait<Result<PaymentOutcome>>([&](auto done) { s.Refund(std::move(r), done); });
}
Result<PaymentOutcome> Refund(PointCardService& s, int64_t card, int64_t transaction, std::optional<int64_t> amount,
                              const std::string& key) {
  return Refund(
      s, RefundRequest{.card_id = card, .transaction_id = transaction, .amount = amount, .idempotency_key = key});
}
// A card's balance and row count: what a refused refund must leave alone.
std::pair<int64_t, size_t> Footprint(PointCardService& s, int64_t card) {
  return {GetCard(s, card)->balance, AllRows(s, card).size()};
}

}  // namespace

// Refunds return a payment in parts, each a row of its own (kind refund,
// the payment's store, refundOf), until what it took is back; a key
// replays its refund and refuses another request.
TEST_P(PointCardContract, APaymentIsRefundedInPartsUpToWhatItTook) {
  ASSERT_TRUE(Pay(*service, 30, 2, 5000).ok());
  auto paid = Pay(*service, 30, 4, -500);
  ASSERT_TRUE(paid.ok()) << paid.status().ToString();
  const int64_t tx = paid->row.transaction_id;
  const int64_t after_payment = paid->row.balance;

  auto part = Refund(*service, 30, tx, 200, "refund-1");
  ASSERT_TRUE(part.ok()) << part.status().ToString();
  EXPECT_FALSE(part->replayed);
  EXPECT_EQ(part->row.kind, "refund");
  EXPECT_EQ(part->row.amount, 200);
  EXPECT_EQ(part->row.store_id, 4) << "the payment's store";
  EXPECT_EQ(part->row.refund_of, tx);
  EXPECT_EQ(part->row.balance, after_payment + 200);
  EXPECT_GT(part->row.transaction_id, tx);
  EXPECT_GT(part->row.payment_time_us, paid->row.payment_time_us);
  EXPECT_EQ(part->row.actor, pointcard::kActorAnonymous);
  EXPECT_EQ(GetCard(*service, 30)->balance, after_payment + 200);

  auto again = Refund(*service, 30, tx, 200, "refund-1");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->replayed);
  EXPECT_EQ(again->row.transaction_id, part->row.transaction_id);
  EXPECT_EQ(again->row.refund_of, tx);
  EXPECT_EQ(again->row.balance, part->row.balance);
  EXPECT_EQ(Refund(*service, 30, tx, 201, "refund-1").status().code(), ErrorCode::kIdempotencyMismatch);
  EXPECT_EQ(Refund(*service, 30, tx, std::nullopt, "refund-1").status().code(), ErrorCode::kIdempotencyMismatch);
  // A payment's key on the card is another request.
  ASSERT_TRUE(Pay(*service, 30, 4, -1, std::string("pay-key")).ok());
  EXPECT_EQ(Refund(*service, 30, tx, 1, "pay-key").status().code(), ErrorCode::kIdempotencyMismatch);

  auto too_much = Refund(*service, 30, tx, 301, "refund-2");
  EXPECT_EQ(too_much.status().code(), ErrorCode::kRefundExceedsOriginal) << too_much.status().ToString();
  EXPECT_EQ(too_much.status().field(), "amount");
  EXPECT_NE(too_much.status().message().find("300"), std::string::npos) << too_much.status().message();
  auto rest = Refund(*service, 30, tx, std::nullopt, "refund-2");
  ASSERT_TRUE(rest.ok()) << rest.status().ToString() << " (a refused refund keeps no key)";
  EXPECT_EQ(rest->row.amount, 300) << "all that was left";
  auto none_left = Refund(*service, 30, tx, std::nullopt, "refund-3");
  EXPECT_EQ(none_left.status().code(), ErrorCode::kRefundExceedsOriginal);
  EXPECT_EQ(Refund(*service, 30, tx, 1, "refund-3").status().code(), ErrorCode::kRefundExceedsOriginal);
  EXPECT_EQ(GetCard(*service, 30)->balance, after_payment - 1 + 500);

  auto rows = AllRows(*service, 30);
  int refunds = 0;
  for (const auto& r : rows) {
    if (r.kind != "refund") continue;
    ++refunds;
    EXPECT_EQ(r.refund_of, tx);
    EXPECT_EQ(r.store_id, 4);
  }
  EXPECT_EQ(refunds, 2);
  Restart();
  auto replayed = Refund(*service, 30, tx, std::nullopt, "refund-2");
  ASSERT_TRUE(replayed.ok()) << replayed.status().ToString();
  EXPECT_TRUE(replayed->replayed) << "the key survives a restart";
  EXPECT_EQ(replayed->row.amount, 300);
  ExpectInvariants();
}

// Only payments are refundable; an unknown row, a row of another card and
// an unknown card are not_found; a bad amount is invalid_field. None of
// them writes anything.
TEST_P(PointCardContract, OnlyPaymentsOfTheCardAreRefundable) {
  auto charge = Pay(*service, 31, 2, 1000);
  ASSERT_TRUE(charge.ok());
  auto paid = Pay(*service, 31, 2, -100);
  ASSERT_TRUE(paid.ok());
  auto refund = Refund(*service, 31, paid->row.transaction_id, 10, "r-1");
  ASSERT_TRUE(refund.ok()) << refund.status().ToString();
  auto other = Pay(*service, 32, 2, -1);
  const auto before = Footprint(*service, 31);

  auto of_charge = Refund(*service, 31, charge->row.transaction_id, std::nullopt, "r-2");
  EXPECT_EQ(of_charge.status().code(), ErrorCode::kNotRefundable) << of_charge.status().ToString();
  EXPECT_NE(of_charge.status().message().find("charge"), std::string::npos) << of_charge.status().message();
  EXPECT_EQ(Refund(*service, 31, refund->row.transaction_id, 1, "r-3").status().code(), ErrorCode::kNotRefundable);
  EXPECT_EQ(Refund(*service, 31, 999'999'999, 1, "r-4").status().code(), ErrorCode::kNotFound);
  if (other.ok()) {
    EXPECT_EQ(Refund(*service, 31, other->row.transaction_id, 1, "r-5").status().code(), ErrorCode::kNotFound)
        << "another card's payment";
  }
  EXPECT_EQ(Refund(*service, 999'999, paid->row.transaction_id, 1, "r-6").status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(Refund(*service, 31, paid->row.transaction_id, 0, "r-7").status().field(), "amount");
  EXPECT_EQ(Refund(*service, 31, paid->row.transaction_id, -5, "r-7").status().field(), "amount");
  EXPECT_EQ(Refund(*service, 31, paid->row.transaction_id, 1, "").status().field(), "Idempotency-Key");
  EXPECT_EQ(Footprint(*service, 31), before);
  // The refused keys were not kept: they refund now.
  EXPECT_TRUE(Refund(*service, 31, paid->row.transaction_id, 1, "r-3").ok());
  ExpectInvariants();
}

// A closed card takes refunds (and nothing else that spends or charges).
TEST_P(PointCardContract, AClosedCardTakesRefunds) {
  ASSERT_TRUE(Pay(*service, 33, 2, 1000).ok());
  auto paid = Pay(*service, 33, 2, -400);
  ASSERT_TRUE(paid.ok());
  ASSERT_TRUE(Wait<Result<Card>>([&](auto done) { service->CloseCard(CardClose{33}, done); }).ok());
  auto refund = Refund(*service, 33, paid->row.transaction_id, std::nullopt, "after-close");
  ASSERT_TRUE(refund.ok()) << refund.status().ToString();
  EXPECT_EQ(refund->row.amount, 400);
  EXPECT_EQ(GetCard(*service, 33)->status, "closed");
  EXPECT_EQ(Pay(*service, 33, 2, -1).status().code(), ErrorCode::kCardClosed);
  ExpectInvariants();
}

// A store key refunds its store's payments only: the refunded row's store,
// whatever store the refund is asked at; its refund row names it.
TEST_P(PointCardContract, AStoreKeyRefundsItsStoresPaymentsOnly) {
  using MadeKey = Result<std::pair<StoreKey, std::string>>;
  auto key3 = Wait<MadeKey>([&](auto done) { service->CreateStoreKey(3, done); });
  auto key4 = Wait<MadeKey>([&](auto done) { service->CreateStoreKey(4, done); });
  ASSERT_TRUE(key3.ok() && key4.ok());
  auto charged = Pay(*service, 34, 2, 1000);
  ASSERT_TRUE(charged.ok());
  auto paid = Pay(*service, 34, 3, -300);
  ASSERT_TRUE(paid.ok());
  auto with_key = [&](const std::string& shown, const std::string& idempotency_key) {
    RefundRequest r{
        .card_id = 34, .transaction_id = paid->row.transaction_id, .amount = 100, .idempotency_key = idempotency_key};
    r.key = PointCardService::ParseStoreKey(shown);
    r.actor = pointcard::KeyActor(r.key ? r.key->key_id : "");
    return Refund(*service, std::move(r));
  };
  const auto before = Footprint(*service, 34);
  auto refused = with_key(key4->second, "k-1");
  EXPECT_EQ(refused.status().code(), ErrorCode::kForbidden) << refused.status().ToString();
  auto wrong = with_key(key3->first.key_id + "." + std::string(pointcard::kKeySecretLength, '0'), "k-1");
  EXPECT_EQ(wrong.status().code(), ErrorCode::kUnauthorized) << wrong.status().ToString();
  EXPECT_EQ(Footprint(*service, 34), before);
  // Another store's charge is that store's business (403); the key's own
  // store's charge is not refundable (409), nor is a grant's row, which is
  // no store's, whatever the key.
  auto keyed = [&](int64_t transaction, const std::string& idempotency_key) {
    RefundRequest r{.card_id = 34, .transaction_id = transaction, .idempotency_key = idempotency_key};
    r.key = PointCardService::ParseStoreKey(key3->second);
    r.actor = pointcard::KeyActor(key3->first.key_id);
    return Refund(*service, std::move(r));
  };
  EXPECT_EQ(keyed(charged->row.transaction_id, "k-2").status().code(), ErrorCode::kForbidden);
  auto own_charge = Pay(*service, 34, 3, 50);
  ASSERT_TRUE(own_charge.ok());
  EXPECT_EQ(keyed(own_charge->row.transaction_id, "k-2").status().code(), ErrorCode::kNotRefundable);
  auto grant = Grant(*service, 0, pointcard::NowUs() - 1, 10);
  ASSERT_TRUE(grant.ok()) << grant.status().ToString();
  WaitFolded(*service, grant->grant_id);
  int64_t grant_row = 0;
  for (const auto& row : AllRows(*service, 34))
    if (row.kind == "grant") grant_row = row.transaction_id;
  ASSERT_NE(grant_row, 0) << "card 34's charges earned a grant row";
  EXPECT_EQ(keyed(grant_row, "k-2").status().code(), ErrorCode::kNotRefundable);
  auto ok = with_key(key3->second, "k-1");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->row.actor, pointcard::KeyActor(key3->first.key_id));
  EXPECT_EQ(ok->row.store_id, 3);
  ExpectInvariants();
}

// Refund against refund: many refunds of one payment at once, on one
// backend's connections, each decided under the card's lock: exactly what
// the payment took comes back, never more.
TEST_P(PointCardContract, RefundsRacingForOnePaymentReturnAtMostWhatItTook) {
  ASSERT_TRUE(Pay(*service, 35, 2, 10000).ok());
  auto paid = Pay(*service, 35, 2, -500);
  ASSERT_TRUE(paid.ok());
  const int64_t before = GetCard(*service, 35)->balance;
  constexpr int kRefunders = 8, kEach = 3;  // 24 refunds of 100 for 500 points
  std::atomic<int> refunded{0}, refused{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kRefunders; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        auto r =
            Refund(*service, 35, paid->row.transaction_id, 100, "race-" + std::to_string(t) + "-" + std::to_string(i));
        if (r.ok())
          ++refunded;
        else if (r.status().code() == ErrorCode::kRefundExceedsOriginal)
          ++refused;
        else
          ++failed;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(refunded.load(), 5);
  EXPECT_EQ(refused.load(), kRefunders * kEach - 5);
  EXPECT_EQ(GetCard(*service, 35)->balance, before + 500);
  ExpectInvariants();
}

// Refunds earn no points: a grant counts charges only.
TEST_P(PointCardContract, AGrantCountsNoRefund) {
  ASSERT_TRUE(Pay(*service, 36, 2, 5000).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const int64_t from = pointcard::NowUs();
  auto paid = Pay(*service, 36, 2, -1000);
  ASSERT_TRUE(paid.ok());
  ASSERT_TRUE(Refund(*service, 36, paid->row.transaction_id, std::nullopt, "r").ok());
  ASSERT_TRUE(Pay(*service, 37, 2, 1000).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const int64_t to = pointcard::NowUs();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const int64_t card_36 = GetCard(*service, 36)->balance;
  auto grant = Grant(*service, from, to, 10);
  ASSERT_TRUE(grant.ok()) << grant.status().ToString();
  EXPECT_EQ(grant->cards, 1) << "card 37's charge; card 36 has a refund only";
  EXPECT_EQ(grant->points, 100);
  WaitFolded(*service, grant->grant_id);
  EXPECT_EQ(GetCard(*service, 36)->balance, card_36);
  ExpectInvariants();
}

}  // namespace hotrow::testing
