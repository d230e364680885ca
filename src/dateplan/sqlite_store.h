// The date-plan store on the embedded SQLite database: every write goes
// through the group-commit writer (db/sqlite_writer.h); likes to one plan within a
// batch coalesce into one UPDATE.
#pragma once

#include "dateplan/store.h"
#include "db/sqlite_database.h"

namespace hotrow::dateplan {

class SqliteDatePlanStore final : public DatePlanStore {
 public:
  // Creates the schema if needed. Must run before db.writer().Start().
  static Result<std::unique_ptr<SqliteDatePlanStore>> Open(db::sqlite::Database& db);

  Status LoadAll(const std::function<void(Plan&&)>& sink) override;
  void Insert(PlanFields fields, std::string edit_token_hash, std::function<void(Result<Plan>)> done) override;
  void Update(int64_t id, PlanFields fields, std::function<void(Result<Plan>)> done) override;
  void Delete(int64_t id, std::function<void(Status)> done) override;
  void Like(int64_t id, StoreCallback<Result<LikeOutcome>> done) override;

 private:
  explicit SqliteDatePlanStore(db::sqlite::Database& db) : db_(db) {}
  db::sqlite::Database& db_;
};

// Creates the date-plan tables on `conn` if they do not exist.
Status CreateDatePlanSchema(db::sqlite::Connection& conn);

}  // namespace hotrow::dateplan
