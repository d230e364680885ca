// Point-card databases that earlier releases made (the dumps of
// tests/fixtures/make-pg-fixture.sh), migrated and served by this one.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "contract/pointcard_helpers.h"
#include "contract/wait.h"
#include "db/postgres.h"
#include "harness/http_client.h"
#include "harness/or_throw.h"
#include "harness/postgres_process.h"
#include "pg/pg_cards_fixture.h"
#include "pointcard/postgres_store.h"
#include "pointcard/service.h"

namespace hotrow::testing {
namespace {

// A fresh database holding tests/fixtures/`file`; its URL.
std::string RestoreFixture(const std::string& file) {
  std::ifstream in(std::string(HOTROW_SOURCE_DIR) + "/tests/fixtures/" + file);
  std::stringstream dump;
  dump << in.rdbuf();
  EXPECT_GT(dump.str().size(), 1000u) << file;
  std::string url = FreshDatabase();
  std::string database = url.substr(url.rfind('/') + 1), out;
  EXPECT_EQ(PostgresProcess::Shared()->Psql(database, dump.str(), &out), 0) << out;
  return url;
}

// A database v0.5.0 made (tests/fixtures/make-pg-fixture.sh: seeded, a
// keyed payment, a keyed grant written whole under its table lock) takes
// point-card migration 1: its rows get their KIND, its grant reads as
// folded, its keys still replay, the checker passes, and a new grant runs
// the staged protocol on it.
TEST(PostgresGrant, ADatabaseOfV050MigratesAndGrantsInSteps) {
  std::string url = RestoreFixture("v0.5.0-postgres.sql");
  auto conn = OrThrow(db::pg::Connection::Connect(url));
  auto count = [&](const std::string& sql) { return OrThrow(conn->Query(sql)).Int(0, 0); };
  ASSERT_EQ(count("SELECT COUNT(*) FROM information_schema.columns WHERE table_name = 'h_transaction' "
                  "AND column_name = 'kind'"),
            0)
      << "the fixture is from before the migration";
  int64_t grant_rows = count("SELECT COUNT(*) FROM H_TRANSACTION WHERE STORE_ID = 0");
  ASSERT_GT(grant_rows, 0);
  auto pool = OpenPool(url);
  auto store = OrThrow(pointcard::PostgresPointCardStore::Open(*pool, {.fold_chunk = 7}));
  pointcard::PointCardService service(*store);
  ASSERT_TRUE(service.Load().ok());
  EXPECT_EQ(count("SELECT COUNT(*) FROM H_TRANSACTION WHERE KIND = 'grant'"), grant_rows);
  EXPECT_EQ(count("SELECT COUNT(*) FROM H_TRANSACTION WHERE KIND IS DISTINCT FROM CASE WHEN STORE_ID = 0 THEN "
                  "'grant' WHEN AMOUNT > 0 THEN 'charge' ELSE 'payment' END"),
            0);
  auto old = Wait<Result<pointcard::GrantInfo>>([&](auto done) { service.GetGrant(1, done); });
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_TRUE(old->folded());
  EXPECT_EQ(old->outcome.cards, grant_rows);
  auto replay = Wait<Result<pointcard::PaymentOutcome>>([&](auto done) {
    service.Pay(pointcard::Payment{1, 1, 700, "fixture-1"}, done);
  });
  ASSERT_TRUE(replay.ok()) << replay.status().ToString();
  EXPECT_TRUE(replay->replayed);
  auto again = Wait<Result<pointcard::GrantOutcome>>([&](auto done) {
    service.Grant({old->from_us, old->to_us, 10, "fixture-grant", false}, done);
  });
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->replayed) << "the key of a grant v0.5.0 made replays it";
  auto fresh = Wait<Result<pointcard::GrantOutcome>>([&](auto done) {
    service.Grant({0, pointcard::NowUs(), 10, std::nullopt, true}, done);
  });
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_GT(fresh->cards, 0);
  EXPECT_TRUE(Eventually([&] { return count("SELECT COUNT(*) FROM P_GRANT WHERE STATE <> 'folded'") == 0; },
                         std::chrono::seconds(20)));
  auto report = pointcard::CheckPostgresInvariants(*conn);
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok()) << report->examples.front();
  service.Stop();
}

