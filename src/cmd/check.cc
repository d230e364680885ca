// hotrow check pointcard: verifies the point card's invariants on one
// snapshot; exit status 1 with a precise report when anything is off.
// With --sample-cards and --for it checks a random range of cards at a time,
// snapshot after snapshot, beside a running server: the proof that a grant
// is atomic while it stages and folds (docs/pointcard.md#invariants-and-the-checker).
#include "pointcard/check.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <thread>

#include "cmd/commands.h"
#include "db/postgres.h"
#include "db/sqlite_database.h"
#include "db/store_url.h"
#include "ops/log.h"
#include "pointcard/postgres_store.h"
#include "pointcard/sqlite_file.h"

namespace hotrow::cmd {

namespace {

constexpr int64_t kSampleCardsMax = 1000000;

using Checker = std::function<Result<pointcard::CheckReport>(const pointcard::CheckScope&)>;
// The first and last ids of the `count` cards from the one at 0-based
// position `skip` in id order; nullopt when there is none.
using CardRange = std::optional<std::pair<int64_t, int64_t>>;
using Picker = std::function<Result<CardRange>(int64_t skip, int64_t count)>;
constexpr const char* kPickCards =
    "SELECT MIN(CARD_ID), MAX(CARD_ID) FROM (SELECT CARD_ID FROM S_ACCOUNT ORDER BY CARD_ID LIMIT $2 OFFSET $1) s "
    "HAVING COUNT(*) > 0";

void PrintViolations(const pointcard::CheckReport& report) {
  std::printf("FAILED:\n");
  for (const auto& [kind, count] : report.violations)
    std::printf("  %-18s %lld violation(s)\n", kind.c_str(), static_cast<long long>(count));
  std::printf("first %zu:\n", report.examples.size());
  for (const auto& e : report.examples) std::printf("  %s\n", e.c_str());
}

int PrintOne(const pointcard::CheckReport& report) {
  std::printf("checked %lld card(s) and %lld history row(s)", static_cast<long long>(report.cards),
              static_cast<long long>(report.rows));
  if (report.grants_checked > 0)
    std::printf(", %lld grant(s) recomputed", static_cast<long long>(report.grants_checked));
  if (report.pending_points > 0)
    std::printf("; %lld point(s) of an applied grant not yet folded into the history",
                static_cast<long long>(report.pending_points));
  std::printf("\n");
  if (report.ok()) {
    std::printf("OK: every invariant holds\n");
    return 0;
  }
  PrintViolations(report);
  return 1;
}

// Snapshot after snapshot until `span` has passed, one starting every
// `every`, each of `sample` consecutive cards of the `cards` from a random
// one on (every card when sample is 0): cards, not ids, so sparse ids are
// sampled as evenly as dense ones. Stops at the first snapshot that breaks
// an invariant.
int Repeat(const Checker& check, const Picker& pick, int64_t sample, int64_t cards_total,
           std::chrono::milliseconds span, std::chrono::milliseconds every) {
  std::mt19937_64 random(std::random_device{}());
  std::uniform_int_distribution<int64_t> draw(0, std::max<int64_t>(0, cards_total - sample));
  auto start = std::chrono::steady_clock::now();
  int64_t snapshots = 0, staging = 0, folding = 0, cards = 0;
  for (auto next = start; next - start < span || snapshots == 0; next += every) {
    std::this_thread::sleep_until(next);
    pointcard::CheckScope scope;
    if (sample > 0) {
      auto range = pick(draw(random), sample);
      if (!range.ok()) {
        log::Error("cannot check: {}", range.status().ToString());
        return 2;
      }
      if (*range) scope.card_first = (*range)->first, scope.card_last = (*range)->second;
    }
    auto report = check(scope);
    if (!report.ok()) {
      log::Error("cannot check: {}", report.status().ToString());
      return 2;
    }
    ++snapshots;
    cards += report->cards;
    staging += report->grants_staging > 0;
    folding += report->grants_folding > 0;
    if (!report->ok()) {
      std::printf("snapshot %lld, cards %lld to %lld:\n", static_cast<long long>(snapshots),
                  static_cast<long long>(scope.card_first), static_cast<long long>(scope.card_last));
      PrintViolations(*report);
      return 1;
    }
    next = std::max(next, std::chrono::steady_clock::now() - every);  // late: the next one now
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "checked %lld snapshot(s) over %.1f s, %.0f card(s) each on average: %lld saw a grant staging, "
      "%lld a grant applied and folding\n",
      static_cast<long long>(snapshots), seconds, static_cast<double>(cards) / static_cast<double>(snapshots),
      static_cast<long long>(staging), static_cast<long long>(folding));
  std::printf("OK: every invariant holds in every snapshot\n");
  return 0;
}

}  // namespace

CLI::App* AddCheck(CLI::App& app, CheckFlags& f) {
  CLI::App* c = app.add_subcommand("check", "Verify a data set's invariants (safe beside a running server)");
  c->require_subcommand(1);
  CLI::App* cards = c->add_subcommand(
      "pointcard",
      "Balances equal their history's sums, running balances, no negative balance, LAST_UPDATE, and every applied "
      "grant gave each card its bonus, no more and no less");
  cards->add_option("--db", f.db, "Store URL: sqlite:PATH or postgresql://…")
      ->envname("HOTROW_DB")
      ->capture_default_str();
  cards
      ->add_option("--sample-cards", f.sample_cards,
                   "Check only this many cards, a random range of ids, in each snapshot (0: every card)")
      ->check(CLI::Range(int64_t{0}, kSampleCardsMax));
  cards->add_option("--for", f.for_duration,
                    "Check snapshot after snapshot for this long (60s, 3m), beside a running grant; stops at the "
                    "first that fails");
  cards
      ->add_option("--every", f.every,
                   "With --for: start a snapshot this often, 0 for back to back (a snapshot of 1,000 cards of 1M "
                   "reads for about 10 ms)")
      ->capture_default_str();
  cards->callback([&f] { f.what = "pointcard"; });
  return c;
}

int RunCheck(const CheckFlags& f) {
  std::chrono::milliseconds span{0}, every{0};
  if (!f.for_duration.empty() && !ParseDuration(f.for_duration, &span)) {
    log::Error("--for takes a duration such as 60s, 3m or 500ms, not '{}'", f.for_duration);
    return 2;
  }
  if (!ParseDuration(f.every, &every, /*zero_allowed=*/true)) {
    log::Error("--every takes a duration such as 200ms, or 0, not '{}'", f.every);
    return 2;
  }
  if (span.count() == 0 && f.every != CheckFlags().every) {
    log::Error("--every needs --for");
    return 2;
  }
  auto url = db::ParseStoreUrl(f.db);
  if (!url.ok()) {
    log::Error("{}", url.status().message());
    return 2;
  }
  std::unique_ptr<db::pg::Connection> pg;
  std::unique_ptr<db::sqlite::Connection> sqlite;
  Checker check;
  Picker pick;
  std::function<Result<int64_t>()> count_cards;
  const char* kCount = "SELECT COUNT(*) FROM S_ACCOUNT";
  if (url->kind == db::StoreUrl::Kind::kPostgres) {
    auto conn = db::pg::Connection::Connect(url->postgres_url);
    if (!conn.ok()) {
      log::Error("{}", conn.status().ToString());
      return 2;
    }
    pg = std::move(conn).value();
    check = [&pg](const pointcard::CheckScope& s) { return pointcard::CheckPostgresInvariants(*pg, s); };
    pick = [&pg](int64_t skip, int64_t count) -> Result<CardRange> {
      auto r = pg->Query(kPickCards, {std::to_string(skip), std::to_string(count)});
      if (!r.ok()) return r.status();
      if (r->empty()) return CardRange();
      return CardRange(std::pair{r->Int(0, 0), r->Int(0, 1)});
    };
    count_cards = [&pg, kCount]() -> Result<int64_t> {
      auto r = pg->Query(kCount);
      if (!r.ok()) return r.status();
      return r->Int(0, 0);
    };
  } else {
    // PATH.pointcard.db, or PATH itself in a layout before 0.5.0.
    auto conn =
        db::sqlite::Connection::Open(pointcard::PointCardPathToRead(url->sqlite_path), db::sqlite::OpenMode::kReadOnly);
    if (!conn.ok()) {
      log::Error("{}", conn.status().ToString());
      return 2;
    }
    sqlite = std::move(conn).value();
    // Memory-mapped reads, as the server's readers do (db::sqlite::Database):
    // the check's passes over the table and its index lookups otherwise
    // read page by page through a 2 MB cache, one pread(2) each.
    if (Status s = sqlite->Exec("PRAGMA mmap_size=" + std::to_string(db::sqlite::DatabaseOptions().mmap_bytes));
        !s.ok()) {
      log::Error("{}", s.ToString());
      return 2;
    }
    check = [&sqlite](const pointcard::CheckScope& s) { return pointcard::CheckInvariants(*sqlite, s); };
    pick = [&sqlite](int64_t skip, int64_t count) -> Result<CardRange> {
      std::string sql = kPickCards;  // SQLite's ?n for PostgreSQL's $n
      std::replace(sql.begin(), sql.end(), '$', '?');
      auto q = sqlite->Prepare(sql);
      if (!q.ok()) return q.status();
      auto row = q->Bind(1, skip).Bind(2, count).Step();
      if (!row.ok()) return row.status();
      if (!*row) return CardRange();
      return CardRange(std::pair{q->Int(0), q->Int(1)});
    };
    count_cards = [&sqlite, kCount]() -> Result<int64_t> { return db::sqlite::QueryInt(*sqlite, kCount); };
  }
  if (f.sample_cards == 0 && span.count() == 0) {
    auto report = check(pointcard::CheckScope{});
    if (!report.ok()) {
      log::Error("cannot check: {}", report.status().ToString());
      return 2;
    }
    return PrintOne(*report);
  }
  auto bounds = count_cards();
  if (!bounds.ok()) {
    log::Error("cannot check: {}", bounds.status().ToString());
    return 2;
  }
  // A sample of every card is the whole check (which reads faster).
  int64_t cards = *bounds, sample = f.sample_cards >= cards ? 0 : f.sample_cards;
  return Repeat(check, pick, sample, cards, span, every);
}

}  // namespace hotrow::cmd
