#include "dateplan/sqlite_store.h"

namespace hotrow::dateplan {

namespace sqlite = db::sqlite;

Status CreateDatePlanSchema(sqlite::Connection& conn) {
  // The table keeps the reference's name and "like" column, so its SQL
  // (UPDATE datePlans SET "like" = "like" + 1 ...) reads the same here.
  // AUTOINCREMENT: a deleted plan's id is never handed out again, so an old
  // link or edit token can never reach a different plan.
  //
  // The table is created as v0.1.0 made it; migrations bring it forward, so
  // a new database and one a release made take the same steps.
  if (Status s = conn.Exec(R"sql(
    CREATE TABLE IF NOT EXISTS datePlans (
      id              INTEGER PRIMARY KEY AUTOINCREMENT,
      title           TEXT    NOT NULL,
      content         TEXT    NOT NULL,
      category        TEXT    NOT NULL,
      "like"          INTEGER NOT NULL DEFAULT 0 CHECK ("like" >= 0),
      edit_token_hash BLOB             -- SHA-256 of the edit token; NULL: admin only
    );
  )sql");
      !s.ok())
    return s;
  return sqlite::Migrate(conn,
                         {
                             // 1 (v0.2.0): a version per plan, bumped by every edit (Plan::version).
                             {.sql = R"(ALTER TABLE datePlans ADD COLUMN version INTEGER NOT NULL DEFAULT 1)"},
                             // 2 (v0.5.0), contract: the point card lives in its own file
                             // (pointcard/sqlite_file.h moves its tables there and drops
                             // them here). A release before would find no point card in
                             // this file and serve an empty one: it is refused.
                             {.sql = "SELECT 1", .contract = true},
                             // 3 (v0.7.0), contract: from here on the other components
                             // of this file (the leaderboard) record their steps per
                             // component (sqlite::MigrateComponent), which a release
                             // before would not read: it is refused.
                             {.sql = "SELECT 1", .contract = true},
                         },
                         "date plans and leaderboard");
}

Result<std::unique_ptr<SqliteDatePlanStore>> SqliteDatePlanStore::Open(db::sqlite::Database& db) {
  if (Status s = CreateDatePlanSchema(db.writer().connection()); !s.ok()) return s;
  return std::unique_ptr<SqliteDatePlanStore>(new SqliteDatePlanStore(db));
}

Status SqliteDatePlanStore::LoadAll(const std::function<void(Plan&&)>& sink) {
  auto conn = db_.OpenReader();
  if (!conn.ok()) return conn.status();
  auto q = (*conn)->Prepare(
      R"(SELECT id, title, content, category, "like", edit_token_hash, version FROM datePlans ORDER BY id)");
  if (!q.ok()) return q.status();
  while (true) {
    auto row = q->Step();
    if (!row.ok()) return row.status();
    if (!*row) return Status::Ok();
    sink(Plan{.id = q->Int(0),
              .title = std::string(q->Text(1)),
              .content = std::string(q->Text(2)),
              .category = std::string(q->Text(3)),
              .like = q->Int(4),
              .edit_token_hash = std::string(q->Blob(5)),
              .version = q->Int(6)});
  }
}

void SqliteDatePlanStore::Insert(PlanFields fields, std::string edit_token_hash,
                                 std::function<void(Result<Plan>)> done) {
  auto apply = [f = std::move(fields), hash = std::move(edit_token_hash)](sqlite::Connection& c) -> Result<Plan> {
    auto q = c.Prepare(R"(INSERT INTO datePlans (title, content, category, "like", edit_token_hash)
                          VALUES (?1, ?2, ?3, 0, ?4))");
    if (!q.ok()) return q.status();
    q->Bind(1, f.title).Bind(2, f.content).Bind(3, f.category);
    if (hash.empty())
      q->BindNull(4);
    else
      q->BindBlob(4, hash);
    if (Status s = q->Run(); !s.ok()) return s;
    return Plan{.id = c.LastInsertRowid(),
                .title = f.title,
                .content = f.content,
                .category = f.category,
                .like = 0,
                .edit_token_hash = hash};
  };
  db::sqlite::SubmitCall<Plan>(db_.writer(), std::move(apply), std::move(done));
}

void SqliteDatePlanStore::Update(int64_t id, PlanFields fields, std::function<void(Result<Plan>)> done) {
  auto apply = [id, f = std::move(fields)](sqlite::Connection& c) -> Result<Plan> {
    auto q = c.Prepare(R"(UPDATE datePlans SET title = ?1, content = ?2, category = ?3, version = version + 1
                          WHERE id = ?4 RETURNING "like", edit_token_hash, version)");
    if (!q.ok()) return q.status();
    q->Bind(1, f.title).Bind(2, f.content).Bind(3, f.category).Bind(4, id);
    auto row = q->Step();
    if (!row.ok()) return row.status();
    if (!*row) return NoSuchPlan(id);
    Plan p{id, f.title, f.content, f.category, q->Int(0), std::string(q->Blob(1)), q->Int(2)};
    if (Status s = q->Run(); !s.ok()) return s;
    return p;
  };
  db::sqlite::SubmitCall<Plan>(db_.writer(), std::move(apply), std::move(done));
}

void SqliteDatePlanStore::Delete(int64_t id, std::function<void(Status)> done) {
  auto apply = [id](sqlite::Connection& c) -> Result<db::sqlite::Unit> {
    auto q = c.Prepare("DELETE FROM datePlans WHERE id = ?1");
    if (!q.ok()) return q.status();
    if (Status s = q->Bind(1, id).Run(); !s.ok()) return s;
    if (c.Changes() == 0) return NoSuchPlan(id);
    return db::sqlite::Unit{};
  };
  db::sqlite::SubmitCall<db::sqlite::Unit>(
      db_.writer(), std::move(apply),
      [done = std::move(done)](const Result<db::sqlite::Unit>& r) { done(r.status()); });
}

namespace {

// Likes on one plan coalesce: a batch holding k of them runs one
//   UPDATE datePlans SET "like" = "like" + k WHERE id = ? RETURNING "like"
// and hands the k requests the consecutive counts N-k+1 .. N in submission
// order.
//
// A like is one small op, allocated and freed per like: a bounded pool of
// them was measured and bought nothing (docs/design.md#allocation-free-requests).
class LikeOp final : public db::sqlite::WriteOp {
 public:
  LikeOp(int64_t id, StoreCallback<Result<LikeOutcome>> done) : id_(id), done_(std::move(done)) {}
  static db::sqlite::OpPtr Make(int64_t id, StoreCallback<Result<LikeOutcome>> done) {
    return db::sqlite::MakeOp<LikeOp>(id, std::move(done));
  }

