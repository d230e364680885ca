// Operating hotrow on PostgreSQL (issue 12): what /readyz says when
// PostgreSQL goes away and comes back, and the backup procedure of
// docs/deploy.md (pg_dump, pg_restore) restored and served.
#include <chrono>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "harness/http_client.h"
#include "harness/postgres_process.h"
#include "harness/server_process.h"

namespace hotrow::testing {
namespace {

using namespace std::chrono_literals;

std::string PgBin(const std::string& tool) {
  const char* dir = std::getenv("HOTROW_PG_BIN");
  return std::string(dir ? dir : "/usr/lib/postgresql/15/bin") + "/" + tool;
}

bool Has(const std::string& body, const std::string& part) { return body.find(part) != std::string::npos; }

// PostgreSQL down is a shared outage: named, with 200, so that the balancer
// keeps every instance (each answers 503 with Retry-After meanwhile). Once
// it is back the listener reconnects and reloads, and says so.
TEST(PgReadiness, APostgresOutageIsNamedWith200AndTheListenerRecovers) {
  auto pg = PostgresProcess::Start();
  ASSERT_TRUE(pg);
  TestServer server(TestServerOptions{0, false, {}, {}, pg->CreateDatabase()});
  ASSERT_TRUE(server.ok());
  HttpClient client(server.port());
  ASSERT_TRUE(Eventually(
      [&] {
        return Has(client.Get("/readyz").body, R"("name":"listener","scope":"instance","state":"listening","ok":true)");
      },
      10s))
      << client.Get("/readyz").body;
  auto up = client.Get("/readyz");
  EXPECT_EQ(up.status, 200);
  EXPECT_TRUE(Has(up.body, R"({"name":"postgresql","scope":"shared","state":"up","ok":true})")) << up.body;

  pg->Kill();
  ASSERT_TRUE(Eventually(
      [&] { return Has(client.Get("/readyz").body, R"("name":"postgresql","scope":"shared","state":"down")"); }, 15s))
      << client.Get("/readyz").body;
  auto down = client.Get("/readyz");
  EXPECT_EQ(down.status, 200) << down.body;
  EXPECT_TRUE(Has(down.body, R"("name":"listener","scope":"instance","state":"waiting for postgresql","ok":true)"))
      << down.body;
  EXPECT_EQ(client.Post("/datePlan", R"({"title":"t","content":"c","category":"x"})").status, 503);

  ASSERT_TRUE(pg->Restart());
  EXPECT_TRUE(Eventually(
      [&] {
        auto r = client.Get("/readyz");
        return r.status == 200 && Has(r.body, R"("state":"listening")") && Has(r.body, R"("state":"up")");
      },
      20s))
      << client.Get("/readyz").body;
  EXPECT_TRUE(Eventually(
      [&] { return client.Post("/datePlan", R"({"title":"t","content":"c","category":"x"})").status == 201; }, 10s));
  auto m = client.Get("/metrics");
  EXPECT_TRUE(Has(m.body, "hotrow_read_model_reloads_total{model=\"date plans\"} ")) << "the reload is counted";
  EXPECT_TRUE(Has(m.body, "hotrow_pg_pool_connections{pool=\"requests\"} 4")) << m.body.substr(0, 200);
  EXPECT_TRUE(Has(m.body, "hotrow_pg_pool_connections{pool=\"grants\"} 3")) << "the grant's lane";
}

// docs/deploy.md's PostgreSQL backup: pg_dump -Fc while serving, then
// pg_restore into a new database, and a server on it sees what was
// acknowledged before the dump.
TEST(PgBackup, ADumpRestoresIntoADatabaseAServerServes) {
  auto* pg = PostgresProcess::Shared();
  ASSERT_TRUE(pg);
  std::string source = pg->CreateDatabase();
  ASSERT_EQ(RunHotrow({"seed", "dateplans", "--count", "5", "--db", source}).exit_code, 0);
  TestServer server(TestServerOptions{0, false, {}, {}, source});
  ASSERT_TRUE(server.ok());
  HttpClient client(server.port());
  for (int i = 0; i < 10; ++i) ASSERT_EQ(client.Post("/datePlan/3/like").status, 200);
  TempDir dir;
  std::string dump = dir.File("hotrow.dump");
  std::string cmd = PgBin("pg_dump") + " -Fc -f " + dump + " '" + source + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::string target = pg->CreateDatabase();
  cmd = PgBin("pg_restore") + " --no-owner --exit-on-error -d '" + target + "' " + dump;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  TestServer restored(TestServerOptions{0, false, {}, {}, target});
  ASSERT_TRUE(restored.ok());
  HttpClient r(restored.port());
  auto plan = r.Get("/datePlan/3");
  ASSERT_EQ(plan.status, 200) << plan.body;
  EXPECT_EQ(JsonInt(plan.body, "like"), 10);
  EXPECT_EQ(r.Post("/datePlan/3/like").status, 200) << "the restored database takes writes";
}

}  // namespace
}  // namespace hotrow::testing
