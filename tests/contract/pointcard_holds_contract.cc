// The point-card contract, holds (0.12.0): a store reserves points now and
// captures or voids them later; open holds count in `held`, payments and
// new holds take from what is available, and every decision about a
// card's holds is taken under its lock, on every backend.
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "contract/pointcard_contract.h"
#include "contract/pointcard_helpers.h"

namespace hotrow::testing {

using pointcard::HoldAction;
using pointcard::HoldOutcome;
using pointcard::HoldPage;
using pointcard::NewHold;
using pointcard::PointCardService;
using pointcard::RefundRequest;

namespace {

Result<HoldOutcome> MakeHold(PointCardService& s, NewHold h) {
  return Wait<Result<HoldOutcome>>([&](auto done) { s.CreateHold(std::move(h), done); });
}
Result<HoldOutcome> MakeHold(PointCardService& s, int64_t card, int64_t store, int64_t amount, int64_t seconds,
                             std::optional<std::string> key = std::nullopt) {
  return MakeHold(s, NewHold{.card_id = card,
                             .store_id = store,
                             .amount = amount,
                             .expires_in_seconds = seconds,
                             .idempotency_key = std::move(key)});
}
Result<HoldOutcome> EndHold(PointCardService& s, HoldAction a) {
  return Wait<Result<HoldOutcome>>([&](auto done) { s.EndHold(std::move(a), done); });
}
Result<HoldOutcome> Capture(PointCardService& s, int64_t card, int64_t hold, std::optional<int64_t> amount,
                            std::optional<std::string> key = std::nullopt) {
  return EndHold(
      s, HoldAction{.card_id = card, .hold_id = hold, .capture = true, .amount = amount, .idempotency_key = key});
}
Result<HoldOutcome> Void(PointCardService& s, int64_t card, int64_t hold,
                         std::optional<std::string> key = std::nullopt) {
  return EndHold(s, HoldAction{.card_id = card, .hold_id = hold, .idempotency_key = key});
}
Result<HoldPage> Holds(PointCardService& s, int64_t card, int64_t limit = 100,
                       std::optional<int64_t> before = std::nullopt) {
  return Wait<Result<HoldPage>>([&](auto done) { s.ListHolds(card, limit, before, done); });
}
// The card's balance to the point: what a test starts from.
int64_t Balance(PointCardService& s, int64_t card) { return GetCard(s, card)->balance; }

}  // namespace

// A hold reserves points: they stay in the balance, count in `held`, and a
// payment or another hold takes from what is left available. A capture
// writes one "capture" row (refundable), ends the hold and releases the
// rest; a key replays its hold or capture and refuses another request.
TEST_P(PointCardContract, AHoldReservesPointsUntilItsCaptureReleasesTheRest) {
  ASSERT_TRUE(Pay(*service, 40, 2, 1000 - Balance(*service, 40)).ok() || Balance(*service, 40) == 1000);
  ASSERT_EQ(Balance(*service, 40), 1000);
  auto hold = MakeHold(*service, 40, 3, -600, 600, "hold-1");
  ASSERT_TRUE(hold.ok()) << hold.status().ToString();
  EXPECT_FALSE(hold->replayed);
  EXPECT_EQ(hold->hold.status, "open");
  EXPECT_EQ(hold->hold.amount, -600);
  EXPECT_EQ(hold->hold.store_id, 3);
  EXPECT_EQ(hold->hold.expires_us - hold->hold.created_us, 600'000'000);
  EXPECT_FALSE(hold->row) << "a hold writes no history row";
  auto card = GetCard(*service, 40);
  EXPECT_EQ(card->balance, 1000);
  EXPECT_EQ(card->held, 600);
  const size_t rows = AllRows(*service, 40).size();

  auto again = MakeHold(*service, 40, 3, -600, 600, "hold-1");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->replayed);
  EXPECT_EQ(again->hold.hold_id, hold->hold.hold_id);
  EXPECT_EQ(MakeHold(*service, 40, 3, -601, 600, "hold-1").status().code(), ErrorCode::kIdempotencyMismatch);
  EXPECT_EQ(Pay(*service, 40, 3, -600, std::string("hold-1")).status().code(), ErrorCode::kIdempotencyMismatch)
      << "a hold's key is another request for a payment";
  EXPECT_EQ(GetCard(*service, 40)->held, 600) << "a replay holds nothing more";

