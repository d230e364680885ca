// Data-driven HTTP cases: each file in tests/http/cases/ is a list of
// requests and the answers expected, run in order against one server seeded
// with 20 date plans. Format (see cases/README.md):
//
//   === name of the case
//   METHOD /target
//   Header: value            (any number; then a blank line)
//   body ...                 (optional, up to the separator)
//   ---
//   STATUS
//   header Name: value       (exact header value)
//   contains some text       (the body contains it)
//   {"exact":"body"}         (any other line: the exact body)
//
// "{{admin}}" in a request stands for the server's admin token. A first
// line "#! backends: sqlite redis" runs the file once per backend (redis:
// a real redis-server and --redis); the default is sqlite alone. A line
// "#! seed: pointcard" adds the small point-card data set (200 cards, 20
// stores, 1,000 history rows, seed 7) to the 20 date plans.
//
// HOTROW_CASES_URL=http://host:port (and HOTROW_CASES_ADMIN_TOKEN) run every
// file once against a running server seeded that way instead
// (scripts/compose-test: two instances behind nginx); a case named
// "... (direct: why)" is left out there.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "harness/http_client.h"
#include "harness/redis_process.h"
#include "harness/server_process.h"

namespace hotrow::testing {
namespace {

// The admin token of the server the cases run against: the harness's, or
// HOTROW_CASES_ADMIN_TOKEN with HOTROW_CASES_URL (a running server).
std::string AdminToken() {
  const char* t = std::getenv("HOTROW_CASES_ADMIN_TOKEN");
  return t ? t : kTestAdminToken;
}

struct Case {
  std::string name;
  int line = 0;
  std::string method, target, body;
  Headers headers;
  int status = 0;
  Headers expect_headers;
  std::vector<std::string> contains;
  std::optional<std::string> exact_body;
};

std::string Substitute(std::string s) {
  for (size_t at; (at = s.find("{{admin}}")) != std::string::npos;) s.replace(at, 9, AdminToken());
  return s;
}

std::vector<Case> ParseCases(const std::string& path) {
  std::ifstream in(path);
  std::vector<Case> cases;
  std::string line;
  enum { kNone, kRequestLine, kHeaders, kBody, kExpectStatus, kExpect } state = kNone;
  int n = 0;
  auto split_header = [](const std::string& l) {
    size_t colon = l.find(':');
    std::string value = colon == std::string::npos ? "" : l.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    return std::make_pair(l.substr(0, colon), Substitute(value));
  };
  while (std::getline(in, line)) {
    ++n;
    if (line.rfind("=== ", 0) == 0) {
      cases.push_back({});
      cases.back().name = line.substr(4);
      cases.back().line = n;
      state = kRequestLine;
      continue;
    }
    if (state == kNone || (line.rfind("#", 0) == 0 && state != kBody && state != kExpect)) continue;
    Case& c = cases.back();
    switch (state) {
      case kRequestLine: {
        if (line.empty()) continue;
        size_t sp = line.find(' ');
        c.method = line.substr(0, sp);
        c.target = Substitute(line.substr(sp + 1));
        state = kHeaders;
        break;
      }
      case kHeaders:
        if (line == "---")
          state = kExpectStatus;
        else if (line.empty())
          state = kBody;
        else
          c.headers.push_back(split_header(line));
        break;
      case kBody:
        if (line == "---") {
          if (!c.body.empty() && c.body.back() == '\n') c.body.pop_back();
          state = kExpectStatus;
        } else {
          c.body += Substitute(line) + "\n";
        }
        break;
      case kExpectStatus:
        if (line.empty()) continue;
        c.status = std::stoi(line);
        state = kExpect;
        break;
      case kExpect:
        if (line.empty()) continue;
        if (line.rfind("header ", 0) == 0)
          c.expect_headers.push_back(split_header(line.substr(7)));
        else if (line.rfind("contains ", 0) == 0)
          c.contains.push_back(line.substr(9));
        else
          c.exact_body = c.exact_body ? *c.exact_body + "\n" + line : line;
        break;
      case kNone:
        break;
    }
  }
  return cases;
}

struct CaseFile {
  std::string file;
  std::string backend;
  bool seed_pointcard = false;
};

void PrintTo(const CaseFile& c, std::ostream* os) { *os << c.file << " on " << c.backend; }

std::string CasesDir() { return std::string(HOTROW_SOURCE_DIR) + "/tests/http/cases/"; }

// The first backend a file lists ("sqlite" when it lists none).
std::string FirstBackend(const std::string& file) {
  std::ifstream in(CasesDir() + file);
  std::string line;
  if (std::getline(in, line) && line.rfind("#! backends:", 0) == 0) {
    std::istringstream words(line.substr(12));
    std::string b;
    if (words >> b) return b;
  }
  return "sqlite";
}

class HttpCases : public ::testing::TestWithParam<CaseFile> {};

TEST_P(HttpCases, Run) {
  std::string path = CasesDir() + GetParam().file;
  auto cases = ParseCases(path);
  ASSERT_FALSE(cases.empty()) << "no cases in " << path;
  std::unique_ptr<RedisProcess> redis;
  std::unique_ptr<TestServer> server;
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  if (const char* url = std::getenv("HOTROW_CASES_URL")) {
    // A running server (scripts/compose-test: the stack behind nginx), seeded
    // as below; each file once, whatever backends it lists.
    if (GetParam().backend != FirstBackend(GetParam().file)) GTEST_SKIP() << "one backend against a running server";
    ASSERT_TRUE(http::ParseHttpUrl(url, &host, &port)) << url;
  } else {
    std::vector<std::string> args;
    if (GetParam().backend == "redis") {
      redis = RedisProcess::Start();
      ASSERT_TRUE(redis);
      args = {"--redis", redis->url()};
    }
    server = std::make_unique<TestServer>(TestServerOptions{20, GetParam().seed_pointcard, args, {}});
    ASSERT_TRUE(server->ok());
    port = server->port();
  }
  HttpClient client(host, port);
  bool through_proxy = std::getenv("HOTROW_CASES_URL") != nullptr;
  for (const Case& c : cases) {
    // A case about what hotrow does with a request a proxy in front would
    // not pass on ("(direct: ...)" in its name) runs against hotrow only.
    if (through_proxy && c.name.find("(direct") != std::string::npos) continue;
    SCOPED_TRACE(GetParam().file + ":" + std::to_string(c.line) + " " + c.name + " [" + GetParam().backend + "]");
    HttpResponse r = client.Request(c.method, c.target, c.body, c.headers);
    // Behind a balancer a read may reach the other instance before it has
    // applied the write just answered (docs/deploy.md: a few ms): a GET is
    // read again, for up to 2 s, until it is the answer expected.
    auto stale = [&](const HttpResponse& x) {
      if (x.status != c.status) return true;
      if (!c.exact_body) return false;
      std::string id = x.Header("X-Request-Id"), tail = ",\"requestId\":\"" + id + "\"}}";
      std::string b = x.body;
      if (x.status >= 400 && b.size() >= tail.size() && b.compare(b.size() - tail.size(), tail.size(), tail) == 0)
        b = b.substr(0, b.size() - tail.size()) + "}}";
      return b != *c.exact_body;
    };
    for (int i = 0; through_proxy && c.method == "GET" && stale(r) && i < 100; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      r = client.Request(c.method, c.target, c.body, c.headers);
    }
    EXPECT_EQ(r.status, c.status) << r.body;
    for (const auto& [name, value] : c.expect_headers) EXPECT_EQ(r.Header(name), value) << "header " << name;
    // Every response names its request; an error body carries the same id
    // last, which the exact bodies below leave out.
    std::string id = r.Header("X-Request-Id");
    EXPECT_FALSE(id.empty()) << "every response has X-Request-Id";
    std::string body = r.body;
    if (r.status >= 400) {
      EXPECT_EQ(body.rfind("{\"error\":{\"code\":\"", 0), 0u) << "every error has the one JSON shape: " << body;
      EXPECT_EQ(r.Header("Content-Type"), "application/json; charset=utf-8");
      std::string tail = ",\"requestId\":\"" + id + "\"}}";
      bool has_id = body.size() >= tail.size() && body.compare(body.size() - tail.size(), tail.size(), tail) == 0;
      EXPECT_TRUE(has_id) << "an error body ends with the response's X-Request-Id " << id << ": " << body;
      if (has_id) body = body.substr(0, body.size() - tail.size()) + "}}";
    }
    for (const auto& text : c.contains) EXPECT_NE(body.find(text), std::string::npos) << "body: " << r.body;
    if (c.exact_body) {
      EXPECT_EQ(body, *c.exact_body);
    }
  }
}

std::vector<CaseFile> CaseFiles() {
  std::vector<CaseFile> files;
  for (const auto& e : std::filesystem::directory_iterator(CasesDir())) {
    if (e.path().extension() != ".test") continue;
    std::ifstream in(e.path());
    std::vector<std::string> backends = {"sqlite"};
    bool seed_pointcard = false;
    for (std::string line; std::getline(in, line) && line.rfind("#!", 0) == 0;) {
      std::istringstream words(line.substr(2));
      std::string key;
      words >> key;
      if (key == "backends:") {
        backends.clear();
        for (std::string b; words >> b;) backends.push_back(b);
      } else if (key == "seed:") {
        for (std::string what; words >> what;) seed_pointcard = seed_pointcard || what == "pointcard";
      }
    }
    for (const auto& b : backends) files.push_back({e.path().filename().string(), b, seed_pointcard});
  }
  std::sort(files.begin(), files.end(),
            [](const CaseFile& a, const CaseFile& b) { return a.file + a.backend < b.file + b.backend; });
  return files;
}

INSTANTIATE_TEST_SUITE_P(Files, HttpCases, ::testing::ValuesIn(CaseFiles()), [](const auto& info) {
  std::string n = info.param.file.substr(0, info.param.file.find('.')) + "_" + info.param.backend;
  for (char& ch : n)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
});

}  // namespace
}  // namespace hotrow::testing