// A database v0.7.2 made (the last release before point-card migration 2):
// its rows are numbered in primary-key order with their actors, the
// sequence continues after them, a key it stored replays with the row's
// id, and a row an instance of v0.7.2 still writes during a rolling
// upgrade (hotrow_pay_v3, and a positional insert as v0.2.0's function
// makes) gets an id and an actor from the default and the trigger.
TEST(PostgresPointCard, ADatabaseOfV072NumbersItsRowsAndKeepsServingOlderInstances) {
  std::string url = RestoreFixture("v0.7.2-postgres.sql");
  auto conn = OrThrow(db::pg::Connection::Connect(url));
  auto count = [&](const std::string& sql) { return OrThrow(conn->Query(sql)).Int(0, 0); };
  ASSERT_EQ(count("SELECT COUNT(*) FROM information_schema.columns WHERE table_name = 'h_transaction' "
                  "AND column_name = 'transaction_id'"),
            0)
      << "the fixture is from before the migration";
  const int64_t rows = count("SELECT COUNT(*) FROM H_TRANSACTION");
  ASSERT_GT(count("SELECT COUNT(*) FROM H_TRANSACTION WHERE KIND = 'grant'"), 0);
  auto unmigrated = pointcard::CheckPostgresInvariants(*conn);
  ASSERT_TRUE(unmigrated.ok()) << "a database no 0.8.0 server has migrated yet: " << unmigrated.status().ToString();
  EXPECT_TRUE(unmigrated->ok()) << unmigrated->examples.front();
  auto pool = OpenPool(url);
  auto store = OrThrow(pointcard::PostgresPointCardStore::Open(*pool, {}));
  pointcard::PointCardService service(*store);
  ASSERT_TRUE(service.Load().ok());
  EXPECT_EQ(count("SELECT COUNT(*) FROM (SELECT TRANSACTION_ID, row_number() OVER (ORDER BY PAYMENT_TIME, CARD_ID, "
                  "STORE_ID) AS n FROM H_TRANSACTION) r WHERE TRANSACTION_ID = n"),
            rows);
  EXPECT_EQ(count("SELECT COUNT(*) FROM H_TRANSACTION WHERE ACTOR <> CASE KIND WHEN 'grant' THEN 'system' ELSE "
                  "'anonymous' END"),
            0);
  auto replay = Wait<Result<pointcard::PaymentOutcome>>([&](auto done) {
    service.Pay(pointcard::Payment{1, 1, 700, "fixture-1"}, done);
  });
  ASSERT_TRUE(replay.ok()) << replay.status().ToString();
  EXPECT_TRUE(replay->replayed);
  EXPECT_EQ(replay->row.transaction_id,
            count("SELECT TRANSACTION_ID FROM H_TRANSACTION h JOIN P_IDEMPOTENCY k ON k.PAYMENT_TIME = h.PAYMENT_TIME "
                  "AND k.CARD_ID = h.CARD_ID AND k.KEY = 'fixture-1'"));
  EXPECT_EQ(replay->row.actor, "anonymous");
  pointcard::Payment p{2, 1, 5};
  p.reference = "R-72";
  p.actor = "admin";
  auto fresh = Wait<Result<pointcard::PaymentOutcome>>([&](auto done) { service.Pay(p, done); });
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_EQ(fresh->row.transaction_id, rows + 1) << "the sequence continues after the numbered rows";
  EXPECT_EQ(fresh->row.reference, "R-72");
  // An instance of v0.7.2 still running beside this one.
  ASSERT_TRUE(conn->Exec("SELECT * FROM hotrow_pay_v3(3, 1, 7, NULL, NULL)").ok());
  ASSERT_TRUE(conn->Exec("SELECT * FROM hotrow_pay_v2(4, 1, 8, NULL, NULL)").ok());
  EXPECT_EQ(count("SELECT COUNT(*) FROM H_TRANSACTION WHERE TRANSACTION_ID > " + std::to_string(rows + 1) +
                  " AND ACTOR = 'anonymous' AND KIND = 'charge' AND CARD_ID IN (3, 4)"),
            2);
  auto grant = Wait<Result<pointcard::GrantOutcome>>([&](auto done) {
    service.Grant({0, pointcard::NowUs(), 10, std::nullopt, true}, done);
  });
  ASSERT_TRUE(grant.ok()) << grant.status().ToString();
  EXPECT_TRUE(Eventually([&] { return count("SELECT COUNT(*) FROM P_GRANT WHERE STATE <> 'folded'") == 0; },
                         std::chrono::seconds(20)));
  EXPECT_EQ(count("SELECT COUNT(*) FROM H_TRANSACTION WHERE KIND = 'grant' AND ACTOR <> 'system'"), 0);
  EXPECT_EQ(count("SELECT COUNT(*) FROM H_TRANSACTION"), count("SELECT COUNT(DISTINCT TRANSACTION_ID) FROM "
                                                               "H_TRANSACTION"));
  auto report = pointcard::CheckPostgresInvariants(*conn);
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok()) << report->examples.front();
  // A row whose actor is not one: invariant 9.
  ASSERT_TRUE(conn->Exec("UPDATE H_TRANSACTION SET ACTOR = 'root' WHERE CARD_ID = 2 AND REFERENCE = 'R-72'").ok());
  auto bad = pointcard::CheckPostgresInvariants(*conn);
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->violations.count("row fields"), 1u);
  service.Stop();
}

