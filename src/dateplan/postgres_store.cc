#include "dateplan/postgres_store.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <numeric>
#include <random>

#include "base/text.h"
#include "dateplan/seed.h"
#include "ops/failpoint.h"
#include "ops/log.h"

namespace hotrow::dateplan {

namespace pg = db::pg;

namespace {

constexpr size_t kLikeBatchMax = 2048;

std::string Hex(const std::string& bytes) { return "\\x" + HexEncode(bytes); }

pg::Param TokenParam(const std::string& hash) { return hash.empty() ? pg::Param() : pg::Param(Hex(hash)); }

// A plan row's columns, the one place they are listed, in PlanFrom's order.
#define HOTROW_PLAN_COLUMNS R"(id, title, content, category, "like", edit_token_hash, version)"

Plan PlanFrom(const pg::Rows& r, int row) {
  return Plan{.id = r.Int(row, 0),
              .title = std::string(r.Text(row, 1)),
              .content = std::string(r.Text(row, 2)),
              .category = std::string(r.Text(row, 3)),
              .like = r.Int(row, 4),
              .edit_token_hash = r.IsNull(row, 5) ? std::string() : r.Bytes(row, 5),
              .version = r.Int(row, 6)};
}

// The statements of the request path, prepared once per connection. Every
// change NOTIFYs kPlanChannel in its own transaction (Follow parses them).
constexpr pg::NamedSql kSelectAllPlans{"dateplan_select_all",
                                       "SELECT " HOTROW_PLAN_COLUMNS " FROM datePlans ORDER BY id"};
constexpr pg::NamedSql kSelectPlan{"dateplan_select", "SELECT " HOTROW_PLAN_COLUMNS " FROM datePlans WHERE id = $1"};
constexpr pg::NamedSql kInsertPlan{"dateplan_insert", R"(
  WITH ins AS (INSERT INTO datePlans (title, content, category, "like", edit_token_hash)
               VALUES ($1, $2, $3, 0, $4) RETURNING id)
  SELECT id, pg_notify('hotrow_plans', 'put ' || id) FROM ins)"};
constexpr pg::NamedSql kUpdatePlan{"dateplan_update", R"(
  WITH up AS (UPDATE datePlans SET title = $1, content = $2, category = $3, version = version + 1
              WHERE id = $4 RETURNING id, "like", edit_token_hash, version)
  SELECT "like", edit_token_hash, version, pg_notify('hotrow_plans', 'put ' || id) FROM up)"};
constexpr pg::NamedSql kDeletePlan{"dateplan_delete", R"(
  WITH d AS (DELETE FROM datePlans WHERE id = $1 RETURNING id)
  SELECT pg_notify('hotrow_plans', 'del ' || id) FROM d)"};
constexpr pg::NamedSql kAddLikes{"dateplan_add_likes", R"(
  WITH u AS (UPDATE datePlans SET "like" = "like" + $2 WHERE id = $1 RETURNING id, "like")
  SELECT "like", pg_notify('hotrow_plans', 'like ' || id || ' ' || "like") FROM u)"};

constexpr int64_t kSchemaLock = 72720001;  // advisory lock key (pg::WithSchemaLock)

// Created as v0.1.0 made it, then migrated (pg::Migrate), so a new
// database and one a release made take the same steps.
Status CreateSchema(pg::Connection& conn) {
  if (Status s = conn.Exec(R"sql(
    CREATE TABLE IF NOT EXISTS datePlans (
      id              BIGSERIAL PRIMARY KEY,
      title           TEXT   NOT NULL,
      content         TEXT   NOT NULL,
      category        TEXT   NOT NULL,
      "like"          BIGINT NOT NULL DEFAULT 0 CHECK ("like" >= 0),
      edit_token_hash BYTEA
    );
  )sql");
      !s.ok())
    return s;
  return pg::Migrate(conn, "dateplans",
                     {
                         // 1 (v0.2.0): a version per plan, bumped by every edit (Plan::version).
                         {.sql = R"(ALTER TABLE datePlans ADD COLUMN version BIGINT NOT NULL DEFAULT 1)"},
                     });
}

}  // namespace

Status CreatePostgresDatePlanSchema(pg::Connection& conn) {
  return pg::WithSchemaLock(conn, kSchemaLock, CreateSchema);
}

Result<std::unique_ptr<PostgresDatePlanStore>> PostgresDatePlanStore::Open(pg::Pool& pool, size_t like_queue_max) {
  if (Status s = pg::CreateSchemaLocked(pool, kSchemaLock, CreateSchema); !s.ok()) return s;
  std::unique_ptr<PostgresDatePlanStore> store(new PostgresDatePlanStore(pool, like_queue_max));
  store->liker_ = std::thread([p = store.get()] { p->LikeLoop(); });
  return store;
}

PostgresDatePlanStore::~PostgresDatePlanStore() { Stop(); }

void PostgresDatePlanStore::Stop() {
  std::lock_guard lock(stop_mutex_);
  likes_.Stop();  // the loop commits what is queued, then returns
  if (liker_.joinable()) liker_.join();
}

Status PostgresDatePlanStore::LoadAll(const std::function<void(Plan&&)>& sink) {
  auto rows = pool_.Run<pg::Rows>([](pg::Connection& c) { return c.Query(kSelectAllPlans); },
                                  /*unbounded=*/true);
  if (!rows.ok()) return rows.status();
  for (int i = 0; i < rows->size(); ++i) sink(PlanFrom(*rows, i));
  return Status::Ok();
}

Result<std::optional<Plan>> PostgresDatePlanStore::Fetch(int64_t id) {
  auto rows = pool_.Run<pg::Rows>([id](pg::Connection& c) { return c.Query(kSelectPlan, {std::to_string(id)}); });
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return std::optional<Plan>();
  return std::optional<Plan>(PlanFrom(*rows, 0));
}

// The notifications the statements below send on kPlanChannel, in the
// writing transaction:
//   "put <id>"           a plan was created or edited: re-read the row
//   "del <id>"           a plan was deleted
//   "like <id> <count>"  a batch of likes committed with this count
Result<std::optional<PlanChange>> PostgresDatePlanStore::Follow(std::string_view payload) {
  auto bad = [&]() -> std::optional<PlanChange> {
    log::Debug("ignoring an unreadable date-plan notification: {}", payload);
    return std::nullopt;
  };
  auto number = [](std::string_view& rest, int64_t& out) {
    while (rest.starts_with(' ')) rest.remove_prefix(1);
    auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), out);
    if (ec != std::errc() || end == rest.data()) return false;
    rest.remove_prefix(static_cast<size_t>(end - rest.data()));
    return true;
  };
  size_t space = payload.find(' ');
  if (space == std::string_view::npos) return bad();
  std::string_view verb = payload.substr(0, space), rest = payload.substr(space);
  PlanChange change;
  if (!number(rest, change.id)) return bad();
  if (verb == "like") {
    if (!number(rest, change.like)) return bad();
    change.kind = PlanChange::Kind::kLike;
    return std::make_optional(std::move(change));
  }
  if (verb == "del") {
    change.kind = PlanChange::Kind::kErase;
    return std::make_optional(std::move(change));
  }
  if (verb != "put") return bad();
  static std::atomic<int64_t> fetches{0};
  if (failpoint::Hit("follow.fetch", ++fetches)) return Status::Unavailable("failpoint follow.fetch");
  auto plan = Fetch(change.id);  // the row as it is now
  if (!plan.ok()) return plan.status();
  change.kind = *plan ? PlanChange::Kind::kPut : PlanChange::Kind::kErase;
  change.plan = std::move(*plan);
  return std::make_optional(std::move(change));
}

