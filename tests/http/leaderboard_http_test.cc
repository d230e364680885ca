// Leaderboard scenarios across processes: several instances on one Redis,
// restarts, and the admin switch.
#include <sys/stat.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "base/crypto.h"
#include "base/text.h"
#include "base/time.h"
#include "harness/http_client.h"
#include "harness/redis_process.h"
#include "harness/server_process.h"

namespace hotrow::testing {
namespace {

TEST(LeaderboardHttp, ASecondInstanceSeesAScorePostedOnTheFirst) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis);
  TestServer a(0, {"--redis", redis->url()});
  TestServer b(0, {"--redis", redis->url()});
  ASSERT_TRUE(a.ok() && b.ok());
  HttpClient ca(a.port()), cb(b.port());
  // Warm b's cache first, so the test covers invalidation, not a cold read.
  ASSERT_EQ(cb.Get("/api/v1/leaderboard").status, 200);
  auto posted = ca.Post("/api/v1/score", R"({"score":12345})", {{"ClientId", "from-a"}});
  ASSERT_EQ(posted.status, 200) << posted.body;
  bool seen = Eventually([&] { return cb.Get("/api/v1/leaderboard?limit=1").body.find("from-a") != std::string::npos; },
                         std::chrono::seconds(2));
  EXPECT_TRUE(seen) << "instance b did not rank a score posted on instance a within 2 s";
  auto mine = cb.Get("/api/v1/leaderboard/from-a");
  EXPECT_EQ(mine.status, 200);
  EXPECT_NE(mine.body.find("\"rank\":1"), std::string::npos) << mine.body;
}

TEST(LeaderboardHttp, ScoresSurviveAServerRestartOnTheEmbeddedStore) {
  TestServer server;
  ASSERT_TRUE(server.ok());
  {
    HttpClient c(server.port());
    ASSERT_EQ(c.Post("/api/v1/score", R"({"score":7})", {{"ClientId", "a"}}).status, 200);
    ASSERT_EQ(c.Post("/api/v1/score", R"({"score":7})", {{"ClientId", "b"}}).status, 200);
  }
  ASSERT_EQ(server.Stop(), 0);
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  EXPECT_EQ(c.Get("/api/v1/leaderboard").body,
            R"({"entries":[{"rank":1,"clientId":"a","score":7},{"rank":2,"clientId":"b","score":7}],"total":2,)"
            R"("next":null})");
}

TEST(LeaderboardHttp, AcknowledgedScoresSurviveKill9OnTheEmbeddedStore) {
  TestServer server;
  ASSERT_TRUE(server.ok());
  std::atomic<bool> stop{false};
  std::vector<std::vector<std::pair<std::string, int>>> acked(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      try {
        HttpClient c(server.port(), std::chrono::milliseconds(5000));
        for (int i = 0; !stop; ++i) {
          std::string id = "t" + std::to_string(t) + "-" + std::to_string(i);
          if (c.Post("/api/v1/score", "{\"score\":" + std::to_string(i) + "}", {{"ClientId", id}}).status == 200)
            acked[t].push_back({id, i});
        }
      } catch (const std::exception&) {
      }
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  server.Kill();
  stop = true;
  for (auto& th : threads) th.join();
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  size_t checked = 0;
  for (const auto& list : acked)
    for (const auto& [id, score] : list) {
      auto r = c.Get("/api/v1/leaderboard/" + id);
      ASSERT_EQ(r.status, 200) << "acknowledged score of " << id << " was lost";
      EXPECT_NE(r.body.find("\"score\":" + std::to_string(score) + "}"), std::string::npos) << r.body;
      ++checked;
    }
  EXPECT_GT(checked, 0u);
}

TEST(LeaderboardHttp, WithoutAnAdminTokenRemovingIsForbidden) {
  TempDir dir;
  auto p = ServerProcess::Start({"--db", "sqlite:" + dir.File("x.db")}, dir.File("log"));
  ASSERT_TRUE(p);
  HttpClient c(p->port());
  ASSERT_EQ(c.Post("/api/v1/score", R"({"score":7})", {{"ClientId", "a"}}).status, 200);
  auto r = c.Delete("/api/v1/leaderboard/a", {{"Authorization", "Bearer guess"}});
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(r.body.find("admin actions are disabled"), std::string::npos) << r.body;
  EXPECT_EQ(c.Get("/api/v1/leaderboard/a").status, 200);
  EXPECT_EQ(p->Stop(), 0);
}

TEST(LeaderboardHttp, AnUnreachableRedisFailsAfterTheConnectTimeout) {
  TempDir dir;
  auto started = std::chrono::steady_clock::now();
  auto r = RunHotrow({"serve", "--port", "0", "--db", "sqlite:" + dir.File("a.db"), "--redis",
                      "redis://127.0.0.1:" + std::to_string(FreePort()), "--db-connect-timeout", "2"},
                     std::chrono::seconds(60));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("cannot connect to Redis"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("waiting up to 2 s"), std::string::npos) << r.output;
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(1500)) << "it waited";
}

