// Shutdown with work still in flight: no handler may outlive the objects it
// calls (issue 9, items 6 and 7). Under the ASan build (make test runs these
// against the sanitized binary) a use-after-free aborts the server, so the
// exit status tells.
#include <csignal>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "db/redis.h"
#include "harness/http_client.h"
#include "harness/redis_process.h"
#include "harness/server_process.h"
#include "pointcard/model.h"

namespace hotrow::testing {
namespace {

// A grant still running when the grace period ends used to answer through
// a freed worker: the server destroyed its event loops (and then the
// stores) while the grant thread was in its query phase. Now the stores
// stop first: the grant answers, then the server exits 0. The grant takes
// 5 s, longer than the grace (0.2 s) plus the server's two 2 s drains, so
// a teardown that does not wait for it fails here (seen: exit 1 and no
// answer with only the writer stopped in before_stop; under ASan on the
// code before this change, a heap-use-after-free).
TEST(Shutdown, AGrantThatOutlivesTheGracePeriodStillAnswersAndTheServerExitsCleanly) {
  TestServer server(
      TestServerOptions{0, true, {"--shutdown-grace-ms", "200"}, {{"HOTROW_FAILPOINT", "grant.slow:5000"}}});
  ASSERT_TRUE(server.ok());
  std::promise<int> answered;
  std::thread client([&] {
    try {
      HttpClient c(server.port());
      std::string to = pointcard::FormatTime(pointcard::NowUs() - 1000000);
      auto r = c.Post("/api/v1/grants",
                      R"({"from":"2000-01-01T00:00:00Z","to":")" + to + R"(","ratePercent":1,"allowOverlap":true})",
                      {{"Authorization", std::string("Bearer ") + kTestAdminToken}});
      answered.set_value(r.status);
    } catch (const std::exception&) {
      answered.set_value(0);
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the grant is in its slow query phase
  int exit_status = server.Stop();
  client.join();
  EXPECT_EQ(exit_status, 0) << server.process().Log();
  int status = answered.get_future().get();
  EXPECT_TRUE(status == 201 || status == 503) << "the grant must be answered, not cut off: " << status;
}

// Requests arriving during a shutdown are answered or refused; none hangs,
// and the server exits 0.
TEST(Shutdown, SigtermUnderLoadExitsCleanly) {
  TestServer server(TestServerOptions{20, true, {"--shutdown-grace-ms", "300"}, {}});
  ASSERT_TRUE(server.ok());
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  for (int i = 0; i < 8; ++i)
    clients.emplace_back([&, i] {
      while (!stop) {
        try {
          HttpClient c(server.port(), std::chrono::seconds(10));
          while (!stop) {
            if (i % 2)
              c.Post("/datePlan/" + std::to_string(1 + i) + "/like");
            else
              c.Post("/api/v1/cards/" + std::to_string(1 + i) + "/transactions", R"({"storeId":1,"amount":5})");
          }
        } catch (const std::exception&) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
      }
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  int exit_status = server.Stop();
  stop = true;
  for (auto& t : clients) t.join();
  EXPECT_EQ(exit_status, 0) << server.process().Log();
}

// Every request is answered within --handler-timeout-ms, whatever a store
// does: a Redis that stalls (stopped) longer than the bound used to
// hold the score post until the Redis client's own 5 s timeout. Now the
// connection answers 503 at the bound (plus the sweep's 500 ms) and closes:
// whether the score was stored is unknown, and the answer says so (issue 9,
// item 8).
TEST(HandlerTimeout, AStalledStoreIsAnsweredWithinTheBound) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis);
  TestServer server(TestServerOptions{0, false, {"--redis", redis->url(), "--handler-timeout-ms", "1000"}, {}});
  ASSERT_TRUE(server.ok());
  HttpClient c(server.port());
  ASSERT_EQ(c.Post("/api/v1/score", R"({"score":1})", {{"ClientId", "before"}}).status, 200);
  // Stalled for certain before the post (SIGSTOP; a DEBUG SLEEP sent from a
  // thread 200 ms earlier might not have begun on a loaded machine).
  redis->Pause();
  struct Resume {
    RedisProcess& r;
    ~Resume() { r.Resume(); }
  } resume{*redis};
  auto start = std::chrono::steady_clock::now();
  auto r = c.Post("/api/v1/score", R"({"score":2})", {{"ClientId", "during"}});
  auto took = std::chrono::steady_clock::now() - start;
  redis->Resume();
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_NE(r.body.find("whether it took effect is unknown"), std::string::npos) << r.body;
  EXPECT_EQ(r.Header("Connection"), "close");
  EXPECT_LT(took, std::chrono::milliseconds(3000)) << "answered after the stall, not at the bound";
  EXPECT_EQ(c.Get("/healthz").status, 200) << "the server goes on";
}

// SIGTERM while a store stalls (issue 9, item 25): Redis stopped with
// SIGSTOP, requests in flight to it. The server must still end within its
// grace period plus the stores' own bounds (Redis's 5 s reply timeout), and
// exit 0.
TEST(Shutdown, SigtermWhileRedisStallsEndsInBoundedTime) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis);
  TestServer server(TestServerOptions{
      0, false, {"--redis", redis->url(), "--shutdown-grace-ms", "500", "--handler-timeout-ms", "1000"}, {}});
  ASSERT_TRUE(server.ok());
  redis->Pause();
  struct Resume {
    RedisProcess& r;
    ~Resume() { r.Resume(); }
  } resume{*redis};
  std::vector<std::thread> clients;
  for (int i = 0; i < 4; ++i)
    clients.emplace_back([&, i] {
      try {
        HttpClient c(server.port(), std::chrono::seconds(20));
        c.Post("/api/v1/score", R"({"score":1})", {{"ClientId", "stalled-" + std::to_string(i)}});
      } catch (const std::exception&) {
      }
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto start = std::chrono::steady_clock::now();
  int status = server.Stop();
  auto took = std::chrono::steady_clock::now() - start;
  for (auto& t : clients) t.join();
  EXPECT_EQ(status, 0) << server.process().Log();
  EXPECT_LT(took, std::chrono::seconds(12)) << "grace 0.5 s + Redis's 5 s reply timeout + the drain";
}

}  // namespace
}  // namespace hotrow::testing