  auto refused = Pay(*service, 40, 2, -401);
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  EXPECT_TRUE(refused->refused) << "1,000 less 600 held leaves 400";
  EXPECT_EQ(refused->row.balance, 400) << "a refusal names what is available";
  auto too_big = MakeHold(*service, 40, 2, -401, 60);
  EXPECT_EQ(too_big.status().code(), ErrorCode::kInsufficientBalance) << too_big.status().ToString();
  EXPECT_NE(too_big.status().message().find("400"), std::string::npos) << too_big.status().message();
  ASSERT_FALSE(Pay(*service, 40, 2, -400)->refused);
  EXPECT_EQ(AllRows(*service, 40).size(), rows + 1) << "refusals wrote nothing";

  auto captured = Capture(*service, 40, hold->hold.hold_id, -450, "capture-1");
  ASSERT_TRUE(captured.ok()) << captured.status().ToString();
  EXPECT_EQ(captured->hold.status, "captured");
  ASSERT_TRUE(captured->row);
  EXPECT_EQ(captured->row->kind, "capture");
  EXPECT_EQ(captured->row->amount, -450);
  EXPECT_EQ(captured->row->store_id, 3) << "the hold's store";
  EXPECT_EQ(captured->row->balance, 150);
  EXPECT_EQ(captured->hold.capture_id, captured->row->transaction_id);
  EXPECT_EQ(captured->hold.captured_amount, -450);
  ASSERT_TRUE(captured->hold.ended_us);
  EXPECT_LT(*captured->hold.ended_us, captured->hold.expires_us);
  card = GetCard(*service, 40);
  EXPECT_EQ(card->balance, 150);
  EXPECT_EQ(card->held, 0) << "the other 150 are released";

  auto replayed = Capture(*service, 40, hold->hold.hold_id, -450, "capture-1");
  ASSERT_TRUE(replayed.ok()) << replayed.status().ToString();
  EXPECT_TRUE(replayed->replayed);
  ASSERT_TRUE(replayed->row);
  EXPECT_EQ(replayed->row->transaction_id, captured->row->transaction_id);
  EXPECT_EQ(Capture(*service, 40, hold->hold.hold_id, -449, "capture-1").status().code(),
            ErrorCode::kIdempotencyMismatch);
  EXPECT_EQ(Capture(*service, 40, hold->hold.hold_id, std::nullopt).status().code(), ErrorCode::kHoldNotOpen);
  EXPECT_EQ(Void(*service, 40, hold->hold.hold_id, "void-1").status().code(), ErrorCode::kHoldNotOpen);
  EXPECT_EQ(Balance(*service, 40), 150);

  // A capture is refundable as a payment is.
  auto refund = Wait<Result<PaymentOutcome>>([&](auto done) {
    service->Refund(RefundRequest{.card_id = 40,
                                  .transaction_id = captured->row->transaction_id,
                                  .amount = 100,
                                  .idempotency_key = "refund-1"},
                    done);
  });
  ASSERT_TRUE(refund.ok()) << refund.status().ToString();
  EXPECT_EQ(refund->row.refund_of, captured->row->transaction_id);
  EXPECT_EQ(Balance(*service, 40), 250);

  Restart();
  auto listed = Holds(*service, 40);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->holds.size(), 1u);
  EXPECT_EQ(listed->holds[0].status, "captured");
  EXPECT_EQ(listed->holds[0].capture_id, captured->row->transaction_id);
  auto after = Capture(*service, 40, hold->hold.hold_id, -450, "capture-1");
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_TRUE(after->replayed) << "the key outlives a restart";
  ExpectInvariants();
}