// A database v0.8.0 made (the last release before point-card migration 3):
// its cards are active with no external reference, issued cards take ids
// after them, a close holds for every release's payment function (an
// instance of 0.8.0 or older beside this one gets an error, not a payment),
// and the checker sees a payment written around it.
TEST(PostgresPointCard, ADatabaseOfV080GetsCardStatesAndRefusesOlderPaymentsOnClosedCards) {
  std::string url = RestoreFixture("v0.8.0-postgres.sql");
  auto conn = OrThrow(db::pg::Connection::Connect(url));
  auto count = [&](const std::string& sql) { return OrThrow(conn->Query(sql)).Int(0, 0); };
  ASSERT_EQ(count("SELECT COUNT(*) FROM information_schema.columns WHERE table_name = 's_account' "
                  "AND column_name = 'status'"),
            0)
      << "the fixture is from before the migration";
  const int64_t cards = count("SELECT COUNT(*) FROM S_ACCOUNT");
  auto unmigrated = pointcard::CheckPostgresInvariants(*conn);
  ASSERT_TRUE(unmigrated.ok()) << "a database no 0.9.0 server has migrated yet: " << unmigrated.status().ToString();
  EXPECT_TRUE(unmigrated->ok()) << unmigrated->examples.front();
  auto pool = OpenPool(url);
  auto store = OrThrow(pointcard::PostgresPointCardStore::Open(*pool, {}));
  pointcard::PointCardService service(*store);
  ASSERT_TRUE(service.Load().ok());
  EXPECT_EQ(count("SELECT COUNT(*) FROM S_ACCOUNT WHERE STATUS = 'active' AND EXTERNAL_REF IS NULL"), cards);
  auto made = Wait<Result<pointcard::Card>>(
      [&](auto done) { service.CreateCard({.region_id = 13, .external_ref = "m-80"}, done); });
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  EXPECT_EQ(made->card_id, cards + 1) << "the sequence starts after the fixture's cards";
  auto replay = Wait<Result<pointcard::PaymentOutcome>>([&](auto done) {
    service.Pay(pointcard::Payment{1, 1, 700, "fixture-1"}, done);
  });
  ASSERT_TRUE(replay.ok()) << replay.status().ToString();
  EXPECT_TRUE(replay->replayed);
  auto closed = Wait<Result<pointcard::Card>>([&](auto done) { service.CloseCard({.card_id = 2}, done); });
  ASSERT_TRUE(closed.ok()) << closed.status().ToString();
  EXPECT_EQ(closed->status, "closed");
  const int64_t rows = count("SELECT COUNT(*) FROM H_TRANSACTION WHERE CARD_ID = 2");
  // Instances of earlier releases still running beside this one.
  for (const char* call :
       {"SELECT * FROM hotrow_pay_v4(2, 1, 7, NULL, NULL, 'anonymous', NULL, NULL)",
        "SELECT * FROM hotrow_pay_v3(2, 1, 7, NULL, NULL)", "SELECT * FROM hotrow_pay_v2(2, 1, -7, NULL, NULL)"}) {
    auto refused = conn->Exec(call);
    EXPECT_FALSE(refused.ok()) << call;
    EXPECT_EQ(refused.sqlstate(), "HR002") << call << ": " << refused.ToString();
  }
  EXPECT_EQ(count("SELECT COUNT(*) FROM H_TRANSACTION WHERE CARD_ID = 2"), rows);
  ASSERT_TRUE(conn->Exec("SELECT * FROM hotrow_pay_v4(3, 1, 7, NULL, NULL, 'anonymous', NULL, NULL)").ok())
      << "an active card still pays through the older function";
  auto report = pointcard::CheckPostgresInvariants(*conn);
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok()) << report->examples.front();
  // A payment written around the close (a hand edit, or a 0.8.0 binary that
  // recreated its own functions): invariant 10.
  ASSERT_TRUE(conn->Exec("INSERT INTO H_TRANSACTION (PAYMENT_TIME, CARD_ID, STORE_ID, AMOUNT, BALANCE, KIND, ACTOR) "
                         "SELECT CLOSED_TIME + interval '1 second', 2, 1, 1, BALANCE + 1, 'charge', 'anonymous' "
                         "FROM S_ACCOUNT WHERE CARD_ID = 2; UPDATE S_ACCOUNT SET BALANCE = BALANCE + 1, "
                         "LAST_UPDATE = CLOSED_TIME + interval '1 second' WHERE CARD_ID = 2")
                  .ok());
  auto bad = pointcard::CheckPostgresInvariants(*conn);
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->violations.count("closed card"), 1u);
  service.Stop();
}

