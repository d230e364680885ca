// The point card's own SQLite file. `--db sqlite:PATH` names the main file
// (date plans, leaderboard); the point card lives beside it in
// PATH.pointcard.db, with its own writer, readers, checkpointer and schema
// record (PRAGMA user_version), under the main file's lock. Its writes
// never queue behind a date-plan like, and a point grant never holds up a
// like (docs/pointcard.md#two-files).
//
// Releases up to 0.4.0 kept the point card's tables in the main file.
// Opening such a file moves them (MovePointCardTables), once:
//   1. copy every point-card table into PATH.pointcard.db.tmp, with a
//      fingerprint of what it copied (P_MOVED_FROM: cards, balances, rows,
//      the last row's time), and make it durable (a crash here leaves only
//      the .tmp, removed on the next try);
//   2. rename it to PATH.pointcard.db and fsync the directory: from here on
//      that file is the point card;
//   3. drop the tables from the main file and record, in its schema_compat,
//      that binaries before 0.5.0 (which would find no point card in it and
//      serve an empty one) may no longer open it -- one transaction. A crash
//      between 2 and 3 leaves copies in the main file that nothing reads;
//      the next start finds their fingerprint equal to the one recorded and
//      drops them. A point card in the main file with another fingerprint
//      (an old single-file backup restored over PATH alone) is never
//      dropped: start-up refuses, naming both files.
// The main file's migration step 2 is that same contract step, for files
// that never held a point card.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "db/sqlite_database.h"

namespace hotrow::pointcard {

// PATH.pointcard.db.
std::string PointCardPath(std::string_view main_path);

// The file `hotrow check` and `hotrow backup` read for `--db sqlite:PATH`:
// PATH.pointcard.db, or PATH itself when that does not exist (a database
// no 0.5.0 or later has opened, or the simulator's point-card-only files).
std::string PointCardPathToRead(const std::string& main_path);

// Moves the point-card tables out of the main file, if it holds them (see
// above). `main` is the main file's write connection, outside a
// transaction, with the main file's lock held.
Status MovePointCardTables(db::sqlite::Connection& main, const std::string& main_path);

// Moves the tables if needed, then opens PATH.pointcard.db (creating it)
// under `main`'s lock, its writer named "pointcard" in the metrics.
Result<std::unique_ptr<db::sqlite::Database>> OpenPointCardDatabase(db::sqlite::Database& main,
                                                                    db::sqlite::DatabaseOptions options = {});

}  // namespace hotrow::pointcard
