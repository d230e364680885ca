// The point-card contract on SQLite, a grant seen from inside read
// snapshots, and the grant's query (the checker: pointcard_checker_test.cc).
#include <atomic>
#include <future>
#include <map>
#include <set>
#include <thread>
#include <tuple>

#include <gtest/gtest.h>

#include "contract/pointcard_contract.h"
#include "contract/wait.h"
#include "db/sqlite_database.h"
#include "harness/or_throw.h"
#include "harness/server_process.h"
#include "pointcard/seed.h"
#include "pointcard/sqlite_store.h"
#include "unit/pointcard_sqlite_helpers.h"

namespace hotrow::testing {
namespace {

class SqliteCards : public PointCardBackendInstance {
 public:
  // Small chunks by default: a grant over 200 cards crosses many staging
  // and fold ops, with payments between them.
  explicit SqliteCards(pointcard::SqlitePointCardOptions options = {.stage_chunk = 7, .fold_chunk = 5})
      : options_(options) {
    Open(true);
  }
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
    store_ = OrThrow(pointcard::SqlitePointCardStore::Open(*db_, options_));
    db_->writer().Start();
  }
  pointcard::SqlitePointCardOptions options_;
  TempDir dir_;
  std::unique_ptr<db::sqlite::Database> db_;
  std::unique_ptr<pointcard::SqlitePointCardStore> store_;
};

// "sqlite_wide": staging chunks of 150 cards, so that a chunk is staged by
// INSERTs of 64 rows and then of one (the server's chunks are 4,096).
INSTANTIATE_TEST_SUITE_P(Sqlite, PointCardContract,
                         ::testing::Values(PointCardBackend{"sqlite", [] { return std::make_unique<SqliteCards>(); }},
                                           PointCardBackend{"sqlite_wide",
                                                            [] {
                                                              return std::make_unique<SqliteCards>(
                                                                  pointcard::SqlitePointCardOptions{.stage_chunk = 150,
                                                                                                    .fold_chunk = 40});
                                                            }}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace hotrow::testing

namespace hotrow::testing {
namespace {

// Aim 3 of the stall-free grant, proven from inside: a reader's one read
// transaction (a sample of every card, the way `hotrow check` reads) sees
// all of a grant or none of it, in every state it passes through --
// staging, applied with credit pending, half folded, folded -- while point
// uses run beside it. Each snapshot's total of balances (written plus
// applied credit) equals what the payments it sees and the grant, if
// applied in it, add up to.
TEST(StallFreeGrant, EveryReadSnapshotSeesAllOfTheGrantOrNone) {
  TempDir dir;
  auto db = OrThrow(db::sqlite::Database::Open(dir.File("cards.db")));
  ASSERT_TRUE(SeedSmall(db->writer().connection()).ok());
  auto store = OrThrow(pointcard::SqlitePointCardStore::Open(*db, {.stage_chunk = 3, .fold_chunk = 2}));
  db->writer().Start();
  pointcard::PointCardService service(*store);
  ASSERT_TRUE(service.Load().ok());
  // A snapshot: (grant visible?, total as reads show it, charges seen).
  int64_t seen_count = 0, checked_grants = 0;
  auto snapshot = [&]() -> std::tuple<bool, int64_t, int64_t> {
    auto conn = OrThrow(db->OpenReader());
    EXPECT_TRUE(conn->Exec("BEGIN").ok());
    int64_t visible = db::sqlite::QueryInt(*conn, "SELECT COUNT(*) FROM P_GRANT WHERE STATE <> 'staging'").value();
    int64_t total =
        db::sqlite::QueryInt(*conn,
                             "SELECT (SELECT SUM(BALANCE) FROM S_ACCOUNT) + (SELECT COALESCE(SUM(c.POINTS), 0) "
                             "FROM P_GRANT_CREDIT c JOIN P_GRANT g USING (GRANT_ID) WHERE g.STATE = 'applied')")
            .value();
    int64_t charges =
        db::sqlite::QueryInt(*conn, "SELECT COUNT(*) FROM H_TRANSACTION WHERE KIND = 'charge' AND AMOUNT = 1").value();
    EXPECT_TRUE(conn->Exec("COMMIT").ok());
    // And what `hotrow check pointcard --sample-cards` does beside a grant:
    // every invariant, the grant recomputed, on a range of cards.
    int64_t lo = 1 + static_cast<int64_t>(seen_count++ * 37 % kContractCards);
    auto sample = pointcard::CheckInvariants(*conn, {.card_first = lo, .card_last = lo + 39});
    EXPECT_TRUE(sample.ok() && sample->ok()) << (sample.ok() ? sample->examples.front() : sample.status().ToString());
    checked_grants += sample.ok() ? sample->grants_checked : 0;
    return {visible > 0, total, charges};
  };
  auto [_, before, none] = snapshot();
  ASSERT_EQ(none, 0);
  std::atomic<bool> stop{false};
  std::thread payer([&] {  // charges of 1 point, each visible as one row
    for (int64_t i = 0; !stop; ++i) {
      auto r = Wait<Result<pointcard::PaymentOutcome>>([&](auto done) {
        service.Pay(pointcard::Payment{1 + i % kContractCards, 1, 1, std::nullopt}, done);
      });
      ASSERT_TRUE(r.ok()) << r.status().ToString();
    }
  });
  std::promise<Result<pointcard::GrantOutcome>> granted;
  service.Grant({0, pointcard::NowUs(), 10, std::nullopt, true},
                [&](Result<pointcard::GrantOutcome> r) { granted.set_value(std::move(r)); });
  std::vector<std::tuple<bool, int64_t, int64_t>> seen;
  auto future = granted.get_future();
  while (future.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready) seen.push_back(snapshot());
  auto grant = future.get();
  ASSERT_TRUE(grant.ok()) << grant.status().ToString();
  // On through the fold.
  for (int i = 0; i < 3000; ++i) {
    seen.push_back(snapshot());
    auto info = Wait<Result<pointcard::GrantInfo>>([&](auto done) { service.GetGrant(grant->grant_id, done); });
    ASSERT_TRUE(info.ok());
    if (info->folded()) break;
  }
  stop = true;
  payer.join();
  seen.push_back(snapshot());
  int64_t visible = 0;
  for (const auto& [applied, total, charges] : seen) {
    EXPECT_EQ(total, before + charges + (applied ? grant->points : 0))
        << (applied ? "applied" : "not applied") << ", " << charges << " charge(s) seen";
    visible += applied;
  }
  EXPECT_GT(visible, 0);
  EXPECT_LT(visible, static_cast<int64_t>(seen.size())) << "some snapshot should predate the apply";
  EXPECT_GT(checked_grants, 0) << "the sampled checks recomputed the grant";
  auto report = pointcard::CheckInvariants(*OrThrow(db->OpenReader()));
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok()) << report->examples.front();
  EXPECT_EQ(report->pending_points, 0) << "folded";
  service.Stop();
}

// The query's two ways to keep only the cards that exist: when the card ids
// are every integer between the smallest and the largest, a range check;
// otherwise a merge with S_ACCOUNT's ids. Either way a charge whose card
// is missing (history `hotrow check` reports as orphan) earns nothing and
// is not counted, and every card that exists gets its bonus.
class GrantQuery : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = OrThrow(db::sqlite::Database::Open(dir_.File("cards.db")));
    ASSERT_TRUE(SeedSmall(db_->writer().connection()).ok());
  }
  // One charge of `amount` at time 1 (inside the period [0, 2)).
  void Charge(int64_t card, int64_t amount) {
    ASSERT_TRUE(db_->writer()
                    .connection()
                    .Exec(std::string(kInsertRow) + "1, " + std::to_string(card) + ", 1, " + std::to_string(amount) +
                          ", " + std::to_string(amount) + ", 'charge', " + kNextId + ", 'anonymous')")
                    .ok());
  }
  void AddCard(int64_t card) {
    ASSERT_TRUE(db_->writer()
                    .connection()
                    .Exec("INSERT INTO S_ACCOUNT (CARD_ID, BALANCE, REGION_ID, LAST_UPDATE) VALUES (" +
                          std::to_string(card) + ", 0, 1, 0)")
                    .ok());
  }
  // The grant of [0, 2) at 10%, and what it added to each of `cards`
  // (-1: no such card).
  std::pair<pointcard::GrantOutcome, std::map<int64_t, int64_t>> GrantPeriod(const std::vector<int64_t>& cards) {
    std::map<int64_t, int64_t> before;
    for (int64_t card : cards)
      before[card] = db::sqlite::QueryInt(db_->writer().connection(),
                                          "SELECT BALANCE FROM S_ACCOUNT WHERE CARD_ID = " + std::to_string(card))
                         .value();
    auto store = OrThrow(pointcard::SqlitePointCardStore::Open(*db_, {}));
    db_->writer().Start();
    pointcard::PointCardService service(*store);
    EXPECT_TRUE(service.Load().ok());
    auto grant = Wait<Result<pointcard::GrantOutcome>>([&](auto done) {
      service.Grant({0, 2, 10, std::nullopt, true}, done);
    });
    EXPECT_TRUE(grant.ok()) << grant.status().ToString();
    std::map<int64_t, int64_t> added;
    for (int64_t card : cards) {
      auto c = Wait<Result<pointcard::Card>>([&](auto done) { service.GetCard(card, done); });
      added[card] = c.ok() ? c->balance - before[card] : -1;
    }
    service.Stop();
    return {grant.ok() ? *grant : pointcard::GrantOutcome{}, added};
  }
  TempDir dir_;
  std::unique_ptr<db::sqlite::Database> db_;
};

TEST_F(GrantQuery, DenseIdsKeepOnlyTheCardsInTheirRange) {
  Charge(1, 1000);                   // the first card
  Charge(kContractCards, 2000);      // the last
  Charge(kContractCards + 1, 5000);  // no such card
  auto [grant, added] = GrantPeriod({1, kContractCards, kContractCards + 1});
  EXPECT_EQ(grant.cards, 2);
  EXPECT_EQ(grant.points, 300);
  EXPECT_EQ(added[1], 100);
  EXPECT_EQ(added[kContractCards], 200);
  EXPECT_EQ(added[kContractCards + 1], -1) << "not found";
}

TEST_F(GrantQuery, SparseIdsAreMergedWithTheCards) {
  const int64_t far = int64_t{1} << 40;
  AddCard(far);  // ids 1..200 and 2^40: not every integer between
  AddCard(-far);
  Charge(-far, 4000);
  Charge(7, 1000);
  Charge(kContractCards + 1, 5000);  // in the gap: no such card
  Charge(far, 3000);
  Charge(far + 1, 6000);  // past the last: no such card
  auto [grant, added] = GrantPeriod({-far, 7, far});
  EXPECT_EQ(grant.cards, 3);
  EXPECT_EQ(grant.points, 800);
  EXPECT_EQ(added[-far], 400);
  EXPECT_EQ(added[7], 100);
  EXPECT_EQ(added[far], 300);
}

}  // namespace
}  // namespace hotrow::testing

