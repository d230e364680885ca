// hotrow check pointcard: verifies the point card's invariants on one
// snapshot; exit status 1 with a precise report when anything is off.
#include "pointcard/check.h"

#include <cstdio>

#include "cmd/commands.h"
#include "db/postgres.h"
#include "db/store_url.h"
#include "ops/log.h"
#include "pointcard/postgres_store.h"
#include "pointcard/sqlite_file.h"

namespace hotrow::cmd {

CLI::App* AddCheck(CLI::App& app, CheckFlags& f) {
  CLI::App* c = app.add_subcommand("check", "Verify a data set's invariants (safe beside a running server)");
  c->require_subcommand(1);
  CLI::App* cards = c->add_subcommand(
      "pointcard", "Balances equal their history's sums, running balances, no negative balance, LAST_UPDATE");
  cards->add_option("--db", f.db, "Store URL: sqlite:PATH or postgresql://…")
      ->envname("HOTROW_DB")
      ->capture_default_str();
  cards->callback([&f] { f.what = "pointcard"; });
  return c;
}

int RunCheck(const CheckFlags& f) {
  auto url = db::ParseStoreUrl(f.db);
  if (!url.ok()) {
    log::Error("{}", url.status().message());
    return 2;
  }
  Result<pointcard::CheckReport> report = Status::Internal("unset");
  if (url->kind == db::StoreUrl::Kind::kPostgres) {
    auto conn = db::pg::Connection::Connect(url->postgres_url);
    if (!conn.ok()) {
      log::Error("{}", conn.status().ToString());
      return 2;
    }
    report = pointcard::CheckPostgresInvariants(**conn);
  } else {
    // PATH.pointcard.db, or PATH itself in a layout before 0.5.0.
    auto conn =
        db::sqlite::Connection::Open(pointcard::PointCardPathToRead(url->sqlite_path), db::sqlite::OpenMode::kReadOnly);
    if (!conn.ok()) {
      log::Error("{}", conn.status().ToString());
      return 2;
    }
    report = pointcard::CheckInvariants(**conn);
  }
  if (!report.ok()) {
    log::Error("cannot check: {}", report.status().ToString());
    return 2;
  }
  std::printf("checked %lld card(s) and %lld history row(s)", static_cast<long long>(report->cards),
              static_cast<long long>(report->rows));
  if (report->pending_points > 0)
    std::printf("; %lld point(s) of an applied grant not yet folded into the history",
                static_cast<long long>(report->pending_points));
  std::printf("\n");
  if (report->ok()) {
    std::printf("OK: every invariant holds\n");
    return 0;
  }
  std::printf("FAILED:\n");
  for (const auto& [kind, count] : report->violations)
    std::printf("  %-18s %lld violation(s)\n", kind.c_str(), static_cast<long long>(count));
  std::printf("first %zu:\n", report->examples.size());
  for (const auto& e : report->examples) std::printf("  %s\n", e.c_str());
  return 1;
}

}  // namespace hotrow::cmd