// compose starts every container at once: hotrow waits for Redis instead
// of exiting (--db-connect-timeout), then serves.
TEST(LeaderboardHttp, ServeWaitsForRedisToComeUp) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis);
  redis->Kill();
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    EXPECT_TRUE(redis->Restart());
  });
  TestServer server(TestServerOptions{0, false, {"--redis", redis->url(), "--db-connect-timeout", "30"}, {}});
  later.join();
  ASSERT_TRUE(server.ok());
  HttpClient client(server.port());
  auto r = client.Post("/api/v1/score", R"({"score":5})", {{"ClientId", "waiter"}});
  EXPECT_EQ(r.status, 200) << r.body;
}

// Seasons over HTTP: a --test-hooks server's board of 1-second seasons. The
// schedule shows as {"everySeconds":N}, a post answers its season, and the
// season before stays readable with ?season=N.
TEST(LeaderboardHttp, ABoardOfOneSecondSeasonsOverHttp) {
  TestServer server(0, {"--test-hooks"});
  ASSERT_TRUE(server.ok());
  HttpClient c(server.port());
  const Headers admin = {{"Authorization", std::string("Bearer ") + kTestAdminToken}};
  auto made = c.Post("/api/v1/boards", R"({"id":"tick","reset":{"everySeconds":1},"keepSeasons":2})", admin);
  ASSERT_EQ(made.status, 201) << made.body;
  EXPECT_NE(made.body.find(R"("reset":{"everySeconds":1})"), std::string::npos) << made.body;
  auto first = c.Post("/api/v1/boards/tick/scores", R"({"score":9})", {{"ClientId", "ann"}});
  ASSERT_EQ(first.status, 200) << first.body;
  const int64_t s1 = JsonInt(first.body, "season");
  bool moved = Eventually(
      [&] {
        auto r = c.Post("/api/v1/boards/tick/scores", R"({"score":4})", {{"ClientId", "bob"}});
        return r.status == 200 && JsonInt(r.body, "season") > s1;
      },
      std::chrono::seconds(5));
  ASSERT_TRUE(moved) << "no post reached the next season within 5 s";
  auto old = c.Get("/api/v1/boards/tick/leaderboard?season=" + std::to_string(s1));
  ASSERT_EQ(old.status, 200) << old.body;
  EXPECT_NE(old.body.find(R"("season":)" + std::to_string(s1)), std::string::npos) << old.body;
  EXPECT_NE(old.body.find(R"({"rank":1,"clientId":"ann","score":9})"), std::string::npos) << old.body;
  auto player = c.Get("/api/v1/boards/tick/players/ann?season=" + std::to_string(s1));
  EXPECT_EQ(player.status, 200) << player.body;
  EXPECT_EQ(c.Get("/api/v1/boards/tick/players/ann").status, 404);  // not in the current season
  auto seasons = c.Get("/api/v1/boards/tick/seasons");
  ASSERT_EQ(seasons.status, 200);
  EXPECT_NE(seasons.body.find(R"("endedAt":null}]})"), std::string::npos) << seasons.body;
  // The move is counted (once per board and season, on this instance).
  auto metrics = c.Get("/metrics").body;
  auto at = metrics.find("\nhotrow_leaderboard_season_switches_total ");
  ASSERT_NE(at, std::string::npos) << metrics;
  EXPECT_GE(std::stoll(metrics.substr(at + 42)), 1);
  // A patch back to a named reset shows as its name.
  auto patched = c.Request("PATCH", "/api/v1/boards/tick", R"({"reset":"weekly"})", admin);
  ASSERT_EQ(patched.status, 200) << patched.body;
  EXPECT_NE(patched.body.find(R"("reset":"weekly")"), std::string::npos) << patched.body;
}

