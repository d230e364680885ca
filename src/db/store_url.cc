#include "db/store_url.h"

namespace hotrow::db {

Result<StoreUrl> ParseStoreUrl(const std::string& url) {
  StoreUrl out;
  if (url.rfind("sqlite:", 0) == 0) {
    out.kind = StoreUrl::Kind::kSqlite;
    out.sqlite_path = url.substr(7);
    if (out.sqlite_path.rfind("//", 0) == 0) out.sqlite_path = out.sqlite_path.substr(2);
    if (out.sqlite_path.empty())
      return Status::InvalidField("db", "sqlite: needs a file path, as in sqlite:data/hotrow.db");
    return out;
  }
  if (url.rfind("postgresql://", 0) == 0 || url.rfind("postgres://", 0) == 0) {
    out.kind = StoreUrl::Kind::kPostgres;
    out.postgres_url = url;
    return out;
  }
  return Status::InvalidField(
      "db", "--db must be sqlite:PATH or postgresql://user@host:port/dbname, not '" + RedactUrl(url) + "'");
}

std::string RedactUrl(std::string_view url) {
  std::string out(url);
  size_t scheme = out.find("://");
  if (scheme != std::string::npos) {
    size_t authority = scheme + 3;
    // The user-info ends at the last '@', not at the first '/', '?' or '#':
    // a password may hold those unescaped (":pa?ss@"), and must not show. An
    // '@' in a path or query after a port then redacts more than needed,
    // which only costs readability.
    size_t at = out.rfind('@');
    if (at != std::string::npos && at >= authority) {
      size_t colon = out.find(':', authority);
      if (colon != std::string::npos && colon < at)
        out.replace(colon + 1, at - colon - 1, "***");
      else if (out.compare(0, 5, "redis") == 0 && at > authority)
        out.replace(authority, at - authority, "***");  // redis://PASSWORD@host: the user-info is the password
    }
  }
  for (size_t p = out.find("password="); p != std::string::npos; p = out.find("password=", p + 1)) {
    size_t value = p + 9, end = out.find('&', value);
    out.replace(value, (end == std::string::npos ? out.size() : end) - value, "***");
  }
  return out;
}

}  // namespace hotrow::db
