// The --db URL: "sqlite:PATH" (the default, sqlite:data/hotrow.db) or
// "postgresql://user@host:port/dbname".
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace hotrow::db {

struct StoreUrl {
  enum class Kind { kSqlite, kPostgres };
  Kind kind = Kind::kSqlite;
  std::string sqlite_path;   // for kSqlite
  std::string postgres_url;  // for kPostgres: the whole URL, as libpq takes it
};

Result<StoreUrl> ParseStoreUrl(const std::string& url);

// `url` for a log line or a message: the user-info's password is replaced
// by "***" ("redis://:s3cret@h:6379" -> "redis://:***@h:6379",
// "postgresql://u:pw@h/db" -> "postgresql://u:***@h/db"), and a
// "password=" query parameter likewise. Every URL hotrow prints goes
// through it.
std::string RedactUrl(std::string_view url);

}  // namespace hotrow::db