// A database v0.9.0 made (the last release before point-card migration 4):
// its stores get keys, a key pays at its store, and v0.9.0's own payment
// function (hotrow_pay_v5, now a wrapper of v6 with no key) still pays and
// still refuses a closed card.
TEST(PostgresPointCard, ADatabaseOfV090GetsStoreKeysAndKeepsOlderPaymentsWorking) {
  std::string url = RestoreFixture("v0.9.0-postgres.sql");
  auto conn = OrThrow(db::pg::Connection::Connect(url));
  auto count = [&](const std::string& sql) { return OrThrow(conn->Query(sql)).Int(0, 0); };
  ASSERT_EQ(count("SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'm_store_key'"), 0)
      << "the fixture is from before the migration";
  ASSERT_EQ(count("SELECT COUNT(*) FROM S_ACCOUNT WHERE STATUS = 'closed'"), 1);
  const int64_t last_store = count("SELECT MAX(STORE_ID) FROM M_STORE");
  auto pool = OpenPool(url);
  auto store = OrThrow(pointcard::PostgresPointCardStore::Open(*pool, {}));
  pointcard::PointCardService service(*store);
  ASSERT_TRUE(service.Load().ok());
  using MadeKey = Result<std::pair<pointcard::StoreKey, std::string>>;
  auto key = Wait<MadeKey>([&](auto done) { service.CreateStoreKey(last_store, done); });
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  pointcard::Payment p{51, last_store, 40};
  p.key = pointcard::PointCardService::ParseStoreKey(key->second);
  p.actor = pointcard::KeyActor(key->first.key_id);
  auto paid = Wait<Result<pointcard::PaymentOutcome>>([&](auto done) { service.Pay(p, done); });
  ASSERT_TRUE(paid.ok()) << "0.9.0's issued card at 0.9.0's store: " << paid.status().ToString();
  EXPECT_EQ(paid->row.actor, "key:" + key->first.key_id);
  auto replay = Wait<Result<pointcard::PaymentOutcome>>([&](auto done) {
    service.Pay(pointcard::Payment{1, 1, 700, "fixture-1"}, done);
  });
  ASSERT_TRUE(replay.ok()) << replay.status().ToString();
  EXPECT_TRUE(replay->replayed);
  // An instance of 0.9.0 still running beside this one.
  auto older = OrThrow(conn->Query("SELECT outcome FROM hotrow_pay_v5(3, 1, 7, NULL, NULL, 'anonymous', NULL, NULL)"));
  EXPECT_EQ(older.Int(0, 0), 0) << "v0.9.0's function still pays";
  auto closed = OrThrow(conn->Query("SELECT outcome FROM hotrow_pay_v5(2, 1, 7, NULL, NULL, 'anonymous', NULL, NULL)"));
  EXPECT_EQ(closed.Int(0, 0), 6) << "and still refuses the closed card";
  auto report = pointcard::CheckPostgresInvariants(*conn);
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok()) << report->examples.front();
  service.Stop();
}

