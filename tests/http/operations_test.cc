// What an operator sees (issue 12): /metrics, /healthz and /readyz, the
// drain delay, the access log, X-Request-Id, sd_notify, the config file and
// its precedence. Each against a real `hotrow serve`.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "harness/http_client.h"
#include "harness/metrics_sample.h"
#include "harness/redis_process.h"
#include "harness/server_process.h"

namespace hotrow::testing {
namespace {

using namespace std::chrono_literals;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Metrics, TheExpositionIsWellFormedAndCountsRequestsByRouteTemplate) {
  TestServer server(3);
  ASSERT_TRUE(server.ok());
  HttpClient client(server.port());
  for (int i = 0; i < 3; ++i) ASSERT_EQ(client.Post("/datePlan/2/like").status, 200);
  ASSERT_EQ(client.Get("/datePlan/9999").status, 404);
  auto r = client.Get("/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.Header("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  const std::string& m = r.body;
  EXPECT_EQ(Sample(m, R"(hotrow_http_requests_total{route="/datePlan/{id}/like",method="POST",status="200"})"), 3);
  EXPECT_EQ(Sample(m, R"(hotrow_http_requests_total{route="/datePlan/{id}",method="GET",status="404"})"), 1);
  EXPECT_EQ(Sample(m, R"(hotrow_http_request_duration_seconds_count{route="/datePlan/{id}/like"})"), 3);
  EXPECT_EQ(Sample(m, R"(hotrow_http_request_duration_seconds_bucket{route="/datePlan/{id}/like",le="+Inf"})"), 3);
  EXPECT_GE(Sample(m, R"(hotrow_http_request_duration_seconds_bucket{route="/datePlan/{id}/like",le="10"})"), 3);
  EXPECT_GE(Sample(m, R"(hotrow_http_request_duration_seconds_bucket{route="/datePlan/{id}/like",le="0.0001"})"), 0);
  EXPECT_EQ(Sample(m, R"(hotrow_sqlite_writer_ops_total{writer="main",outcome="ok"})"), 3);
  EXPECT_GE(Sample(m, R"(hotrow_sqlite_writer_batch_ops_count{writer="main"})"), 1);
  EXPECT_EQ(Sample(m, R"(hotrow_read_model_entries{model="date plans"})"), 3);
  EXPECT_GT(Sample(m, "process_resident_memory_bytes"), 1e6);
  EXPECT_GT(Sample(m, "process_open_fds"), 3);
  EXPECT_GT(Sample(m, "process_start_time_seconds"), 1.7e9);
  EXPECT_EQ(Sample(m, "hotrow_http_connections"), 1);
  EXPECT_NE(m.find("hotrow_build_info{version=\""), std::string::npos);

  // Every line is a comment (# HELP / # TYPE name type) or a sample; each
  // family is typed before its samples, once.
  static const std::regex kSample(
      R"(^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? [-+0-9.eEInfNa]+$)");
  static const std::regex kType(R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram)$)");
  std::set<std::string> typed;
  std::istringstream in(m);
  int samples = 0;
  for (std::string line; std::getline(in, line);) {
    std::smatch t;
    if (std::regex_match(line, t, kType)) {
      EXPECT_TRUE(typed.insert(t[1]).second) << "typed twice: " << line;
      continue;
    }
    if (line.rfind("# HELP ", 0) == 0) continue;
    EXPECT_TRUE(std::regex_match(line, kSample)) << line;
    std::string name = line.substr(0, line.find_first_of("{ "));
    for (const char* suffix : {"_bucket", "_sum", "_count"})
      if (!typed.count(name) && name.size() > strlen(suffix) &&
          name.compare(name.size() - strlen(suffix), strlen(suffix), suffix) == 0)
        name = name.substr(0, name.size() - strlen(suffix));
    EXPECT_TRUE(typed.count(name)) << "a sample before its # TYPE: " << line;
    ++samples;
  }
  EXPECT_GT(samples, 50);
}

TEST(Metrics, AMetricsTokenGuardsTheEndpointAndTheAdminTokenDoesNotOpenIt) {
  TestServer server(TestServerOptions{0, false, {"--metrics-token", "scrape-me"}, {}});
  ASSERT_TRUE(server.ok());
  HttpClient client(server.port());
  EXPECT_EQ(client.Get("/metrics").status, 401);
  EXPECT_EQ(client.Get("/metrics", {{"Authorization", "Bearer wrong"}}).status, 403);
  EXPECT_EQ(client.Get("/metrics", {{"Authorization", "Bearer " + std::string(kTestAdminToken)}}).status, 403);
  EXPECT_EQ(client.Get("/metrics", {{"Authorization", "Bearer scrape-me"}}).status, 200);
  EXPECT_EQ(client.Get("/healthz").status, 200) << "the probes stay open";
  EXPECT_EQ(client.Get("/readyz").status, 200);
}

TEST(RequestId, AnInvalidOneIsReplacedNotRefused) {
  TestServer server;
  ASSERT_TRUE(server.ok());
  HttpClient client(server.port());
  for (std::string bad : {std::string(65, 'a'), std::string("has space"), std::string("quote\"d"), std::string("")}) {
    auto r = client.Get("/healthz", {{"X-Request-Id", bad}});
    EXPECT_EQ(r.status, 200);
    EXPECT_TRUE(std::regex_match(r.Header("X-Request-Id"), std::regex("[0-9a-f]{16}")))
        << "'" << bad << "' -> " << r.Header("X-Request-Id");
  }
  auto a = client.Get("/healthz"), b = client.Get("/healthz");
  EXPECT_NE(a.Header("X-Request-Id"), b.Header("X-Request-Id"));
}

TEST(Readiness, ReadyzListsEachPartAndDrainingAnswers503WhileEveryRouteIsServed) {
  TestServer server(TestServerOptions{2, false, {"--drain-delay-ms", "3000"}, {}});
  ASSERT_TRUE(server.ok());
  HttpClient client(server.port());
  auto ready = client.Get("/readyz");
  EXPECT_EQ(ready.status, 200);
  EXPECT_NE(ready.body.find(R"({"name":"server","scope":"instance","state":"serving","ok":true})"), std::string::npos)
      << ready.body;
  EXPECT_NE(ready.body.find(R"({"name":"sqlite","scope":"instance","state":"ok","ok":true})"), std::string::npos)
      << ready.body;
  auto signalled = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(server.process().pid(), SIGTERM), 0);
  ASSERT_TRUE(Eventually([&] { return client.Get("/readyz").status == 503; }, 2s));
  auto draining = client.Get("/readyz");
  EXPECT_NE(draining.body.find(R"("state":"draining")"), std::string::npos) << draining.body;
  EXPECT_EQ(draining.Header("Retry-After"), "1");
  EXPECT_EQ(client.Get("/healthz").status, 200) << "live while draining";
  EXPECT_EQ(client.Post("/datePlan/1/like").status, 200) << "every other route is still served";
  HttpClient fresh(server.port());
  EXPECT_EQ(fresh.Get("/datePlan/1").status, 200) << "new connections are still accepted";
  EXPECT_EQ(server.process().Wait(20s), 0);
  EXPECT_GE(std::chrono::steady_clock::now() - signalled, 2500ms) << "the acceptor stayed open for the delay";
}

