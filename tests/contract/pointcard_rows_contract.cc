// The point-card contract, each history row's own fields and the balance
// at a time (0.8.0): what every backend must do.
#include <functional>
#include <set>

#include "contract/pointcard_contract.h"
#include "contract/pointcard_helpers.h"

namespace hotrow::testing {

// Every row says what it is and who wrote it, under an id of its own; the
// client's reference and reason are kept, replayed with the key, and part
// of the key's fingerprint.
TEST_P(PointCardContract, RowsCarryTheirIdKindActorReferenceAndReason) {
  Payment charge{30, 2, 900};
  charge.reference = "ORDER-0001";
  auto charged = Wait<Result<PaymentOutcome>>([&](auto done) { service->Pay(charge, done); });
  ASSERT_TRUE(charged.ok()) << charged.status().ToString();
  EXPECT_EQ(charged->row.kind, "charge");
  EXPECT_EQ(charged->row.actor, "anonymous");
  EXPECT_EQ(charged->row.reference, "ORDER-0001");
  EXPECT_FALSE(charged->row.reason);
  EXPECT_FALSE(charged->row.refund_of);
  Payment pay{30, 3, -250, std::string("pay-30")};
  pay.reference = "ORDER-0002";
  pay.reason = "lunch, café 2F";
  pay.actor = "admin";
  auto paid = Wait<Result<PaymentOutcome>>([&](auto done) { service->Pay(pay, done); });
  ASSERT_TRUE(paid.ok()) << paid.status().ToString();
  EXPECT_EQ(paid->row.kind, "payment");
  EXPECT_EQ(paid->row.actor, "admin");
  EXPECT_EQ(paid->row.reason, "lunch, café 2F");
  EXPECT_GT(charged->row.transaction_id, 0);
  EXPECT_GT(paid->row.transaction_id, charged->row.transaction_id) << "one writer at a time: ids in order";

  // Every row of every card has its own id; these two as written.
  std::set<int64_t> ids;
  size_t rows = 0;
  for (int64_t card = 1; card <= kContractCards; ++card) {
    for (const auto& r : AllRows(*service, card)) {
      ++rows;
      EXPECT_GT(r.transaction_id, 0);
      ids.insert(r.transaction_id);
      EXPECT_EQ(r.kind, pointcard::KindOfAmount(r.amount));
      if (r.transaction_id == paid->row.transaction_id) {
        EXPECT_EQ(r.actor, "admin");
        EXPECT_EQ(r.reference, "ORDER-0002");
        EXPECT_EQ(r.reason, "lunch, café 2F");
        EXPECT_EQ(r.balance, paid->row.balance);
      } else if (r.transaction_id == charged->row.transaction_id) {
        EXPECT_EQ(r.reference, "ORDER-0001");
        EXPECT_FALSE(r.reason);
      } else {
        EXPECT_EQ(r.actor, "anonymous") << "seeded rows";
        EXPECT_FALSE(r.reference);
      }
    }
  }
  EXPECT_EQ(ids.size(), rows) << "no id twice";

  // The replay is the row as written, whoever retries it.
  Payment retry = pay;
  retry.actor = "anonymous";
  auto again = Wait<Result<PaymentOutcome>>([&](auto done) { service->Pay(retry, done); });
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->replayed);
  EXPECT_EQ(again->row.transaction_id, paid->row.transaction_id);
  EXPECT_EQ(again->row.actor, "admin");
  EXPECT_EQ(again->row.reference, "ORDER-0002");
  EXPECT_EQ(again->row.reason, "lunch, café 2F");
  EXPECT_EQ(again->row.kind, "payment");
  // Another reference, another reason, or none: another request.
  for (auto change : {std::function<void(Payment&)>([](Payment& p) { p.reference = "ORDER-0003"; }),
                      std::function<void(Payment&)>([](Payment& p) { p.reason.reset(); }),
                      std::function<void(Payment&)>([](Payment& p) { p.reference.reset(); })}) {
    Payment other = pay;
    change(other);
    auto r = Wait<Result<PaymentOutcome>>([&](auto done) { service->Pay(other, done); });
    EXPECT_EQ(r.status().code(), ErrorCode::kIdempotencyMismatch);
  }
  ExpectInvariants();
}

