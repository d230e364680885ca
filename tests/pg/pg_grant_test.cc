// The grant's protocol on PostgreSQL (pointcard/postgres_store.h): what the
// contract suite cannot see from outside -- snapshots taken during a grant,
// a point use that meets unfolded credit, fold chunks, an apply that meets
// a lock or a vacuum (the crashes: pg_grant_crash_test.cc).
#include <atomic>
#include <csignal>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <libpq-fe.h>

#include "contract/pointcard_contract.h"
#include "contract/wait.h"
#include "db/postgres.h"
#include "harness/http_client.h"
#include "harness/or_throw.h"
#include "harness/postgres_process.h"
#include "harness/server_process.h"
#include "ops/metrics.h"
#include "pg/pg_cards_fixture.h"
#include "pointcard/postgres_store.h"
#include "pointcard/service.h"

namespace hotrow::testing {
namespace {

// A payment whose card-lock release fails (a pg_cancel_backend landing on
// it, or on the COMMIT before it, which leaves the release to fail inside
// the aborted block) must not hand its connection back still holding the
// card's session lock: every later payment on that card waited for it
// (7 s each, until the statement timeout) for as long as the connection
// lived. The review's cancel storm left 15 cards so. Here the release
// always fails: a pg_advisory_unlock of the database's own comes first on
// the search path. Seen failing before the fix: the lock stayed held.
TEST(PostgresPointCard, AFailedCardUnlockDoesNotKeepTheLockOnAPooledConnection) {
  PgCardsFixture f(
      "CREATE FUNCTION public.pg_advisory_unlock(int, int) RETURNS boolean LANGUAGE plpgsql AS $$ BEGIN "
      "RAISE EXCEPTION 'release refused by the test'; END $$; "
      "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET search_path = public, pg_catalog', current_database()); "
      "END $$");
  auto paid = Wait<Result<pointcard::PaymentOutcome>>([&](auto done) {
    f.service->Pay(pointcard::Payment{1, 1, 1, std::nullopt}, done);
  });
  ASSERT_TRUE(paid.ok()) << paid.status().ToString();  // written: only the release failed
  const std::string held =
      "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = 72720004 AND objid = 1 "
      "AND objsubid = 2";
  int64_t locks = 1;
  for (int i = 0; i < 100 && (locks = f.Int(held)) > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(locks, 0) << "card 1's lock is still held by a pooled connection";
}

// A payment's pipeline ends its transaction with one COMMIT and no stray
// ROLLBACK: a ROLLBACK after every committed payment wrote "there is no
// transaction in progress" into the server's log once per payment (1,000
// lines a second beside 192 workers), and a refused payment must end its
// aborted block just as quietly.
TEST(PostgresPointCard, PaymentsLeaveNothingInTheServersLog) {
  PgCardsFixture f;
  auto stray = [] {
    std::ifstream in(PostgresProcess::Shared()->LogPath());
    std::string line;
    int64_t n = 0;
    while (std::getline(in, line)) n += line.find("there is no transaction in progress") != std::string::npos;
    return n;
  };
  const int64_t before = stray();
  for (int64_t i = 0; i < 20; ++i) {
    // A charge, then a payment larger than any balance (refused, 409).
    for (int64_t amount : {int64_t{1}, int64_t{-1000000}}) {
      auto r = Wait<Result<pointcard::PaymentOutcome>>([&](auto done) {
        f.service->Pay(pointcard::Payment{1 + i, 1, amount, std::nullopt}, done);
      });
      ASSERT_TRUE(r.ok()) << r.status().ToString();
    }
  }
  EXPECT_EQ(stray() - before, 0) << "lines in " << PostgresProcess::Shared()->LogPath();
  f.ExpectInvariants();
}

// Invariant 8 on PostgreSQL: a grant whose fold is held off passes with its
// credit pending and when folded; a credit lost, or a grant row outside its
// window, is found, and a scope sees only its own cards.
TEST(PostgresGrant, TheCheckerRecomputesEveryAppliedGrant) {
  PgCardsFixture f;
  auto conn = OrThrow(db::pg::Connection::Connect(f.url));
  auto check = [&](pointcard::CheckScope scope = {}) {
    return OrThrow(pointcard::CheckPostgresInvariants(*conn, scope));
  };
  auto pause = OrThrow(db::pg::Connection::Connect(f.url));
  auto first = f.Grant(10);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(f.Folded(first->grant_id));
  ASSERT_TRUE(pause->Exec(PauseFold(first->grant_id + 1)).ok());
  auto grant = f.Grant(20);
  ASSERT_TRUE(grant.ok()) << grant.status().ToString();
  auto pending = check();
  EXPECT_TRUE(pending.ok()) << pending.examples.front();
  EXPECT_EQ(pending.grants_checked, 2);
  EXPECT_EQ(pending.grants_folding, 1);
  EXPECT_EQ(pending.pending_points, grant->points);
  int64_t card = f.Int("SELECT MIN(CARD_ID) FROM P_GRANT_CREDIT");
  std::string c = std::to_string(card);
  ASSERT_TRUE(conn->Exec("DELETE FROM P_GRANT_CREDIT WHERE CARD_ID = " + c).ok());
  auto lost = check();
  EXPECT_EQ(lost.violations.count("grant"), 1u);
  EXPECT_EQ(lost.violations.count("grant total"), 1u);
  EXPECT_EQ(check({.card_first = card, .card_last = card}).violations.count("grant"), 1u);
  auto elsewhere = check({.card_first = card + 1, .card_last = card + 100});
  EXPECT_TRUE(elsewhere.ok()) << elsewhere.examples.front();
  // The first grant's row of a card moved before that grant applied.
  int64_t other = f.Int("SELECT MIN(CARD_ID) FROM H_TRANSACTION WHERE KIND = 'grant'");
  ASSERT_TRUE(conn->Exec("UPDATE H_TRANSACTION SET PAYMENT_TIME = (SELECT GRANT_TIME FROM P_GRANT WHERE GRANT_ID = " +
                         std::to_string(first->grant_id) +
                         ") + interval '1 microsecond' WHERE KIND = 'grant' "
                         "AND CARD_ID = " +
                         std::to_string(other))
                  .ok());
  EXPECT_EQ(check({.card_first = other, .card_last = other}).violations.count("grant row"), 1u);
  ASSERT_TRUE(pause->Exec(ResumeFold(first->grant_id + 1)).ok());
}

// A card may have any id from 1 to 2^63 - 1. The staging and the fold
// bounded their ranges with `CARD_ID < COALESCE(bound, 2^63 - 1)`, so the
// card of the largest id got no bonus; the checker, with the same bound,
// did not see it either.
TEST(PostgresGrant, TheCardOfTheLargestIdGetsItsBonus) {
  PgCardsFixture f(
      "INSERT INTO S_ACCOUNT VALUES (9223372036854775807, 5000, 1, TIMESTAMP '2026-01-01 00:00:00'); "
      "INSERT INTO H_TRANSACTION (PAYMENT_TIME, CARD_ID, STORE_ID, AMOUNT, BALANCE, KIND) "
      "VALUES (TIMESTAMP '2026-01-01 00:00:00', 9223372036854775807, 1, 5000, 5000, 'charge')");
  auto grant = f.Grant(10);
  ASSERT_TRUE(grant.ok()) << grant.status().ToString();
  ASSERT_TRUE(f.Folded(grant->grant_id));
  auto card = f.Card(INT64_MAX);
  ASSERT_TRUE(card.ok()) << card.status().ToString();
  EXPECT_EQ(card->balance, 5500);
  EXPECT_EQ(f.Int("SELECT COUNT(*) FROM H_TRANSACTION WHERE KIND = 'grant' AND CARD_ID = 9223372036854775807"), 1);
  f.ExpectInvariants();
  auto conn = OrThrow(db::pg::Connection::Connect(f.url));
  ASSERT_TRUE(conn->Exec("UPDATE S_ACCOUNT SET BALANCE = 1 WHERE CARD_ID = 9223372036854775807").ok());
  auto report = OrThrow(pointcard::CheckPostgresInvariants(*conn));
  EXPECT_EQ(report.violations.count("balance"), 1u) << "the checker sees that card too";
}

// The grant's jobs run on a lane of their own (`hotrow serve` and the
// simulator give it one): with every connection of the request pool held
// by requests, a grant still stages, renews its lease, applies and folds.
// Before the lane it queued behind them: seen failing with the lane left
// unset (no answer within the bound below while the pool was held).
TEST(PostgresGrant, AGrantRunsOnItsLaneWhileEveryPooledConnectionIsBusy) {
  std::string url = FreshDatabase();
  SeedContractCards(url);
  auto pool = OpenPool(url);
  db::pg::PoolOptions lane;
  lane.url = url;
  auto store = OrThrow(pointcard::PostgresPointCardStore::Open(
      *pool, {.fold_chunk = 3, .stage_workers = 2, .lease = std::chrono::seconds(1), .lane = lane}));
  pointcard::PointCardService service(*store);
  ASSERT_TRUE(service.Load().ok());
  auto conn = OrThrow(db::pg::Connection::Connect(url));
  auto count = [&](const std::string& sql) { return OrThrow(conn->Query(sql)).Int(0, 0); };
  EXPECT_EQ(count("SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = 'hotrow-grants' "
                  "AND datname = current_database()"),
            4)
      << "two staging ranges, one fold worker and one more";
  const std::string metrics = metrics::Registry::Default().Expose();
  EXPECT_NE(metrics.find("hotrow_pg_pool_connections{pool=\"grants\"} 4"), std::string::npos) << metrics;

  // Every pooled connection held, as by requests stuck on a lock, for the
  // whole grant.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> holding{0};
  for (int i = 0; i < pool->size(); ++i)
    pool->Submit([&, released](Result<db::pg::Connection*>) {
      ++holding;
      released.wait();
    });
  for (int i = 0; i < 500 && holding < pool->size(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(holding, pool->size());

  std::promise<Result<pointcard::GrantOutcome>> granted;
  auto answer = granted.get_future();
  service.Grant({0, pointcard::NowUs(), 10, std::nullopt, true},
                [&](Result<pointcard::GrantOutcome> r) { granted.set_value(std::move(r)); });
  bool answered = answer.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  int64_t state = -1;
  for (int i = 0; answered && i < 1000 && (state = count("SELECT COUNT(*) FROM P_GRANT WHERE STATE = 'folded'")) == 0;
       ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  release.set_value();
  ASSERT_TRUE(answered) << "the grant waited for the request pool";
  auto grant = answer.get();
  ASSERT_TRUE(grant.ok()) << grant.status().ToString();
  EXPECT_GT(grant->cards, 0);
  EXPECT_EQ(state, 1) << "folded while the pool was held";
  service.Stop();
}

// Atomicity as a reader sees it: REPEATABLE READ snapshots taken over and
// over through a whole grant (staging, apply, fold) with charges of 1
// point committing beside it. Each snapshot's total -- balances plus the
// applied credit, as reads add it -- is the total before, plus the charges
// it sees, plus all of the grant's points if it sees the grant applied.
TEST(PostgresGrant, EveryRepeatableReadSnapshotSeesAllOfTheGrantOrNone) {
  PgCardsFixture f;
  auto reader = OrThrow(db::pg::Connection::Connect(f.url));
  auto snapshot = [&]() -> std::tuple<bool, int64_t, int64_t> {
    EXPECT_TRUE(reader->Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY").ok());
    auto rows = OrThrow(
        reader->Query("SELECT (SELECT COUNT(*) FROM P_GRANT WHERE STATE <> 'staging'), "
                      "(SELECT SUM(BALANCE) FROM S_ACCOUNT) + (SELECT COALESCE(SUM(c.POINTS), 0) FROM P_GRANT_CREDIT c "
                      "JOIN P_GRANT g USING (GRANT_ID) WHERE g.STATE = 'applied'), "
                      "(SELECT COUNT(*) FROM H_TRANSACTION WHERE KIND = 'charge' AND AMOUNT = 1)"));
    EXPECT_TRUE(reader->Exec("COMMIT").ok());
    return {rows.Int(0, 0) > 0, rows.Int(0, 1), rows.Int(0, 2)};
  };
  auto [_, before, none] = snapshot();
  ASSERT_EQ(none, 0);
  std::atomic<bool> stop{false};
  std::thread payer([&] {
    for (int64_t i = 0; !stop; ++i) {
      auto r = Wait<Result<pointcard::PaymentOutcome>>([&](auto done) {
        f.service->Pay(pointcard::Payment{1 + i % kContractCards, 1, 1, std::nullopt}, done);
      });
      ASSERT_TRUE(r.ok()) << r.status().ToString();
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::promise<Result<pointcard::GrantOutcome>> granted;
  f.service->Grant({0, pointcard::NowUs(), 10, std::nullopt, true},
                   [&](Result<pointcard::GrantOutcome> r) { granted.set_value(std::move(r)); });
  std::vector<std::tuple<bool, int64_t, int64_t>> seen;
  auto future = granted.get_future();
  while (future.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready) seen.push_back(snapshot());
  auto grant = future.get();
  ASSERT_TRUE(grant.ok()) << grant.status().ToString();
  for (int i = 0; i < 3000 && f.Int("SELECT COUNT(*) FROM P_GRANT WHERE STATE = 'applied'") > 0; ++i)
    seen.push_back(snapshot());
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
  f.ExpectInvariants();
}

// A point use on a card whose credit is applied but not folded (the fold
// is held off here by taking its lock) folds it itself: the grant's row,
// then its own, each at its own time; the fold then skips that card.
TEST(PostgresGrant, APointUseBeforeTheFoldWritesTheGrantsRowFirst) {
  PgCardsFixture f;
  auto holder = OrThrow(db::pg::Connection::Connect(f.url));
  // The first grant of a fresh database is grant 1.
  ASSERT_TRUE(holder->Query(PauseFold(1)).ok());
  auto grant = f.Grant(10);
  ASSERT_TRUE(grant.ok()) << grant.status().ToString();
  ASSERT_EQ(grant->grant_id, 1);
  ASSERT_GT(grant->cards, 1);
  int64_t card = f.Int("SELECT MIN(CARD_ID) FROM P_GRANT_CREDIT");
  int64_t credit = f.Int("SELECT POINTS FROM P_GRANT_CREDIT WHERE CARD_ID = " + std::to_string(card));
  auto before = f.Card(card);
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before->pending_points, credit);
  auto paid = Wait<Result<pointcard::PaymentOutcome>>([&](auto done) {
    f.service->Pay(pointcard::Payment{card, 1, -1, std::nullopt}, done);
  });
  ASSERT_TRUE(paid.ok()) << paid.status().ToString();
  ASSERT_FALSE(paid->refused);
  EXPECT_EQ(paid->row.balance, before->balance - 1) << "the balance with the credit, less the payment";
  auto after = f.Card(card);
  EXPECT_EQ(after->pending_points, 0);
  EXPECT_EQ(after->balance, before->balance - 1);
  EXPECT_EQ(f.Int("SELECT COUNT(*) FROM P_GRANT_CREDIT"), grant->cards - 1) << "the others still wait for the fold";
  std::string where = " FROM H_TRANSACTION WHERE CARD_ID = " + std::to_string(card);
  EXPECT_EQ(f.Int("SELECT AMOUNT" + where + " AND KIND = 'grant'"), credit);
  EXPECT_EQ(f.Int("SELECT COUNT(*)" + where + " AND KIND = 'grant' AND PAYMENT_TIME < (SELECT MAX(PAYMENT_TIME)" +
                  where + ")"),
            1)
      << "the grant's row comes before the payment's";
  f.ExpectInvariants();
  ASSERT_TRUE(holder->Query(ResumeFold(1)).ok());
  ASSERT_TRUE(f.Folded(grant->grant_id));
  EXPECT_EQ(f.Int("SELECT COUNT(*) FROM H_TRANSACTION WHERE KIND = 'grant'"), grant->cards)
      << "one row per credited card: none twice, none lost";
  EXPECT_EQ(f.Int("SELECT COALESCE(SUM(AMOUNT), 0) FROM H_TRANSACTION WHERE KIND = 'grant'"), grant->points);
  f.ExpectInvariants();
}

// The staging reads the period's rows through an index into a bitmap, so
// in the heap's order, and hashes them in memory, whatever the planner or
// the caller's settings would pick: no sequential scan, which reads every
// grant row written since, and no index scan by card, which visited one
// heap page per row (1.3-1.5 s idle on 1M cards against 0.9 s). The caller
// here turns bitmap scans off, which led the function without its own
// setting to the scan by card. auto_explain shows the plans of the
// function's statements; its settings end with the call, so the connection
// goes back to the pool with the session's own.
TEST(PostgresGrant, TheStagingReadsThePeriodThroughABitmapAndLeavesTheSessionsSettings) {
  PgCardsFixture f;
  std::string plans;  // before the connection, which may call into it until closed
  auto conn = OrThrow(db::pg::Connection::Connect(f.url));
  PQsetNoticeProcessor(
      conn->raw(), [](void* out, const char* m) { static_cast<std::string*>(out)->append(m); }, &plans);
  ASSERT_TRUE(conn->Exec("SET enable_bitmapscan = off").ok());
  const std::string settings =
      "SELECT current_setting('enable_seqscan') || current_setting('enable_indexscan') || "
      "current_setting('enable_bitmapscan') || current_setting('enable_hashjoin') || "
      "current_setting('enable_nestloop') || current_setting('work_mem') || current_setting('jit')";
  const std::string before(OrThrow(conn->Query(settings)).Text(0, 0));
  const std::string now = std::to_string(pointcard::NowUs());
  auto begun = OrThrow(
      conn->Query("SELECT outcome, grant_id FROM hotrow_grant_begin_v1(0, " + now + ", 10, NULL, NULL, true, 60000)"));
  ASSERT_EQ(begun.Int(0, 0), 0);
  const std::string id = std::to_string(begun.Int(0, 1));
  ASSERT_TRUE(conn->Exec("LOAD 'auto_explain'").ok());
  ASSERT_TRUE(conn->Exec("SET auto_explain.log_min_duration = 0").ok());
  ASSERT_TRUE(conn->Exec("SET auto_explain.log_nested_statements = on").ok());
  ASSERT_TRUE(conn->Exec("SET auto_explain.log_level = notice").ok());
  ASSERT_TRUE(conn->Exec("BEGIN ISOLATION LEVEL REPEATABLE READ").ok());
  plans.clear();
  auto staged =
      OrThrow(conn->Query("SELECT cards FROM hotrow_grant_stage_range_v1(" + id + ", 0, " + now + ", 10, 0, NULL)"));
  EXPECT_GT(staged.Int(0, 0), 0);
  EXPECT_NE(plans.find("Bitmap Heap Scan on h_transaction"), std::string::npos) << plans;
  EXPECT_EQ(plans.find("Scan using h_transaction"), std::string::npos) << plans;  // index (only) scans
  EXPECT_EQ(plans.find("Seq Scan on h_transaction"), std::string::npos) << plans;
  EXPECT_EQ(OrThrow(conn->Query(settings)).Text(0, 0), before) << "inside the transaction, after the call";
  ASSERT_TRUE(conn->Exec("ROLLBACK").ok());
  ASSERT_TRUE(conn->Exec("SET auto_explain.log_min_duration = -1").ok());
  ASSERT_TRUE(conn->Query("SELECT hotrow_grant_abandon_v1(" + id + ")").ok());
}

// A fold worker's chunk reads its own card range and no further, also with
// the generic plan a connection switches to after five calls. The bound
// used to be `(p_before IS NULL OR CARD_ID < p_before)`: no index condition
// in a generic plan, so a range's last chunks read every credit after it,
// holding the credits they had picked (and with them the payments on those
// cards) for as long as that took: 30 s and more at p192 once other
// snapshots kept the folded rows from being pruned.
TEST(PostgresGrant, AFoldChunkReadsOnlyItsCardRange) {
  PgCardsFixture f;
  auto holder = OrThrow(db::pg::Connection::Connect(f.url));
  ASSERT_TRUE(holder->Query(PauseFold(1)).ok());
  auto grant = f.Grant(10);
  ASSERT_TRUE(grant.ok()) << grant.status().ToString();
  ASSERT_EQ(grant->grant_id, 1);
  const int64_t in_range = f.Int("SELECT COUNT(*) FROM P_GRANT_CREDIT WHERE CARD_ID <= 20");
  const int64_t beyond = f.Int("SELECT COUNT(*) FROM P_GRANT_CREDIT WHERE CARD_ID > 20");
  ASSERT_GT(in_range, 0);
  ASSERT_GT(beyond, 4 * in_range) << "too few credits after the range for the test to tell";
  // The holder's own advisory lock does not conflict with its own fold.
  ASSERT_TRUE(holder->Exec("BEGIN").ok());
  ASSERT_TRUE(holder->Exec("SET LOCAL plan_cache_mode = force_generic_plan").ok());
  auto folded = OrThrow(holder->Query("SELECT outcome, cards FROM hotrow_grant_fold_v1(1, 0, 21, 4096)"));
  EXPECT_EQ(folded.Int(0, 0), 0);
  EXPECT_EQ(folded.Int(0, 1), in_range);
  const int64_t fetched =
      OrThrow(holder->Query("SELECT idx_tup_fetch FROM pg_stat_xact_user_tables WHERE relname = 'p_grant_credit'"))
          .Int(0, 0);
  EXPECT_LE(fetched, 2 * in_range + 2) << "rows read by index in P_GRANT_CREDIT; " << beyond << " lie after the range";
  ASSERT_TRUE(holder->Exec("COMMIT").ok());
  ASSERT_TRUE(holder->Query(ResumeFold(1)).ok());
  ASSERT_TRUE(f.Folded(grant->grant_id));
  f.ExpectInvariants();
}

// A fold chunk updates each of its cards by one index probe, whatever the
// statistics say. Autovacuum analyzes P_GRANT_CREDIT when the previous
// grant's credits are all folded and the next one's are not committed yet:
// the table reads as empty. The chunk's UPDATE then planned a nested loop
// whose inner side was the index scan on `CARD_ID = ANY (locked)`, run once
// per credit: 4,096 x 4,096 probes, 38 s, holding 4,096 cards (and every
// point use that met one) at p192.
TEST(PostgresGrant, AFoldChunkProbesEachCardOnceEvenWhenCreditsLookEmpty) {
  PgCardsFixture f;
  auto holder = OrThrow(db::pg::Connection::Connect(f.url));
  ASSERT_TRUE(holder->Exec("ALTER TABLE P_GRANT_CREDIT SET (autovacuum_enabled = false)").ok());
  ASSERT_TRUE(holder->Exec("ANALYZE P_GRANT_CREDIT").ok());  // empty, as between two grants
  ASSERT_TRUE(holder->Query(PauseFold(1)).ok());
  auto grant = f.Grant(10);
  ASSERT_TRUE(grant.ok()) << grant.status().ToString();
  ASSERT_EQ(grant->grant_id, 1);
  constexpr int64_t kChunk = 150;
  ASSERT_GT(grant->cards, kChunk);
  ASSERT_TRUE(holder->Exec("BEGIN").ok());
  // The plan PL/pgSQL settles on after five calls.
  ASSERT_TRUE(holder->Exec("SET LOCAL plan_cache_mode = force_generic_plan").ok());
  auto folded = OrThrow(
      holder->Query("SELECT outcome, cards FROM hotrow_grant_fold_v1(1, -1, NULL, " + std::to_string(kChunk) + ")"));
  EXPECT_EQ(folded.Int(0, 0), 0);
  EXPECT_EQ(folded.Int(0, 1), kChunk);
  const int64_t fetched =
      OrThrow(holder->Query("SELECT idx_tup_fetch FROM pg_stat_xact_user_tables WHERE relname = 's_account'"))
          .Int(0, 0);
  // Locking the cards, then updating them: two probes a card.
  EXPECT_LE(fetched, 3 * kChunk) << "rows of S_ACCOUNT read by index for " << kChunk << " cards";
  ASSERT_TRUE(holder->Exec("COMMIT").ok());
  ASSERT_TRUE(holder->Query(ResumeFold(1)).ok());
  ASSERT_TRUE(f.Folded(grant->grant_id));
  f.ExpectInvariants();
}

// A fold chunk that skips a card a point use holds holds nothing of that
// card: the point use then consumes the card's credit without waiting for
// the chunk's commit. (Chunks used to take the credits FOR UPDATE as they
// read them, and a slow read kept point uses waiting on those rows.)
TEST(PostgresGrant, APointUseNeverWaitsForTheCreditOfACardAFoldChunkSkipped) {
  PgCardsFixture f;
  auto chunk = OrThrow(db::pg::Connection::Connect(f.url));
  ASSERT_TRUE(chunk->Query(PauseFold(1)).ok());
  auto grant = f.Grant(10);
  ASSERT_TRUE(grant.ok()) << grant.status().ToString();
  ASSERT_EQ(grant->grant_id, 1);
  const std::string card = std::to_string(f.Int("SELECT MIN(CARD_ID) FROM P_GRANT_CREDIT"));
  auto payment = OrThrow(db::pg::Connection::Connect(f.url));
  ASSERT_TRUE(payment->Exec("BEGIN").ok());
  ASSERT_TRUE(payment->Query("SELECT 1 FROM S_ACCOUNT WHERE CARD_ID = " + card + " FOR UPDATE").ok());
  ASSERT_TRUE(chunk->Exec("BEGIN").ok());
  auto folded = OrThrow(chunk->Query("SELECT outcome, cards FROM hotrow_grant_fold_v1(1, -1, NULL, 4096)"));
  ASSERT_EQ(folded.Int(0, 0), 0);
  EXPECT_EQ(folded.Int(0, 1), grant->cards - 1) << "every card but the one the point use holds";
  // The chunk is still open. The point use's own credit is free to take.
  ASSERT_TRUE(payment->Exec("SET LOCAL lock_timeout = '500ms'").ok());
  auto consumed = payment->Query("DELETE FROM P_GRANT_CREDIT WHERE GRANT_ID = 1 AND CARD_ID = " + card);
  EXPECT_TRUE(consumed.ok()) << consumed.status().ToString();
  ASSERT_TRUE(payment->Exec("ROLLBACK").ok());
  ASSERT_TRUE(chunk->Exec("COMMIT").ok());
  ASSERT_TRUE(chunk->Query(ResumeFold(1)).ok());
  ASSERT_TRUE(f.Folded(grant->grant_id));
  f.ExpectInvariants();
}

// The apply's session lock and its transaction go in one pipeline, whose
// later segments run even when the lock's fails. With a lock_timeout set
// for the database, a take that timed out behind another holder used to
// let the apply commit unlocked; the retry then found the grant applied
// and answered 503 "lost its staging lease", for a grant that had applied.
TEST(PostgresGrant, AnApplyWhoseLockTimesOutWaitsForItAndAnswersTheGrant) {
  PgCardsFixture f(
      "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET lock_timeout = ''200ms''', "
      "current_database()); END $$");
  auto holder = OrThrow(db::pg::Connection::Connect(f.url));
  ASSERT_TRUE(holder->Query(PauseFold(1)).ok());
  auto first = f.Grant(10);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(first->grant_id, 1);
  // The second grant stages, then waits for the first one's fold.
  std::promise<Result<pointcard::GrantOutcome>> granted;
  f.service->Grant({0, pointcard::NowUs(), 10, std::nullopt, true},
                   [&](Result<pointcard::GrantOutcome> r) { granted.set_value(std::move(r)); });
  for (int i = 0; i < 500 && f.Int("SELECT COUNT(*) FROM P_GRANT WHERE GRANT_ID = 2 AND CARDS > 0") == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(f.Int("SELECT COUNT(*) FROM P_GRANT WHERE GRANT_ID = 2 AND STATE = 'staging' AND CARDS > 0"), 1);
  // Its apply now meets the grant lock held elsewhere: takes time out.
  ASSERT_TRUE(holder->Query("SELECT pg_advisory_lock(72720005)").ok());
  ASSERT_TRUE(holder->Query(ResumeFold(1)).ok());
  ASSERT_TRUE(f.Folded(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  EXPECT_EQ(f.Int("SELECT COUNT(*) FROM P_GRANT WHERE GRANT_ID = 2 AND STATE = 'staging'"), 1)
      << "nothing applies while another session holds the grant lock";
  ASSERT_TRUE(holder->Query("SELECT pg_advisory_unlock(72720005)").ok());
  auto second = granted.get_future().get();
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->grant_id, 2);
  ASSERT_TRUE(f.Folded(2));
  EXPECT_EQ(f.Int("SELECT COUNT(*) FROM H_TRANSACTION WHERE KIND = 'grant'"), first->cards + second->cards);
  f.ExpectInvariants();
}

// A vacuum of S_ACCOUNT (here a session holding the lock a vacuum takes,
// SHARE UPDATE EXCLUSIVE) is waited out before the apply's SHARE request:
// queued behind it, that request would hold every payment behind it for
// each lock_timeout (500 ms), and PostgreSQL cancels an autovacuum only
// after deadlock_timeout (1 s).
TEST(PostgresGrant, AnApplyWaitsOutAVacuumWithoutQueueingPayments) {
  PgCardsFixture f;
  auto vacuum = OrThrow(db::pg::Connection::Connect(f.url));
  ASSERT_TRUE(vacuum->Exec("BEGIN").ok());
  ASSERT_TRUE(vacuum->Exec("LOCK TABLE S_ACCOUNT IN SHARE UPDATE EXCLUSIVE MODE").ok());
  std::promise<Result<pointcard::GrantOutcome>> granted;
  f.service->Grant({0, pointcard::NowUs(), 10, std::nullopt, true},
                   [&](Result<pointcard::GrantOutcome> r) { granted.set_value(std::move(r)); });
  for (int i = 0; i < 500 && f.Int("SELECT COUNT(*) FROM P_GRANT WHERE GRANT_ID = 1 AND CARDS > 0") == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  int queued = 0;
  for (int i = 0; i < 30; ++i) {
    queued += f.Int(
        "SELECT COUNT(*) FROM pg_locks WHERE relation = 's_account'::regclass AND mode = 'ShareLock' AND NOT granted");
    std::this_thread::sleep_for(std::chrono::milliseconds(40));
  }
  EXPECT_EQ(queued, 0) << "samples with the apply's SHARE request queued behind the vacuum";
  auto paid = Wait<Result<pointcard::PaymentOutcome>>([&](auto done) {
    f.service->Pay(pointcard::Payment{1, 1, 1, std::nullopt}, done);
  });
  EXPECT_TRUE(paid.ok()) << paid.status().ToString();
  EXPECT_EQ(f.Int("SELECT COUNT(*) FROM P_GRANT WHERE STATE = 'staging'"), 1) << "it has not applied meanwhile";
  ASSERT_TRUE(vacuum->Exec("COMMIT").ok());
  auto grant = granted.get_future().get();
  ASSERT_TRUE(grant.ok()) << grant.status().ToString();
  ASSERT_TRUE(f.Folded(grant->grant_id));
  f.ExpectInvariants();
}

}  // namespace
}  // namespace hotrow::testing
