// The point-card contract's calls through the service, waited for: shared
// by the contract's files.
#pragma once

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "contract/wait.h"
#include "pointcard/service.h"

namespace hotrow::testing {

using pointcard::Card;
using pointcard::GrantOutcome;
using pointcard::GrantRequest;
using pointcard::HistoryPage;
using pointcard::Payment;
using pointcard::PaymentOutcome;

inline Result<Card> GetCard(pointcard::PointCardService& s, int64_t id) {
  return Wait<Result<Card>>([&](auto done) { s.GetCard(id, done); });
}
inline Result<PaymentOutcome> Pay(pointcard::PointCardService& s, int64_t card, int64_t store, int64_t amount,
                                  std::optional<std::string> key = std::nullopt) {
  return Wait<Result<PaymentOutcome>>([&](auto done) { s.Pay(Payment{card, store, amount, key}, done); });
}
inline Result<HistoryPage> History(pointcard::PointCardService& s, int64_t card, int64_t limit,
                                   std::optional<int64_t> before = std::nullopt) {
  return Wait<Result<HistoryPage>>([&](auto done) { s.History(card, limit, before, done); });
}
// Grants here overlap freely (allow_overlap), as in the reference's
// experiment; OverlappingPeriodsAreRefusedUnlessAllowed checks the refusal.
inline Result<GrantOutcome> Grant(pointcard::PointCardService& s, int64_t from, int64_t to, int64_t rate,
                                  std::optional<std::string> key = std::nullopt, bool allow_overlap = true) {
  return Wait<Result<GrantOutcome>>([&](auto done) {
    s.Grant(GrantRequest{from, to, rate, key, allow_overlap}, done);
  });
}

// Every row of a card, oldest first.
inline Result<pointcard::GrantInfo> GetGrant(pointcard::PointCardService& s, int64_t id) {
  return Wait<Result<pointcard::GrantInfo>>([&](auto done) { s.GetGrant(id, done); });
}

// Until the grant's history rows are written (SQLite folds them after the
// answer; PostgreSQL writes them in the grant's transaction).
inline void WaitFolded(pointcard::PointCardService& s, int64_t id) {
  for (int i = 0; i < 3000; ++i) {
    auto g = GetGrant(s, id);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    if (g->folded()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  FAIL() << "grant " << id << " did not fold in 30 s";
}

inline std::vector<pointcard::HistoryRow> AllRows(pointcard::PointCardService& s, int64_t card) {
  std::vector<pointcard::HistoryRow> rows;
  std::optional<int64_t> before;
  while (true) {
    auto page = History(s, card, 100, before);
    if (!page.ok()) break;
    rows.insert(rows.end(), page->rows.begin(), page->rows.end());
    if (!page->next_before_us) break;
    before = page->next_before_us;
  }
  std::reverse(rows.begin(), rows.end());
  return rows;
}

}  // namespace hotrow::testing
