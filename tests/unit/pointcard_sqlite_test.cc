// The point-card contract on SQLite, and the invariant checker against
// each kind of corruption.
#include <gtest/gtest.h>

#include "contract/pointcard_contract.h"
#include "db/sqlite_database.h"
#include "harness/or_throw.h"
#include "harness/server_process.h"
#include "pointcard/seed.h"
#include "pointcard/sqlite_store.h"

namespace hotrow::testing {
namespace {

Status SeedSmall(db::sqlite::Connection& conn) {
  pointcard::SeedOptions o;
  o.cards = kContractCards;
  o.stores = kContractStores;
  o.history = kContractHistory;
  o.seed = 7;
  return pointcard::SeedPointCard(conn, o, nullptr);
}

class SqliteCards : public PointCardBackendInstance {
 public:
  SqliteCards() { Open(true); }
  pointcard::PointCardStore& store() override { return *store_; }
  void Restart() override {
    store_.reset();
    db_.reset();
    Open(false);
  }
  Result<pointcard::CheckReport> Check() override {
    auto conn = db_->OpenReader();
    if (!conn.ok()) return conn.status();
    return pointcard::CheckInvariants(**conn);
  }

 private:
  void Open(bool seed) {
    db_ = OrThrow(db::sqlite::Database::Open(dir_.File("cards.db")));
    if (seed) OrThrow(SeedSmall(db_->writer().connection()));
    store_ = OrThrow(pointcard::SqlitePointCardStore::Open(*db_));
    db_->writer().Start();
  }
  TempDir dir_;
  std::unique_ptr<db::sqlite::Database> db_;
  std::unique_ptr<pointcard::SqlitePointCardStore> store_;
};

INSTANTIATE_TEST_SUITE_P(Sqlite, PointCardContract,
                         ::testing::Values(PointCardBackend{"sqlite", [] { return std::make_unique<SqliteCards>(); }}),
                         [](const auto& info) { return info.param.name; });

// The checker must find each kind of corruption one can introduce by hand.
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
  ExpectFound("INSERT INTO H_TRANSACTION VALUES (" + std::to_string(time + 1) + ", " + c +
                  ", 1, -100000000, (SELECT BALANCE FROM S_ACCOUNT WHERE CARD_ID = " + c +
                  ") - 100000000); UPDATE S_ACCOUNT SET BALANCE = BALANCE - 100000000, LAST_UPDATE = " +
                  std::to_string(time + 1) + " WHERE CARD_ID = " + c,
              "negative balance");
}

TEST_F(Checker, FindsAStaleLastUpdate) {
  auto [card, time] = CardWithHistory();
  ExpectFound("UPDATE S_ACCOUNT SET LAST_UPDATE = LAST_UPDATE - 1 WHERE CARD_ID = " + std::to_string(card),
              "last update");
}

TEST_F(Checker, FindsHistoryOfACardThatDoesNotExist) {
  ExpectFound("INSERT INTO H_TRANSACTION VALUES (1, 999999, 1, 100, 100)", "orphan history");
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
