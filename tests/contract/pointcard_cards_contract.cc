// The point-card contract, cards a retailer issues and closes (0.9.0): what
// every backend must do.
#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

#include "contract/pointcard_contract.h"
#include "contract/pointcard_helpers.h"

namespace hotrow::testing {

using pointcard::CardClose;
using pointcard::NewCard;

namespace {

Result<Card> Issue(pointcard::PointCardService& s, NewCard card) {
  return Wait<Result<Card>>([&](auto done) { s.CreateCard(std::move(card), done); });
}
Result<std::optional<Card>> Find(pointcard::PointCardService& s, const std::string& ref) {
  return Wait<Result<std::optional<Card>>>([&](auto done) { s.FindCard(ref, done); });
}
using MadeStore = Result<std::pair<pointcard::StoreInfo, bool>>;
MadeStore MakeStore(pointcard::PointCardService& s, const pointcard::NewStore& store) {
  return Wait<MadeStore>([&](auto done) { s.CreateStore(store, done); });
}
Result<Card> Close(pointcard::PointCardService& s, int64_t card, std::optional<std::string> key = std::nullopt) {
  return Wait<Result<Card>>([&](auto done) { s.CloseCard(CardClose{card, std::move(key)}, done); });
}

}  // namespace

// A new card takes the next id and starts empty and active; its external
// reference finds it and is unique; a key replays the card it made.
TEST_P(PointCardContract, IssuedCardsStartEmptyAndAreFoundByTheirExternalReference) {
  auto made = Issue(*service, {.region_id = 13, .external_ref = "member-0001"});
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  EXPECT_EQ(made->card_id, kContractCards + 1) << "after every seeded card";
  EXPECT_EQ(made->region_id, 13);
  EXPECT_EQ(made->external_ref, "member-0001");
  EXPECT_EQ(made->status, "active");
  EXPECT_EQ(made->balance, 0);
  EXPECT_FALSE(made->closed_at_us);
  EXPECT_FALSE(made->replayed);
  auto read = GetCard(*service, made->card_id);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->external_ref, "member-0001");
  EXPECT_EQ(read->status, "active");
  EXPECT_EQ(read->last_update_us, made->last_update_us);
  auto found = Find(*service, "member-0001");
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  ASSERT_TRUE(*found);
  EXPECT_EQ((*found)->card_id, made->card_id);
  auto none = Find(*service, "member-9999");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(*none);
  EXPECT_EQ(GetCard(*service, 1)->status, "active") << "seeded cards are active";
  EXPECT_FALSE(GetCard(*service, 1)->external_ref);

  auto twin = Issue(*service, {.region_id = 1, .external_ref = "member-0001"});
  EXPECT_EQ(twin.status().code(), ErrorCode::kAlreadyExists);
  EXPECT_EQ(twin.status().field(), "externalRef");
  EXPECT_EQ(Issue(*service, {.region_id = 48}).status().field(), "regionId");
  EXPECT_EQ(Issue(*service, {.region_id = 1, .external_ref = "two words"}).status().field(), "externalRef");
  EXPECT_EQ(Issue(*service, {.region_id = 1, .external_ref = ""}).status().field(), "externalRef");
  EXPECT_EQ(Find(*service, "").status().field(), "externalRef");

