// Refunds on PostgreSQL beyond the contract: the checker's "refund" probe
// (invariant 12) finds a refund of too much, at another store or of a
// charge, as the SQLite checker does (Checker.FindsARefundOfTooMuchOfAnotherCardOrStoreOrOfACharge).
#include <gtest/gtest.h>

#include "pg/pg_cards_fixture.h"

namespace hotrow::testing {
namespace {

TEST(PostgresRefunds, TheCheckerFindsARefundOfTooMuchAtAnotherStoreOrOfACharge) {
  PgCardsFixture f;
  auto pay = [&](int64_t amount) {
    return Wait<Result<pointcard::PaymentOutcome>>([&](auto done) {
      f.service->Pay(pointcard::Payment{40, 3, amount}, done);
    });
  };
  auto charge = pay(1000);
  auto paid = pay(-100);
  ASSERT_TRUE(charge.ok() && paid.ok());
  auto refund = Wait<Result<pointcard::PaymentOutcome>>([&](auto done) {
    f.service->Refund({.card_id = 40, .transaction_id = paid->row.transaction_id, .amount = 60, .idempotency_key = "r"},
                      done);
  });
  ASSERT_TRUE(refund.ok()) << refund.status().ToString();
  f.ExpectInvariants();
  const std::string row = " WHERE KIND = 'refund'";
  const std::string of = std::to_string(paid->row.transaction_id);
  f.ExpectFound("UPDATE H_TRANSACTION SET STORE_ID = 4" + row, "UPDATE H_TRANSACTION SET STORE_ID = 3" + row, "refund");
  f.ExpectFound("UPDATE H_TRANSACTION SET REFUND_OF = " + std::to_string(charge->row.transaction_id) + row,
                "UPDATE H_TRANSACTION SET REFUND_OF = " + of + row, "refund");
  f.ExpectFound("UPDATE H_TRANSACTION SET REFUND_OF = 1" + row, "UPDATE H_TRANSACTION SET REFUND_OF = " + of + row,
                "refund");
  f.ExpectFound("UPDATE H_TRANSACTION SET AMOUNT = 101, BALANCE = BALANCE + 41" + row,
                "UPDATE H_TRANSACTION SET AMOUNT = 60, BALANCE = BALANCE - 41" + row, "refund");
  f.ExpectFound("UPDATE H_TRANSACTION SET REFUND_OF = NULL" + row, "UPDATE H_TRANSACTION SET REFUND_OF = " + of + row,
                "row fields");
  f.ExpectInvariants();
}

}  // namespace
}  // namespace hotrow::testing