// A database v0.11.0 made (the last release before point-card migration
// 5): its keys replay, its cards hold, and v0.11.0's own payment function
// (hotrow_pay_v6, now a wrapper of v7) respects the holds, so an instance
// of that release beside this one cannot spend held points.
TEST(PostgresPointCard, ADatabaseOfV0110GetsHoldsThatOlderPaymentsRespect) {
  std::string url = RestoreFixture("v0.11.0-postgres.sql");
  auto conn = OrThrow(db::pg::Connection::Connect(url));
  auto count = [&](const std::string& sql) { return OrThrow(conn->Query(sql)).Int(0, 0); };
  ASSERT_EQ(count("SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'p_hold'"), 0)
      << "the fixture is from before the migration";
  ASSERT_EQ(count("SELECT COUNT(*) FROM H_TRANSACTION WHERE KIND = 'refund'"), 1);
  auto pool = OpenPool(url);
  auto store = OrThrow(pointcard::PostgresPointCardStore::Open(*pool, {}));
  pointcard::PointCardService service(*store);
  ASSERT_TRUE(service.Load().ok());
  auto replay = Wait<Result<pointcard::PaymentOutcome>>([&](auto done) {
    service.Pay(pointcard::Payment{5, 1, -30, "fixture-paid"}, done);
  });
  ASSERT_TRUE(replay.ok()) << replay.status().ToString();
  EXPECT_TRUE(replay->replayed);
  const int64_t balance = count("SELECT BALANCE FROM S_ACCOUNT WHERE CARD_ID = 3");
  ASSERT_GT(balance, 10);
  auto hold = Wait<Result<pointcard::HoldOutcome>>([&](auto done) {
    service.CreateHold({.card_id = 3, .store_id = 1, .amount = -(balance - 5), .expires_in_seconds = 600}, done);
  });
  ASSERT_TRUE(hold.ok()) << hold.status().ToString();
  // An instance of 0.11.0 still running beside this one: 5 are available.
  auto older = OrThrow(conn->Query(
      "SELECT outcome, new_balance FROM hotrow_pay_v6(3, 1, -6, NULL, NULL, 'anonymous', NULL, NULL, NULL, NULL)"));
  EXPECT_EQ(older.Int(0, 0), 1) << "v0.11.0's function refuses what is held";
  EXPECT_EQ(older.Int(0, 1), 5) << "and names what is available";
  auto fits = OrThrow(
      conn->Query("SELECT outcome FROM hotrow_pay_v6(3, 1, -5, NULL, NULL, 'anonymous', NULL, NULL, NULL, NULL)"));
  EXPECT_EQ(fits.Int(0, 0), 0);
  // 0.1.0-0.5.x's functions respect holds too (a review found them
  // spending held points).
  auto oldest = OrThrow(conn->Query("SELECT outcome, new_balance FROM hotrow_pay_v2(3, 1, -1, NULL, NULL)"));
  EXPECT_EQ(oldest.Int(0, 0), 1) << "nothing is available now";
  EXPECT_EQ(oldest.Int(0, 1), 0);
  // A contract step: 0.10.0 and 0.11.0 would put their own hotrow_pay_v6
  // back at start, so they are refused (running ones keep serving); and
  // 0.14.0's lots (schema 6) refuse 0.12.0 and 0.13.0 likewise.
  EXPECT_EQ(count("SELECT oldest_schema FROM schema_compat WHERE component = 'pointcard'"), 6);
  auto report = pointcard::CheckPostgresInvariants(*conn);
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok()) << report->examples.front();
  service.Stop();
}

