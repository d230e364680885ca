// The point card on a fresh PostgreSQL database seeded with the contract's
// cards, with a store whose grants fold in small chunks on several workers
// and whose leases are short: the grant suites' fixture
// (pg_grant_test.cc, pg_grant_crash_test.cc).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "contract/pointcard_contract.h"
#include "contract/wait.h"
#include "db/postgres.h"
#include "harness/or_throw.h"
#include "harness/postgres_process.h"
#include "pointcard/postgres_store.h"
#include "pointcard/service.h"

namespace hotrow::testing {

inline constexpr int64_t kFoldLockSpace = 72720006;  // postgres_grant_sql.cc
// A session that runs these holds a grant's fold off, then lets it go.
inline std::string PauseFold(int64_t grant_id) {
  return "SELECT pg_advisory_lock(" + std::to_string(kFoldLockSpace) + ", " + std::to_string(grant_id) + ")";
}
inline std::string ResumeFold(int64_t grant_id) {
  return "SELECT pg_advisory_unlock(" + std::to_string(kFoldLockSpace) + ", " + std::to_string(grant_id) + ")";
}

// The contract's cards, stores and history, seeded into the database at `url`.
inline void SeedContractCards(const std::string& url) {
  auto conn = OrThrow(db::pg::Connection::Connect(url));
  pointcard::SeedOptions o;
  o.cards = kContractCards;
  o.stores = kContractStores;
  o.history = kContractHistory;
  o.seed = 7;
  OrThrow(pointcard::SeedPostgresPointCard(*conn, o, nullptr));
}

struct PgCardsFixture {
  // `setup`: SQL run on the seeded database before the pool connects.
  explicit PgCardsFixture(const std::string& setup = "") : url(FreshDatabase()) {
    SeedContractCards(url);
    if (!setup.empty()) {
      auto conn = OrThrow(db::pg::Connection::Connect(url));
      EXPECT_TRUE(conn->Exec(setup).ok()) << setup;
    }
    pool = OpenPool(url);
    store = OrThrow(pointcard::PostgresPointCardStore::Open(
        *pool, {.fold_chunk = 3, .fold_workers = 4, .stage_workers = 3, .lease = std::chrono::seconds(1)}));
    service = std::make_unique<pointcard::PointCardService>(*store);
    EXPECT_TRUE(service->Load().ok());
  }
  ~PgCardsFixture() {
    service->Stop();
    service.reset();
    store.reset();
  }
  int64_t Int(const std::string& sql) {
    auto conn = OrThrow(db::pg::Connection::Connect(url));
    auto rows = OrThrow(conn->Query(sql));
    return rows.Int(0, 0);
  }
  Result<pointcard::GrantOutcome> Grant(int64_t rate, std::optional<std::string> key = std::nullopt) {
    return Wait<Result<pointcard::GrantOutcome>>([&](auto done) {
      service->Grant({0, pointcard::NowUs(), rate, key, true}, done);
    });
  }
  Result<pointcard::Card> Card(int64_t id) {
    return Wait<Result<pointcard::Card>>([&](auto done) { service->GetCard(id, done); });
  }
  void ExpectInvariants() {
    auto conn = OrThrow(db::pg::Connection::Connect(url));
    auto report = pointcard::CheckPostgresInvariants(*conn);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    EXPECT_TRUE(report->ok()) << report->examples.front();
  }
  // `corrupt` (SQL) makes the checker report a violation of `kind`; `undo`
  // puts it back.
  void ExpectFound(const std::string& corrupt, const std::string& undo, const char* kind) {
    auto conn = OrThrow(db::pg::Connection::Connect(url));
    ASSERT_TRUE(conn->Exec(corrupt).ok()) << corrupt;
    auto report = OrThrow(pointcard::CheckPostgresInvariants(*conn));
    EXPECT_EQ(report.violations.count(kind), 1u) << corrupt;
    ASSERT_TRUE(conn->Exec(undo).ok()) << undo;
  }
  bool Folded(int64_t grant_id) {
    for (int i = 0; i < 1500; ++i) {
      auto g = Wait<Result<pointcard::GrantInfo>>([&](auto done) { service->GetGrant(grant_id, done); });
      if (g.ok() && g->folded()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  std::string url;
  std::unique_ptr<db::pg::Pool> pool;
  std::unique_ptr<pointcard::PostgresPointCardStore> store;
  std::unique_ptr<pointcard::PointCardService> service;
};

}  // namespace hotrow::testing