// A board whose time zone this machine's tzdata no longer has (a tzdata
// update, another machine) is left out, with a warning; the server and
// every other board still start. (Before, the server refused to start.)
TEST(LeaderboardHttp, ABoardWhoseZoneIsGoneIsLeftOutAndTheServerStillStarts) {
  TempDir zones;
  std::filesystem::create_directories(zones.File("Asia"));
  std::filesystem::copy_file("/usr/share/zoneinfo/Asia/Tokyo", zones.File("Asia/Tokyo"));
  std::filesystem::copy_file("/usr/share/zoneinfo/UTC", zones.File("UTC"));
  TestServer server(TestServerOptions{.args = {}, .env = {{"TZDIR", zones.path()}}});
  ASSERT_TRUE(server.ok());
  {
    HttpClient c(server.port());
    const Headers admin = {{"Authorization", std::string("Bearer ") + kTestAdminToken}};
    auto made = c.Post("/api/v1/boards", R"({"id":"tokyo","reset":"daily","resetTimezone":"Asia/Tokyo"})", admin);
    ASSERT_EQ(made.status, 201) << made.body;
  }
  ASSERT_EQ(server.Stop(), 0);
  std::filesystem::remove(zones.File("Asia/Tokyo"));
  ASSERT_TRUE(server.Start()) << "the server must start without the board's zone";
  HttpClient c(server.port());
  EXPECT_EQ(c.Get("/api/v1/boards/tokyo").status, 404);
  EXPECT_EQ(c.Get("/api/v1/leaderboard").status, 200);
  EXPECT_EQ(c.Get("/api/v1/boards/default").status, 200);
}

// --score-rate: a player's posts to a board past the rate get 429 with
// Retry-After, others' (and the same player's on another board) go on;
// the legacy route is limited too, and /metrics counts the refusals.
TEST(LeaderboardHttp, ScoresPastTheRateAreRefusedWith429AndRetryAfter) {
  // 1/min: a burst of one, and no token back within the test however slow
  // the machine (at 2/s one came back whenever two posts and their commits
  // took over 500 ms). The refill is ScoreRateLimiter's unit tests'.
  TestServer server(0, {"--score-rate", "1/min"});
  ASSERT_TRUE(server.ok());
  HttpClient c(server.port());
  const Headers admin = {{"Authorization", std::string("Bearer ") + kTestAdminToken}};
  ASSERT_EQ(c.Post("/api/v1/boards", R"({"id":"race"})", admin).status, 201);
  auto post = [&](const std::string& path, const std::string& client) {
    return c.Post(path, R"({"score":1})", {{"ClientId", client}});
  };
  // The burst, then refused until the next token.
  EXPECT_EQ(post("/api/v1/boards/race/scores", "ann").status, 200);
  auto refused = post("/api/v1/boards/race/scores", "ann");
  EXPECT_EQ(refused.status, 429) << refused.body;
  const int retry_after = std::atoi(refused.Header("Retry-After").c_str());
  EXPECT_TRUE(retry_after >= 55 && retry_after <= 60) << refused.Header("Retry-After");
  EXPECT_NE(refused.body.find(R"("code":"rate_limited")"), std::string::npos) << refused.body;
  EXPECT_EQ(post("/api/v1/boards/race/scores", "bob").status, 200);
  EXPECT_EQ(post("/api/v1/score", "ann").status, 200);  // another board: default
  EXPECT_EQ(post("/api/v1/score", "ann").status, 429);
  // An invalid id is refused for what it is, not counted.
  EXPECT_EQ(c.Post("/api/v1/boards/race/scores", R"({"score":1})", {{"ClientId", "bad id"}}).status, 400);
  auto metrics = c.Get("/metrics");
  EXPECT_NE(metrics.body.find("hotrow_leaderboard_scores_rate_limited_total 2"), std::string::npos) << metrics.body;
}

