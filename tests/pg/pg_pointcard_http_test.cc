// The point card on two hotrow instances over one PostgreSQL: stores, keys
// and card states made on one count on the other at once, and refunds and
// holds of one card sent to both are decided under the card's lock, so
// none takes more than the card has.
#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "harness/http_client.h"
#include "harness/postgres_process.h"
#include "harness/server_process.h"

namespace hotrow::testing {
namespace {

// Stores, cards and card states made on one instance count on the other at
// once: a store made on A takes payments on B (B's memory holds only the
// stores it loaded), and a card issued and then closed on A refuses B's
// payments.
TEST(PgHttp, AStoreMadeOnOneInstancePaysOnTheOther) {
  PostgresProcess* pg = PostgresProcess::Shared();
  ASSERT_TRUE(pg);
  std::string url = pg->CreateDatabase();
  auto seeded =
      RunHotrow({"seed", "pointcard", "--cards", "20", "--stores", "5", "--history", "40", "--seed", "7", "--db", url});
  ASSERT_EQ(seeded.exit_code, 0) << seeded.output;
  TestServer a(TestServerOptions{0, false, {}, {}, url});
  TestServer b(TestServerOptions{0, false, {}, {}, url});
  ASSERT_TRUE(a.ok() && b.ok());
  HttpClient ca(a.port()), cb(b.port());
  const Headers admin = {{"Authorization", std::string("Bearer ") + kTestAdminToken}};
  auto store = ca.Post(
      "/api/v1/stores",
      R"({"name":"新宿店","regionId":13,"zipcode":"1600022","address":"東京都新宿区新宿3-38-1","latitude":35.69,"longitude":139.70})",
      admin);
  ASSERT_EQ(store.status, 201) << store.body;
  const int64_t store_id = JsonInt(store.body, "storeId");
  EXPECT_EQ(store_id, 6);
  auto read = cb.Get("/api/v1/stores/" + std::to_string(store_id));
  EXPECT_EQ(read.status, 200) << read.body;
  EXPECT_EQ(JsonString(read.body, "name"), "新宿店");
  EXPECT_NE(cb.Get("/api/v1/regions/13/stores").body.find(R"("storeId":6,)"), std::string::npos);
  auto card = ca.Post("/api/v1/cards", R"({"regionId":13,"externalRef":"pg-two"})", admin);
  ASSERT_EQ(card.status, 201) << card.body;
  const std::string card_path = "/api/v1/cards/" + std::to_string(JsonInt(card.body, "cardId"));
  auto charged = cb.Post(card_path + "/transactions", R"({"storeId":6,"amount":500})");
  ASSERT_EQ(charged.status, 201) << charged.body;
  EXPECT_EQ(JsonInt(charged.body, "balance"), 500);
  EXPECT_EQ(cb.Post(card_path + "/transactions", R"({"storeId":7,"amount":5})").status, 404);
  ASSERT_EQ(ca.Post(card_path + "/close", "", admin).status, 200);
  auto refused = cb.Post(card_path + "/transactions", R"({"storeId":6,"amount":-5})");
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_NE(refused.body.find("card_closed"), std::string::npos) << refused.body;
  EXPECT_EQ(JsonString(cb.Get("/api/v1/cards?externalRef=pg-two").body, "status"), "closed");
  EXPECT_EQ(a.Stop(), 0);
  EXPECT_EQ(b.Stop(), 0);
  auto check = RunHotrow({"check", "pointcard", "--db", url});
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

// A key made on one instance pays on the other; revoked on the first, the
// other refuses its next payment at once (the key is checked in the
// payment's transaction: no cache to expire). Without
// --require-store-keys, serve on PostgreSQL warns.
TEST(PgHttp, AKeyRevokedOnOneInstanceIsRefusedOnTheOtherAtOnce) {
  PostgresProcess* pg = PostgresProcess::Shared();
  ASSERT_TRUE(pg);
  std::string url = pg->CreateDatabase();
  auto seeded =
      RunHotrow({"seed", "pointcard", "--cards", "20", "--stores", "5", "--history", "40", "--seed", "7", "--db", url});
  ASSERT_EQ(seeded.exit_code, 0) << seeded.output;
  TestServer a(TestServerOptions{0, false, {}, {}, url});
  TestServer b(TestServerOptions{0, false, {"--require-store-keys"}, {}, url});
  ASSERT_TRUE(a.ok() && b.ok());
  HttpClient ca(a.port()), cb(b.port());
  const Headers admin = {{"Authorization", std::string("Bearer ") + kTestAdminToken}};
  auto made = ca.Post("/api/v1/stores/3/keys", "", admin);
  ASSERT_EQ(made.status, 201) << made.body;
  const Headers terminal = {{"Authorization", "Bearer " + JsonString(made.body, "key")}};
  EXPECT_EQ(cb.Post("/api/v1/cards/4/transactions", R"({"storeId":3,"amount":-1})").status, 401) << "b requires a key";
  auto paid = cb.Post("/api/v1/cards/4/transactions", R"({"storeId":3,"amount":20})", terminal);
  ASSERT_EQ(paid.status, 201) << paid.body;
  EXPECT_EQ(cb.Post("/api/v1/cards/4/transactions", R"({"storeId":4,"amount":-1})", terminal).status, 403);
  auto signup = cb.Post("/api/v1/cards", R"({"regionId":13})", terminal);
  EXPECT_EQ(signup.status, 201) << "a store key issues cards: " << signup.body;
  ASSERT_EQ(ca.Delete("/api/v1/stores/3/keys/" + JsonString(made.body, "keyId"), admin).status, 204);
  EXPECT_EQ(cb.Post("/api/v1/cards/4/transactions", R"({"storeId":3,"amount":-1})", terminal).status, 401);
  EXPECT_EQ(cb.Post("/api/v1/cards", R"({"regionId":13})", terminal).status, 401);
  auto listed = cb.Get("/api/v1/stores/3/keys", admin);
  EXPECT_NE(listed.body.find(R"("revokedAt":")"), std::string::npos) << listed.body;
  EXPECT_EQ(a.Stop(), 0);
  EXPECT_EQ(b.Stop(), 0);
  EXPECT_NE(a.process().Log().find("--require-store-keys is off"), std::string::npos) << "a warns";
  EXPECT_EQ(b.process().Log().find("--require-store-keys is off"), std::string::npos) << "b does not";
  auto check = RunHotrow({"check", "pointcard", "--db", url});
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

// Refund against refund across two instances: refunds of one payment sent
// to both at once are decided under the card's advisory lock, whichever
// instance runs them: together they return exactly what the payment took,
// and the rest are refused (409), none failing.
TEST(PgHttp, RefundsOfOnePaymentOnTwoInstancesReturnAtMostWhatItTook) {
  PostgresProcess* pg = PostgresProcess::Shared();
  ASSERT_TRUE(pg);
  std::string url = pg->CreateDatabase();
  auto seeded =
      RunHotrow({"seed", "pointcard", "--cards", "20", "--stores", "5", "--history", "40", "--seed", "7", "--db", url});
  ASSERT_EQ(seeded.exit_code, 0) << seeded.output;
  TestServer a(TestServerOptions{0, false, {}, {}, url});
  TestServer b(TestServerOptions{0, false, {}, {}, url});
  ASSERT_TRUE(a.ok() && b.ok());
  HttpClient ca(a.port());
  ASSERT_EQ(ca.Post("/api/v1/cards/6/transactions", R"({"storeId":2,"amount":5000})").status, 201);
  auto paid = ca.Post("/api/v1/cards/6/transactions", R"({"storeId":2,"amount":-1000})");
  ASSERT_EQ(paid.status, 201) << paid.body;
  const std::string path =
      "/api/v1/cards/6/transactions/" + std::to_string(JsonInt(paid.body, "transactionId")) + "/refund";
  const int64_t before = JsonInt(ca.Get("/api/v1/cards/6").body, "balance");
  std::atomic<int> refunded{0}, refused{0}, other{0};
  std::vector<std::thread> senders;
  for (int t = 0; t < 6; ++t) {
    senders.emplace_back([&, t] {
      HttpClient c(t % 2 == 0 ? a.port() : b.port());
      for (int i = 0; i < 5; ++i) {  // 30 refunds of 100 for 1,000 points
        auto r = c.Post(path, R"({"amount":100})",
                        {{"Idempotency-Key", "race-" + std::to_string(t) + "-" + std::to_string(i)}});
        (r.status == 201 ? refunded : r.status == 409 ? refused : other)++;
      }
    });
  }
  for (auto& t : senders) t.join();
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(refunded.load(), 10);
  EXPECT_EQ(refused.load(), 20);
  EXPECT_EQ(JsonInt(ca.Get("/api/v1/cards/6").body, "balance"), before + 1000);
  EXPECT_EQ(a.Stop(), 0);
  EXPECT_EQ(b.Stop(), 0);
  auto check = RunHotrow({"check", "pointcard", "--db", url});
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

// Holds across instances: payments and holds sent to two instances for one
// card never take more than it has, and captures and voids of one hold
// sent to both land once: each is decided under the card's lock, on any
// instance.
TEST(PgHttp, HoldsOnOneCardFromTwoInstancesTakeAtMostWhatItHasAndEndOnce) {
  PostgresProcess* pg = PostgresProcess::Shared();
  ASSERT_TRUE(pg);
  std::string url = pg->CreateDatabase();
  auto seeded =
      RunHotrow({"seed", "pointcard", "--cards", "20", "--stores", "5", "--history", "40", "--seed", "7", "--db", url});
  ASSERT_EQ(seeded.exit_code, 0) << seeded.output;
  TestServer a(TestServerOptions{0, false, {}, {}, url});
  TestServer b(TestServerOptions{0, false, {}, {}, url});
  ASSERT_TRUE(a.ok() && b.ok());
  HttpClient ca(a.port());
  const int64_t start = JsonInt(ca.Get("/api/v1/cards/8").body, "balance");
  ASSERT_EQ(
      ca.Post("/api/v1/cards/8/transactions", R"({"storeId":2,"amount":)" + std::to_string(1000 - start) + "}").status,
      201)
      << "card 8 at 1,000 points";
  std::atomic<int> paid{0}, held{0}, refused{0}, other{0};
  std::vector<std::thread> senders;
  for (int t = 0; t < 6; ++t) {
    senders.emplace_back([&, t] {
      HttpClient c(t % 2 == 0 ? a.port() : b.port());
      for (int i = 0; i < 5; ++i) {  // 30 payments and holds of 100 for 1,000 points
        auto r = (t + i) % 2 == 0
                     ? c.Post("/api/v1/cards/8/transactions", R"({"storeId":2,"amount":-100})")
                     : c.Post("/api/v1/cards/8/holds", R"({"storeId":2,"amount":-100,"expiresInSeconds":600})");
        if (r.status == 201)
          ((t + i) % 2 == 0 ? paid : held)++;
        else
          (r.status == 409 ? refused : other)++;
      }
    });
  }
  for (auto& t : senders) t.join();
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(paid.load() + held.load(), 10);
  EXPECT_EQ(refused.load(), 20);
  auto card = ca.Get("/api/v1/cards/8").body;
  EXPECT_EQ(JsonInt(card, "available"), 0) << card;
  EXPECT_EQ(JsonInt(card, "held"), 100 * held.load()) << card;
  ASSERT_GT(held.load(), 0) << "the race made at least one hold";

  // Twelve captures and voids of one open hold, half through each instance.
  auto listed = ca.Get("/api/v1/cards/8/holds?limit=1");
  const auto at = listed.body.find("\"holdId\":");
  ASSERT_NE(at, std::string::npos) << listed.body;
  const std::string hold = std::to_string(std::stoll(listed.body.substr(at + 9)));
  std::atomic<int> ended{0}, not_open{0}, failed{0};
  senders.clear();
  for (int t = 0; t < 12; ++t) {
    senders.emplace_back([&, t] {
      HttpClient c(t % 2 == 0 ? a.port() : b.port());
      auto r = c.Post("/api/v1/cards/8/holds/" + hold + (t % 3 == 0 ? "/void" : "/capture"), "");
      if (r.status == 200)
        ++ended;
      else if (r.status == 409 && r.body.find("hold_not_open") != std::string::npos)
        ++not_open;
      else
        ++failed;
    });
  }
  for (auto& t : senders) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(ended.load(), 1);
  EXPECT_EQ(not_open.load(), 11);
  EXPECT_EQ(a.Stop(), 0);
  EXPECT_EQ(b.Stop(), 0);
  auto check = RunHotrow({"check", "pointcard", "--db", url});
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

}  // namespace
}  // namespace hotrow::testing