// A void releases a whole hold; a hold past its expiry is released by time
// alone, and its capture or void is refused (hold_expired) even though no
// sweep ran. Bounds, unknown holds and another card's hold are refused.
TEST_P(PointCardContract, AVoidOrTheExpiryReleasesAHold) {
  const int64_t balance = Balance(*service, 41);
  ASSERT_TRUE(Pay(*service, 41, 2, 1000).ok());
  auto voided = MakeHold(*service, 41, 2, -300, 600);
  auto expiring = MakeHold(*service, 41, 2, -200, 1);
  ASSERT_TRUE(voided.ok() && expiring.ok());
  EXPECT_EQ(GetCard(*service, 41)->held, 500);
  auto v = Void(*service, 41, voided->hold.hold_id, "void-key");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->hold.status, "voided");
  EXPECT_FALSE(v->row);
  EXPECT_TRUE(Void(*service, 41, voided->hold.hold_id, "void-key")->replayed);
  EXPECT_EQ(Capture(*service, 41, voided->hold.hold_id, std::nullopt).status().code(), ErrorCode::kHoldNotOpen);
  EXPECT_EQ(GetCard(*service, 41)->held, 200);

  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  auto card = GetCard(*service, 41);
  EXPECT_EQ(card->held, 0) << "expired by time alone";
  EXPECT_EQ(card->balance, balance + 1000);
  auto late = Capture(*service, 41, expiring->hold.hold_id, std::nullopt, "late-capture");
  EXPECT_EQ(late.status().code(), ErrorCode::kHoldExpired) << late.status().ToString();
  EXPECT_EQ(Void(*service, 41, expiring->hold.hold_id).status().code(), ErrorCode::kHoldExpired);
  auto listed = Holds(*service, 41);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->holds.size(), 2u);
  EXPECT_EQ(listed->holds[0].hold_id, expiring->hold.hold_id) << "newest first";
  EXPECT_EQ(listed->holds[0].status, "expired");
  EXPECT_EQ(listed->holds[0].ended_us, listed->holds[0].expires_us);
  EXPECT_EQ(listed->holds[1].status, "voided");
  auto page = Holds(*service, 41, 1);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->holds.size(), 1u);
  ASSERT_TRUE(page->next_before_id);
  auto next = Holds(*service, 41, 1, page->next_before_id);
  ASSERT_TRUE(next.ok());
  ASSERT_EQ(next->holds.size(), 1u);
  EXPECT_EQ(next->holds[0].hold_id, voided->hold.hold_id);
  EXPECT_FALSE(next->next_before_id);

  // What is refused, and writes nothing.
  const size_t rows = AllRows(*service, 41).size();
  EXPECT_EQ(MakeHold(*service, 41, 2, 0, 60).status().field(), "amount");
  EXPECT_EQ(MakeHold(*service, 41, 2, 1, 60).status().field(), "amount");
  EXPECT_EQ(MakeHold(*service, 41, 2, -1'000'001, 60).status().field(), "amount");
  EXPECT_EQ(MakeHold(*service, 41, 2, -1, 0).status().field(), "expiresInSeconds");
  EXPECT_EQ(MakeHold(*service, 41, 2, -1, 604'801).status().field(), "expiresInSeconds");
  EXPECT_EQ(MakeHold(*service, 41, 999'999, -1, 60).status().code(), ErrorCode::kNotFound) << "no such store";
  EXPECT_EQ(MakeHold(*service, 999'999, 2, -1, 60).status().code(), ErrorCode::kNotFound) << "no such card";
  auto open = MakeHold(*service, 41, 2, -100, 600);
  ASSERT_TRUE(open.ok());
  EXPECT_EQ(Capture(*service, 41, open->hold.hold_id, -101).status().field(), "amount") << "more than it holds";
  EXPECT_EQ(Capture(*service, 41, open->hold.hold_id, 1).status().field(), "amount");
  EXPECT_EQ(Capture(*service, 42, open->hold.hold_id, std::nullopt).status().code(), ErrorCode::kNotFound)
      << "another card's hold";
  EXPECT_EQ(Capture(*service, 41, open->hold.hold_id + 1000, std::nullopt).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(Holds(*service, 999'999).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(AllRows(*service, 41).size(), rows);
  EXPECT_EQ(GetCard(*service, 41)->held, 100);
  // An open hold outlives a restart, and still keeps its points from a
  // payment.
  Restart();
  card = GetCard(*service, 41);
  EXPECT_EQ(card->held, 100);
  auto over = Pay(*service, 41, 2, -(card->balance - 99));
  ASSERT_TRUE(over.ok()) << over.status().ToString();
  EXPECT_TRUE(over->refused);
  EXPECT_EQ(over->row.balance, card->balance - 100);
  ExpectInvariants();
}

// A closed card refuses new holds but captures and voids those opened
// before its close.
TEST_P(PointCardContract, AClosedCardCapturesItsOpenHoldsButMakesNoNewOnes) {
  ASSERT_TRUE(Pay(*service, 43, 2, 1000).ok());
  auto first = MakeHold(*service, 43, 2, -100, 600);
  auto second = MakeHold(*service, 43, 2, -100, 600);
  ASSERT_TRUE(first.ok() && second.ok());
  auto closed = Wait<Result<Card>>([&](auto done) { service->CloseCard(pointcard::CardClose{.card_id = 43}, done); });
  ASSERT_TRUE(closed.ok()) << closed.status().ToString();
  EXPECT_EQ(closed->held, 200);
  EXPECT_EQ(MakeHold(*service, 43, 2, -1, 60).status().code(), ErrorCode::kCardClosed);
  auto captured = Capture(*service, 43, first->hold.hold_id, std::nullopt);
  ASSERT_TRUE(captured.ok()) << captured.status().ToString();
  EXPECT_EQ(captured->row->amount, -100) << "the whole hold by default";
  ASSERT_TRUE(Void(*service, 43, second->hold.hold_id).ok());
  EXPECT_EQ(GetCard(*service, 43)->held, 0);
  ExpectInvariants();
}

// A store key holds for its own store, and captures and voids its own
// store's holds only.
TEST_P(PointCardContract, AStoreKeyHoldsAndCapturesForItsStoreOnly) {
  using MadeKey = Result<std::pair<pointcard::StoreKey, std::string>>;
  auto key3 = Wait<MadeKey>([&](auto done) { service->CreateStoreKey(3, done); });
  ASSERT_TRUE(key3.ok());
  ASSERT_TRUE(Pay(*service, 44, 2, 1000).ok());
  auto keyed = [&](NewHold h) {
    h.key = PointCardService::ParseStoreKey(key3->second);
    h.actor = pointcard::KeyActor(key3->first.key_id);
    return MakeHold(*service, std::move(h));
  };
  EXPECT_EQ(keyed({.card_id = 44, .store_id = 4, .amount = -10, .expires_in_seconds = 60}).status().code(),
            ErrorCode::kForbidden);
  auto own = keyed({.card_id = 44, .store_id = 3, .amount = -10, .expires_in_seconds = 60});
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  EXPECT_EQ(own->hold.actor, pointcard::KeyActor(key3->first.key_id));
  auto other = MakeHold(*service, 44, 4, -10, 60);
  ASSERT_TRUE(other.ok());
  auto end_keyed = [&](int64_t hold) {
    HoldAction a{.card_id = 44, .hold_id = hold, .capture = true};
    a.key = PointCardService::ParseStoreKey(key3->second);
    a.actor = pointcard::KeyActor(key3->first.key_id);
    return EndHold(*service, std::move(a));
  };
  EXPECT_EQ(end_keyed(other->hold.hold_id).status().code(), ErrorCode::kForbidden) << "store 4's hold";
  auto captured = end_keyed(own->hold.hold_id);
  ASSERT_TRUE(captured.ok()) << captured.status().ToString();
  EXPECT_EQ(captured->row->actor, pointcard::KeyActor(key3->first.key_id));
  ExpectInvariants();
}

// Payment against hold: payments and holds on one card, from many threads
// at once, never take more than the card has: exactly its balance goes, in
// payments and held points together.
TEST_P(PointCardContract, PaymentsAndHoldsRacingNeverTakeMoreThanTheCardHas) {
  const int64_t start = Balance(*service, 45);
  ASSERT_TRUE(Pay(*service, 45, 2, 1000 - start).ok() || start == 1000);
  ASSERT_EQ(Balance(*service, 45), 1000);
  constexpr int kThreads = 8, kEach = 4;  // 32 attempts of 100 for 1,000 points
  std::atomic<int> paid{0}, held{0}, refused{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        if ((t + i) % 2 == 0) {
          auto r = Pay(*service, 45, 2, -100);
          if (!r.ok())
            ++failed;
          else
            ++(r->refused ? refused : paid);
        } else {
          auto r = MakeHold(*service, 45, 2, -100, 600);
          if (r.ok())
            ++held;
          else if (r.status().code() == ErrorCode::kInsufficientBalance)
            ++refused;
          else
            ++failed;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(paid.load() + held.load(), 10);
  EXPECT_EQ(refused.load(), kThreads * kEach - 10);
  auto card = GetCard(*service, 45);
  EXPECT_EQ(card->balance, 1000 - 100 * paid.load());
  EXPECT_EQ(card->held, 100 * held.load());
  EXPECT_EQ(card->balance - card->held, 0);
  ExpectInvariants();
}

// Holds, captures and voids on many cards at once never fail: each is
// decided under its own card's lock. (On PostgreSQL, run under SSI, they
// read and wrote P_HOLD's shared index pages, and 6-14 of 160 holds on 8
// cards at once ended in 503 after three tries: a hostile review's load.)
TEST_P(PointCardContract, HoldsOnManyCardsAtOnceNeverFail) {
  constexpr int kCards = 8, kEach = 20;
  for (int c = 0; c < kCards; ++c) ASSERT_TRUE(Pay(*service, 50 + c, 2, 10000).ok());
  std::atomic<int> done{0}, failed{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < kCards; ++c) {
    threads.emplace_back([&, c] {
      for (int i = 0; i < kEach; ++i) {
        auto h = MakeHold(*service, 50 + c, 2, -1, 600);
        if (!h.ok()) {
          ++failed;
          continue;
        }
        auto end = i % 3 == 0   ? Void(*service, 50 + c, h->hold.hold_id)
                   : i % 3 == 1 ? Capture(*service, 50 + c, h->hold.hold_id, std::nullopt)
                                : Result<HoldOutcome>(*h);
        if (end.ok())
          ++done;
        else
          ++failed;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(done.load(), kCards * kEach);
  ExpectInvariants();
}

// Capture against expiry: captures sent as their holds expire each either
// capture before the expiry or are refused at or after it, never both, and
// what the card holds agrees.
TEST_P(PointCardContract, CapturesRacingTheExpiryEitherCaptureBeforeItOrAreRefused) {
  ASSERT_TRUE(Pay(*service, 46, 2, 10000).ok());
  constexpr int kHolds = 12;
  std::vector<HoldOutcome> holds;
  for (int i = 0; i < kHolds; ++i) {
    auto h = MakeHold(*service, 46, 2, -10, 1);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    holds.push_back(*h);
  }
  const int64_t before = Balance(*service, 46);
  // Aim the captures at the last holds' expiry: some land before it, some
  // at or after.
  const int64_t aim = holds[kHolds / 2].hold.expires_us - 3000;
  while (pointcard::NowUs() < aim) std::this_thread::sleep_for(std::chrono::microseconds(200));
  std::vector<Result<HoldOutcome>> results(kHolds, Status::Internal("not run"));
  std::vector<std::thread> threads;
  for (int i = 0; i < kHolds; ++i)
    threads.emplace_back([&, i] { results[i] = Capture(*service, 46, holds[i].hold.hold_id, std::nullopt); });
  for (auto& t : threads) t.join();
  int captured = 0;
  for (int i = 0; i < kHolds; ++i) {
    if (results[i].ok()) {
      ++captured;
      ASSERT_TRUE(results[i]->hold.ended_us);
      EXPECT_LT(*results[i]->hold.ended_us, results[i]->hold.expires_us);
    } else {
      EXPECT_EQ(results[i].status().code(), ErrorCode::kHoldExpired) << results[i].status().ToString();
    }
  }
  auto listed = Holds(*service, 46);
  ASSERT_TRUE(listed.ok());
  int listed_captured = 0;
  for (const auto& h : listed->holds) {
    EXPECT_TRUE(h.status == "captured" || h.status == "expired") << h.status;
    listed_captured += h.status == "captured";
  }
  EXPECT_EQ(listed_captured, captured);
  EXPECT_EQ(Balance(*service, 46), before - 10 * captured);
  EXPECT_EQ(GetCard(*service, 46)->held, 0);
  ExpectInvariants();
}

}  // namespace hotrow::testing