void PostgresDatePlanStore::Insert(PlanFields f, std::string hash, std::function<void(Result<Plan>)> done) {
  pool_.Submit([f = std::move(f), hash = std::move(hash), done = std::move(done)](Result<pg::Connection*> c) {
    if (!c.ok()) return done(c.status());
    auto rows = (*c)->Query(kInsertPlan, {f.title, f.content, f.category, TokenParam(hash)});
    if (!rows.ok()) return done(rows.status());
    done(Plan{.id = rows->Int(0, 0),
              .title = f.title,
              .content = f.content,
              .category = f.category,
              .like = 0,
              .edit_token_hash = hash});
  });
}

void PostgresDatePlanStore::Update(int64_t id, PlanFields f, std::function<void(Result<Plan>)> done) {
  pool_.Submit([id, f = std::move(f), done = std::move(done)](Result<pg::Connection*> c) {
    if (!c.ok()) return done(c.status());
    auto rows = (*c)->Query(kUpdatePlan, {f.title, f.content, f.category, std::to_string(id)});
    if (!rows.ok()) return done(rows.status());
    if (rows->empty()) return done(NoSuchPlan(id));
    done(Plan{.id = id,
              .title = f.title,
              .content = f.content,
              .category = f.category,
              .like = rows->Int(0, 0),
              .edit_token_hash = rows->IsNull(0, 1) ? "" : rows->Bytes(0, 1),
              .version = rows->Int(0, 2)});
  });
}

