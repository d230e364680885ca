// The --db URL: "sqlite:PATH" (the default, sqlite:data/hotrow.db) or
// "postgresql://user@host:port/dbname".
#pragma once

#include <string>

#include "ops/status.h"

namespace hotrow::db {

struct StoreUrl {
  enum class Kind { kSqlite, kPostgres };
  Kind kind = Kind::kSqlite;
  std::string sqlite_path;   // for kSqlite
  std::string postgres_url;  // for kPostgres: the whole URL, as libpq takes it
};

Result<StoreUrl> ParseStoreUrl(const std::string& url);

}  // namespace hotrow::db