// A database v0.13.0 made (the last release before point-card migration
// 6, PostgreSQL's lots): its keys replay; an expiring grant now makes a
// lot per card, which a payment takes from first; v0.13.0's own payment
// function (hotrow_pay_v7, same signature, this release's body) takes
// from lots too, so an instance of that release beside this one keeps
// them right; and the step refuses 0.12.0 and 0.13.0 at start.
TEST(PostgresPointCard, ADatabaseOfV0130GetsLotsThatOlderPaymentsTakeFrom) {
  std::string url = RestoreFixture("v0.13.0-postgres.sql");
  auto conn = OrThrow(db::pg::Connection::Connect(url));
  auto count = [&](const std::string& sql) { return OrThrow(conn->Query(sql)).Int(0, 0); };
  ASSERT_EQ(count("SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'p_lot'"), 0)
      << "the fixture is from before the migration";
  ASSERT_GT(count("SELECT COUNT(*) FROM P_HOLD"), 0);
  auto pool = OpenPool(url);
  auto store = OrThrow(pointcard::PostgresPointCardStore::Open(*pool, {}));
  pointcard::PointCardService service(*store);
  ASSERT_TRUE(service.Load().ok());
  EXPECT_EQ(count("SELECT oldest_schema FROM schema_compat WHERE component = 'pointcard'"), 6);
  EXPECT_EQ(count("SELECT COUNT(*) FROM P_LOT"), 0) << "no credit of earlier grants becomes a lot";
  EXPECT_EQ(count("SELECT COUNT(*) FROM S_ACCOUNT WHERE LOT_TIME IS NOT NULL"), 0);
  auto replay = Pay(service, 5, 1, -30, "fixture-paid");
  ASSERT_TRUE(replay.ok()) << replay.status().ToString();
  EXPECT_TRUE(replay->replayed);
  // Card 4's whole balance spent, then 100 charged and spent again, and
  // granted back at 100% as a lot expiring in 30 days.
  const int64_t balance = GetCard(service, 4)->balance;
  if (balance > 0) {
    ASSERT_FALSE(Pay(service, 4, 1, -balance)->refused);
  }
  const int64_t from = pointcard::NowUs();
  ASSERT_FALSE(Pay(service, 4, 1, 100)->refused);
  ASSERT_FALSE(Pay(service, 4, 1, -100)->refused);
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  GrantRequest grant{from, pointcard::NowUs(), 100, std::nullopt, true};
  grant.expires_in_days = 30;
  auto granted = Wait<Result<GrantOutcome>>([&](auto done) { service.Grant(grant, done); });
  ASSERT_TRUE(granted.ok()) << granted.status().ToString();
  WaitFolded(service, granted->grant_id);
  auto info = GetGrant(service, granted->grant_id);
  ASSERT_TRUE(info.ok() && info->expires_us);
  // 30 days after the grant's time, its begin, before its apply.
  EXPECT_LE(*info->expires_us - info->applied_at_us, 30 * 86'400'000'000LL);
  EXPECT_GT(*info->expires_us - info->applied_at_us, 30 * 86'400'000'000LL - 60'000'000);
  EXPECT_EQ(count("SELECT REMAINING FROM P_LOT WHERE CARD_ID = 4"), 100);
  ASSERT_FALSE(Pay(service, 4, 1, -30)->refused);
  EXPECT_EQ(count("SELECT REMAINING FROM P_LOT WHERE CARD_ID = 4"), 70) << "a payment takes from the lot first";
  // An instance of 0.13.0 still running beside this one.
  auto older = OrThrow(
      conn->Query("SELECT outcome FROM hotrow_pay_v7(4, 1, -20, NULL, NULL, 'anonymous', NULL, NULL, NULL, NULL)"));
  EXPECT_EQ(older.Int(0, 0), 0);
  EXPECT_EQ(count("SELECT REMAINING FROM P_LOT WHERE CARD_ID = 4"), 50) << "v0.13.0's call takes from it too";
  auto report = pointcard::CheckPostgresInvariants(*conn);
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok()) << report->examples.front();
  service.Stop();
}

}  // namespace
}  // namespace hotrow::testing