void PostgresDatePlanStore::Delete(int64_t id, std::function<void(Status)> done) {
  pool_.Submit([id, done = std::move(done)](Result<pg::Connection*> c) {
    if (!c.ok()) return done(c.status());
    auto rows = (*c)->Query(kDeletePlan, {std::to_string(id)});
    if (!rows.ok()) return done(rows.status());
    done(rows->empty() ? NoSuchPlan(id) : Status::Ok());
  });
}

void PostgresDatePlanStore::Like(int64_t id, StoreCallback<Result<LikeOutcome>> done) {
  PendingLike like{id, std::move(done)};
  if (Status s = likes_.Push(like); !s.ok()) like.done(std::move(s));
}

// One batch at a time, like the SQLite writer: while it runs, the next
// batch gathers, so the round trip and the commit are shared.
void PostgresDatePlanStore::LikeLoop() {
  std::vector<PendingLike> batch;
  // Batch indices ordered by plan, arrival order within a plan, and where
  // each plan's run starts; both keep their capacity from batch to batch.
  std::vector<size_t> order, starts;
  while (likes_.PopBatch(batch, kLikeBatchMax)) {
    order.resize(batch.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return std::pair(batch[a].id, a) < std::pair(batch[b].id, b); });
    starts.clear();
    for (size_t i = 0; i < order.size(); ++i)
      if (i == 0 || batch[order[i]].id != batch[order[i - 1]].id) starts.push_back(i);
    starts.push_back(order.size());
    const size_t plans = starts.size() - 1;

    auto results = pool_.Run<std::vector<pg::Rows>>([&](pg::Connection& c) {
      std::vector<pg::Connection::Statement> statements;
      for (size_t p = 0; p < plans; ++p)
        statements.emplace_back(kAddLikes, std::vector<pg::Param>{std::to_string(batch[order[starts[p]]].id),
                                                                  std::to_string(starts[p + 1] - starts[p])});
      return c.Pipeline(statements);
    });
    for (size_t p = 0; p < plans; ++p) {
      const size_t first = starts[p];
      const auto k = static_cast<int64_t>(starts[p + 1] - first);
      for (int64_t j = 0; j < k; ++j) {
        PendingLike& like = batch[order[first + static_cast<size_t>(j)]];
        if (!results.ok()) {
          like.done(results.status());
        } else if ((*results)[p].empty()) {
          like.done(NoSuchPlan(like.id));
        } else {
          // A plan's likes get the counts leading up to its new total, in
          // the order they arrived.
          int64_t total = (*results)[p].Int(0, 0);
          like.done(LikeOutcome{total - k + 1 + j, total});
        }
      }
    }
    batch.clear();
  }
}

Status SeedPostgresPlans(pg::Connection& conn, int64_t count, uint64_t seed) {
  if (Status s = CreatePostgresDatePlanSchema(conn); !s.ok()) return s;
  auto existing = conn.Query("SELECT COUNT(*) FROM datePlans");
  if (!existing.ok()) return existing.status();
  if (existing->Int(0, 0) > 0)
    return Status::Conflict("the database already holds " + std::to_string(existing->Int(0, 0)) +
                            " date plan(s); seed a fresh database or pass --replace");
  std::mt19937_64 rng(seed);
  std::string data;
  for (int64_t id = 1; id <= count; ++id) {
    PlanFields f = GeneratePlan(rng);
    data += std::to_string(id) + "\t";
    pg::AppendCopyText(data, f.title);
    data += "\t";
    pg::AppendCopyText(data, f.content);
    data += "\t";
    pg::AppendCopyText(data, f.category);
    data += "\t0\n";
  }
  if (Status s = conn.CopyIn(R"(COPY datePlans (id, title, content, category, "like") FROM STDIN)", data); !s.ok())
    return s;
  auto bumped = conn.Query("SELECT setval(pg_get_serial_sequence('dateplans', 'id'), $1)", {std::to_string(count)});
  return bumped.status();
}

}  // namespace hotrow::dateplan
