#include "db/store_url.h"

namespace hotrow::db {

Result<StoreUrl> ParseStoreUrl(const std::string& url) {
  StoreUrl out;
  if (url.rfind("sqlite:", 0) == 0) {
    out.kind = StoreUrl::Kind::kSqlite;
    out.sqlite_path = url.substr(7);
    if (out.sqlite_path.rfind("//", 0) == 0) out.sqlite_path = out.sqlite_path.substr(2);
    if (out.sqlite_path.empty()) return Status::InvalidField("db", "sqlite: needs a file path, as in sqlite:data/hotrow.db");
    return out;
  }
  if (url.rfind("postgresql://", 0) == 0 || url.rfind("postgres://", 0) == 0) {
    out.kind = StoreUrl::Kind::kPostgres;
    out.postgres_url = url;
    return out;
  }
  return Status::InvalidField("db", "--db must be sqlite:PATH or postgresql://user@host:port/dbname, not '" + url + "'");
}

}  // namespace hotrow::db
