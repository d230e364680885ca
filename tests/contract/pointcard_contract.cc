#include "contract/pointcard_contract.h"

#include <atomic>
#include <future>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "contract/pointcard_helpers.h"
#include "contract/wait.h"

namespace hotrow::testing {

void PointCardContract::SetUp() {
  backend = GetParam().make();
  ASSERT_TRUE(backend);
  service = std::make_unique<pointcard::PointCardService>(backend->store());
  ASSERT_TRUE(service->Load().ok());
}

void PointCardContract::Restart() {
  service.reset();
  backend->Restart();
  service = std::make_unique<pointcard::PointCardService>(backend->store());
  ASSERT_TRUE(service->Load().ok());
}

void PointCardContract::ExpectInvariants() {
  auto report = backend->Check();
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->ok()) << (report->examples.empty() ? "" : report->examples.front());
}

TEST_P(PointCardContract, MasterDataAndCards) {
  EXPECT_EQ(service->regions().size(), 47u);
  EXPECT_EQ(service->regions()[12].name, "東京都");
  EXPECT_EQ(service->store_count(), static_cast<size_t>(kContractStores));
  size_t stores = 0;
  for (const auto& r : service->regions()) stores += (*service->StoresOf(r.region_id))->size();
  EXPECT_EQ(stores, static_cast<size_t>(kContractStores));
  EXPECT_EQ(service->StoresOf(48).status().code(), ErrorCode::kNotFound);
  auto store = service->Store(3);
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->store_id, 3);
  EXPECT_FALSE((*store)->name.empty());
  EXPECT_EQ(service->Store(kContractStores + 1).status().code(), ErrorCode::kNotFound);
  auto card = GetCard(*service, 1);
  ASSERT_TRUE(card.ok());
  EXPECT_GE(card->balance, 0);
  EXPECT_GE(card->region_id, 1);
  EXPECT_LE(card->region_id, 47);
  EXPECT_EQ(GetCard(*service, kContractCards + 1).status().code(), ErrorCode::kNotFound);
  ExpectInvariants();
}

TEST_P(PointCardContract, ChargeAndPayAppendHistoryWithRunningBalances) {
  auto before = GetCard(*service, 5);
  ASSERT_TRUE(before.ok());
  auto charge = Pay(*service, 5, 3, 5000);
  ASSERT_TRUE(charge.ok()) << charge.status().ToString();
  EXPECT_FALSE(charge->refused);
  EXPECT_EQ(charge->row.balance, before->balance + 5000);
  auto pay = Pay(*service, 5, 4, -1200);
  ASSERT_TRUE(pay.ok());
  EXPECT_EQ(pay->row.balance, before->balance + 3800);
  EXPECT_GT(pay->row.payment_time_us, charge->row.payment_time_us) << "times strictly increase";
  auto after = GetCard(*service, 5);
  EXPECT_EQ(after->balance, before->balance + 3800);
  EXPECT_EQ(after->last_update_us, pay->row.payment_time_us);
  auto page = History(*service, 5, 2);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->rows.size(), 2u);
  EXPECT_EQ(page->rows[0].amount, -1200) << "newest first";
  EXPECT_EQ(page->rows[0].store_id, 4);
  EXPECT_EQ(page->rows[1].amount, 5000);
  ExpectInvariants();
}

TEST_P(PointCardContract, APaymentThatDoesNotFitIsRefusedAndWritesNothing) {
  auto card = GetCard(*service, 7);
  auto rows = AllRows(*service, 7).size();
  auto refused = Pay(*service, 7, 1, -(card->balance + 1));
  ASSERT_TRUE(refused.ok());
  EXPECT_TRUE(refused->refused);
  EXPECT_EQ(refused->row.balance, card->balance);
  EXPECT_EQ(GetCard(*service, 7)->balance, card->balance);
  EXPECT_EQ(AllRows(*service, 7).size(), rows);
  if (card->balance > 0) {
    auto exact = Pay(*service, 7, 1, -card->balance);  // paying the whole balance fits
    EXPECT_FALSE(exact->refused);
    EXPECT_EQ(exact->row.balance, 0);
  }
  ExpectInvariants();
}

