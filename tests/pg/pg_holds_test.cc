// Holds on PostgreSQL beyond the contract: the checker's "hold", "capture"
// and "held" probes (invariant 13) find what the SQLite checker finds
// (Checker.FindsAHoldOutOfOrderACaptureOfNoHoldAndMoreHeldThanTheCardHas).
#include <gtest/gtest.h>

#include "pg/pg_cards_fixture.h"

namespace hotrow::testing {
namespace {

TEST(PostgresHolds, TheCheckerFindsAHoldOutOfOrderACaptureOfNoHoldAndMoreHeldThanTheCardHas) {
  PgCardsFixture f;
  auto charged = Wait<Result<pointcard::PaymentOutcome>>([&](auto done) {
    f.service->Pay(pointcard::Payment{40, 3, 1000}, done);
  });
  ASSERT_TRUE(charged.ok());
  auto hold = [&](int64_t amount) {
    return Wait<Result<pointcard::HoldOutcome>>([&](auto done) {
      f.service->CreateHold({.card_id = 40, .store_id = 3, .amount = amount, .expires_in_seconds = 3600}, done);
    });
  };
  auto captured = hold(-15);
  auto open = hold(-1);
  ASSERT_TRUE(captured.ok() && open.ok()) << captured.status().ToString();
  auto capture = Wait<Result<pointcard::HoldOutcome>>([&](auto done) {
    f.service->EndHold({.card_id = 40, .hold_id = captured->hold.hold_id, .capture = true, .amount = -10}, done);
  });
  ASSERT_TRUE(capture.ok()) << capture.status().ToString();
  f.ExpectInvariants();
  const std::string c = " WHERE HOLD_ID = " + std::to_string(captured->hold.hold_id);
  const std::string o = " WHERE HOLD_ID = " + std::to_string(open->hold.hold_id);
  f.ExpectFound("UPDATE P_HOLD SET CAPTURED_AMOUNT = -16" + c, "UPDATE P_HOLD SET CAPTURED_AMOUNT = -10" + c, "hold");
  f.ExpectFound("UPDATE P_HOLD SET STORE_ID = 4" + c, "UPDATE P_HOLD SET STORE_ID = 3" + c, "hold");
  f.ExpectFound("UPDATE P_HOLD SET EXPIRES_TIME = ENDED_TIME" + c,
                "UPDATE P_HOLD SET EXPIRES_TIME = CREATED_TIME + interval '1 hour'" + c, "hold");
  f.ExpectFound(
      "UPDATE P_HOLD SET STATUS = 'voided', CAPTURE_ID = NULL" + c,
      "UPDATE P_HOLD SET STATUS = 'captured', CAPTURE_ID = " + std::to_string(capture->row->transaction_id) + c,
      "capture");
  f.ExpectFound("UPDATE P_HOLD SET STATUS = 'expired'" + o, "UPDATE P_HOLD SET STATUS = 'open'" + o, "hold");
  f.ExpectFound("UPDATE P_HOLD SET AMOUNT = -1000000" + o, "UPDATE P_HOLD SET AMOUNT = -1" + o, "held");
  // A card whose HOLD_TIME lost its holds (a reseed that kept P_HOLD did
  // this): its payments would read no P_HOLD.
  f.ExpectFound(
      "UPDATE S_ACCOUNT SET HOLD_TIME = NULL WHERE CARD_ID = 40",
      "UPDATE S_ACCOUNT SET HOLD_TIME = (SELECT MAX(GREATEST(CREATED_TIME, ENDED_TIME)) FROM P_HOLD WHERE CARD_ID = "
      "40) "
      "WHERE CARD_ID = 40",
      "hold");
  f.ExpectInvariants();
}

}  // namespace
}  // namespace hotrow::testing