TEST(Readiness, ASecondSignalEndsTheDrainDelay) {
  TestServer server(TestServerOptions{0, false, {"--drain-delay-ms", "60000"}, {}});
  ASSERT_TRUE(server.ok());
  HttpClient client(server.port());
  ASSERT_EQ(kill(server.process().pid(), SIGTERM), 0);
  ASSERT_TRUE(Eventually([&] { return client.Get("/readyz").status == 503; }, 2s));
  ASSERT_EQ(kill(server.process().pid(), SIGTERM), 0);
  EXPECT_EQ(server.process().Wait(10s), 0);
}

TEST(Readiness, ADatabaseFileReplacedUnderTheServerMakesItUnready) {
  TestServer server(1);
  ASSERT_TRUE(server.ok());
  HttpClient client(server.port());
  ASSERT_EQ(client.Get("/readyz").status, 200);
  std::string path = server.db_url().substr(std::string("sqlite:").size());
  std::filesystem::rename(path, path + ".moved");
  auto r = client.Get("/readyz");
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find(R"("name":"sqlite","scope":"instance","state":"unusable")"), std::string::npos) << r.body;
  std::filesystem::rename(path + ".moved", path);
  EXPECT_EQ(client.Get("/readyz").status, 200);
}

// A shared dependency that is down is named, with 200: one Redis outage
// must not take every instance out of the balancer.
TEST(Readiness, RedisDownIsNamedButTheInstanceStaysReady) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis);
  TestServer server(TestServerOptions{0, false, {"--redis", redis->url()}, {}});
  ASSERT_TRUE(server.ok());
  HttpClient client(server.port());
  auto up = client.Get("/readyz");
  EXPECT_NE(up.body.find(R"({"name":"redis","scope":"shared","state":"up","ok":true})"), std::string::npos) << up.body;
  redis->Kill();
  // The client notices on its next command.
  EXPECT_EQ(client.Post("/api/v1/score", R"({"score":1})", {{"ClientId", "p"}}).status, 503);
  auto down = client.Get("/readyz");
  EXPECT_EQ(down.status, 200) << down.body;
  EXPECT_NE(down.body.find(R"({"name":"redis","scope":"shared","state":"down","ok":false})"), std::string::npos)
      << down.body;
  ASSERT_TRUE(redis->Restart());
  EXPECT_TRUE(Eventually(
      [&] {
        client.Post("/api/v1/score", R"({"score":1})", {{"ClientId", "p"}});
        return client.Get("/readyz").body.find(R"("name":"redis","scope":"shared","state":"up")") != std::string::npos;
      },
      10s));
}