// Signed submissions over HTTP: the secret shown once, a post signed as
// the docs say (a client in another language computes the same bytes),
// refusals with 401 and WWW-Authenticate, a replayed signature that writes
// nothing, a rotation with grace, and a key file others may read refused.
TEST(LeaderboardHttp, AnHmacBoardTakesSignedPostsOnly) {
  TempDir dir;
  const std::string key_file = dir.File("secrets.key");
  {
    std::FILE* f = std::fopen(key_file.c_str(), "w");
    ASSERT_TRUE(f);
    std::fputs("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n", f);
    std::fclose(f);
  }
  ::chmod(key_file.c_str(), 0644);
  auto loose = RunHotrow({"serve", "--port", "0", "--db", "sqlite:" + dir.File("a.db"), "--secrets-key-file", key_file},
                         std::chrono::seconds(60));
  EXPECT_EQ(loose.exit_code, 1);
  EXPECT_NE(loose.output.find("chmod 600"), std::string::npos) << loose.output;
  ::chmod(key_file.c_str(), 0600);
  {  // 32 characters of text are no key of 256 bits
    const std::string weak_file = dir.File("weak.key");
    std::FILE* f = std::fopen(weak_file.c_str(), "w");
    ASSERT_TRUE(f);
    std::fputs("0123456789abcdef0123456789abcdef", f);
    std::fclose(f);
    ::chmod(weak_file.c_str(), 0600);
    auto weak =
        RunHotrow({"serve", "--port", "0", "--db", "sqlite:" + dir.File("b.db"), "--secrets-key-file", weak_file},
                  std::chrono::seconds(60));
    EXPECT_EQ(weak.exit_code, 1);
    EXPECT_NE(weak.output.find("64 hex digits"), std::string::npos) << weak.output;
  }

  TestServer server(0, {"--secrets-key-file", key_file});
  ASSERT_TRUE(server.ok());
  HttpClient c(server.port());
  const Headers admin = {{"Authorization", std::string("Bearer ") + kTestAdminToken}};
  auto made = c.Post("/api/v1/boards", R"({"id":"ranked","auth":"hmac","operator":"increment"})", admin);
  ASSERT_EQ(made.status, 201) << made.body;
  auto secret_at = made.body.find(R"("secret":")");
  ASSERT_NE(secret_at, std::string::npos) << made.body;
  const std::string secret = made.body.substr(secret_at + 10, 64);
  auto shown = c.Get("/api/v1/boards/ranked");
  EXPECT_EQ(shown.body.find("secret"), std::string::npos) << "shown once: " << shown.body;
  EXPECT_NE(shown.body.find(R"("auth":"hmac")"), std::string::npos);

  const std::string path = "/api/v1/boards/ranked/scores";
  auto sign = [&](const std::string& key, const std::string& client, const std::string& ts, const std::string& body) {
    return HexEncode(HmacSha256(key, "POST\n" + path + "\n" + client + "\n" + ts + "\n" + body));
  };
  const std::string now = std::to_string(NowMicros() / 1000000);
  const std::string body = R"({"score":5})";
  auto post = [&](const std::string& ts, const std::string& signature, const std::string& b = R"({"score":5})") {
    return c.Post(path, b, {{"ClientId", "ann"}, {"X-Timestamp", ts}, {"X-Signature", signature}});
  };
  auto unsigned_post = c.Post(path, body, {{"ClientId", "ann"}});
  EXPECT_EQ(unsigned_post.status, 401) << unsigned_post.body;
  EXPECT_EQ(unsigned_post.Header("WWW-Authenticate"), "HMAC-SHA256");
  EXPECT_NE(unsigned_post.body.find(R"("code":"bad_signature")"), std::string::npos) << unsigned_post.body;
  const std::string good = sign(secret, "ann", now, body);
  EXPECT_EQ(post(now, good, R"({"score":6})").status, 401) << "another body";
  EXPECT_EQ(post(std::to_string(NowMicros() / 1000000 - 400),
                 sign(secret, "ann", std::to_string(NowMicros() / 1000000 - 400), body))
                .status,
            401)
      << "too old";
  EXPECT_EQ(post(now, std::string(64, '0')).status, 401);
  EXPECT_EQ(post(now, "xyz").status, 401);

  auto first = post(now, good);
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.body, R"({"clientId":"ann","score":5,"rank":1,"season":1})");
  std::string upper = good;
  for (auto& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  auto again = post(now, upper);  // the same signature (hex in either case): replayed
  EXPECT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.Header("Idempotent-Replayed"), "true");
  EXPECT_EQ(again.body, first.body);
  EXPECT_NE(c.Get("/api/v1/boards/ranked/players/ann").body.find(R"("score":5)"), std::string::npos)
      << "the increment was applied once";

  // Rotation: the old secret stays good for the grace only.
  auto rotated = c.Post("/api/v1/boards/ranked/secret", R"({"graceSeconds":60})", admin);
  ASSERT_EQ(rotated.status, 201) << rotated.body;
  const std::string fresh = rotated.body.substr(rotated.body.find(R"("secret":")") + 10, 64);
  EXPECT_NE(fresh, secret);
  const std::string body2 = R"({"score":1})";
  EXPECT_EQ(post(now, sign(secret, "ann", now, body2), body2).status, 200) << "the old one, within its grace";
  EXPECT_EQ(post(now, sign(fresh, "ann", now, body2), body2).status, 200);
  ASSERT_EQ(c.Post("/api/v1/boards/ranked/secret", "", admin).status, 201);  // no grace: both go
  const std::string body3 = R"({"score":2})";
  EXPECT_EQ(post(now, sign(fresh, "ann", now, body3), body3).status, 401);
  // Not on a board that takes unsigned posts.
  ASSERT_EQ(c.Post("/api/v1/boards", R"({"id":"open"})", admin).status, 201);
  EXPECT_EQ(c.Post("/api/v1/boards/open/secret", "", admin).status, 409);
  // Switched off and on again: a fresh secret, shown in that PATCH; the one
  // before never comes back.
  auto off = c.Request("PATCH", "/api/v1/boards/ranked", R"({"auth":"none"})", admin);
  ASSERT_EQ(off.status, 200) << off.body;
  EXPECT_EQ(off.body.find("secret"), std::string::npos);
  auto on = c.Request("PATCH", "/api/v1/boards/ranked", R"({"auth":"hmac"})", admin);
  ASSERT_EQ(on.status, 200) << on.body;
  ASSERT_NE(on.body.find(R"("secret":")"), std::string::npos) << on.body;
  const std::string again_secret = on.body.substr(on.body.find(R"("secret":")") + 10, 64);
  EXPECT_NE(again_secret, fresh);
  const std::string body4 = R"({"score":3})";
  EXPECT_EQ(post(now, sign(fresh, "ann", now, body4), body4).status, 401);
  EXPECT_EQ(post(now, sign(again_secret, "ann", now, body4), body4).status, 200);
  // The legacy route on a signed `default`: its ?mode is not signed, so refused.
  auto signed_default = c.Request("PATCH", "/api/v1/boards/default", R"({"auth":"hmac"})", admin);
  ASSERT_EQ(signed_default.status, 200) << signed_default.body;
  const std::string dflt = signed_default.body.substr(signed_default.body.find(R"("secret":")") + 10, 64);
  auto legacy_sig = HexEncode(HmacSha256(dflt, "POST\n/api/v1/score\nann\n" + now + "\n" + body4));
  const Headers legacy = {{"ClientId", "ann"}, {"X-Timestamp", now}, {"X-Signature", legacy_sig}};
  EXPECT_EQ(c.Post("/api/v1/score?mode=best", body4, legacy).status, 400);
  EXPECT_EQ(c.Post("/api/v1/score", body4, legacy).status, 200);
  auto metrics = c.Get("/metrics");
  EXPECT_NE(metrics.body.find("hotrow_leaderboard_signature_refusals_total 7"), std::string::npos) << metrics.body;
}

TEST(LeaderboardHttp, WithoutASecretsKeyNoBoardMayBeHmac) {
  TestServer server;
  ASSERT_TRUE(server.ok());
  HttpClient c(server.port());
  const Headers admin = {{"Authorization", std::string("Bearer ") + kTestAdminToken}};
  auto r = c.Post("/api/v1/boards", R"({"id":"ranked","auth":"hmac"})", admin);
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_NE(r.body.find("--secrets-key-file"), std::string::npos) << r.body;
  ASSERT_EQ(c.Post("/api/v1/boards", R"({"id":"open"})", admin).status, 201);
  EXPECT_EQ(c.Request("PATCH", "/api/v1/boards/open", R"({"auth":"hmac"})", admin).status, 409);
}

// `seed leaderboard --redis` writes the players it reports (it once
// reported 50 and wrote none: its posts lacked the season's schedule).
TEST(LeaderboardHttp, SeedingRedisWritesEveryPlayer) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis);
  auto seed = RunHotrow({"seed", "leaderboard", "--clients", "50", "--redis", redis->url()});
  ASSERT_EQ(seed.exit_code, 0) << seed.output;
  TestServer server(0, {"--redis", redis->url()});
  ASSERT_TRUE(server.ok());
  HttpClient c(server.port());
  auto page = c.Get("/api/v1/leaderboard?limit=1");
  EXPECT_NE(page.body.find("\"total\":50,"), std::string::npos) << page.body;
  auto again = RunHotrow({"seed", "leaderboard", "--clients", "50", "--redis", redis->url()});
  EXPECT_NE(again.exit_code, 0) << "a second seed without --replace or --if-empty: " << again.output;
  auto both = RunHotrow({"seed", "leaderboard", "--clients", "5", "--redis", redis->url(), "--replace", "--if-empty"});
  EXPECT_NE(both.exit_code, 0) << both.output;
  // --replace replaces `default`'s players and nothing else (it once
  // deleted every other board).
  const Headers admin = {{"Authorization", std::string("Bearer ") + kTestAdminToken}};
  ASSERT_EQ(c.Post("/api/v1/boards", R"({"id":"keepme"})", admin).status, 201);
  ASSERT_EQ(c.Post("/api/v1/boards/keepme/scores", R"({"score":3})", {{"ClientId", "kept"}}).status, 200);
  auto replaced = RunHotrow({"seed", "leaderboard", "--clients", "20", "--redis", redis->url(), "--replace"});
  ASSERT_EQ(replaced.exit_code, 0) << replaced.output;
  EXPECT_NE(c.Get("/api/v1/leaderboard?limit=1").body.find("\"total\":20,"), std::string::npos);
  auto kept = c.Get("/api/v1/boards/keepme/leaderboard");
  EXPECT_NE(kept.body.find("\"kept\""), std::string::npos) << kept.body;
}

// --redis-replica: a page is read from a real replica once its lag is
// measured, the series show it, and a misconfiguration is refused at start.
TEST(LeaderboardHttp, PagesAreReadFromAReplicaAndItsLagIsExported) {
  auto master = RedisProcess::Start();
  auto replica = RedisProcess::Start();
  ASSERT_TRUE(master && replica);
  {
    RawConnection m(master->port());
    m.Send("CONFIG SET repl-diskless-sync-delay 0\r\n");
    RawConnection r(replica->port());
    r.Send("REPLICAOF 127.0.0.1 " + std::to_string(master->port()) + "\r\n");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  TestServer server(0, {"--redis", master->url(), "--redis-replica", replica->url()});
  ASSERT_TRUE(server.ok());
  HttpClient c(server.port());
  ASSERT_EQ(c.Post("/api/v1/score", R"({"score":42})", {{"ClientId", "seen"}}).status, 200);
  bool replica_read = Eventually(
      [&] {
        auto page = c.Get("/api/v1/leaderboard");
        EXPECT_NE(page.body.find("\"seen\""), std::string::npos) << page.body;
        auto metrics = c.Get("/metrics").body;
        std::string series = "hotrow_redis_reads_total{server=\"127.0.0.1:" + std::to_string(replica->port()) + "\"} ";
        size_t at = metrics.find(series);
        return at != std::string::npos && metrics.compare(at + series.size(), 2, "0\n") != 0;
      },
      std::chrono::seconds(15));
  EXPECT_TRUE(replica_read) << "no page was read from the replica within 15 s";
  EXPECT_NE(c.Get("/metrics").body.find("hotrow_redis_replica_lag_seconds{replica=\"127.0.0.1:"), std::string::npos);
}

TEST(LeaderboardHttp, AReplicaWithoutAMasterIsRefused) {
  TempDir dir;
  auto r = RunHotrow(
      {"serve", "--port", "0", "--db", "sqlite:" + dir.File("a.db"), "--redis-replica", "redis://127.0.0.1:6379"},
      std::chrono::seconds(30));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("need --redis"), std::string::npos) << r.output;
  // An empty URL in the variable's list is refused, and takes no flag
  // after it for a URL.
  auto empty = RunHotrow({"serve", "--port", "0", "--db", "sqlite:" + dir.File("b.db")}, std::chrono::seconds(30),
                         {{"HOTROW_REDIS", "redis://127.0.0.1:6379"}, {"HOTROW_REDIS_REPLICA", ","}});
  EXPECT_EQ(empty.exit_code, 2) << empty.output;
  EXPECT_NE(empty.output.find("empty URL"), std::string::npos) << empty.output;
  auto itself = RunHotrow({"serve", "--port", "0", "--db", "sqlite:" + dir.File("c.db"), "--redis",
                           "redis://127.0.0.1:6379", "--redis-replica", "redis://127.0.0.1:6379"},
                          std::chrono::seconds(30));
  EXPECT_EQ(itself.exit_code, 2) << itself.output;
  auto split = RunHotrow({"serve", "--port", "0", "--redis-replica-split", "8/7"}, std::chrono::seconds(30));
  EXPECT_NE(split.exit_code, 0);
  EXPECT_NE(split.output.find("N/M"), std::string::npos) << split.output;
}

}  // namespace
}  // namespace hotrow::testing