TEST_P(PointCardContract, BadPaymentsAreRejected) {
  EXPECT_EQ(Pay(*service, 1, 1, 0).status().field(), "amount");
  EXPECT_EQ(Pay(*service, 1, 1, 1000001).status().field(), "amount");
  EXPECT_EQ(Pay(*service, 1, 1, -1000001).status().field(), "amount");
  EXPECT_TRUE(Pay(*service, 1, 1, 1000000).ok());
  EXPECT_EQ(Pay(*service, 1, kContractStores + 1, 10).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(Pay(*service, kContractCards + 1, 1, 10).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(Pay(*service, 1, 1, 10, std::string("bad key")).status().field(), "Idempotency-Key");
  EXPECT_EQ(History(*service, 1, 0).status().field(), "limit");
  EXPECT_EQ(History(*service, kContractCards + 1, 10).status().code(), ErrorCode::kNotFound);
  ExpectInvariants();
}

TEST_P(PointCardContract, HistoryPagesNewestFirstWithACursor) {
  for (int i = 1; i <= 7; ++i) ASSERT_TRUE(Pay(*service, 9, 2, i * 10).ok());
  std::vector<int64_t> seen;
  std::optional<int64_t> before;
  for (int page = 0; page < 100; ++page) {
    auto p = History(*service, 9, 3, before);
    ASSERT_TRUE(p.ok());
    for (const auto& r : p->rows) seen.push_back(r.payment_time_us);
    if (!p->next_before_us) break;
    before = p->next_before_us;
  }
  EXPECT_TRUE(std::is_sorted(seen.rbegin(), seen.rend()));
  EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), seen.size()) << "no row twice across pages";
  EXPECT_EQ(seen.size(), AllRows(*service, 9).size());
}

// A cursor beyond any time a store holds is the first page (PostgreSQL said
// "interval out of range" in a 500 that quoted the statement).
TEST_P(PointCardContract, AHugeCursorIsTheFirstPage) {
  auto first = History(*service, 9, 3);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto huge = History(*service, 9, 3, INT64_MAX);
  ASSERT_TRUE(huge.ok()) << huge.status().ToString();
  ASSERT_EQ(huge->rows.size(), first->rows.size());
  for (size_t i = 0; i < huge->rows.size(); ++i)
    EXPECT_EQ(huge->rows[i].payment_time_us, first->rows[i].payment_time_us);
}

TEST_P(PointCardContract, IdempotencyKeysReplayTheFirstAnswer) {
  auto first = Pay(*service, 11, 1, -1, "order-1");
  auto again = Pay(*service, 11, 1, -1, "order-1");
  ASSERT_TRUE(first.ok() && again.ok());
  EXPECT_TRUE(again->replayed);
  EXPECT_EQ(again->refused, first->refused);
  EXPECT_EQ(again->row.payment_time_us, first->row.payment_time_us);
  EXPECT_EQ(again->row.balance, first->row.balance);
  EXPECT_EQ(Pay(*service, 11, 1, -2, "order-1").status().code(), ErrorCode::kIdempotencyMismatch);
  // A key is scoped to its card.
  auto other = Pay(*service, 12, 1, 10, "order-1");
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->replayed);
  // A refusal is an answer, replayed as such.
  auto refused = Pay(*service, 13, 1, -1000000, "too-much");
  auto refused_again = Pay(*service, 13, 1, -1000000, "too-much");
  EXPECT_TRUE(refused->refused);
  EXPECT_TRUE(refused_again->refused);
  EXPECT_TRUE(refused_again->replayed);
  ExpectInvariants();
}

TEST_P(PointCardContract, ConcurrentRequestsWithOneKeyMakeOnePayment) {
  auto before = GetCard(*service, 20);
  std::vector<std::thread> threads;
  std::vector<Result<PaymentOutcome>> results(16, Status::Internal("unset"));
  for (int i = 0; i < 16; ++i)
    threads.emplace_back([&, i] { results[static_cast<size_t>(i)] = Pay(*service, 20, 2, 700, "dup"); });
  for (auto& t : threads) t.join();
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->row.payment_time_us, results[0]->row.payment_time_us);
    EXPECT_EQ(r->row.balance, before->balance + 700);
  }
  EXPECT_EQ(GetCard(*service, 20)->balance, before->balance + 700);
  ExpectInvariants();
}

