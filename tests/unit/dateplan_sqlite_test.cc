// Runs the date-plan store contract on the embedded SQLite backend.
#include "contract/dateplan_contract.h"
#include "dateplan/sqlite_store.h"
#include "db/sqlite_database.h"
#include "harness/or_throw.h"
#include "harness/server_process.h"

namespace hotrow::testing {
namespace {

class SqliteBackend : public DatePlanBackendInstance {
 public:
  SqliteBackend() { Open(); }
  dateplan::DatePlanStore& store() override { return *store_; }
  void Restart() override {
    store_.reset();
    db_.reset();
    Open();
  }

 private:
  void Open() {
    db_ = OrThrow(db::sqlite::Database::Open(dir_.File("plans.db")));
    store_ = OrThrow(dateplan::SqliteDatePlanStore::Open(*db_));
    db_->writer().Start();
  }
  TempDir dir_;
  std::unique_ptr<db::sqlite::Database> db_;
  std::unique_ptr<dateplan::SqliteDatePlanStore> store_;
};

INSTANTIATE_TEST_SUITE_P(Sqlite, DatePlanContract,
                         ::testing::Values(DatePlanBackend{"sqlite", [] { return std::make_unique<SqliteBackend>(); }}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace hotrow::testing
