// The HTTP layer's limits and its behaviour with bad, slow and vanishing
// clients. Each error must reach the client as a complete response.
#include <thread>

#include <gtest/gtest.h>

#include "harness/http_client.h"
#include "harness/server_process.h"

namespace hotrow::testing {
namespace {

using std::chrono::milliseconds;

class Limits : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server = new TestServer(3, {"--request-timeout-ms", "1000", "--max-connections", "50"});
  }
  static void TearDownTestSuite() {
    delete server;
    server = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(server && server->ok()); }
  uint16_t port() { return server->port(); }
  static TestServer* server;
};
TestServer* Limits::server = nullptr;

TEST_F(Limits, BodyOverLimitIs413AndTheClientReadsIt) {
  RawConnection conn(port());
  std::string body(200 * 1024, 'x');
  std::string req = "POST /datePlan HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: " +
                    std::to_string(body.size()) + "\r\n\r\n" + body;
  conn.Send(req);  // may fail part-way: the server stops reading
  std::string raw = conn.ReadUntilClose(milliseconds(5000));
  EXPECT_EQ(StatusOf(raw), 413) << raw.substr(0, 200);
  EXPECT_NE(raw.find("\"code\":\"payload_too_large\""), std::string::npos);
  EXPECT_NE(raw.find("Connection: close"), std::string::npos);
}

TEST_F(Limits, ChunkedBodyOverLimitIs413) {
  RawConnection conn(port());
  std::string req = "POST /datePlan HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 20; ++i) req += "1000\r\n" + std::string(4096, 'y') + "\r\n";
  req += "0\r\n\r\n";
  conn.Send(req);
  std::string raw = conn.ReadUntilClose(milliseconds(5000));
  EXPECT_EQ(StatusOf(raw), 413) << raw.substr(0, 200);
}

TEST_F(Limits, BodyAtTheLimitIsRead) {
  HttpClient c(port());
  std::string body = R"({"title":"t","content":")" + std::string(1990, 'c') + R"(","category":"c","pad":")";
  body += std::string(64 * 1024 - body.size() - 2, 'p') + "\"}";
  ASSERT_EQ(body.size(), 64u * 1024);
  auto r = c.Post("/datePlan", body);
  EXPECT_EQ(r.status, 400) << "read in full, then refused for its unknown field";
  EXPECT_NE(r.body.find("unknown field 'pad'"), std::string::npos) << r.body;
}

TEST_F(Limits, HeaderBlockOverLimitIs431) {
  RawConnection conn(port());
  std::string req = "GET /healthz HTTP/1.1\r\nHost: t\r\nX-Big: " + std::string(9000, 'h') + "\r\n\r\n";
  conn.Send(req);
  std::string raw = conn.ReadUntilClose(milliseconds(5000));
  EXPECT_EQ(StatusOf(raw), 431) << raw.substr(0, 200);
  EXPECT_NE(raw.find("\"code\":\"headers_too_large\""), std::string::npos);
}

TEST_F(Limits, MalformedRequestIs400) {
  RawConnection conn(port());
  conn.Send("THIS IS NOT HTTP\r\n\r\n");
  std::string raw = conn.ReadUntilClose(milliseconds(5000));
  EXPECT_EQ(StatusOf(raw), 400) << raw;
  EXPECT_NE(raw.find("\"code\":\"bad_request\""), std::string::npos);
}

TEST_F(Limits, IdleConnectionIsClosedAfterTheTimeout) {
  RawConnection conn(port());
  EXPECT_FALSE(conn.ClosedWithin(milliseconds(300)));
  EXPECT_TRUE(conn.ClosedWithin(milliseconds(5000)));
}

// The deadline counts from the last response, not from the connection's
// start: a keep-alive client that asks every 300 ms outlives several 1 s
// timeouts, then is closed once it stops.
TEST_F(Limits, KeepAliveDeadlineRestartsWithEachRequest) {
  RawConnection conn(port());
  auto start = std::chrono::steady_clock::now();
  int answered = 0;
  while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(2500)) {
    ASSERT_TRUE(conn.Send("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")) << "closed after " << answered << " requests";
    std::string raw = conn.ReadUntilClose(milliseconds(300));
    ASSERT_EQ(StatusOf(raw), 200) << "request " << answered << ": " << raw;
    ++answered;
  }
  EXPECT_GE(answered, 5);
  EXPECT_TRUE(conn.ClosedWithin(milliseconds(5000))) << "idle after its last request";
}

