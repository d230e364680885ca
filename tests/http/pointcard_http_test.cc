// Point-card scenarios across processes: the command-line tools (grant,
// simulate, check) against real servers and databases.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "harness/close_during_grant.h"
#include "harness/http_client.h"
#include "harness/server_process.h"
#include "pointcard/model.h"

namespace hotrow::testing {
namespace {

TEST(PointCardHttp, GrantCommandCallsTheServer) {
  TestServer server(TestServerOptions{0, true, {}, {}});
  ASSERT_TRUE(server.ok());
  std::string url = "http://127.0.0.1:" + std::to_string(server.port());
  std::string to = pointcard::FormatTime(pointcard::NowUs() - 1000000);
  auto r = RunHotrow({"grant", "--url", url, "--from", "2000-01-01T00:00:00Z", "--to", to, "--rate-percent", "2",
                      "--admin-token", kTestAdminToken, "--idempotency-key", "cli-1"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"grantId\":1,"), std::string::npos) << r.output;
  auto again = RunHotrow({"grant", "--url", url, "--from", "2000-01-01T00:00:00Z", "--to", to, "--rate-percent", "2",
                          "--admin-token", kTestAdminToken, "--idempotency-key", "cli-1"});
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("\"grantId\":1,"), std::string::npos) << "the retry must not grant twice";
  auto unauthorized = RunHotrow({"grant", "--url", url, "--from", "2000-01-01T00:00:00Z", "--to", to});
  EXPECT_EQ(unauthorized.exit_code, 1);
  EXPECT_NE(unauthorized.output.find("unauthorized"), std::string::npos) << unauthorized.output;
  EXPECT_EQ(server.Stop(), 0);
  auto check = RunHotrow({"check", "pointcard", "--db", server.db_url()});
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

// A card closed while a grant runs gets nothing from it: closed in the
// grant's query phase, the query leaves it out; closed between its staging
// and its apply, the apply drops its credit.
TEST(PointCardHttp, ACardClosedDuringAGrantsQueryGetsNothingFromIt) {
  TestServer server(TestServerOptions{0, true, {}, {{"HOTROW_FAILPOINT", "grant.slow:1500"}}});
  ASSERT_TRUE(server.ok());
  CloseACardDuringAGrant(server);
}

TEST(PointCardHttp, ACardClosedBeforeAGrantsApplyGetsNothingFromIt) {
  TestServer server(TestServerOptions{0, true, {}, {{"HOTROW_FAILPOINT", "grant.apply.slow:1500"}}});
  ASSERT_TRUE(server.ok());
  CloseACardDuringAGrant(server);
}

// Store keys end to end, under --require-store-keys: made (shown once,
// not cached), listed without secrets, paying at their store only, and
// refused from the next request after their revocation.
TEST(PointCardHttp, StoreKeysPayAtTheirStoreUntilRevoked) {
  TestServer server(TestServerOptions{0, true, {"--require-store-keys"}, {}});
  ASSERT_TRUE(server.ok());
  HttpClient c(server.port());
  const Headers admin = {{"Authorization", std::string("Bearer ") + kTestAdminToken}};
  EXPECT_EQ(c.Post("/api/v1/stores/2/keys", "").status, 401) << "making keys is the admin's";
  EXPECT_EQ(c.Post("/api/v1/stores/2/keys", "", {{"Authorization", "Bearer x"}}).status, 403);
  EXPECT_EQ(c.Post("/api/v1/stores/21/keys", "", admin).status, 404);
  EXPECT_EQ(c.Post("/api/v1/stores/2/keys", "", {admin[0], {"Idempotency-Key", "k"}}).status, 400);
  EXPECT_EQ(c.Post("/api/v1/stores/2/keys", R"({"name":"till 1"})", admin).status, 400);
  auto made = c.Post("/api/v1/stores/2/keys", "{}", admin);
  ASSERT_EQ(made.status, 201) << made.body;
  EXPECT_EQ(made.Header("Cache-Control"), "no-store");
  const std::string key = JsonString(made.body, "key"), key_id = JsonString(made.body, "keyId");
  EXPECT_EQ(key.substr(0, key_id.size() + 1), key_id + ".");
  EXPECT_NE(made.body.find(R"("lastUsedAt":null)"), std::string::npos) << made.body;
  const Headers terminal = {{"Authorization", "Bearer " + key}};

  auto anonymous = c.Post("/api/v1/cards/5/transactions", R"({"storeId":2,"amount":-1})");
  EXPECT_EQ(anonymous.status, 401) << anonymous.body;
  EXPECT_EQ(anonymous.Header("WWW-Authenticate"), "Bearer");
  auto paid = c.Post("/api/v1/cards/5/transactions", R"({"storeId":2,"amount":30})", terminal);
  ASSERT_EQ(paid.status, 201) << paid.body;
  EXPECT_EQ(JsonString(paid.body, "actor"), "key:" + key_id);
  EXPECT_EQ(c.Post("/api/v1/cards/5/transactions", R"({"storeId":2,"amount":-1})", admin).status, 201)
      << "the admin token pays wherever a store key does";
  auto elsewhere = c.Post("/api/v1/cards/5/transactions", R"({"storeId":3,"amount":-1})", terminal);
  EXPECT_EQ(elsewhere.status, 403) << elsewhere.body;
  EXPECT_NE(elsewhere.body.find("belongs to store 2, not store 3"), std::string::npos) << elsewhere.body;
  std::string wrong = key;
  wrong.back() = wrong.back() == 'a' ? 'b' : 'a';
  auto guessed =
      c.Post("/api/v1/cards/5/transactions", R"({"storeId":2,"amount":-1})", {{"Authorization", "Bearer " + wrong}});
  EXPECT_EQ(guessed.status, 401) << guessed.body;
  EXPECT_NE(guessed.body.find("unknown, revoked or wrong"), std::string::npos) << guessed.body;

  auto listed = c.Get("/api/v1/stores/2/keys", admin);
  ASSERT_EQ(listed.status, 200) << listed.body;
  EXPECT_NE(listed.body.find(key_id), std::string::npos);
  EXPECT_EQ(listed.body.find(key.substr(key_id.size() + 1)), std::string::npos) << "never the secret";
  EXPECT_EQ(listed.body.find(R"("lastUsedAt":null)"), std::string::npos) << "the key was used: " << listed.body;
  EXPECT_EQ(c.Get("/api/v1/stores/2/keys").status, 401);

  EXPECT_EQ(c.Delete("/api/v1/stores/3/keys/" + key_id, admin).status, 404) << "another store's key";
  EXPECT_EQ(c.Delete("/api/v1/stores/2/keys/not-a-key", admin).status, 404);
  EXPECT_EQ(c.Delete("/api/v1/stores/2/keys/" + key_id).status, 401);
  EXPECT_EQ(c.Delete("/api/v1/stores/2/keys/" + key_id, admin).status, 204);
  EXPECT_EQ(c.Delete("/api/v1/stores/2/keys/" + key_id, admin).status, 204) << "revoking twice is no error";
  EXPECT_EQ(c.Post("/api/v1/cards/5/transactions", R"({"storeId":2,"amount":-1})", terminal).status, 401);
  EXPECT_NE(c.Get("/api/v1/stores/2/keys", admin).body.find(R"("revokedAt":")"), std::string::npos);
  EXPECT_EQ(server.Stop(), 0);
  auto check = RunHotrow({"check", "pointcard", "--db", server.db_url()});
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

// Refunds end to end, under --require-store-keys: an Idempotency-Key is
// required, the refunded payment's store key or the admin token refunds,
// the body is optional and checked, the history shows refundOf, and a
// refund survives kill -9 (acknowledged means durable).
TEST(PointCardHttp, RefundsNeedAKeyAndTheirPaymentsStore) {
  TestServer server(TestServerOptions{0, true, {"--require-store-keys"}, {}});
  ASSERT_TRUE(server.ok());
  HttpClient c(server.port());
  const Headers admin = {{"Authorization", std::string("Bearer ") + kTestAdminToken}};
  auto made = c.Post("/api/v1/stores/2/keys", "{}", admin);
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string key_id = JsonString(made.body, "keyId");
  auto other = c.Post("/api/v1/stores/3/keys", "{}", admin);
  ASSERT_EQ(other.status, 201) << other.body;
  const Headers terminal = {{"Authorization", "Bearer " + JsonString(made.body, "key")}};
  ASSERT_EQ(c.Post("/api/v1/cards/6/transactions", R"({"storeId":2,"amount":5000})", terminal).status, 201);
  auto paid = c.Post("/api/v1/cards/6/transactions", R"({"storeId":2,"amount":-800})", terminal);
  ASSERT_EQ(paid.status, 201) << paid.body;
  const std::string path =
      "/api/v1/cards/6/transactions/" + std::to_string(JsonInt(paid.body, "transactionId")) + "/refund";
  auto with = [](const Headers& h, const std::string& key) {
    Headers all = h;
    all.push_back({"Idempotency-Key", key});
    return all;
  };

  auto no_key = c.Post(path, R"({"amount":100})", terminal);
  EXPECT_EQ(no_key.status, 400) << no_key.body;
  EXPECT_NE(no_key.body.find(R"("field":"Idempotency-Key")"), std::string::npos) << no_key.body;
  EXPECT_EQ(c.Post(path, R"({"amount":100})", {{"Idempotency-Key", "a"}}).status, 401) << "no credentials";
  auto elsewhere = c.Post(path, R"({"amount":100})",
                          {{"Authorization", "Bearer " + JsonString(other.body, "key")}, {"Idempotency-Key", "a"}});
  EXPECT_EQ(elsewhere.status, 403) << elsewhere.body;
  EXPECT_EQ(c.Post(path, R"({"amount":"100"})", with(terminal, "a")).status, 400);
  EXPECT_EQ(c.Post(path, R"({"amount":100,"storeId":2})", with(terminal, "a")).status, 400);
  EXPECT_EQ(c.Post(path, R"({"amount":0})", with(terminal, "a")).status, 400);
  EXPECT_EQ(c.Post(path, "{", with(terminal, "a")).status, 400);
  EXPECT_EQ(c.Post("/api/v1/cards/6/transactions/x/refund", "", with(terminal, "a")).status, 400);
  EXPECT_EQ(c.Post("/api/v1/cards/6/transactions/999999/refund", "", with(terminal, "a")).status, 404);
  EXPECT_EQ(c.Get(path, terminal).status, 405);

  auto part = c.Post(path, R"({"amount":300,"reference":"RMA-1","reason":"one item back"})", with(terminal, "a"));
  ASSERT_EQ(part.status, 201) << part.body;
  EXPECT_EQ(JsonString(part.body, "kind"), "refund");
  EXPECT_EQ(JsonInt(part.body, "amount"), 300);
  EXPECT_EQ(JsonInt(part.body, "refundOf"), JsonInt(paid.body, "transactionId"));
  EXPECT_EQ(JsonString(part.body, "actor"), "key:" + key_id);
  auto replay = c.Post(path, R"({"amount":300,"reference":"RMA-1","reason":"one item back"})", with(terminal, "a"));
  EXPECT_EQ(replay.status, 201);
  EXPECT_EQ(replay.Header("Idempotent-Replayed"), "true");
  EXPECT_EQ(JsonInt(replay.body, "transactionId"), JsonInt(part.body, "transactionId"));
  EXPECT_EQ(c.Post(path, R"({"amount":301})", with(terminal, "a")).status, 422);
  auto too_much = c.Post(path, R"({"amount":501})", with(admin, "b"));
  EXPECT_EQ(too_much.status, 409) << too_much.body;
  EXPECT_NE(too_much.body.find("refund_exceeds_original"), std::string::npos) << too_much.body;
  auto rest = c.Post(path, "", with(admin, "b"));
  ASSERT_EQ(rest.status, 201) << rest.body;
  EXPECT_EQ(JsonInt(rest.body, "amount"), 500);
  EXPECT_EQ(JsonString(rest.body, "actor"), "admin");
  auto history = c.Get("/api/v1/cards/6/transactions?limit=3");
  EXPECT_NE(history.body.find(R"("kind":"refund")"), std::string::npos) << history.body;
  const int64_t balance = JsonInt(c.Get("/api/v1/cards/6").body, "balance");

  server.Kill();  // kill -9: the refunds were acknowledged
  auto check = RunHotrow({"check", "pointcard", "--db", server.db_url()});
  EXPECT_EQ(check.exit_code, 0) << check.output;
  ASSERT_TRUE(server.Start());
  HttpClient c2(server.port());
  EXPECT_EQ(JsonInt(c2.Get("/api/v1/cards/6").body, "balance"), balance);
  EXPECT_EQ(c2.Post(path, "", with(admin, "c")).status, 409) << "refunded in full";
  EXPECT_EQ(server.Stop(), 0);
}

// Holds over HTTP, under --require-store-keys: a till's key holds for its
// store (201), captures in part (200 with the capture row) and voids; bad
// input, wrong methods and unknown ids are precise 4xx answers that write
// nothing; held and available show on the card; a kill -9 keeps every
// acknowledged hold, capture and void.
TEST(PointCardHttp, HoldsAreMadeCapturedAndVoidedByTheirStoresTill) {
  TestServer server(TestServerOptions{0, true, {"--require-store-keys"}, {}});
  ASSERT_TRUE(server.ok());
  HttpClient c(server.port());
  const Headers admin = {{"Authorization", std::string("Bearer ") + kTestAdminToken}};
  auto made = c.Post("/api/v1/stores/2/keys", "{}", admin);
  ASSERT_EQ(made.status, 201) << made.body;
  auto other = c.Post("/api/v1/stores/3/keys", "{}", admin);
  ASSERT_EQ(other.status, 201) << other.body;
  const Headers till = {{"Authorization", "Bearer " + JsonString(made.body, "key")}};
  const Headers other_till = {{"Authorization", "Bearer " + JsonString(other.body, "key")}};
  ASSERT_EQ(c.Post("/api/v1/cards/7/transactions", R"({"storeId":2,"amount":5000})", till).status, 201);
  const int64_t balance = JsonInt(c.Get("/api/v1/cards/7").body, "balance");
  const std::string holds = "/api/v1/cards/7/holds";
  auto keyed = [](const Headers& h, const std::string& key) {
    Headers all = h;
    all.push_back({"Idempotency-Key", key});
    return all;
  };

  EXPECT_EQ(c.Post(holds, R"({"storeId":2,"amount":-500,"expiresInSeconds":600})").status, 401);
  EXPECT_EQ(c.Post(holds, R"({"storeId":2,"amount":-500,"expiresInSeconds":600})", other_till).status, 403);
  for (const char* bad : {R"({"storeId":2,"amount":-500})", R"({"storeId":2,"amount":500,"expiresInSeconds":600})",
                          R"({"storeId":2,"amount":-500,"expiresInSeconds":604801})",
                          R"({"storeId":2,"amount":"-500","expiresInSeconds":600})",
                          R"({"storeId":2,"amount":-500,"expiresInSeconds":600,"x":1})", "{", "[]"}) {
    auto r = c.Post(holds, bad, till);
    EXPECT_EQ(r.status, 400) << bad << ": " << r.body;
  }
  EXPECT_EQ(c.Post("/api/v1/cards/999999/holds", R"({"storeId":2,"amount":-5,"expiresInSeconds":60})", till).status,
            404);
  EXPECT_EQ(c.Delete(holds, till).status, 405);

  auto hold = c.Post(holds, R"({"storeId":2,"amount":-500,"expiresInSeconds":600})", keyed(till, "h-1"));
  ASSERT_EQ(hold.status, 201) << hold.body;
  EXPECT_EQ(JsonString(hold.body, "status"), "open");
  EXPECT_EQ(JsonInt(hold.body, "amount"), -500);
  EXPECT_EQ(JsonString(hold.body, "actor"), "key:" + JsonString(made.body, "keyId"));
  const std::string id = std::to_string(JsonInt(hold.body, "holdId"));
  auto replay = c.Post(holds, R"({"storeId":2,"amount":-500,"expiresInSeconds":600})", keyed(till, "h-1"));
  EXPECT_EQ(replay.status, 201);
  EXPECT_EQ(replay.Header("Idempotent-Replayed"), "true");
  EXPECT_EQ(c.Post(holds, R"({"storeId":2,"amount":-501,"expiresInSeconds":600})", keyed(till, "h-1")).status, 422);
  auto card = c.Get("/api/v1/cards/7");
  EXPECT_EQ(JsonInt(card.body, "held"), 500);
  EXPECT_EQ(JsonInt(card.body, "available"), balance - 500);
  auto too_much =
      c.Post("/api/v1/cards/7/transactions", R"({"storeId":2,"amount":-)" + std::to_string(balance - 499) + "}", till);
  EXPECT_EQ(too_much.status, 409) << too_much.body;
  EXPECT_NE(too_much.body.find(std::to_string(balance - 500) + " point(s) available"), std::string::npos)
      << too_much.body;

  const std::string capture = holds + "/" + id + "/capture";
  EXPECT_EQ(c.Post(capture, R"({"amount":-200})", other_till).status, 403) << "store 2's hold";
  EXPECT_EQ(c.Post(capture, R"({"amount":-501})", till).status, 400);
  EXPECT_EQ(c.Post(capture, R"({"amount":-200,"storeId":2})", till).status, 400);
  EXPECT_EQ(c.Post(holds + "/x/capture", "", till).status, 400);
  EXPECT_EQ(c.Post(holds + "/999999/capture", "", till).status, 404);
  EXPECT_EQ(c.Get(capture, till).status, 405);
  auto captured = c.Post(capture, R"({"amount":-200})", keyed(till, "c-1"));
  ASSERT_EQ(captured.status, 200) << captured.body;
  EXPECT_EQ(JsonString(captured.body, "status"), "captured");
  EXPECT_EQ(JsonInt(captured.body, "capturedAmount"), -200);
  EXPECT_NE(captured.body.find(R"("kind":"capture")"), std::string::npos) << captured.body;
  EXPECT_EQ(c.Post(capture, R"({"amount":-200})", keyed(till, "c-1")).Header("Idempotent-Replayed"), "true");
  auto twice = c.Post(capture, "", till);
  EXPECT_EQ(twice.status, 409);
  EXPECT_NE(twice.body.find("hold_not_open"), std::string::npos) << twice.body;

  auto second = c.Post(holds, R"({"storeId":2,"amount":-100,"expiresInSeconds":600})", till);
  ASSERT_EQ(second.status, 201) << second.body;
  const std::string void_path = holds + "/" + std::to_string(JsonInt(second.body, "holdId")) + "/void";
  EXPECT_EQ(c.Post(void_path, R"({"amount":-1})", till).status, 400) << "a void takes no body";
  auto voided = c.Post(void_path, "", till);
  ASSERT_EQ(voided.status, 200) << voided.body;
  EXPECT_EQ(JsonString(voided.body, "status"), "voided");
  auto listed = c.Get(holds + "?limit=1");
  ASSERT_EQ(listed.status, 200) << listed.body;
  EXPECT_NE(listed.body.find(R"("status":"voided")"), std::string::npos) << listed.body;
  EXPECT_EQ(c.Get(holds + "?limit=0").status, 400);
  EXPECT_EQ(c.Get(holds + "?before=x").status, 400);
  card = c.Get("/api/v1/cards/7");
  EXPECT_EQ(JsonInt(card.body, "held"), 0);
  EXPECT_EQ(JsonInt(card.body, "balance"), balance - 200);

  server.Kill();  // kill -9: every answer above was durable
  auto check = RunHotrow({"check", "pointcard", "--db", server.db_url()});
  EXPECT_EQ(check.exit_code, 0) << check.output;
  ASSERT_TRUE(server.Start());
  HttpClient c2(server.port());
  EXPECT_EQ(JsonInt(c2.Get("/api/v1/cards/7").body, "balance"), balance - 200);
  auto after = c2.Get(holds);
  EXPECT_NE(after.body.find(R"("status":"captured")"), std::string::npos) << after.body;
  EXPECT_EQ(c2.Post(capture, R"({"amount":-200})", keyed(till, "c-1")).Header("Idempotent-Replayed"), "true");
  EXPECT_EQ(server.Stop(), 0);
}

// Guessing is throttled on every route (the HTTP layer counts each 401 and
// 403 to a request with Authorization): past --auth-failures-max failures
// within a minute, 429 with Retry-After. Store keys' failures count apart,
// with ten times the limit, so tills whose keys fail do not shut out the
// admin behind the same address. Requests without credentials pass.
TEST(PointCardHttp, RepeatedFailedCredentialsAreThrottled) {
  TestServer server(TestServerOptions{0, true, {"--auth-failures-max", "3"}, {}});
  ASSERT_TRUE(server.ok());
  HttpClient c(server.port());
  const Headers admin = {{"Authorization", std::string("Bearer ") + kTestAdminToken}};
  auto made = c.Post("/api/v1/stores/2/keys", "", admin);
  ASSERT_EQ(made.status, 201) << made.body;
  auto other = c.Post("/api/v1/stores/2/keys", "", admin);
  ASSERT_EQ(other.status, 201) << other.body;
  const Headers key = {{"Authorization", "Bearer " + JsonString(made.body, "key")}};
  const Headers other_key = {{"Authorization", "Bearer " + JsonString(other.body, "key")}};
  std::string wrong = JsonString(made.body, "key");
  wrong.back() = wrong.back() == 'a' ? 'b' : 'a';
  const std::string pay = R"({"storeId":2,"amount":-1})";
  // Wrong secrets (found out by the payment's transaction): the keys' limit
  // is 30 here.
  for (int i = 0; i < 29; ++i)
    ASSERT_EQ(c.Post("/api/v1/cards/5/transactions", pay, {{"Authorization", "Bearer " + wrong}}).status, 401) << i;
  EXPECT_EQ(c.Post("/api/v1/cards/5/transactions", pay, key).status, 201) << "29 of 30";
  EXPECT_EQ(c.Post("/api/v1/cards/5/transactions", pay, {{"Authorization", "Bearer " + wrong}}).status, 401);
  auto throttled = c.Post("/api/v1/cards/5/transactions", pay, other_key);
  EXPECT_EQ(throttled.status, 429) << "every key from this address: " << throttled.body;
  EXPECT_NE(throttled.body.find(R"("code":"rate_limited")"), std::string::npos) << throttled.body;
  const std::string wait = throttled.Header("Retry-After");
  ASSERT_FALSE(wait.empty());
  EXPECT_GE(std::stoi(wait), 1);
  EXPECT_LE(std::stoi(wait), 60);
  EXPECT_EQ(c.Get("/api/v1/stores/2/keys", admin).status, 200) << "the admin token from the same address";
  // Three failures of other kinds, on two domains: counted by address.
  EXPECT_EQ(c.Post("/api/v1/stores", "{}", {{"Authorization", "Bearer nope"}}).status, 403);
  EXPECT_EQ(c.Delete("/api/v1/leaderboard/nobody", {{"Authorization", "Bearer nope"}}).status, 403);
  EXPECT_EQ(c.Post("/api/v1/cards/5/transactions", pay, {{"Authorization", "Bearer ?"}}).status, 401);
  EXPECT_EQ(c.Get("/api/v1/stores/2/keys", admin).status, 429) << "now the admin token too, from this address";
  EXPECT_EQ(c.Delete("/api/v1/leaderboard/nobody", admin).status, 429) << "on every route";
  EXPECT_EQ(c.Get("/api/v1/stores/2/keys").status, 401) << "no credential, nothing to throttle";
  EXPECT_EQ(c.Post("/api/v1/cards/5/transactions", R"({"storeId":2,"amount":1})").status, 201);
  EXPECT_EQ(server.Stop(), 0);
  EXPECT_NE(server.process().Log().find("failed credentials within a minute"), std::string::npos)
      << "a throttled client is logged";
}

TEST(PointCardHttp, CheckRunsBesideALiveServer) {
  TestServer server(TestServerOptions{0, true, {}, {}});
  ASSERT_TRUE(server.ok());
  HttpClient c(server.port());
  ASSERT_EQ(c.Post("/api/v1/cards/3/transactions", R"({"storeId":2,"amount":700})").status, 201);
  auto check = RunHotrow({"check", "pointcard", "--db", server.db_url()});
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_NE(check.output.find("checked 200 card(s) and 1001 history row(s)"), std::string::npos) << check.output;
}

TEST(PointCardHttp, QuickSimulationWritesItsReports) {
  TempDir dir;
  auto r = RunHotrow({"simulate", "pointcard", "--quick", "--parallel", "1,4", "--duration", "2s", "--work-dir",
                      dir.File("work"), "--out", dir.File("out")},
                     std::chrono::seconds(240));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("8.1 point use"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("8.6 point grant"), std::string::npos);
  for (const char* f : {"simulation.json", "simulation.svg", "simulation.html", "simulation.txt"})
    EXPECT_TRUE(std::filesystem::exists(dir.File("out") + "/" + f)) << f;
  std::ifstream json(dir.File("out") + "/simulation.json");
  std::stringstream body;
  body << json.rdbuf();
  EXPECT_NE(body.str().find("\"parallel\":4"), std::string::npos);
  EXPECT_EQ(body.str().find("\"invariantsOk\":false"), std::string::npos) << "every run must keep the invariants";
  EXPECT_NE(body.str().find("\"ng\":0"), std::string::npos);
}

TEST(PointCardHttp, SimulationOverHttp) {
  TestServer server(TestServerOptions{0, true, {}, {}});
  ASSERT_TRUE(server.ok());
  TempDir dir;
  auto r = RunHotrow({"simulate", "pointcard", "--url", "http://127.0.0.1:" + std::to_string(server.port()),
                      "--admin-token", kTestAdminToken, "--cards", "200", "--parallel", "4", "--duration", "2s",
                      "--grant-interval", "500ms", "--out", dir.File("out")},
                     std::chrono::seconds(120));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("driven over HTTP"), std::string::npos) << r.output;
  EXPECT_EQ(server.Stop(), 0);
  auto check = RunHotrow({"check", "pointcard", "--db", server.db_url()});
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

// A server run with --require-store-keys can be simulated: --store-keys
// pays as each store's till, with a key per store made before the runs and
// revoked after them. Without it, the run's payments fail (401).
TEST(PointCardHttp, SimulationOverHttpPaysWithStoreKeys) {
  TestServer server(TestServerOptions{0, true, {"--require-store-keys"}, {}});
  ASSERT_TRUE(server.ok());
  TempDir dir;
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port());
  auto r =
      RunHotrow({"simulate", "pointcard", "--url", url, "--admin-token", kTestAdminToken, "--store-keys", "--cards",
                 "200", "--parallel", "4", "--duration", "2s", "--grant-interval", "500ms", "--out", dir.File("out")},
                std::chrono::seconds(120));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  HttpClient c(server.port());
  const Headers admin = {{"Authorization", std::string("Bearer ") + kTestAdminToken}};
  int keyed = 0;
  for (int store = 1; store <= 20; ++store) {
    auto keys = c.Get("/api/v1/stores/" + std::to_string(store) + "/keys", admin);
    ASSERT_EQ(keys.status, 200) << keys.body;
    if (keys.body.find(R"("lastUsedAt":")") != std::string::npos) ++keyed;
    EXPECT_EQ(keys.body.find(R"("revokedAt":null)"), std::string::npos) << "revoked after the runs: " << keys.body;
  }
  EXPECT_GT(keyed, 0) << "the simulator's tills paid with their keys";
  auto without = RunHotrow({"simulate", "pointcard", "--url", url, "--store-keys", "--out", dir.File("out2")},
                           std::chrono::seconds(30));
  EXPECT_EQ(without.exit_code, 2) << "--store-keys needs --admin-token: " << without.output;
  EXPECT_EQ(server.Stop(), 0);
  auto check = RunHotrow({"check", "pointcard", "--db", server.db_url()});
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

}  // namespace
}  // namespace hotrow::testing