TEST(AccessLog, OneJsonLinePerRequestWithItsIdAndNoSecrets) {
  TempDir dir;
  std::string log = dir.File("access.log");
  TestServer server(TestServerOptions{1, false, {"--access-log", log, "--log-format", "json"}, {}});
  ASSERT_TRUE(server.ok());
  HttpClient client(server.port());
  auto r = client.Get("/datePlan/1", {{"X-Request-Id", "trace-42"}, {"Authorization", "Bearer sekrit-token"}});
  ASSERT_EQ(r.status, 200);
  ASSERT_EQ(client.Post("/api/v1/score", R"({"score":3})", {{"ClientId", "someone"}}).status, 200);
  ASSERT_TRUE(Eventually([&] { return ReadAll(log).find("/api/v1/score") != std::string::npos; }, 5s));
  std::string text = ReadAll(log);
  EXPECT_NE(text.find(R"("requestId":"trace-42","client":"127.0.0.1:)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("method":"GET","target":"/datePlan/1","status":200,"durationUs":)"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("sekrit"), std::string::npos) << "no header value is logged";
  EXPECT_EQ(text.find(kTestAdminToken), std::string::npos);
  EXPECT_EQ(text.find("someone"), std::string::npos);
  std::istringstream lines(text);
  int n = 0;
  for (std::string line; std::getline(lines, line); ++n) EXPECT_EQ(line.front(), '{') << line;
  EXPECT_GE(n, 3);  // /healthz of the harness, the GET, the POST
}

TEST(AccessLog, TextLinesAndAnUnwritablePathFailsAtStart) {
  TempDir dir;
  std::string log = dir.File("access.log");
  TestServer server(TestServerOptions{1, false, {"--access-log", log}, {}});
  ASSERT_TRUE(server.ok());
  HttpClient client(server.port());
  ASSERT_EQ(client.Get("/datePlan/1", {{"X-Request-Id", "t-1"}}).status, 200);
  ASSERT_TRUE(Eventually([&] { return ReadAll(log).find(" t-1 ") != std::string::npos; }, 5s));
  EXPECT_TRUE(
      std::regex_search(ReadAll(log), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z t-1 127\.0\.0\.1:\d+ GET )"
                                                 R"(/datePlan/1 200 \d+us in=\d+ out=\d+\n)")))
      << ReadAll(log);
  auto bad = RunHotrow(
      {"serve", "--port", "0", "--db", "sqlite:" + dir.File("b.db"), "--access-log", "/nonexistent/dir/access.log"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("cannot open the access log"), std::string::npos) << bad.output;
}

// systemd's Type=notify: READY=1 once the stores are loaded and the port is
// open, STOPPING=1 when the drain begins. NOTIFY_SOCKET points at a socket
// this test reads (nothing here runs systemd).
TEST(Systemd, NotifiesReadyThenStopping) {
  TempDir dir;
  std::string path = dir.File("notify.sock");
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  auto receive = [&] {
    char buf[512];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  };
  TestServer server(TestServerOptions{0, false, {}, {{"NOTIFY_SOCKET", path}}});
  ASSERT_TRUE(server.ok());
  std::string ready = receive();
  EXPECT_NE(ready.find("READY=1"), std::string::npos) << ready;
  EXPECT_NE(ready.find("STATUS=serving on port " + std::to_string(server.port())), std::string::npos) << ready;
  ASSERT_EQ(kill(server.process().pid(), SIGTERM), 0);
  std::string stopping = receive();
  EXPECT_NE(stopping.find("STOPPING=1"), std::string::npos) << stopping;
  EXPECT_EQ(server.process().Wait(20s), 0);
  close(fd);
}

