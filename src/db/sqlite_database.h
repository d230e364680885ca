// One SQLite database file as a server (or the seeder) uses it: an exclusive
// process lock, the group-commit writer with the write connection, and
// read-only connections for loading read models at start-up.
//
// The lock is flock(2) on PATH.lock, held for the object's lifetime and
// released by the kernel if the process dies, so "is a server running on
// this file?" has a reliable answer. A second server or `hotrow seed` on the
// same file is refused with a message naming the holder's pid.
#pragma once

#include <memory>
#include <string>

#include "db/sqlite.h"
#include "db/writer.h"
#include "ops/status.h"

namespace hotrow::db {

class SqliteDatabase {
 public:
  // Creates the parent directory if needed, takes the lock, opens the file.
  static Result<std::unique_ptr<SqliteDatabase>> Open(const std::string& path, WriterOptions options = {});
  ~SqliteDatabase();

  const std::string& path() const { return path_; }
  Writer& writer() { return *writer_; }
  Result<std::unique_ptr<sqlite::Connection>> OpenReader() const;

 private:
  SqliteDatabase() = default;
  std::string path_;
  int lock_fd_ = -1;
  std::unique_ptr<Writer> writer_;
};

}  // namespace hotrow::db
