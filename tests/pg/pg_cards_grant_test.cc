// Cards closed while a grant runs, on a PostgreSQL server: closed in the
// grant's query phase, its staging leaves the card out; closed between its
// staging and its apply, the apply drops the card's credit (the scenario
// of tests/harness/close_during_grant.h, as on SQLite).
#include <gtest/gtest.h>

#include "harness/close_during_grant.h"
#include "harness/postgres_process.h"
#include "harness/server_process.h"

namespace hotrow::testing {
namespace {

void CloseDuringAPostgresGrant(const std::string& failpoint) {
  std::string url = FreshDatabase();
  auto seeded = RunHotrow(
      {"seed", "pointcard", "--cards", "200", "--stores", "20", "--history", "1000", "--seed", "7", "--db", url});
  ASSERT_EQ(seeded.exit_code, 0) << seeded.output;
  TestServer server(TestServerOptions{0, false, {}, {{"HOTROW_FAILPOINT", failpoint}}, url});
  ASSERT_TRUE(server.ok());
  CloseACardDuringAGrant(server);
}

TEST(PostgresCards, ACardClosedDuringAGrantsStagingGetsNothingFromIt) { CloseDuringAPostgresGrant("grant.slow:1500"); }

TEST(PostgresCards, ACardClosedBeforeAGrantsApplyGetsNothingFromIt) {
  CloseDuringAPostgresGrant("grant.apply.slow:1500");
}

}  // namespace
}  // namespace hotrow::testing