namespace hotrow::testing {
namespace {

// The lot sweep (sqlite_lots.cc): with no write to any card, every lot due
// is written out within seconds, more than one sweep op's worth
// (kSweepCardsMax lots) chained op after op, each lot once. Two expiring grants on the seeded
// charges make about two lots a card, folded in chunks of 5.
TEST(LotSweep, WritesOutEveryLotDueWithoutAWriteOpAfterOp) {
  TempDir dir;
  auto db = OrThrow(db::sqlite::Database::Open(dir.File("cards.db")));
  ASSERT_TRUE(SeedSmall(db->writer().connection()).ok());
  auto store = OrThrow(pointcard::SqlitePointCardStore::Open(*db, {.stage_chunk = 64, .fold_chunk = 5}));
  db->writer().Start();
  pointcard::PointCardService service(*store);
  ASSERT_TRUE(service.Load().ok());
  auto reader = OrThrow(db->OpenReader());
  auto count = [&](const char* sql) { return db::sqlite::QueryInt(*reader, sql).value(); };
  const int64_t expires = pointcard::NowUs() + 2'000'000;
  for (int64_t rate : {10, 20}) {
    pointcard::GrantRequest r{0, pointcard::NowUs(), rate, std::nullopt, true};
    r.expires_at_us = expires;
    auto grant = Wait<Result<pointcard::GrantOutcome>>([&](auto done) { service.Grant(r, done); });
    ASSERT_TRUE(grant.ok()) << grant.status().ToString();
    for (int i = 0; i < 1000 && count("SELECT COUNT(*) FROM P_GRANT WHERE STATE = 'applied'") > 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const int64_t lots = count("SELECT COUNT(*) FROM P_LOT");
  ASSERT_GT(lots, pointcard::SqlitePointCardStore::kSweepCardsMax) << "more than one op's worth";
  const int64_t total = count("SELECT SUM(BALANCE) FROM S_ACCOUNT"), granted = count("SELECT SUM(AMOUNT) FROM P_LOT");
  EXPECT_EQ(count("SELECT COUNT(*) FROM H_TRANSACTION WHERE KIND = 'expiry'"), 0);
  std::this_thread::sleep_for(std::chrono::microseconds(expires - pointcard::NowUs()));
  for (int i = 0; i < 1000 && count("SELECT COUNT(*) FROM P_LOT WHERE EXPIRED_TIME IS NULL") > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(count("SELECT COUNT(*) FROM P_LOT WHERE EXPIRED_TIME IS NULL"), 0) << "the sweep wrote every lot out";
  EXPECT_EQ(count("SELECT COUNT(*) FROM H_TRANSACTION WHERE KIND = 'expiry'"), lots) << "one row per lot";
  EXPECT_EQ(count("SELECT SUM(BALANCE) FROM S_ACCOUNT"), total - granted);
  EXPECT_EQ(count("SELECT COUNT(*) FROM P_LOT WHERE REMAINING <> 0 OR EXPIRY_ID IS NULL"), 0);
  auto report = pointcard::CheckInvariants(*reader);
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok()) << report->examples.front();
  service.Stop();
}

}  // namespace
}  // namespace hotrow::testing