TEST_P(PointCardContract, GrantGivesEachCardItsShareOfThePeriodsCharges) {
  // Expected bonuses, from the history as the API shows it.
  int64_t now = pointcard::NowUs();
  int64_t from = now - 40ll * 24 * 3600 * 1000000, to = now;
  std::map<int64_t, int64_t> expected;
  std::map<int64_t, int64_t> balance_before;
  for (int64_t card = 1; card <= kContractCards; ++card) {
    int64_t sum = 0;
    for (const auto& r : AllRows(*service, card))
      if (r.payment_time_us >= from && r.payment_time_us < to && r.amount > 0 && r.store_id > 0) sum += r.amount;
    if (sum * 3 / 100 > 0) expected[card] = sum * 3 / 100;
    balance_before[card] = GetCard(*service, card)->balance;
  }
  auto grant = Grant(*service, from, to, 3);
  ASSERT_TRUE(grant.ok()) << grant.status().ToString();
  EXPECT_EQ(grant->cards, static_cast<int64_t>(expected.size()));
  int64_t points = 0;
  for (const auto& [card, bonus] : expected) points += bonus;
  EXPECT_EQ(grant->points, points);
  EXPECT_GT(grant->grant_id, 0);
  // Visible in every balance from the answer on, history rows or not yet.
  for (int64_t card = 1; card <= kContractCards; ++card) {
    int64_t bonus = expected.count(card) ? expected[card] : 0;
    EXPECT_EQ(GetCard(*service, card)->balance, balance_before[card] + bonus) << "card " << card;
  }
  WaitFolded(*service, grant->grant_id);
  auto info = GetGrant(*service, grant->grant_id);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->outcome.cards, grant->cards);
  EXPECT_EQ(info->outcome.points, grant->points);
  EXPECT_EQ(info->from_us, from);
  EXPECT_EQ(info->to_us, to);
  EXPECT_EQ(info->rate_percent, 3);
  EXPECT_LE(info->applied_at_us, *info->folded_at_us);
  for (int64_t card = 1; card <= kContractCards; ++card) {
    int64_t bonus = expected.count(card) ? expected[card] : 0;
    auto folded = GetCard(*service, card);
    EXPECT_EQ(folded->balance, balance_before[card] + bonus) << "card " << card;
    EXPECT_EQ(folded->pending_points, 0) << "card " << card;
    auto newest = History(*service, card, 1);
    if (bonus > 0) {
      ASSERT_EQ(newest->rows.size(), 1u);
      EXPECT_EQ(newest->rows[0].store_id, 0) << "a grant's row has STORE_ID 0";
      EXPECT_EQ(newest->rows[0].amount, bonus);
    }
  }
  ExpectInvariants();
  EXPECT_EQ(GetGrant(*service, grant->grant_id + 1000).status().code(), ErrorCode::kNotFound);
  // Grant rows (STORE_ID 0) never count as charges for a later grant.
  auto second = Grant(*service, from, pointcard::NowUs(), 3);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->points, points);
}