  // Without a reference, and with a key: the key replays the card.
  auto keyed = Issue(*service, {.region_id = 2, .idempotency_key = "issue-1"});
  ASSERT_TRUE(keyed.ok()) << keyed.status().ToString();
  EXPECT_EQ(keyed->card_id, made->card_id + 1) << "a refused issue takes no id";
  EXPECT_FALSE(keyed->external_ref);
  auto again = Issue(*service, {.region_id = 2, .idempotency_key = "issue-1"});
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->replayed);
  EXPECT_EQ(again->card_id, keyed->card_id);
  EXPECT_EQ(Issue(*service, {.region_id = 3, .idempotency_key = "issue-1"}).status().code(),
            ErrorCode::kIdempotencyMismatch);
  // A refusal is kept with its key, as a refused payment's is.
  auto refused = Issue(*service, {.region_id = 4, .external_ref = "member-0001", .idempotency_key = "issue-2"});
  EXPECT_EQ(refused.status().code(), ErrorCode::kAlreadyExists);
  EXPECT_EQ(
      Issue(*service, {.region_id = 4, .external_ref = "member-0001", .idempotency_key = "issue-2"}).status().code(),
      ErrorCode::kAlreadyExists);
  EXPECT_EQ(
      Issue(*service, {.region_id = 4, .external_ref = "member-0002", .idempotency_key = "issue-2"}).status().code(),
      ErrorCode::kIdempotencyMismatch);
  // One reference spelled two ways (e + U+0301, and the precomposed é) is
  // one reference: stored and looked up in NFC.
  auto decomposed = Issue(*service, {.region_id = 6, .external_ref = "Cafe\xcc\x81-7"});
  ASSERT_TRUE(decomposed.ok()) << decomposed.status().ToString();
  EXPECT_EQ(decomposed->external_ref, "Caf\xc3\xa9-7");
  EXPECT_EQ(Issue(*service, {.region_id = 6, .external_ref = "Caf\xc3\xa9-7"}).status().code(),
            ErrorCode::kAlreadyExists);
  auto by_other_spelling = Find(*service, "Cafe\xcc\x81-7");
  ASSERT_TRUE(by_other_spelling.ok() && *by_other_spelling);
  EXPECT_EQ((*by_other_spelling)->card_id, decomposed->card_id);
  // The key is the route's, not a card's: a payment may use it too.
  ASSERT_TRUE(Pay(*service, keyed->card_id, 1, 100, std::string("issue-1")).ok());

  Restart();
  EXPECT_EQ(GetCard(*service, made->card_id)->external_ref, "member-0001");
  auto after_restart = Issue(*service, {.region_id = 2, .idempotency_key = "issue-1"});
  ASSERT_TRUE(after_restart.ok());
  EXPECT_TRUE(after_restart->replayed);
  EXPECT_EQ(after_restart->balance, 100) << "a replay answers the card as it is now";
  auto next = Issue(*service, {.region_id = 2});
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->card_id, decomposed->card_id + 1);
  ExpectInvariants();
}

// Concurrent issues with one external reference make one card, and so do
// concurrent first uses of one key.
TEST_P(PointCardContract, ConcurrentIssuesWithOneReferenceOrOneKeyMakeOneCard) {
  std::atomic<int> made{0}, taken{0}, replayed{0};
  std::vector<std::thread> clients;
  std::vector<int64_t> ids(8, 0);
  for (int i = 0; i < 8; ++i)
    clients.emplace_back([&, i] {
      auto r = Issue(*service, {.region_id = 5, .external_ref = "shared-ref"});
      if (r.ok()) ++made;
      if (r.status().code() == ErrorCode::kAlreadyExists) ++taken;
      auto k = Issue(*service, {.region_id = 5, .idempotency_key = "shared-key"});
      if (k.ok()) {
        ids[i] = k->card_id;
        if (k->replayed) ++replayed;
      }
    });
  for (auto& c : clients) c.join();
  EXPECT_EQ(made.load(), 1);
  EXPECT_EQ(taken.load(), 7);
  EXPECT_EQ(replayed.load(), 7);
  for (int64_t id : ids) EXPECT_EQ(id, ids[0]) << "one card for the key";
  ExpectInvariants();
}

