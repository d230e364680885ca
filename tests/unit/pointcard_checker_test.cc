// The point-card invariant checker (pointcard/check.h) on SQLite: a small
// seeded database corrupted by hand in each way it must find, the grants
// recomputed, samples and scopes.
#include <map>
#include <set>
#include <tuple>

#include <gtest/gtest.h>

#include "db/sqlite_database.h"
#include "harness/or_throw.h"
#include "harness/server_process.h"
#include "pointcard/check.h"
#include "pointcard/sqlite_store.h"
#include "unit/pointcard_sqlite_helpers.h"

namespace hotrow::testing {
namespace {

class Checker : public ::testing::Test {
 protected:
  void SetUp() override {
    auto conn = db::sqlite::Connection::Open(dir.File("c.db"), db::sqlite::OpenMode::kReadWrite);
    ASSERT_TRUE(conn.ok());
    conn_ = std::move(conn).value();
    ASSERT_TRUE(SeedSmall(*conn_).ok());
    auto clean = pointcard::CheckInvariants(*conn_);
    ASSERT_TRUE(clean.ok() && clean->ok()) << "freshly seeded data must pass";
    EXPECT_EQ(clean->cards, kContractCards);
    EXPECT_EQ(clean->rows, kContractHistory);
  }
  // Corrupts with `sql`, then expects exactly `kind` to be reported.
  void ExpectFound(const std::string& sql, const std::string& kind) {
    ASSERT_TRUE(conn_->Exec(sql).ok()) << sql;
    auto report = pointcard::CheckInvariants(*conn_);
    ASSERT_TRUE(report.ok());
    EXPECT_FALSE(report->ok());
    EXPECT_TRUE(report->violations.count(kind)) << "expected a '" << kind << "' violation after: " << sql;
    ASSERT_FALSE(report->examples.empty());
  }
  // A card that has history, and its newest row's time.
  std::pair<int64_t, int64_t> CardWithHistory() {
    auto card = db::sqlite::QueryInt(*conn_,
                                     "SELECT CARD_ID FROM H_TRANSACTION GROUP BY CARD_ID HAVING COUNT(*) >= 2 "
                                     "ORDER BY CARD_ID LIMIT 1");
    auto time = db::sqlite::QueryInt(
        *conn_, "SELECT MAX(PAYMENT_TIME) FROM H_TRANSACTION WHERE CARD_ID = " + std::to_string(*card));
    return {*card, *time};
  }
  TempDir dir;
  std::unique_ptr<db::sqlite::Connection> conn_;
};

TEST_F(Checker, FindsABalanceThatDisagreesWithTheHistory) {
  auto [card, time] = CardWithHistory();
  ExpectFound("UPDATE S_ACCOUNT SET BALANCE = BALANCE + 1 WHERE CARD_ID = " + std::to_string(card), "balance");
}

TEST_F(Checker, FindsABrokenRunningBalance) {
  auto [card, time] = CardWithHistory();
  ExpectFound("UPDATE H_TRANSACTION SET BALANCE = BALANCE + 5 WHERE CARD_ID = " + std::to_string(card) +
                  " AND PAYMENT_TIME = (SELECT MIN(PAYMENT_TIME) FROM H_TRANSACTION WHERE CARD_ID = " +
                  std::to_string(card) + ")",
              "running balance");
}

TEST_F(Checker, FindsANegativeBalance) {
  auto [card, time] = CardWithHistory();
  std::string c = std::to_string(card);
  ExpectFound(std::string(kInsertRow) + std::to_string(time + 1) + ", " + c +
                  ", 1, -100000000, (SELECT BALANCE FROM S_ACCOUNT WHERE CARD_ID = " + c +
                  ") - 100000000, 'payment', " + kNextId +
                  ", 'anonymous'); UPDATE S_ACCOUNT SET BALANCE = BALANCE - 100000000, LAST_UPDATE = " +
                  std::to_string(time + 1) + " WHERE CARD_ID = " + c,
              "negative balance");
}

TEST_F(Checker, FindsAStaleLastUpdate) {
  auto [card, time] = CardWithHistory();
  ExpectFound("UPDATE S_ACCOUNT SET LAST_UPDATE = LAST_UPDATE - 1 WHERE CARD_ID = " + std::to_string(card),
              "last update");
}

// Invariant 9: each row's own fields.
TEST_F(Checker, FindsARowWithoutItsTransactionIdOrWithABadActor) {
  auto [card, time] = CardWithHistory();
  std::string row = " WHERE CARD_ID = " + std::to_string(card) + " AND PAYMENT_TIME = " + std::to_string(time);
  ExpectFound("UPDATE H_TRANSACTION SET TRANSACTION_ID = NULL" + row, "row fields");
  ASSERT_TRUE(conn_->Exec("UPDATE H_TRANSACTION SET TRANSACTION_ID = 1000000" + row).ok());
  EXPECT_TRUE(pointcard::CheckInvariants(*conn_)->ok());
  ExpectFound("UPDATE H_TRANSACTION SET ACTOR = 'root'" + row, "row fields");
}

TEST_F(Checker, FindsAChargeWrittenBySystemAndAReferenceWithASpace) {
  auto [card, time] = CardWithHistory();
  std::string row = " WHERE CARD_ID = " + std::to_string(card) + " AND PAYMENT_TIME = " + std::to_string(time);
  ExpectFound("UPDATE H_TRANSACTION SET ACTOR = 'system'" + row, "row fields");
  ASSERT_TRUE(conn_->Exec("UPDATE H_TRANSACTION SET ACTOR = 'admin'" + row).ok());
  EXPECT_TRUE(pointcard::CheckInvariants(*conn_)->ok());
  ExpectFound("UPDATE H_TRANSACTION SET REFERENCE = 'A 1'" + row, "row fields");
  ASSERT_TRUE(
      conn_->Exec("UPDATE H_TRANSACTION SET REFERENCE = NULL, REASON = 'two' || char(10) || 'lines'" + row).ok());
  EXPECT_FALSE(pointcard::CheckInvariants(*conn_)->ok());
}

TEST_F(Checker, FindsAGrantRowNotWrittenBySystemAndAnOverlongReference) {
  auto [card, time] = CardWithHistory();
  std::string row = " WHERE CARD_ID = " + std::to_string(card) + " AND PAYMENT_TIME = " + std::to_string(time);
  ExpectFound("UPDATE H_TRANSACTION SET REFERENCE = '" + std::string(65, 'r') + "'" + row, "row fields");
  ASSERT_TRUE(conn_->Exec("UPDATE H_TRANSACTION SET REFERENCE = '" + std::string(64, 'r') + "'" + row).ok());
  EXPECT_TRUE(pointcard::CheckInvariants(*conn_)->ok());
  // The card's opening row is a charge: made a grant's, by the admin.
  ExpectFound("UPDATE H_TRANSACTION SET STORE_ID = 0, KIND = 'grant', ACTOR = 'admin' WHERE CARD_ID = " +
                  std::to_string(card) + " AND PAYMENT_TIME = (SELECT MIN(PAYMENT_TIME) FROM H_TRANSACTION " +
                  "WHERE CARD_ID = " + std::to_string(card) + ")",
              "row fields");
}

// Invariant 10: each card's state.
TEST_F(Checker, FindsABadCardStateAndAPaymentAfterAClose) {
  auto [card, time] = CardWithHistory();
  std::string c = std::to_string(card), where = " WHERE CARD_ID = " + c;
  ExpectFound("UPDATE S_ACCOUNT SET STATUS = 'frozen'" + where, "card state");
  ExpectFound("UPDATE S_ACCOUNT SET STATUS = 'closed'" + where, "card state");  // no CLOSED_TIME
  ASSERT_TRUE(conn_->Exec("UPDATE S_ACCOUNT SET CLOSED_TIME = " + std::to_string(time + 10) + where).ok());
  EXPECT_TRUE(pointcard::CheckInvariants(*conn_)->ok()) << "closed after its newest row";
  ExpectFound("UPDATE S_ACCOUNT SET EXTERNAL_REF = 'two words'" + where, "card state");
  ASSERT_TRUE(conn_->Exec("UPDATE S_ACCOUNT SET EXTERNAL_REF = 'member-1'" + where).ok());
  EXPECT_TRUE(pointcard::CheckInvariants(*conn_)->ok());
  // A charge written around the close.
  ExpectFound(std::string(kInsertRow) + std::to_string(time + 20) + ", " + c +
                  ", 1, 5, (SELECT BALANCE FROM S_ACCOUNT WHERE CARD_ID = " + c + ") + 5, 'charge', " + kNextId +
                  ", 'anonymous'); UPDATE S_ACCOUNT SET BALANCE = BALANCE + 5, LAST_UPDATE = " +
                  std::to_string(time + 20) + where,
              "closed card");
}

// Invariant 11: a store key's rows.
TEST_F(Checker, FindsARowOfAnUnknownKeyAnotherStoresKeyAndARevokedKey) {
  auto [card, time] = CardWithHistory();
  std::string row = " WHERE CARD_ID = " + std::to_string(card) + " AND PAYMENT_TIME = " + std::to_string(time);
  auto store = db::sqlite::QueryInt(*conn_, "SELECT STORE_ID FROM H_TRANSACTION" + row);
  ASSERT_TRUE(store.ok());
  ExpectFound("UPDATE H_TRANSACTION SET ACTOR = 'key:0123456789abcdef'" + row, "store key");
  ASSERT_TRUE(conn_
                  ->Exec("INSERT INTO M_STORE_KEY VALUES ('0123456789abcdef', " + std::to_string(*store) +
                         ", 'digest', " + std::to_string(time - 10) + ", NULL, NULL)")
                  .ok());
  EXPECT_TRUE(pointcard::CheckInvariants(*conn_)->ok()) << "a key of the row's store, made before it";
  ExpectFound("UPDATE M_STORE_KEY SET STORE_ID = STORE_ID + 1", "store key");
  ASSERT_TRUE(conn_->Exec("UPDATE M_STORE_KEY SET STORE_ID = STORE_ID - 1").ok());
  ExpectFound("UPDATE M_STORE_KEY SET REVOKED_TIME = " + std::to_string(time), "store key");
  ASSERT_TRUE(conn_->Exec("UPDATE M_STORE_KEY SET REVOKED_TIME = " + std::to_string(time + 1)).ok());
  EXPECT_TRUE(pointcard::CheckInvariants(*conn_)->ok()) << "revoked after the row";
  ExpectFound("UPDATE M_STORE_KEY SET CREATED_TIME = " + std::to_string(time + 1), "store key");
}

// Invariant 12: refunds (and REFUND_OF on refunds only, 9.).
TEST_F(Checker, FindsARefundOfTooMuchOfAnotherCardOrStoreOrOfACharge) {
  auto [card, time] = CardWithHistory();
  const std::string c = std::to_string(card);
  // A payment of 100 and a refund of 60 of it, written as the server does.
  auto append = [&, time = time](int64_t at, int64_t store, int64_t amount, const std::string& kind,
                                 const std::string& refund_of) {
    const std::string t = std::to_string(time + at);
    ASSERT_TRUE(conn_
                    ->Exec("INSERT INTO H_TRANSACTION (PAYMENT_TIME, CARD_ID, STORE_ID, AMOUNT, BALANCE, KIND, "
                           "TRANSACTION_ID, ACTOR, REFUND_OF) VALUES (" +
                           t + ", " + c + ", " + std::to_string(store) + ", " + std::to_string(amount) +
                           ", (SELECT BALANCE FROM S_ACCOUNT WHERE CARD_ID = " + c + ") + " + std::to_string(amount) +
                           ", '" + kind + "', " + kNextId + ", 'anonymous', " + refund_of +
                           "); UPDATE S_ACCOUNT SET BALANCE = BALANCE + " + std::to_string(amount) +
                           ", LAST_UPDATE = " + t + " WHERE CARD_ID = " + c)
                    .ok());
  };
  append(10, 3, 1000, "charge", "NULL");
  append(20, 3, -100, "payment", "NULL");
  const std::string payment = "(SELECT TRANSACTION_ID FROM H_TRANSACTION WHERE CARD_ID = " + c +
                              " AND PAYMENT_TIME = " + std::to_string(time + 20) + ")";
  append(30, 3, 60, "refund", payment);
  auto clean = pointcard::CheckInvariants(*conn_);
  ASSERT_TRUE(clean.ok());
  EXPECT_TRUE(clean->ok()) << (clean->examples.empty() ? "" : clean->examples[0]);
  const std::string refund = " WHERE KIND = 'refund'";
  ExpectFound("UPDATE H_TRANSACTION SET STORE_ID = 4" + refund, "refund");
  ASSERT_TRUE(conn_->Exec("UPDATE H_TRANSACTION SET STORE_ID = 3" + refund).ok());
  ExpectFound("UPDATE H_TRANSACTION SET REFUND_OF = REFUND_OF - 1" + refund, "refund");  // the charge
  ASSERT_TRUE(conn_->Exec("UPDATE H_TRANSACTION SET REFUND_OF = REFUND_OF + 1" + refund).ok());
  ExpectFound("UPDATE H_TRANSACTION SET REFUND_OF = 1" + refund, "refund");  // another card's row
  ASSERT_TRUE(conn_->Exec("UPDATE H_TRANSACTION SET REFUND_OF = " + payment + refund).ok());
  EXPECT_TRUE(pointcard::CheckInvariants(*conn_)->ok());
  ExpectFound("UPDATE H_TRANSACTION SET REFUND_OF = 999999999" + refund, "refund");  // no such row
  ASSERT_TRUE(conn_->Exec("UPDATE H_TRANSACTION SET REFUND_OF = " + payment + refund).ok());
  append(40, 3, 41, "refund", payment);  // 101 of 100
  ExpectFound("SELECT 1", "refund");
  ExpectFound("UPDATE H_TRANSACTION SET REFUND_OF = NULL" + refund, "row fields");
  ExpectFound("UPDATE H_TRANSACTION SET REFUND_OF = 1 WHERE KIND = 'charge' AND CARD_ID = " + c, "row fields");
}

// Invariant 13: a hold's amount, status and times in order, its capture row
// a capture of its card and store within its amount, every capture row
// named by one captured hold, and no card holding more than it has.
TEST_F(Checker, FindsAHoldOutOfOrderACaptureOfNoHoldAndMoreHeldThanTheCardHas) {
  auto [card, time] = CardWithHistory();
  const std::string c = std::to_string(card), t = std::to_string(time);
  auto balance = db::sqlite::QueryInt(*conn_, "SELECT BALANCE FROM S_ACCOUNT WHERE CARD_ID = " + c);
  ASSERT_TRUE(balance.ok());
  ASSERT_GT(*balance, 10) << "the seed gave the card points";
  // A capture of 10 at store 3, written as the server does: the row, then
  // its captured hold; and an open hold of 1 for an hour.
  ASSERT_TRUE(conn_
                  ->Exec("INSERT INTO H_TRANSACTION (PAYMENT_TIME, CARD_ID, STORE_ID, AMOUNT, BALANCE, KIND, "
                         "TRANSACTION_ID, ACTOR) VALUES (" +
                         t + " + 20, " + c + ", 3, -10, " + std::to_string(*balance - 10) + ", 'capture', " + kNextId +
                         ", 'anonymous'); UPDATE S_ACCOUNT SET BALANCE = BALANCE - 10, LAST_UPDATE = " + t +
                         " + 20 WHERE CARD_ID = " + c +
                         "; INSERT INTO P_HOLD (HOLD_ID, CARD_ID, STORE_ID, AMOUNT, STATUS, CREATED_TIME, "
                         "EXPIRES_TIME, ENDED_TIME, CAPTURE_ID, CAPTURED_AMOUNT, ACTOR) VALUES (1, " +
                         c + ", 3, -15, 'captured', " + t + " + 10, " + t + " + 1000000, " + t +
                         " + 20, (SELECT MAX(TRANSACTION_ID) FROM H_TRANSACTION), -10, 'anonymous'); "
                         "INSERT INTO P_HOLD (HOLD_ID, CARD_ID, STORE_ID, AMOUNT, STATUS, CREATED_TIME, EXPIRES_TIME, "
                         "ACTOR) VALUES (2, " +
                         c + ", 3, -1, 'open', " + t + " + 30, 9000000000000000, 'anonymous')")
                  .ok());
  auto clean = pointcard::CheckInvariants(*conn_);
  ASSERT_TRUE(clean.ok());
  EXPECT_TRUE(clean->ok()) << (clean->examples.empty() ? "" : clean->examples[0]);
  const std::string captured = " WHERE HOLD_ID = 1";
  ExpectFound("UPDATE P_HOLD SET CAPTURED_AMOUNT = -16" + captured, "hold");  // more than it held
  ASSERT_TRUE(conn_->Exec("UPDATE P_HOLD SET CAPTURED_AMOUNT = -10" + captured).ok());
  ExpectFound("UPDATE P_HOLD SET STORE_ID = 4" + captured, "hold");  // its row is another store's
  ASSERT_TRUE(conn_->Exec("UPDATE P_HOLD SET STORE_ID = 3" + captured).ok());
  ExpectFound("UPDATE P_HOLD SET EXPIRES_TIME = ENDED_TIME" + captured, "hold");  // captured at its expiry
  ASSERT_TRUE(conn_->Exec("UPDATE P_HOLD SET EXPIRES_TIME = " + t + " + 1000000" + captured).ok());
  ExpectFound("UPDATE P_HOLD SET STATUS = 'voided', CAPTURE_ID = NULL" + captured, "capture");  // a row of no hold
  ASSERT_TRUE(conn_
                  ->Exec("UPDATE P_HOLD SET STATUS = 'captured', CAPTURE_ID = (SELECT MAX(TRANSACTION_ID) FROM "
                         "H_TRANSACTION)" +
                         captured)
                  .ok());
  EXPECT_TRUE(pointcard::CheckInvariants(*conn_)->ok());
  ExpectFound("UPDATE P_HOLD SET STATUS = 'expired' WHERE HOLD_ID = 2", "hold");  // expired with no end
  ASSERT_TRUE(conn_->Exec("UPDATE P_HOLD SET STATUS = 'open' WHERE HOLD_ID = 2").ok());
  ExpectFound("UPDATE P_HOLD SET AMOUNT = -" + std::to_string(*balance) + " WHERE HOLD_ID = 2", "held");
}

// Lots (invariant 14), written as the server does: a grant of 10% of a
// charge of 500, expiring, folded as the card's lot of 50; a payment of 20
// from it; its expiry's row of the other 30.
TEST_F(Checker, FindsALotThatDoesNotAddUpAUseOfTheWrongSignAndAnExpiryOfNoLot) {
  auto [card, newest] = CardWithHistory();
  auto last = db::sqlite::QueryInt(*conn_, "SELECT MAX(PAYMENT_TIME) FROM H_TRANSACTION");
  auto balance = db::sqlite::QueryInt(*conn_, "SELECT BALANCE FROM S_ACCOUNT WHERE CARD_ID = " + std::to_string(card));
  ASSERT_TRUE(last.ok() && balance.ok());
  const std::string c = std::to_string(card), t = std::to_string(*last), b = std::to_string(*balance);
  auto row = [&](int at, int64_t amount, int64_t after, const char* kind, const char* actor, int store) {
    return std::string(kInsertRow) + t + " + " + std::to_string(at) + ", " + c + ", " + std::to_string(store) + ", " +
           std::to_string(amount) + ", " + b + " + " + std::to_string(after) + ", '" + kind + "', " + kNextId + ", '" +
           actor + "'); ";
  };
  ASSERT_TRUE(conn_
                  ->Exec(row(5, 500, 500, "charge", "anonymous", 2) +
                         "INSERT INTO P_GRANT (GRANT_ID, GRANT_TIME, FROM_TIME, TO_TIME, RATE_PERCENT, CARDS, POINTS, "
                         "QUERY_MS, UPDATE_MS, STATE, APPLIED_TIME, FOLDED_TIME, EXPIRES_TIME) VALUES (77, " +
                         t + " + 6, " + t + " + 4, " + t + " + 6, 10, 1, 50, 0, 0, 'folded', " + t + " + 7, " + t +
                         " + 10, " + t + " + 25); " + row(10, 50, 550, "grant", "system", 0) +
                         "INSERT INTO P_LOT (LOT_ID, CARD_ID, GRANT_ID, SOURCE_ID, AMOUNT, REMAINING, RESERVED, "
                         "CREATED_TIME, EXPIRES_TIME, EXPIRED_TIME, EXPIRY_ID) VALUES (1, " +
                         c + ", 77, (SELECT MAX(TRANSACTION_ID) FROM H_TRANSACTION), 50, 0, 0, " + t + " + 10, " + t +
                         " + 25, " + t + " + 30, NULL); " + row(20, -20, 530, "payment", "anonymous", 2) +
                         "INSERT INTO P_LOT_USE VALUES ((SELECT MAX(TRANSACTION_ID) FROM H_TRANSACTION), 1, -20); " +
                         row(31, -30, 500, "expiry", "system", 0) +
                         "INSERT INTO P_LOT_USE VALUES ((SELECT MAX(TRANSACTION_ID) FROM H_TRANSACTION), 1, -30); "
                         "UPDATE P_LOT SET EXPIRY_ID = (SELECT MAX(TRANSACTION_ID) FROM H_TRANSACTION); "
                         "UPDATE S_ACCOUNT SET BALANCE = " +
                         b + " + 500, LAST_UPDATE = " + t + " + 31 WHERE CARD_ID = " + c)
                  .ok());
  auto clean = pointcard::CheckInvariants(*conn_);
  ASSERT_TRUE(clean.ok());
  EXPECT_TRUE(clean->ok()) << (clean->examples.empty() ? "" : clean->examples[0]);
  ExpectFound("UPDATE P_LOT SET REMAINING = 5", "lot");  // more left than its uses leave
  ASSERT_TRUE(conn_->Exec("UPDATE P_LOT SET REMAINING = 0").ok());
  ExpectFound("UPDATE P_LOT SET EXPIRES_TIME = EXPIRES_TIME + 1", "lot");  // not its grant's expiry
  ASSERT_TRUE(conn_->Exec("UPDATE P_LOT SET EXPIRES_TIME = EXPIRES_TIME - 1").ok());
  ExpectFound("UPDATE P_LOT_USE SET AMOUNT = 20 WHERE AMOUNT = -20", "lot use");  // a payment that gives
  ASSERT_TRUE(conn_->Exec("UPDATE P_LOT_USE SET AMOUNT = -20 WHERE AMOUNT = 20").ok());
  ExpectFound("UPDATE P_LOT SET EXPIRED_TIME = EXPIRES_TIME - 1", "lot");  // written out before its expiry
  ASSERT_TRUE(conn_->Exec("UPDATE P_LOT SET EXPIRED_TIME = EXPIRES_TIME + 5").ok());
  EXPECT_TRUE(pointcard::CheckInvariants(*conn_)->ok());
  ExpectFound("DELETE FROM P_LOT_USE WHERE AMOUNT = -30", "expiry");  // an expiry of no lot
}

TEST_F(Checker, FindsHistoryOfACardThatDoesNotExist) {
  ExpectFound(std::string(kInsertRow) + "1, 999999, 1, 100, 100, 'charge', " + kNextId + ", 'anonymous')",
              "orphan history");
}

TEST_F(Checker, FindsALostHistoryRow) {
  auto [card, time] = CardWithHistory();
  ExpectFound("DELETE FROM H_TRANSACTION WHERE CARD_ID = " + std::to_string(card) +
                  " AND PAYMENT_TIME = " + std::to_string(time),
              "balance");
}

TEST_F(Checker, TheCommandExitsOneWithAReport) {
  auto [card, time] = CardWithHistory();
  ASSERT_TRUE(conn_->Exec("UPDATE S_ACCOUNT SET BALANCE = 7 WHERE CARD_ID = " + std::to_string(card)).ok());
  auto r = RunHotrow({"check", "pointcard", "--db", "sqlite:" + dir.File("c.db")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("FAILED"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("card " + std::to_string(card) + " has BALANCE 7"), std::string::npos) << r.output;
  ASSERT_TRUE(conn_
                  ->Exec("UPDATE S_ACCOUNT SET BALANCE = (SELECT SUM(AMOUNT) FROM H_TRANSACTION WHERE CARD_ID = " +
                         std::to_string(card) + ") WHERE CARD_ID = " + std::to_string(card))
                  .ok());
  auto fixed = RunHotrow({"check", "pointcard", "--db", "sqlite:" + dir.File("c.db")});
  EXPECT_EQ(fixed.exit_code, 0) << fixed.output;
  EXPECT_NE(fixed.output.find("OK: every invariant holds"), std::string::npos);
}

}  // namespace
}  // namespace hotrow::testing

namespace hotrow::testing {
namespace {

class CheckerCredits : public Checker {
 protected:
  std::set<std::string> Found(const std::string& sql) {
    EXPECT_TRUE(conn_->Exec(sql).ok()) << sql;
    auto report = pointcard::CheckInvariants(*conn_);
    EXPECT_TRUE(report.ok());
    std::set<std::string> kinds;
    for (const auto& [kind, n] : report->violations) kinds.insert(kind);
    return kinds;
  }
};

TEST_F(CheckerCredits, ARowWhoseKindContradictsItIsFound) {
  EXPECT_EQ(Found("UPDATE H_TRANSACTION SET KIND = 'grant', ACTOR = 'system' WHERE PAYMENT_TIME = "
                  "(SELECT MIN(PAYMENT_TIME) FROM H_TRANSACTION WHERE KIND = 'charge')"),
            std::set<std::string>{"kind"});
}

TEST_F(CheckerCredits, CreditOfAFoldedGrantOrAMissingCardIsFound) {
  ASSERT_TRUE(conn_
                  ->Exec("INSERT INTO P_GRANT (GRANT_ID, GRANT_TIME, FROM_TIME, TO_TIME, RATE_PERCENT, CARDS, POINTS, "
                         "QUERY_MS, UPDATE_MS, STATE) VALUES (1, 1, 0, 1, 1, 1, 5, 0, 0, 'applied'), "
                         "(2, 2, 0, 1, 1, 1, 5, 0, 0, 'folded')")
                  .ok());
  auto pending = Found("INSERT INTO P_GRANT_CREDIT VALUES (1, 1, 5)");
  EXPECT_TRUE(pending.empty()) << "an applied grant's credit is pending, not wrong";
  auto report = pointcard::CheckInvariants(*conn_);
  EXPECT_EQ(report->pending_points, 5);
  EXPECT_EQ(Found("INSERT INTO P_GRANT_CREDIT VALUES (2, 2, 5)"), std::set<std::string>{"stale credit"});
  EXPECT_EQ(Found("DELETE FROM P_GRANT_CREDIT WHERE GRANT_ID = 2; INSERT INTO P_GRANT_CREDIT VALUES (999999, 1, 5)"),
            std::set<std::string>{"orphan credit"});
}

// Invariant 8: an applied grant gave each card its bonus, recomputed from
// the period's charges, in its history or pending. A grant applied by hand
// with exactly those credits passes, folded or not; each way of breaking
// it is found, and only where the check looks.
class CheckerGrant : public CheckerCredits {
 protected:
  void SetUp() override {
    CheckerCredits::SetUp();
    t0_ = *db::sqlite::QueryInt(*conn_, "SELECT MAX(PAYMENT_TIME) FROM H_TRANSACTION") + 10;
    std::string t = std::to_string(t0_);
    ASSERT_TRUE(
        conn_
            ->Exec("INSERT INTO P_GRANT (GRANT_ID, GRANT_TIME, FROM_TIME, TO_TIME, RATE_PERCENT, CARDS, "
                   "POINTS, QUERY_MS, UPDATE_MS, STATE, APPLIED_TIME) VALUES (1, " +
                   t + ", 0, " + t + ", 10, 0, 0, 0, 0, 'applied', " + t +
                   " + 1); INSERT INTO P_GRANT_CREDIT SELECT CARD_ID, 1, SUM(AMOUNT) * 10 / 100 "
                   "FROM H_TRANSACTION WHERE KIND = 'charge' GROUP BY CARD_ID HAVING SUM(AMOUNT) * 10 / 100 > 0; "
                   "UPDATE P_GRANT SET CARDS = (SELECT COUNT(*) FROM P_GRANT_CREDIT), "
                   "POINTS = (SELECT SUM(POINTS) FROM P_GRANT_CREDIT)")
            .ok());
    card_ = *db::sqlite::QueryInt(*conn_, "SELECT MIN(CARD_ID) FROM P_GRANT_CREDIT");
  }
  // Folds `card`'s credit into a grant row at `time`, as the fold does;
  // `keep_credit` leaves the credit too (folded twice).
  std::string Fold(int64_t card, int64_t time, bool keep_credit = false) {
    std::string c = std::to_string(card), at = std::to_string(time),
                pts = "(SELECT POINTS FROM P_GRANT_CREDIT WHERE CARD_ID = " + c + ")";
    return std::string(kInsertRow) + at + ", " + c + ", 0, " + pts +
           ", (SELECT BALANCE FROM S_ACCOUNT WHERE CARD_ID = " + c + ") + " + pts + ", 'grant', " + kNextId +
           ", 'system'); UPDATE S_ACCOUNT SET BALANCE = BALANCE + " + pts + ", LAST_UPDATE = " + at +
           " WHERE CARD_ID = " + c + ";" + (keep_credit ? "" : "DELETE FROM P_GRANT_CREDIT WHERE CARD_ID = " + c);
  }
  pointcard::CheckReport Report(pointcard::CheckScope scope = {}) {
    auto report = pointcard::CheckInvariants(*conn_, scope);
    EXPECT_TRUE(report.ok()) << report.status().ToString();
    return std::move(report).value();
  }
  int64_t t0_ = 0, card_ = 0;
};

TEST_F(CheckerGrant, ABonusPendingOrFoldedPasses) {
  auto pending = Report();
  EXPECT_TRUE(pending.ok()) << pending.examples.front();
  EXPECT_EQ(pending.grants_checked, 1);
  EXPECT_EQ(pending.grants_folding, 1);
  EXPECT_GT(pending.pending_points, 0);
  EXPECT_TRUE(Found(Fold(card_, t0_ + 2)).empty()) << "a credit folded as the fold does it";
}

TEST_F(CheckerGrant, ALostCreditIsFound) {
  EXPECT_EQ(Found("DELETE FROM P_GRANT_CREDIT WHERE CARD_ID = " + std::to_string(card_)),
            (std::set<std::string>{"grant", "grant total"}));
}

TEST_F(CheckerGrant, ACreditFoldedTwiceIsFound) {
  EXPECT_EQ(Found(Fold(card_, t0_ + 2, true)), (std::set<std::string>{"grant", "grant total"}));
}

TEST_F(CheckerGrant, ABonusGivenToTheWrongCardIsFound) {
  auto other = *db::sqlite::QueryInt(
      *conn_, "SELECT MIN(CARD_ID) FROM S_ACCOUNT WHERE CARD_ID NOT IN (SELECT CARD_ID FROM P_GRANT_CREDIT)");
  EXPECT_EQ(Found("UPDATE P_GRANT_CREDIT SET CARD_ID = " + std::to_string(other) +
                  " WHERE CARD_ID = " + std::to_string(card_)),
            std::set<std::string>{"grant"});
  EXPECT_EQ(Report().violations.at("grant"), 2) << "one card short, one given too much";
}

TEST_F(CheckerGrant, AGrantRowWrittenBeforeTheApplyIsFound) {
  // At t0: after the card's newest row, but before the grant applied.
  EXPECT_EQ(Found(Fold(card_, t0_)), (std::set<std::string>{"grant", "grant total", "grant row"}));
}

// A grant from before 0.5.0 (APPLIED_TIME = GRANT_TIME, long before) must
// not hide the rows no window holds: the check used to end that range at
// the legacy grant's time, before it began, and passed a card credited twice.
TEST_F(CheckerGrant, ALegacyGrantDoesNotHideARowOutsideEveryWindow) {
  ASSERT_TRUE(
      conn_
          ->Exec("INSERT INTO P_GRANT (GRANT_ID, GRANT_TIME, FROM_TIME, TO_TIME, RATE_PERCENT, CARDS, POINTS, "
                 "QUERY_MS, UPDATE_MS, STATE, APPLIED_TIME) VALUES (7, 1000, 0, 1, 1, 0, 0, 0, 0, 'folded', 1000)")
          .ok());
  EXPECT_TRUE(Report().ok()) << Report().examples.front();
  // The credit folded at t0 (after the grant began, before it applied) and
  // kept: the card is credited twice.
  auto kinds = Found(Fold(card_, t0_, true));
  EXPECT_TRUE(kinds.count("grant row")) << "found: " << kinds.size();
}

TEST_F(CheckerGrant, AStagingGrantDeliversNothing) {
  EXPECT_TRUE(Found("UPDATE P_GRANT SET STATE = 'staging'").empty()) << "its credits are invisible";
  EXPECT_EQ(Report().grants_staging, 1);
  EXPECT_EQ(Report().grants_checked, 0);
  EXPECT_EQ(Found(Fold(card_, t0_ + 2)), std::set<std::string>{"grant row"}) << "folded before its apply";
}

TEST_F(CheckerGrant, TheSampledCommandRepeatsAndStopsAtABrokenSnapshot) {
  std::string db = "sqlite:" + dir.File("c.db");
  auto ok = RunHotrow({"check", "pointcard", "--db", db, "--sample-cards", "50", "--for", "300ms"});
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("OK: every invariant holds in every snapshot"), std::string::npos) << ok.output;
  EXPECT_NE(ok.output.find("a grant applied and folding"), std::string::npos) << ok.output;
  ASSERT_TRUE(conn_->Exec("DELETE FROM P_GRANT_CREDIT WHERE CARD_ID = " + std::to_string(card_)).ok());
  auto broken =
      RunHotrow({"check", "pointcard", "--db", db, "--sample-cards", std::to_string(kContractCards), "--for", "5s"});
  EXPECT_EQ(broken.exit_code, 1) << broken.output;
  EXPECT_NE(broken.output.find("snapshot 1,"), std::string::npos) << broken.output;
  EXPECT_NE(broken.output.find("card " + std::to_string(card_) + ": grant 1 owes it"), std::string::npos)
      << broken.output;
  auto bad = RunHotrow({"check", "pointcard", "--db", db, "--for", "soon"});
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
}

// Sampling picks ranges of cards, not of ids: on ids 1..N and 2^63 - 1 it
// still finds a card broken among the first N, and the card of the largest
// id is checked by a whole check. Durations that are not one are refused.
TEST_F(CheckerGrant, TheSamplesAreCardsWhateverTheirIds) {
  std::string db = "sqlite:" + dir.File("c.db");
  ASSERT_TRUE(
      conn_
          ->Exec(
              "INSERT INTO S_ACCOUNT (CARD_ID, BALANCE, REGION_ID, LAST_UPDATE) VALUES (9223372036854775807, 0, 7, 0); "
              "UPDATE S_ACCOUNT SET BALANCE = BALANCE + 1 WHERE CARD_ID = " +
              std::to_string(card_))
          .ok());
  auto whole = Report();
  EXPECT_EQ(whole.violations.at("balance"), 1);
  EXPECT_EQ(whole.cards, kContractCards + 1);
  // Two cards a snapshot: the broken one is found long before 5 s are up.
  auto sampled = RunHotrow({"check", "pointcard", "--db", db, "--sample-cards", "2", "--for", "5s", "--every", "0"});
  EXPECT_EQ(sampled.exit_code, 1) << sampled.output;
  EXPECT_NE(sampled.output.find("card " + std::to_string(card_) + " has BALANCE"), std::string::npos) << sampled.output;
  for (std::vector<std::string> bad : {std::vector<std::string>{"--for", "nan"},
                                       {"--for", "inf"},
                                       {"--for", "0.4ms"},
                                       {"--for", "1e10s"},
                                       {"--for", "1s", "--every", "1e10s"},
                                       {"--every", "1s"}}) {
    std::vector<std::string> args = {"check", "pointcard", "--db", db};
    args.insert(args.end(), bad.begin(), bad.end());
    auto r = RunHotrow(args);
    EXPECT_EQ(r.exit_code, 2) << bad[0] << " " << bad[1] << ": " << r.output;
  }
}

TEST_F(CheckerGrant, AScopeChecksOnlyItsCards) {
  ASSERT_TRUE(conn_->Exec("DELETE FROM P_GRANT_CREDIT WHERE CARD_ID = " + std::to_string(card_)).ok());
  auto inside = Report({.card_first = card_, .card_last = card_});
  EXPECT_EQ(inside.violations.count("grant"), 1u);
  EXPECT_EQ(inside.violations.count("grant total"), 0u) << "totals are checked on every card only";
  EXPECT_EQ(inside.cards, 1);
  auto outside = Report({.card_first = card_ + 1, .card_last = card_ + 1000});
  EXPECT_TRUE(outside.ok()) << outside.examples.front();
}

}  // namespace
}  // namespace hotrow::testing