// A card's points are its charges times the rate, rounded down, on every
// backend: PostgreSQL's grant rounded half up (numeric into bigint) while
// SQLite truncated, so 150 at 1% gave 2 points on one and 1 on the other.
TEST_P(PointCardContract, AGrantsPointsAreRoundedDown) {
  int64_t from = pointcard::NowUs();
  ASSERT_TRUE(Pay(*service, 1, 1, 150).ok());
  ASSERT_TRUE(Pay(*service, 2, 1, 199).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  auto grant = Grant(*service, from, pointcard::NowUs(), 1);
  ASSERT_TRUE(grant.ok()) << grant.status().ToString();
  EXPECT_EQ(grant->cards, 2);
  EXPECT_EQ(grant->points, 2) << "1.5 and 1.99 points are 1 each";
  WaitFolded(*service, grant->grant_id);
  ExpectInvariants();
}

TEST_P(PointCardContract, GrantRulesAndGrantInProgress) {
  int64_t now = pointcard::NowUs();
  EXPECT_EQ(Grant(*service, now - 1000, now - 1000, 1).status().field(), "to");
  EXPECT_EQ(Grant(*service, now - 1000, now + 60000000, 1).status().field(), "to");
  EXPECT_EQ(Grant(*service, now - 1000, now - 10, 0).status().field(), "ratePercent");
  EXPECT_EQ(Grant(*service, now - 1000, now - 10, 101).status().field(), "ratePercent");
  // Two grants at once: the second is refused while the first runs. (On a
  // loaded machine the test thread can be descheduled until the first has
  // finished: then the pair says nothing, and is sent again.)
  for (int attempt = 0;; ++attempt) {
    ASSERT_LT(attempt, 10) << "the first grant always finished before the second was sent";
    std::promise<Result<GrantOutcome>> first, second;
    std::atomic<bool> first_done{false};
    service->Grant({0, now, 1, std::nullopt, true}, [&](Result<GrantOutcome> r) {
      first_done = true;
      first.set_value(std::move(r));
    });
    const bool raced = first_done.load();
    service->Grant({0, now, 1, std::nullopt, true}, [&](Result<GrantOutcome> r) { second.set_value(std::move(r)); });
    auto a = first.get_future().get(), b = second.get_future().get();
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    if (raced) continue;
    EXPECT_EQ(b.status().code(), ErrorCode::kGrantInProgress);
    break;
  }
  ExpectInvariants();
}

// A second grant of an overlapping period without a key doubled the bonus
// (issue 9, item 13): refused, naming the earlier grant, unless asked for.
// Periods are half-open, so adjacent ones do not overlap.
TEST_P(PointCardContract, OverlappingPeriodsAreRefusedUnlessAllowed) {
  const int64_t hour = 3600ll * 1000000, now = pointcard::NowUs();
  auto total = [&] {
    int64_t sum = 0;
    for (int64_t card = 1; card <= kContractCards; ++card) sum += GetCard(*service, card)->balance;
    return sum;
  };
  auto first = Grant(*service, now - 40 * 24 * hour, now - hour, 3, std::nullopt, false);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  int64_t before = total();
  auto overlapping = Grant(*service, now - 2 * hour, now - hour / 2, 3, std::nullopt, false);
  ASSERT_EQ(overlapping.status().code(), ErrorCode::kPeriodAlreadyGranted) << overlapping.status().ToString();
  EXPECT_NE(overlapping.status().message().find("grant " + std::to_string(first->grant_id)), std::string::npos)
      << overlapping.status().message();
  EXPECT_EQ(total(), before) << "a refused grant writes nothing";
  auto adjacent = Grant(*service, now - hour, now, 3, std::nullopt, false);
  EXPECT_TRUE(adjacent.ok()) << adjacent.status().ToString();
  auto allowed = Grant(*service, now - 2 * hour, now - hour / 2, 3, std::nullopt, true);
  EXPECT_TRUE(allowed.ok()) << allowed.status().ToString();
  ExpectInvariants();
}

TEST_P(PointCardContract, GrantIdempotencyKey) {
  int64_t now = pointcard::NowUs();
  auto a = Grant(*service, 0, now, 2, "campaign-7");
  auto b = Grant(*service, 0, now, 2, "campaign-7");
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString() << b.status().ToString();
  EXPECT_TRUE(b->replayed);
  EXPECT_EQ(b->grant_id, a->grant_id);
  EXPECT_EQ(b->points, a->points);
  EXPECT_EQ(Grant(*service, 0, now, 5, "campaign-7").status().code(), ErrorCode::kIdempotencyMismatch);
}

// A grant running beside 64 online workers: the grant succeeds, every
// online transaction succeeds or is refused for balance, invariants hold.
TEST_P(PointCardContract, GrantBesideSixtyFourOnlineWorkers) {
  std::atomic<bool> stop{false};
  std::atomic<int64_t> ok{0}, refused{0}, failed{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 64; ++w)
    workers.emplace_back([&, w] {
      std::mt19937_64 rng(w);
      while (!stop) {
        int64_t card = static_cast<int64_t>(rng() % kContractCards) + 1;
        int64_t store = static_cast<int64_t>(rng() % kContractStores) + 1;
        int64_t amount = (rng() % 2 ? 1 : -1) * static_cast<int64_t>(rng() % 5000 + 1);
        auto r = Pay(*service, card, store, amount);
        if (!r.ok()) {
          if (failed++ == 0) ADD_FAILURE() << "first failure: " << r.status().ToString();
        } else if (r->refused) {
          ++refused;
        } else {
          ++ok;
        }
      }
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::vector<Result<GrantOutcome>> grants;
  for (int i = 0; i < 3; ++i) grants.push_back(Grant(*service, 0, pointcard::NowUs(), 1));
  stop = true;
  for (auto& w : workers) w.join();
  for (const auto& g : grants) EXPECT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(failed.load(), 0) << "of " << ok.load() + refused.load() + failed.load();
  EXPECT_GT(ok.load(), 0);
  ExpectInvariants();
}

TEST_P(PointCardContract, EverythingSurvivesARestart) {
  auto paid = Pay(*service, 3, 1, 1234, "restart-key");
  ASSERT_TRUE(paid.ok());
  auto grant = Grant(*service, 0, pointcard::NowUs(), 1);
  ASSERT_TRUE(grant.ok());
  auto card = GetCard(*service, 3);
  Restart();
  EXPECT_EQ(GetCard(*service, 3)->balance, card->balance);
  auto replay = Pay(*service, 3, 1, 1234, "restart-key");
  EXPECT_TRUE(replay->replayed);
  auto later = Pay(*service, 3, 1, 1);
  EXPECT_GT(later->row.payment_time_us, card->last_update_us) << "the clock continues after a restart";
  ExpectInvariants();
}

// Shutting a store down while a grant runs waits for the grant (it calls
// back into the store when it ends) and leaves it whole or absent.
TEST_P(PointCardContract, ARestartDuringAGrantWaitsForIt) {
  std::promise<Result<GrantOutcome>> done;
  service->Grant({0, pointcard::NowUs(), 1, std::nullopt, true},
                 [&](Result<GrantOutcome> r) { done.set_value(std::move(r)); });
  Restart();
  auto future = done.get_future();
  ASSERT_EQ(future.wait_for(std::chrono::seconds(0)), std::future_status::ready)
      << "the grant's answer must have come before the store closed";
  auto outcome = future.get();
  EXPECT_TRUE(outcome.ok() || outcome.status().code() == ErrorCode::kUnavailable) << outcome.status().ToString();
  ExpectInvariants();
}

}  // namespace hotrow::testing

namespace hotrow::testing {

// A point use right after a grant answered (SQLite: while it folds) writes
// the grant's row first, then its own, each at its own time, and neither
// is lost or counted twice.
TEST_P(PointCardContract, APaymentAfterAGrantWritesTheGrantsRowFirst) {
  int64_t now = pointcard::NowUs();
  std::map<int64_t, int64_t> before;
  for (int64_t card = 1; card <= kContractCards; ++card) before[card] = GetCard(*service, card)->balance;
  auto grant = Grant(*service, 0, now, 10);
  ASSERT_TRUE(grant.ok()) << grant.status().ToString();
  ASSERT_GT(grant->cards, 0);
  int64_t paid_card = 0, bonus = 0;
  for (int64_t card = 1; card <= kContractCards && !paid_card; ++card) {
    int64_t after = GetCard(*service, card)->balance;
    if (after > before[card]) paid_card = card, bonus = after - before[card];
  }
  ASSERT_GT(paid_card, 0);
  auto paid = Pay(*service, paid_card, 1, -1);
  ASSERT_TRUE(paid.ok()) << paid.status().ToString();
  ASSERT_FALSE(paid->refused);
  EXPECT_EQ(paid->row.balance, before[paid_card] + bonus - 1);
  WaitFolded(*service, grant->grant_id);
  auto rows = History(*service, paid_card, 2);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->rows.size(), 2u);
  EXPECT_EQ(rows->rows[0].amount, -1);
  EXPECT_EQ(rows->rows[1].store_id, 0) << "the grant's row, before the payment's";
  EXPECT_EQ(rows->rows[1].amount, bonus);
  EXPECT_EQ(rows->rows[1].kind, "grant");
  EXPECT_EQ(rows->rows[1].actor, "system");
  EXPECT_GT(rows->rows[1].transaction_id, 0);
  EXPECT_NE(rows->rows[1].transaction_id, rows->rows[0].transaction_id);
  EXPECT_LT(rows->rows[1].payment_time_us, rows->rows[0].payment_time_us);
  EXPECT_EQ(GetCard(*service, paid_card)->balance, before[paid_card] + bonus - 1);
  int64_t total_before = 0, total_after = 0;
  for (int64_t card = 1; card <= kContractCards; ++card) {
    total_before += before[card];
    total_after += GetCard(*service, card)->balance;
  }
  EXPECT_EQ(total_after, total_before + grant->points - 1);
  ExpectInvariants();
}

}  // namespace hotrow::testing
