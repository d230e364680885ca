// Schema migrations, the rules every backend follows (SQLite user_version,
// PostgreSQL schema_migrations, the Redis key hotrow:schema; each backend's
// record is described at db::sqlite::Migrate, db::pg::Migrate and
// db::redis::Migrate).
//
// Tables are created as the first release (v0.1.0) made them, and the steps
// bring them forward, so a new database and one an older release wrote take
// the same steps.
//
// Each store has a numbered list of steps, applied in order at serve and
// seed start, each in its own transaction with its record; a step is never
// renumbered or removed, only appended. Steps are expand-then-contract, so
// that during a rolling restart the binary before keeps working against a
// database the new one migrated:
//   - an expand step (a new column with a default, a new table, a new
//     function beside the old one) leaves the database usable by binaries
//     that know fewer steps;
//   - a contract step (dropping or changing what an older binary uses) is
//     marked `contract`, and ships only once no binary that needs the old
//     shape runs. Applying it records, in the database, the oldest schema a
//     binary must know (this step's number) and this binary's version.
// A binary is refused at start-up, with an error naming both releases ("the
// dateplans schema needs hotrow 0.3.0 or newer (schema 2); this is hotrow
// 0.2.0 (schema 1)"), only when the database's oldest allowed schema is past
// the steps it knows; otherwise a binary that knows fewer steps than the
// database holds uses it as it is.
//
// A step may be interrupted (kill -9, a failed statement) and run again:
// on SQLite and PostgreSQL the step and its record commit together, so it
// is either all there or not at all. A Redis step is one Lua script, which
// Redis logs whole but does not roll back when it fails midway: write every
// Redis step so that running it again over a half-done run is correct.
//
// Not yet per store on SQLite: the file's user_version and its one
// schema_compat row are the date plans' (the only SQLite steps so far),
// though the leaderboard and point-card tables share the file. The first
// SQLite step for another store must first move the record to one row per
// store, as PostgreSQL's schema_migrations(component, version) has.
//
// Change notifications follow the same rule as the schema: a release may
// add a kind that older instances ignore (they log and drop what they
// cannot read), so one that carries a change older instances must see also
// sends the kinds they know until no older instance runs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace hotrow::db {

struct MigrationStep {
  std::string_view sql;
  bool contract = false;
};

// What the database says about who may use it.
struct SchemaCompat {
  int64_t oldest_schema = 0;  // 0: every binary
  std::string oldest_binary;  // the release that applied the contract step
};

// unavailable, naming the store, both releases and both schema numbers.
inline Status TooOldForDatabase(std::string_view store, const SchemaCompat& compat, int64_t known_steps,
                                std::string_view version) {
  return Status::Unavailable("the " + std::string(store) + " schema needs hotrow " + compat.oldest_binary +
                             " or newer (schema " + std::to_string(compat.oldest_schema) + "); this is hotrow " +
                             std::string(version) + " (schema " + std::to_string(known_steps) +
                             "): run the newer release");
}

}  // namespace hotrow::db