TEST_P(PointCardContract, BadReferencesAndReasonsAreRejectedAndWriteNothing) {
  auto before = AllRows(*service, 31).size();
  auto pay = [&](std::optional<std::string> reference, std::optional<std::string> reason) {
    Payment p{31, 1, 10};
    p.reference = std::move(reference);
    p.reason = std::move(reason);
    return Wait<Result<PaymentOutcome>>([&](auto done) { service->Pay(p, done); });
  };
  for (std::string bad : {"", "two words", " lead", "tab\there", "nul\x01", "\u200b-zero-width", "a\u200bb", "\u3164",
                          "\u0301e", "a\u200Db", "a\u034Fb", "a\uFE0F\uFE0F", "\u2764\u200D", "ORDER-77\uFE0F",
                          "ORDER\u200D77", "\u2764\uFE0F\uFE0F"})
    EXPECT_EQ(pay(bad, std::nullopt).status().field(), "reference") << "'" << bad << "'";
  // Marks after a character are part of it, a selector may follow it once,
  // and joiners join emoji.
  for (std::string good : {"हिंदी-42", "\u30AB\u3099", "\u2764\uFE0F", "\U0001F469\u200D\U0001F469\u200D\U0001F466",
                           "\U0001F44D\U0001F3FD"})
    EXPECT_TRUE(pay(good, std::nullopt).ok()) << "'" << good << "'";
  EXPECT_EQ(pay(std::string(65, 'r'), std::nullopt).status().field(), "reference");
  EXPECT_TRUE(pay(std::string(64, 'r'), std::nullopt).ok());
  EXPECT_TRUE(pay("注文-42", std::nullopt).ok()) << "visible beyond ASCII";
  EXPECT_EQ(pay(std::nullopt, "").status().field(), "reason");
  EXPECT_EQ(pay(std::nullopt, std::string(201, 'x')).status().field(), "reason");
  EXPECT_EQ(pay(std::nullopt, "two\nlines").status().field(), "reason");
  EXPECT_EQ(pay(std::nullopt, " padded").status().field(), "reason");
  EXPECT_EQ(pay(std::nullopt, "line\u2028separator").status().field(), "reason");
  EXPECT_TRUE(pay(std::nullopt, std::string(200, 'x')).ok());
  EXPECT_TRUE(pay(std::nullopt, "a reason with spaces").ok());
  EXPECT_TRUE(pay(std::nullopt, "cafe\u0301").ok()) << "a mark at the end belongs to the e";
  EXPECT_EQ(AllRows(*service, 31).size(), before + 10) << "only the ten valid payments wrote";
  ExpectInvariants();
}

// A card's balance at a time, from its history: the balance after its
// newest row at or before the time (that row's own time included), 0
// before its first row; the future and unknown cards are refused.
TEST_P(PointCardContract, TheBalanceAtATimeComesFromTheHistory) {
  auto at = [&](int64_t card, int64_t t) {
    return Wait<Result<pointcard::BalanceAsOf>>([&](auto done) { service->BalanceAt(card, t, done); });
  };
  // The last 10 s may still change (a write stamped in them may not have
  // committed): refused by default.
  EXPECT_EQ(at(40, pointcard::NowUs() - 1000000).status().field(), "asOf");
  EXPECT_TRUE(at(40, pointcard::NowUs() - pointcard::PointCardService::kAsOfSettleDefaultUs - 1000000).ok());
  service->set_as_of_settle_us(0);  // here every write has committed
  auto rows = AllRows(*service, 40);
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(at(40, rows.front().payment_time_us - 1)->balance, 0) << "before the first row";
  for (const auto& r : rows) {
    auto b = at(40, r.payment_time_us);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    EXPECT_EQ(b->balance, r.balance) << "at the row's own time";
    EXPECT_EQ(b->as_of_us, r.payment_time_us);
  }
  auto charge = Pay(*service, 40, 1, 321);
  ASSERT_TRUE(charge.ok());
  EXPECT_EQ(at(40, charge->row.payment_time_us - 1)->balance, rows.back().balance) << "just before the charge";
  EXPECT_EQ(at(40, pointcard::NowUs())->balance, GetCard(*service, 40)->balance) << "now, with no grant pending";
  EXPECT_EQ(at(40, 0)->balance, 0) << "the epoch";
  EXPECT_EQ(at(40, pointcard::NowUs() + 60000000).status().field(), "asOf");
  EXPECT_EQ(at(kContractCards + 1, pointcard::NowUs()).status().code(), ErrorCode::kNotFound);
}

}  // namespace hotrow::testing