  CoalesceKey coalesce_key() const override { return {&kKind, id_}; }

  Status Apply(sqlite::Connection& c, std::span<WriteOp* const> group) override {
    auto q = c.Prepare(R"(UPDATE datePlans SET "like" = "like" + ?1 WHERE id = ?2 RETURNING "like")");
    if (!q.ok()) return q.status();
    auto k = static_cast<int64_t>(group.size());
    q->Bind(1, k).Bind(2, id_);
    auto row = q->Step();
    if (!row.ok()) return row.status();
    if (!*row) return NoSuchPlan(id_);
    int64_t total = q->Int(0);
    if (Status s = q->Run(); !s.ok()) return s;
    for (size_t i = 0; i < group.size(); ++i) {
      auto* op = static_cast<LikeOp*>(group[i]);
      op->outcome_ = {total - k + 1 + static_cast<int64_t>(i), total};
    }
    return Status::Ok();
  }

  void Finish(const Status& status) override {
    if (status.ok())
      done_(outcome_);
    else
      done_(status);
  }

 private:
  static constexpr char kKind = 0;
  int64_t id_ = 0;
  StoreCallback<Result<LikeOutcome>> done_;
  LikeOutcome outcome_{0, 0};
};

}  // namespace

void SqliteDatePlanStore::Like(int64_t id, StoreCallback<Result<LikeOutcome>> done) {
  db_.writer().Submit(LikeOp::Make(id, std::move(done)));
}

}  // namespace hotrow::dateplan