TEST_F(Limits, TricklingClientIsClosed) {
  RawConnection conn(port());
  std::string req = "GET /healthz HTTP/1.1\r\nHost: t\r\nX-Slow: ";
  auto start = std::chrono::steady_clock::now();
  bool closed = false;
  // One byte every 100 ms: each arrives well within any idle timeout, but the
  // request as a whole never completes.
  for (int i = 0; i < 60 && !closed; ++i) {
    closed = !conn.Send("a") || conn.ClosedWithin(milliseconds(100));
  }
  EXPECT_TRUE(closed);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST_F(Limits, VanishingClientsDoNotHurtTheServer) {
  for (int i = 0; i < 20; ++i) {
    RawConnection conn(port());
    conn.Send("POST /datePlan/1/like HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nhalf");
  }  // closed mid-body
  for (int i = 0; i < 20; ++i) {
    RawConnection conn(port());
    conn.Send("GET /datePlan/ HTTP/1.1\r\nHost: t\r\n\r\n");
  }  // closed before reading the response
  HttpClient c(port());
  EXPECT_EQ(c.Get("/healthz").status, 200);
  EXPECT_NE(c.Get("/datePlan/1").body.find("\"like\":0"), std::string::npos) << "half-sent likes must not count";
}

TEST_F(Limits, ExpectContinueIsAnswered) {
  RawConnection conn(port());
  std::string body = R"({"title":"t","content":"","category":"c"})";
  conn.Send(
      "POST /datePlan HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nExpect: 100-continue\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n");
  // Each read ends with its response (the 201's commit is an fsync, which a
  // loaded machine can stretch past any short window).
  std::string interim = conn.ReadResponse(milliseconds(10000));
  EXPECT_EQ(StatusOf(interim), 100) << interim;
  conn.Send(body);
  std::string raw = conn.ReadResponse(milliseconds(10000));
  EXPECT_EQ(StatusOf(raw), 201) << raw;
}

TEST_F(Limits, PipelinedRequestsAreAnsweredInOrder) {
  RawConnection conn(port());
  conn.Send(
      "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\nGET /nope HTTP/1.1\r\nHost: t\r\n\r\n"
      "GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  std::string raw = conn.ReadUntilClose(milliseconds(5000));
  size_t first = raw.find("HTTP/1.1 200"), second = raw.find("HTTP/1.1 404"), third = raw.rfind("HTTP/1.1 200");
  ASSERT_NE(first, std::string::npos) << raw;
  ASSERT_NE(second, std::string::npos) << raw;
  EXPECT_LT(first, second);
  EXPECT_LT(second, third);
}

TEST(ConnectionLimit, ConnectionsPastTheLimitGet503) {
  TestServer server(1, {"--max-connections", "5"});
  ASSERT_TRUE(server.ok());
  std::vector<std::unique_ptr<HttpClient>> held;
  for (int i = 0; i < 5; ++i) {
    held.push_back(std::make_unique<HttpClient>(server.port()));
    ASSERT_EQ(held.back()->Get("/healthz").status, 200);
  }
  RawConnection extra(server.port());
  extra.Send("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n");
  std::string raw = extra.ReadUntilClose(std::chrono::milliseconds(5000));
  EXPECT_EQ(StatusOf(raw), 503) << raw;
  EXPECT_NE(raw.find("Retry-After: 1"), std::string::npos);
  EXPECT_NE(raw.find("\"code\":\"overloaded\""), std::string::npos);
  held.pop_back();  // one slot frees up
  for (int attempt = 0; attempt < 100; ++attempt) {
    RawConnection again(server.port());
    again.Send("GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    if (StatusOf(again.ReadUntilClose(std::chrono::milliseconds(2000))) == 200) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << "a freed connection slot was never reused";
}

// One memory budget for every connection's request body (issue 9, item
// 22): slow senders holding partly sent bodies get 503 past it, and the
// budget comes back when they go.
TEST(BodyBudget, PartlySentBodiesPastTheBudgetGet503) {
  TestServer server(1, {"--body-memory-mb", "1"});
  ASSERT_TRUE(server.ok());
  std::vector<std::unique_ptr<RawConnection>> held;
  std::string head =
      "POST /datePlan HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
      "Content-Length: 60000\r\n\r\n" +
      std::string(10000, ' ');
  for (int i = 0; i < 30; ++i) {
    held.push_back(std::make_unique<RawConnection>(server.port()));
    held.back()->Send(head);
  }
  int refused = 0;
  for (auto& c : held) {
    std::string raw = c->ReadUntilClose(milliseconds(200));
    if (StatusOf(raw) == 503) {
      ++refused;
      EXPECT_NE(raw.find("too many request bodies"), std::string::npos) << raw;
    }
  }
  // 1 MiB holds 17 bodies of 60,000 bytes: the other 13 are refused.
  EXPECT_EQ(refused, 13);
  held.clear();
  EXPECT_TRUE(Eventually(
      [&] {
        HttpClient c(server.port());
        return c.Post("/datePlan", R"({"title":"t","content":")" + std::string(50000, 'c') + R"(","category":"c"})")
                   .status != 503;
      },
      std::chrono::seconds(10)))
      << "the budget must come back when the senders go";
}

TEST(AdminToken, WithoutOneAdminActionsAre403) {
  TempDir dir;
  auto seed = RunHotrow({"seed", "dateplans", "--count", "2", "--db", "sqlite:" + dir.File("a.db")});
  ASSERT_EQ(seed.exit_code, 0) << seed.output;
  auto p = ServerProcess::Start({"--db", "sqlite:" + dir.File("a.db")}, dir.File("log"));
  ASSERT_TRUE(p);
  HttpClient c(p->port());
  auto r = c.Delete("/datePlan/1", {{"Authorization", "Bearer anything"}});
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(c.Get("/datePlan/1").status, 200);
  EXPECT_EQ(p->Stop(), 0);
}

}  // namespace
}  // namespace hotrow::testing