// A closed card refuses payments and charges, keeps its balance and its
// history, and closing it again answers it as it is.
TEST_P(PointCardContract, AClosedCardRefusesPaymentsAndChargesAndKeepsItsBalance) {
  ASSERT_TRUE(Pay(*service, 7, 1, 800, std::string("before-close")).ok());
  auto before = GetCard(*service, 7);
  ASSERT_TRUE(before.ok());
  const size_t rows_before = AllRows(*service, 7).size();
  auto closed = Close(*service, 7);
  ASSERT_TRUE(closed.ok()) << closed.status().ToString();
  EXPECT_EQ(closed->status, "closed");
  ASSERT_TRUE(closed->closed_at_us);
  EXPECT_GT(*closed->closed_at_us, before->last_update_us) << "after the card's newest row";
  EXPECT_EQ(closed->balance, before->balance);
  auto twice = Close(*service, 7);
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ(twice->closed_at_us, closed->closed_at_us) << "closing is idempotent";
  EXPECT_FALSE(twice->replayed);

  EXPECT_EQ(Pay(*service, 7, 1, -1).status().code(), ErrorCode::kCardClosed);
  EXPECT_EQ(Pay(*service, 7, 1, 1).status().code(), ErrorCode::kCardClosed);
  EXPECT_EQ(Pay(*service, 7, 1, -1, std::string("after-close")).status().code(), ErrorCode::kCardClosed);
  auto replay = Pay(*service, 7, 1, 800, std::string("before-close"));
  ASSERT_TRUE(replay.ok()) << "a key's earlier answer still replays";
  EXPECT_TRUE(replay->replayed);
  EXPECT_EQ(AllRows(*service, 7).size(), rows_before);
  EXPECT_EQ(GetCard(*service, 7)->balance, before->balance);
  EXPECT_EQ(Close(*service, kContractCards + 50).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(GetCard(*service, 8)->status, "active") << "only that card";

  // Keys are the card's, shared with its payments.
  EXPECT_EQ(Close(*service, 7, std::string("before-close")).status().code(), ErrorCode::kIdempotencyMismatch);
  auto keyed = Close(*service, 9, std::string("close-9"));
  ASSERT_TRUE(keyed.ok());
  EXPECT_FALSE(keyed->replayed);
  auto keyed_again = Close(*service, 9, std::string("close-9"));
  ASSERT_TRUE(keyed_again.ok());
  EXPECT_TRUE(keyed_again->replayed);
  EXPECT_EQ(Pay(*service, 9, 1, 5, std::string("close-9")).status().code(), ErrorCode::kIdempotencyMismatch);
  // A key on a card closed already is kept too: its retry is a replay.
  auto late = Close(*service, 7, std::string("close-7-late"));
  ASSERT_TRUE(late.ok());
  EXPECT_FALSE(late->replayed);
  EXPECT_EQ(late->closed_at_us, closed->closed_at_us);
  auto late_again = Close(*service, 7, std::string("close-7-late"));
  ASSERT_TRUE(late_again.ok());
  EXPECT_TRUE(late_again->replayed);

  Restart();
  EXPECT_EQ(GetCard(*service, 7)->status, "closed");
  EXPECT_EQ(GetCard(*service, 7)->closed_at_us, closed->closed_at_us);
  EXPECT_EQ(Pay(*service, 7, 1, 1).status().code(), ErrorCode::kCardClosed);
  ExpectInvariants();
}

// Payments racing a close: each one either lands before the close or is
// refused; none lands after it.
TEST_P(PointCardContract, PaymentsRacingACloseLandBeforeItOrAreRefused) {
  ASSERT_TRUE(Pay(*service, 11, 1, 100000).ok());
  std::atomic<int> paid{0}, refused{0}, other{0};
  std::vector<std::thread> payers;
  for (int i = 0; i < 4; ++i)
    payers.emplace_back([&] {
      for (int k = 0; k < 25; ++k) {
        auto r = Pay(*service, 11, 1, -1);
        if (r.ok())
          ++paid;
        else if (r.status().code() == ErrorCode::kCardClosed)
          ++refused;
        else
          ++other;
      }
    });
  // The close goes in once some payments have landed, while the rest are
  // still coming: it meets them (at most the four in flight land after it
  // is queued).
  while (paid.load() < 10 && paid.load() + other.load() < 100) std::this_thread::yield();
  auto closed = Close(*service, 11);
  for (auto& p : payers) p.join();
  ASSERT_TRUE(closed.ok()) << closed.status().ToString();
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(paid.load() + refused.load(), 100);
  EXPECT_GT(refused.load(), 0) << "the close raced nothing";
  int64_t landed = 0;
  for (const auto& r : AllRows(*service, 11)) {
    if (r.amount == -1) {
      ++landed;
      EXPECT_LT(r.payment_time_us, *closed->closed_at_us);
    }
  }
  EXPECT_EQ(landed, paid.load());
  EXPECT_EQ(GetCard(*service, 11)->balance, closed->balance);
  ExpectInvariants();
}

// A grant gives nothing to a card closed before it applied, and takes it
// off its totals; a card closed after keeps what it got.
TEST_P(PointCardContract, AGrantGivesNothingToACardClosedBeforeItApplies) {
  const int64_t from = pointcard::NowUs();
  ASSERT_TRUE(Pay(*service, 20, 1, 10000).ok());
  ASSERT_TRUE(Pay(*service, 21, 1, 20000).ok());
  ASSERT_TRUE(Pay(*service, 22, 1, 30000).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const int64_t to = pointcard::NowUs();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const int64_t closed_20 = GetCard(*service, 20)->balance;
  ASSERT_TRUE(Close(*service, 20).ok());
  auto grant = Grant(*service, from, to, 10);
  ASSERT_TRUE(grant.ok()) << grant.status().ToString();
  EXPECT_EQ(grant->cards, 2) << "cards 21 and 22; 20 was closed";
  EXPECT_EQ(grant->points, 2000 + 3000);
  EXPECT_EQ(GetCard(*service, 20)->balance, closed_20);
  const int64_t with_bonus = GetCard(*service, 21)->balance;
  ASSERT_TRUE(Close(*service, 21).ok());
  WaitFolded(*service, grant->grant_id);
  EXPECT_EQ(GetCard(*service, 21)->balance, with_bonus) << "closed after the apply: it keeps the bonus";
  auto info = GetGrant(*service, grant->grant_id);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->outcome.cards, 2);
  EXPECT_EQ(info->outcome.points, 5000);
  ExpectInvariants();
}

// A store made while serving takes the next id and counts at once: the
// service's memory holds the stores it loaded (as another instance's
// would), and payments and reads go to the database (two instances:
// PgHttp.AStoreMadeOnOneInstancePaysOnTheOther).
TEST_P(PointCardContract, AStoreMadeWhileServingCountsAtOnce) {
  auto& other = *service;
  pointcard::NewStore s{.region_id = 13,
                        .name = "渋谷店",
                        .zipcode = "1500002",
                        .address = "東京都渋谷区渋谷2-21-1",
                        .latitude = 35.659,
                        .longitude = 139.703,
                        .idempotency_key = "store-1"};
  auto made = MakeStore(*service, s);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  const int64_t id = made->first.store_id;
  EXPECT_EQ(id, kContractStores + 1);
  EXPECT_FALSE(made->second);
  EXPECT_EQ(made->first.name, "渋谷店");
  auto again = MakeStore(*service, s);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->second);
  EXPECT_EQ(again->first.store_id, id);
  s.name = "渋谷二号店";
  EXPECT_EQ(MakeStore(*service, s).status().code(), ErrorCode::kIdempotencyMismatch);

  EXPECT_FALSE(other.Store(id).ok()) << "not in the memory loaded at start";
  auto read = Wait<Result<pointcard::StoreInfo>>([&](auto done) { other.FindStore(id, done); });
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->zipcode, "1500002");
  EXPECT_DOUBLE_EQ(read->latitude, 35.659);
  auto listed = Wait<Result<std::vector<pointcard::StoreInfo>>>([&](auto done) { other.ListStores(13, done); });
  ASSERT_TRUE(listed.ok());
  ASSERT_FALSE(listed->empty());
  EXPECT_EQ(listed->back().store_id, id);
  auto paid = Pay(other, 5, id, 300);
  ASSERT_TRUE(paid.ok()) << paid.status().ToString();
  EXPECT_EQ(paid->row.store_id, id);
  EXPECT_EQ(Pay(other, 5, id + 1, 300).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(Pay(other, 5, pointcard::kStoreIdMax + 1, 300).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(Wait<Result<pointcard::StoreInfo>>([&](auto done) { other.FindStore(id + 1, done); }).status().code(),
            ErrorCode::kNotFound);

  // -0 is 0: a retry that sends 0 is the same request.
  pointcard::NewStore zero{.region_id = 2,
                           .name = "zero",
                           .zipcode = "0300000",
                           .address = "c",
                           .latitude = -0.0,
                           .longitude = 0,
                           .idempotency_key = "store-zero"};
  auto z = MakeStore(*service, zero);
  ASSERT_TRUE(z.ok()) << z.status().ToString();
  EXPECT_FALSE(std::signbit(z->first.latitude));
  zero.latitude = 0;
  auto z_again = MakeStore(*service, zero);
  ASSERT_TRUE(z_again.ok()) << z_again.status().ToString();
  EXPECT_TRUE(z_again->second);

  // The rules.
  auto refused = [&](pointcard::NewStore bad) { return MakeStore(*service, bad).status().field(); };
  pointcard::NewStore ok{.region_id = 1, .name = "a", .zipcode = "0600000", .address = "b"};
  auto with = [&](auto change) {
    pointcard::NewStore v = ok;
    change(v);
    return refused(v);
  };
  EXPECT_EQ(with([](auto& v) { v.name = ""; }), "name");
  EXPECT_EQ(with([](auto& v) { v.name = std::string(101, 'n'); }), "name");
  EXPECT_EQ(with([](auto& v) { v.zipcode = "123-4567"; }), "zipcode");
  EXPECT_EQ(with([](auto& v) { v.zipcode = "123456"; }), "zipcode");
  EXPECT_EQ(with([](auto& v) { v.address = " "; }), "address");
  EXPECT_EQ(with([](auto& v) { v.latitude = 90.5; }), "latitude");
  EXPECT_EQ(with([](auto& v) { v.longitude = -181; }), "longitude");
  EXPECT_EQ(with([](auto& v) { v.region_id = 48; }), "regionId");
  Restart();
  auto after = Wait<Result<pointcard::StoreInfo>>([&](auto done) { service->FindStore(id, done); });
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->address, "東京都渋谷区渋谷2-21-1");
  ExpectInvariants();
}

}  // namespace hotrow::testing
