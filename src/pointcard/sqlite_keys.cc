// Store keys on SQLite (M_STORE_KEY): made, listed and revoked on the
// writer; a write's key is checked on the writer, inside its transaction
// (sqlite_store.h).
#include "base/crypto.h"
#include "pointcard/sqlite_store.h"

namespace hotrow::pointcard {

namespace sqlite = db::sqlite;

namespace {

#define HOTROW_KEY_COLUMNS "SELECT KEY_ID, STORE_ID, CREATED_TIME, LAST_USED_TIME, REVOKED_TIME FROM M_STORE_KEY "
constexpr const char* kSelectKey = HOTROW_KEY_COLUMNS "WHERE KEY_ID = ?1 AND STORE_ID = ?2";
constexpr const char* kSelectStoreKeys = HOTROW_KEY_COLUMNS "WHERE STORE_ID = ?1 ORDER BY CREATED_TIME, KEY_ID";
#undef HOTROW_KEY_COLUMNS

StoreKey ReadKey(const sqlite::Query& q) {
  StoreKey k{.key_id = std::string(q.Text(0)), .store_id = q.Int(1), .created_us = q.Int(2)};
  if (!q.IsNull(3)) k.last_used_us = q.Int(3);
  if (!q.IsNull(4)) k.revoked_us = q.Int(4);
  return k;
}

Result<StoreKey> KeyById(sqlite::Connection& c, int64_t store_id, const std::string& key_id) {
  auto q = c.Prepare(kSelectKey);
  if (!q.ok()) return q.status();
  auto row = q->Bind(1, key_id).Bind(2, store_id).Step();
  if (!row.ok()) return row.status();
  if (!*row) return NoSuchKey(key_id, store_id);
  StoreKey k = ReadKey(*q);
  if (Status s = q->Run(); !s.ok()) return s;
  return k;
}

}  // namespace

Result<int64_t> CheckStoreKey(sqlite::Connection& c, const KeyUse& key, int64_t now_us) {
  auto q = c.Prepare("SELECT STORE_ID, SECRET_SHA256, REVOKED_TIME, LAST_USED_TIME FROM M_STORE_KEY WHERE KEY_ID = ?1");
  if (!q.ok()) return q.status();
  auto row = q->Bind(1, key.key_id).Step();
  if (!row.ok()) return row.status();
  if (!*row || !q->IsNull(2) || !ConstantTimeEquals(q->Text(1), key.secret_sha256)) return BadStoreKey();
  const int64_t store_id = q->Int(0);
  const bool stale = q->IsNull(3) || q->Int(3) <= now_us - kKeyUseResolutionUs;
  if (Status s = q->Run(); !s.ok()) return s;
  if (stale) {
    auto used = c.Prepare("UPDATE M_STORE_KEY SET LAST_USED_TIME = ?1 WHERE KEY_ID = ?2");
    if (!used.ok()) return used.status();
    if (Status s = used->Bind(1, now_us).Bind(2, key.key_id).Run(); !s.ok()) return s;
  }
  return store_id;
}

void SqlitePointCardStore::CreateStoreKey(StoreKey key, std::string secret_sha256,
                                          std::function<void(Result<StoreKey>)> done) {
  sqlite::SubmitCall<StoreKey>(
      db_.writer(),
      [this, key = std::move(key),
       digest = std::move(secret_sha256)](sqlite::Connection& c) mutable -> Result<StoreKey> {
        if (Status s = StoreExists(c, key.store_id); !s.ok()) return s;
        auto q = c.Prepare("SELECT COUNT(*) FROM M_STORE_KEY WHERE STORE_ID = ?1 AND REVOKED_TIME IS NULL");
        if (!q.ok()) return q.status();
        auto row = q->Bind(1, key.store_id).Step();
        if (!row.ok()) return row.status();
        const int64_t live = q->Int(0);
        if (Status s = q->Run(); !s.ok()) return s;
        if (live >= kStoreKeysMax) return TooManyKeys(key.store_id);
        key.created_us = NextTime();  // the writer's clock: before every row the key writes
        auto insert = c.Prepare(
            "INSERT INTO M_STORE_KEY (KEY_ID, STORE_ID, SECRET_SHA256, CREATED_TIME, LAST_USED_TIME, REVOKED_TIME) "
            "VALUES (?1, ?2, ?3, ?4, NULL, NULL)");
        if (!insert.ok()) return insert.status();
        if (Status s = insert->Bind(1, key.key_id).Bind(2, key.store_id).Bind(3, digest).Bind(4, key.created_us).Run();
            !s.ok())
          return s;
        return key;
      },
      std::move(done));
}

void SqlitePointCardStore::ListStoreKeys(int64_t store_id, std::function<void(Result<std::vector<StoreKey>>)> done) {
  auto conn = db_.Reader();
  if (!conn.ok()) return done(conn.status());
  // Stores are never deleted: the store found, its keys read next.
  sqlite::Connection& c = **conn;
  if (Status s = StoreExists(c, store_id); !s.ok()) return done(s);
  auto q = c.Prepare(kSelectStoreKeys);
  if (!q.ok()) return done(q.status());
  q->Bind(1, store_id);
  std::vector<StoreKey> out;
  while (true) {
    auto row = q->Step();
    if (!row.ok()) return done(row.status());
    if (!*row) break;
    out.push_back(ReadKey(*q));
  }
  done(std::move(out));
}

void SqlitePointCardStore::RevokeStoreKey(int64_t store_id, std::string key_id,
                                          std::function<void(Result<StoreKey>)> done) {
  sqlite::SubmitCall<StoreKey>(
      db_.writer(),
      [this, store_id, key_id = std::move(key_id)](sqlite::Connection& c) -> Result<StoreKey> {
        // The writer's clock, as a payment's: stamped after every payment
        // the writer ran before it.
        auto q = c.Prepare(
            "UPDATE M_STORE_KEY SET REVOKED_TIME = ?1 WHERE KEY_ID = ?2 AND STORE_ID = ?3 AND REVOKED_TIME IS NULL");
        if (!q.ok()) return q.status();
        if (Status s = q->Bind(1, NextTime()).Bind(2, key_id).Bind(3, store_id).Run(); !s.ok()) return s;
        return KeyById(c, store_id, key_id);
      },
      std::move(done));
}

}  // namespace hotrow::pointcard
