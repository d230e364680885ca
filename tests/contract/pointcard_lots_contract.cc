// The point-card contract, expiring lots (0.13.0): a grant given with an
// expiry makes a lot per card; payments and holds take from lots in
// expiry order, never-expiring points last; at its expiry what no open
// hold reserves leaves the card, at once for reads and in one "expiry" row
// written by the card's next write or the sweep (on PostgreSQL, any
// instance's folder).
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "contract/pointcard_contract.h"
#include "contract/pointcard_helpers.h"

namespace hotrow::testing {

using pointcard::HoldAction;
using pointcard::HoldOutcome;
using pointcard::LotPage;
using pointcard::NewHold;
using pointcard::NowUs;
using pointcard::PointCardService;
using pointcard::RefundRequest;

namespace {

Result<GrantOutcome> ExpiringGrant(PointCardService& s, int64_t from, int64_t to, int64_t rate,
                                   std::optional<int64_t> days, std::optional<int64_t> at_us = std::nullopt) {
  GrantRequest r{from, to, rate, std::nullopt, true};
  r.expires_in_days = days;
  r.expires_at_us = at_us;
  return Wait<Result<GrantOutcome>>([&](auto done) { s.Grant(r, done); });
}
Result<LotPage> Lots(PointCardService& s, int64_t card, int64_t limit = pointcard::kLotListLimitMax,
                     std::optional<int64_t> after = std::nullopt) {
  return Wait<Result<LotPage>>([&](auto done) { s.ListLots(card, limit, after, done); });
}
Result<HoldOutcome> MakeHold(PointCardService& s, int64_t card, int64_t store, int64_t amount, int64_t seconds) {
  return Wait<Result<HoldOutcome>>([&](auto done) {
    s.CreateHold(NewHold{.card_id = card, .store_id = store, .amount = amount, .expires_in_seconds = seconds}, done);
  });
}
Result<HoldOutcome> EndHold(PointCardService& s, int64_t card, int64_t hold, bool capture,
                            std::optional<int64_t> amount = std::nullopt) {
  return Wait<Result<HoldOutcome>>([&](auto done) {
    s.EndHold(HoldAction{.card_id = card, .hold_id = hold, .capture = capture, .amount = amount}, done);
  });
}
Result<PaymentOutcome> Refund(PointCardService& s, int64_t card, int64_t transaction, int64_t amount, std::string key) {
  return Wait<Result<PaymentOutcome>>([&](auto done) {
    s.Refund(RefundRequest{.card_id = card, .transaction_id = transaction, .amount = amount, .idempotency_key = key},
             done);
  });
}
std::vector<pointcard::HistoryRow> Expiries(PointCardService& s, int64_t card) {
  std::vector<pointcard::HistoryRow> out;
  for (const auto& row : AllRows(s, card))
    if (row.kind == "expiry") out.push_back(row);
  return out;
}

// A card whose balance is exactly `lot` points, all of them in one lot of
// a grant (rate 100) that expires at `expires_us`: its charge is spent
// before the grant, which then gives it back as the lot. Other cards
// charged in the period get lots too; the tests look at `card` only.
void LotOnlyCard(PointCardService& s, int64_t card, int64_t lot, std::optional<int64_t> days,
                 std::optional<int64_t> expires_us) {
  const int64_t balance = GetCard(s, card)->balance;
  if (balance > 0) {
    ASSERT_FALSE(Pay(s, card, 1, -balance)->refused);
  }
  const int64_t from = NowUs();
  ASSERT_FALSE(Pay(s, card, 1, lot)->refused);
  ASSERT_FALSE(Pay(s, card, 1, -lot)->refused);
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  auto grant = ExpiringGrant(s, from, NowUs(), 100, days, expires_us);
  ASSERT_TRUE(grant.ok()) << grant.status().ToString();
  WaitFolded(s, grant->grant_id);
  ASSERT_EQ(GetCard(s, card)->balance, lot);
}

// Until `pred` holds, or about `seconds`.
template <typename Pred>
bool Eventually(Pred pred, int seconds = 10) {
  for (int i = 0; i < seconds * 100; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

}  // namespace

// Payments take from lots first, the one expiring soonest first, then
// from never-expiring points; a refund gives back in reverse: the
// never-expiring part first, then the lots, latest-expiring first.
TEST_P(PointCardContract, PaymentsSpendTheSoonestExpiringLotFirstAndRefundsGiveBackInReverse) {
  const int64_t from = NowUs();
  ASSERT_FALSE(Pay(*service, 60, 2, 1000)->refused);
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const int64_t to = NowUs();
  auto later = ExpiringGrant(*service, from, to, 10, 30);
  ASSERT_TRUE(later.ok()) << later.status().ToString();
  WaitFolded(*service, later->grant_id);
  auto sooner = ExpiringGrant(*service, from, to, 20, 10);
  ASSERT_TRUE(sooner.ok()) << sooner.status().ToString();
  auto info = GetGrant(*service, sooner->grant_id);
  ASSERT_TRUE(info.ok() && info->expires_us);
  EXPECT_NEAR(static_cast<double>(*info->expires_us - info->applied_at_us), 10 * 86'400e6, 60e6)
      << "expiresInDays counts from the grant's time";
  WaitFolded(*service, sooner->grant_id);
  const int64_t balance = GetCard(*service, 60)->balance;
  auto lots = Lots(*service, 60);
  ASSERT_TRUE(lots.ok()) << lots.status().ToString();
  ASSERT_EQ(lots->lots.size(), 2u);
  EXPECT_EQ(lots->lots[0].grant_id, sooner->grant_id) << "the soonest expiring first";
  EXPECT_EQ(lots->lots[0].amount, 200);
  EXPECT_EQ(lots->lots[1].amount, 100);
  EXPECT_EQ(lots->never_expiring, balance - 300);

  auto paid = Pay(*service, 60, 3, -250);
  ASSERT_TRUE(paid.ok() && !paid->refused);
  lots = Lots(*service, 60);
  ASSERT_EQ(lots->lots.size(), 1u) << "the 10-day lot is spent";
  EXPECT_EQ(lots->lots[0].grant_id, later->grant_id);
  EXPECT_EQ(lots->lots[0].remaining, 50);
  EXPECT_EQ(lots->never_expiring, balance - 300) << "never-expiring points come last";
  auto more = Pay(*service, 60, 3, -100);
  ASSERT_TRUE(more.ok() && !more->refused);
  lots = Lots(*service, 60);
  EXPECT_TRUE(lots->lots.empty());
  EXPECT_EQ(lots->never_expiring, balance - 350);

  // The second payment took 50 from the 30-day lot and 50 never-expiring.
  auto back = Refund(*service, 60, more->row.transaction_id, 70, "lots-refund-1");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  lots = Lots(*service, 60);
  ASSERT_EQ(lots->lots.size(), 1u);
  EXPECT_EQ(lots->lots[0].remaining, 20) << "50 never-expiring back first, then 20 to the lot";
  EXPECT_EQ(lots->never_expiring, balance - 350 + 50);
  auto rest = Refund(*service, 60, more->row.transaction_id, 30, "lots-refund-2");
  ASSERT_TRUE(rest.ok()) << rest.status().ToString();
  lots = Lots(*service, 60);
  EXPECT_EQ(lots->lots[0].remaining, 50);
  EXPECT_EQ(lots->never_expiring, balance - 300);
  ExpectInvariants();
}

// At its expiry a lot leaves: reads leave it out at once, and one expiry
// row writes it out, by the sweep here (no write to the card), never
// twice: not by the next payment, not after a restart.
TEST_P(PointCardContract, ALotLeavesAtItsExpiryInOneExpiryRowWrittenOnce) {
  const int64_t expires = NowUs() + 2'500'000;
  ASSERT_NO_FATAL_FAILURE(LotOnlyCard(*service, 61, 100, std::nullopt, expires));
  ASSERT_FALSE(Pay(*service, 61, 2, 500)->refused) << "never-expiring points beside the lot";
  ASSERT_FALSE(Pay(*service, 61, 2, -30)->refused) << "from the lot";
  EXPECT_EQ(Lots(*service, 61)->lots.at(0).remaining, 70);
  EXPECT_TRUE(Expiries(*service, 61).empty());
  std::this_thread::sleep_for(std::chrono::microseconds(expires - NowUs()) + std::chrono::milliseconds(5));
  EXPECT_EQ(GetCard(*service, 61)->balance, 500) << "a read leaves the lot out from its expiry on";
  EXPECT_TRUE(Lots(*service, 61)->lots.empty());
  ASSERT_TRUE(Eventually([&] { return !Expiries(*service, 61).empty(); })) << "the sweep writes it out";
  auto expiries = Expiries(*service, 61);
  ASSERT_EQ(expiries.size(), 1u);
  EXPECT_EQ(expiries[0].amount, -70);
  EXPECT_EQ(expiries[0].store_id, 0);
  EXPECT_EQ(expiries[0].actor, "system");
  EXPECT_GE(expiries[0].payment_time_us, expires);
  EXPECT_EQ(expiries[0].balance, 500);
  ASSERT_FALSE(Pay(*service, 61, 2, -500)->refused);
  EXPECT_TRUE(Pay(*service, 61, 2, -1)->refused);
  Restart();
  ASSERT_FALSE(Pay(*service, 61, 2, 10)->refused);
  EXPECT_EQ(Expiries(*service, 61).size(), 1u) << "written once, across a restart";
  EXPECT_EQ(GetCard(*service, 61)->balance, 10);
  ExpectInvariants();
}

// A lot's expiry takes only what no open hold reserves; what a hold keeps
// stays for its capture, and what a void releases after the lot's expiry
// leaves then. The first write to the card after the expiry writes it out,
// before its own row.
TEST_P(PointCardContract, AHoldKeepsWhatItReservedOfALotPastTheLotsExpiry) {
  const int64_t expires = NowUs() + 3'000'000;
  ASSERT_NO_FATAL_FAILURE(LotOnlyCard(*service, 62, 100, std::nullopt, expires));
  ASSERT_FALSE(Pay(*service, 62, 2, 400)->refused);
  auto captured = MakeHold(*service, 62, 3, -60, 600);  // all of it from the lot
  ASSERT_TRUE(captured.ok()) << captured.status().ToString();
  auto voided = MakeHold(*service, 62, 3, -70, 600);  // 40 from the lot, 30 never-expiring
  ASSERT_TRUE(voided.ok()) << voided.status().ToString();
  auto lots = Lots(*service, 62);
  EXPECT_EQ(lots->lots.at(0).reserved, 100);
  EXPECT_EQ(lots->never_expiring, 400);
  EXPECT_EQ(lots->never_expiring_reserved, 30);
  std::this_thread::sleep_for(std::chrono::microseconds(expires - NowUs()) + std::chrono::milliseconds(5));
  auto card = GetCard(*service, 62);
  EXPECT_EQ(card->balance, 500) << "all of the lot is reserved: nothing left yet";
  EXPECT_EQ(card->held, 130);
  lots = Lots(*service, 62);
  ASSERT_EQ(lots->lots.size(), 1u);
  EXPECT_TRUE(lots->lots[0].expired);

  auto capture = EndHold(*service, 62, captured->hold.hold_id, true, -45);
  ASSERT_TRUE(capture.ok()) << capture.status().ToString();
  ASSERT_TRUE(capture->row);
  auto expiries = Expiries(*service, 62);
  ASSERT_EQ(expiries.size(), 1u) << "the 15 the capture released leave";
  EXPECT_EQ(expiries[0].amount, -15);
  EXPECT_GT(expiries[0].payment_time_us, capture->row->payment_time_us);
  EXPECT_EQ(GetCard(*service, 62)->balance, 500 - 45 - 15);

  auto end = EndHold(*service, 62, voided->hold.hold_id, false);
  ASSERT_TRUE(end.ok()) << end.status().ToString();
  expiries = Expiries(*service, 62);
  ASSERT_EQ(expiries.size(), 2u) << "the 40 the void released leave";
  EXPECT_EQ(expiries[1].amount, -40);
  EXPECT_EQ(GetCard(*service, 62)->balance, 400);
  EXPECT_TRUE(Lots(*service, 62)->lots.empty());
  ExpectInvariants();
}

// A hold that keeps all of a lot past the lot's expiry, then expires
// itself on a card nobody writes to: what it kept leaves, and the sweep
// writes it out (the lot was written out already, with nothing left over).
TEST_P(PointCardContract, WhatAnExpiredHoldKeptOfAnExpiredLotIsWrittenOutByTheSweep) {
  const int64_t expires = NowUs() + 2'000'000;
  ASSERT_NO_FATAL_FAILURE(LotOnlyCard(*service, 66, 100, std::nullopt, expires));
  auto hold = MakeHold(*service, 66, 3, -100, 3);
  ASSERT_TRUE(hold.ok()) << hold.status().ToString();
  std::this_thread::sleep_for(std::chrono::microseconds(hold->hold.expires_us - NowUs()) +
                              std::chrono::milliseconds(5));
  EXPECT_EQ(GetCard(*service, 66)->balance, 0) << "reads leave it out at once";
  int64_t gone = 0;
  ASSERT_TRUE(Eventually([&] {
    gone = 0;
    for (const auto& e : Expiries(*service, 66)) gone += e.amount;
    return gone == -100;
  })) << "the sweep writes it out: "
      << gone;
  EXPECT_EQ(AllRows(*service, 66).back().balance, 0);
  ExpectInvariants();
}

// A refund gives back to the lot its payment took from; a lot expired
// since takes it and lets it leave in the same transaction.
TEST_P(PointCardContract, ARefundToALotThatHasExpiredLeavesInAnExpiryRow) {
  const int64_t expires = NowUs() + 2'500'000;
  ASSERT_NO_FATAL_FAILURE(LotOnlyCard(*service, 63, 100, std::nullopt, expires));
  ASSERT_FALSE(Pay(*service, 63, 2, 300)->refused);
  auto paid = Pay(*service, 63, 4, -80);
  ASSERT_TRUE(paid.ok() && !paid->refused);
  std::this_thread::sleep_for(std::chrono::microseconds(expires - NowUs()) + std::chrono::milliseconds(5));
  EXPECT_EQ(GetCard(*service, 63)->balance, 300);
  auto refund = Refund(*service, 63, paid->row.transaction_id, 80, "expired-lot-refund");
  ASSERT_TRUE(refund.ok()) << refund.status().ToString();
  EXPECT_EQ(refund->row.amount, 80);
  auto expiries = Expiries(*service, 63);
  int64_t gone = 0;
  for (const auto& e : expiries) gone += e.amount;
  EXPECT_EQ(gone, -100) << "the 20 left at the expiry and the 80 given back";
  ASSERT_FALSE(expiries.empty());
  EXPECT_GT(expiries.back().payment_time_us, refund->row.payment_time_us);
  EXPECT_EQ(GetCard(*service, 63)->balance, 300);
  ExpectInvariants();
}

// Payments racing a lot's expiry: each is decided under the card's lock at
// a time either before the expiry (it may take from the lot) or after it
// (the lot has left); together they and the expiry row never take more
// than the lot had.
TEST_P(PointCardContract, PaymentsRacingALotsExpiryNeverSpendItTwice) {
  const int64_t expires = NowUs() + 2'000'000;
  ASSERT_NO_FATAL_FAILURE(LotOnlyCard(*service, 64, 100, std::nullopt, expires));
  std::atomic<int> paid{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      std::this_thread::sleep_for(std::chrono::microseconds(expires - 150'000 - NowUs()));
      for (int i = 0; i < 6; ++i) {
        auto r = Pay(*service, 64, 5, -7);
        if (r.ok() && !r->refused) ++paid;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  }
  for (auto& t : threads) t.join();
  std::this_thread::sleep_for(std::chrono::microseconds(std::max<int64_t>(0, expires - NowUs())));
  ASSERT_FALSE(Pay(*service, 64, 5, 1)->refused);  // settles the card
  int64_t gone = 0;
  for (const auto& e : Expiries(*service, 64)) gone += e.amount;
  EXPECT_EQ(paid.load() * 7 - gone, 100) << paid.load() << " paid, " << -gone << " expired";
  EXPECT_LE(paid.load(), 14);
  EXPECT_EQ(GetCard(*service, 64)->balance, 1);
  ExpectInvariants();
}

// What a grant's expiry may be, on every backend.
TEST_P(PointCardContract, ExpiringGrantsAreChecked) {
  const int64_t to = NowUs() - 1;
  EXPECT_EQ(ExpiringGrant(*service, 0, to, 10, 0).status().code(), ErrorCode::kInvalidField);
  EXPECT_EQ(ExpiringGrant(*service, 0, to, 10, pointcard::kLotDaysMax + 1).status().code(), ErrorCode::kInvalidField);
  EXPECT_EQ(ExpiringGrant(*service, 0, to, 10, 1, NowUs() + 60'000'000).status().code(), ErrorCode::kInvalidField)
      << "not both";
  auto past = ExpiringGrant(*service, 0, to, 10, std::nullopt, NowUs() - 1);
  EXPECT_EQ(past.status().code(), ErrorCode::kInvalidField) << "an expiry before the grant's time";
  EXPECT_EQ(past.status().field(), "expiresAt");
  auto far = ExpiringGrant(*service, 0, to, 10, std::nullopt, NowUs() + (pointcard::kLotDaysMax + 1) * 86'400'000'000);
  EXPECT_EQ(far.status().code(), ErrorCode::kInvalidField) << "more than 3,650 days after the grant's time";
  auto card = GetCard(*service, 65);
  auto lots = Lots(*service, 65);
  ASSERT_TRUE(lots.ok()) << lots.status().ToString();
  EXPECT_EQ(Lots(*service, 999'999).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(lots->never_expiring, card->balance);
  EXPECT_EQ(lots->never_expiring_reserved, card->held);
  ExpectInvariants();
}

}  // namespace hotrow::testing