// flag > environment > --config file > default, as --print-config shows.
TEST(Config, FlagBeatsEnvironmentBeatsFileBeatsDefault) {
  TempDir dir;
  std::string file = dir.File("hotrow.toml");
  std::ofstream(file)
      << "# hotrow serve\nport = 7001\nthreads = 3\nmax-connections = 500\n"
         "admin-token = \"from-the-file\"\ncors-origin = [\"https://a.example\", \"https://b.example\"]\n";
  setenv("HOTROW_THREADS", "5", 1);
  setenv("HOTROW_MAX_CONNECTIONS", "600", 1);
  auto r = RunHotrow({"serve", "--config", file, "--print-config", "--max-connections", "700"});
  unsetenv("HOTROW_THREADS");
  unsetenv("HOTROW_MAX_CONNECTIONS");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string& o = r.output;
  EXPECT_NE(o.find("port = 7001  # config file"), std::string::npos) << o;
  EXPECT_NE(o.find("threads = 5  # environment HOTROW_THREADS"), std::string::npos) << o;
  EXPECT_NE(o.find("max-connections = 700  # flag"), std::string::npos) << o;
  EXPECT_NE(o.find("host = \"0.0.0.0\"  # default"), std::string::npos) << o;
  EXPECT_NE(o.find("admin-token = \"***\"  # config file"), std::string::npos) << o;
  EXPECT_NE(o.find(R"(cors-origin = ["https://a.example", "https://b.example"]  # config file)"), std::string::npos)
      << o;
  EXPECT_EQ(o.find("from-the-file"), std::string::npos) << "secrets are masked";
}

// An empty variable or file value is no value; it must not take the next
// setting as its value (an empty HOTROW_ADMIN_TOKEN once made the admin
// token "--log-level=debug").
TEST(Config, AnEmptyValueIsUnsetAndSwallowsNothing) {
  TempDir dir;
  std::string file = dir.File("hotrow.toml");
  std::ofstream(file) << "access-log = \"\"\nlog-format = \"json\"\n";
  setenv("HOTROW_ADMIN_TOKEN", "", 1);
  setenv("HOTROW_LOG_LEVEL", "debug", 1);
  auto r = RunHotrow({"serve", "--config", file, "--print-config"});
  unsetenv("HOTROW_ADMIN_TOKEN");
  unsetenv("HOTROW_LOG_LEVEL");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("admin-token = \"\"  # default"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("log-level = \"debug\"  # environment HOTROW_LOG_LEVEL"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("access-log = \"off\"  # default"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("log-format = \"json\"  # config file"), std::string::npos) << r.output;
  // A flag of the user's left without its value fails; it takes nothing.
  setenv("HOTROW_LOG_LEVEL", "debug", 1);
  auto dangling = RunHotrow({"serve", "--print-config", "--access-log"});
  unsetenv("HOTROW_LOG_LEVEL");
  EXPECT_NE(dangling.exit_code, 0) << dangling.output;
}

TEST(Config, TheFileSettingsReachTheServer) {
  TempDir dir;
  std::string file = dir.File("hotrow.ini");
  std::ofstream(file) << "[default]\nmetrics-token=from-ini\nmax-connections=321\n";
  TestServer server(TestServerOptions{0, false, {"--config", file}, {}});
  ASSERT_TRUE(server.ok());
  HttpClient client(server.port());
  // The metrics token from the file is the one the server checks.
  EXPECT_EQ(client.Get("/metrics").status, 401);
  EXPECT_EQ(client.Get("/metrics", {{"Authorization", "Bearer from-ini"}}).status, 200);
  auto bad = RunHotrow({"serve", "--config", dir.File("missing.toml")});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("missing.toml"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace hotrow::testing

namespace hotrow::testing {
namespace {

TEST(Probe, ExitsZeroOnA2xxAndOneOtherwise) {
  TestServer server(TestServerOptions{0, false, {"--drain-delay-ms", "60000"}, {}});
  ASSERT_TRUE(server.ok());
  std::string base = "http://127.0.0.1:" + std::to_string(server.port());
  auto ok = RunHotrow({"probe", base + "/readyz"});
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("200 {\"status\":\"ready\""), std::string::npos) << ok.output;
  EXPECT_EQ(RunHotrow({"probe", base + "/no/such/route"}).exit_code, 1);
  ASSERT_EQ(kill(server.process().pid(), SIGTERM), 0);  // draining: /readyz answers 503
  EXPECT_TRUE(Eventually([&] { return RunHotrow({"probe", base + "/readyz"}).exit_code == 1; }, 5s));
  EXPECT_EQ(RunHotrow({"probe", base + "/healthz"}).exit_code, 0);
  EXPECT_EQ(RunHotrow({"probe", "http://127.0.0.1:" + std::to_string(FreePort()) + "/healthz"}).exit_code, 1);
  EXPECT_EQ(RunHotrow({"probe", "ftp://x/"}).exit_code, 2);
  kill(server.process().pid(), SIGTERM);
  EXPECT_EQ(server.process().Wait(20s), 0);
}

// A backup taken while likes are being written is one consistent snapshot,
// and a server started on it serves it (the restore of docs/deploy.md).
TEST(Backup, ACopyWhileServingRestoresToAConsistentSnapshot) {
  TestServer server(5);
  ASSERT_TRUE(server.ok());
  std::atomic<bool> stop{false};
  std::atomic<int> acked{0};
  std::thread likes([&] {
    HttpClient c(server.port());
    while (!stop) {
      if (c.Post("/datePlan/3/like").status == 200) ++acked;
    }
  });
  ASSERT_TRUE(Eventually([&] { return acked >= 50; }, 20s));
  TempDir dir;
  std::string copy = dir.File("backup.db");
  auto r = RunHotrow({"backup", "--db", server.db_url(), "--out", copy});
  int acked_after = acked;
  stop = true;
  likes.join();
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("backed up"), std::string::npos) << r.output;
  auto again = RunHotrow({"backup", "--db", server.db_url(), "--out", copy});
  EXPECT_EQ(again.exit_code, 2) << "never overwrites";
  EXPECT_NE(again.output.find("exists"), std::string::npos) << again.output;
  EXPECT_EQ(RunHotrow({"backup", "--db", "postgresql://u@127.0.0.1:1/x", "--out", dir.File("x")}).exit_code, 2);

  TestServer restored(TestServerOptions{0, false, {}, {}, "sqlite:" + copy});
  ASSERT_TRUE(restored.ok());
  HttpClient c(restored.port());
  auto plan = c.Get("/datePlan/3");
  ASSERT_EQ(plan.status, 200) << plan.body;
  int64_t likes_in_copy = JsonInt(plan.body, "like");
  EXPECT_GE(likes_in_copy, 50);
  // One like at most is in flight (one client): committed, not yet acknowledged.
  EXPECT_LE(likes_in_copy, acked_after + 1) << "the copy holds nothing written after it";
  EXPECT_EQ(c.Get("/datePlan/5").status, 200);
}

}  // namespace
}  // namespace hotrow::testing

namespace hotrow::testing {
namespace {

TEST(Readiness, CtrlCSkipsTheDrainDelay) {
  TestServer server(TestServerOptions{0, false, {"--drain-delay-ms", "60000"}, {}});
  ASSERT_TRUE(server.ok());
  auto signalled = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(server.process().pid(), SIGINT), 0);
  EXPECT_EQ(server.process().Wait(std::chrono::seconds(20)), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - signalled, std::chrono::seconds(10));
}

}  // namespace
}  // namespace hotrow::testing

namespace hotrow::testing {
namespace {

// A peer that accepts and never answers: the probe gives up at its timeout
// (the client's socket timeouts alone did not bound it).
TEST(Probe, GivesUpAtItsTimeout) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(fd, 8), 0);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  auto started = std::chrono::steady_clock::now();
  auto r =
      RunHotrow({"probe", "--timeout-ms", "1000", "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("no answer within 1000 ms"), std::string::npos) << r.output;
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  close(fd);
}

// What Debian's CLI11 TOML reader would read wrong is refused, not run with.
TEST(Config, ValuesTheReaderWouldMangleAreRefused) {
  TempDir dir;
  for (std::string line :
       {"admin-token = \"sek#ret\"", "metrics-token = \"a\\\\b\"", "metrics-token = m x", "[srve]\nport = 1"}) {
    std::string file = dir.File("c.toml");
    std::ofstream(file) << line << "\n";
    auto r = RunHotrow({"serve", "--config", file, "--print-config"});
    EXPECT_EQ(r.exit_code, 2) << line << ": " << r.output;
  }
  EXPECT_EQ(RunHotrow({"serve", "--config", "/dev/zero", "--print-config"}).exit_code, 2);
  EXPECT_EQ(RunHotrow({"serve", "--config", dir.path(), "--print-config"}).exit_code, 2);
  auto empty_flag = RunHotrow({"serve", "--admin-token=", "--print-config"});
  EXPECT_EQ(empty_flag.exit_code, 2) << empty_flag.output;
  EXPECT_NE(empty_flag.output.find("--admin-token= has no value"), std::string::npos) << empty_flag.output;
}

}  // namespace
}  // namespace hotrow::testing
