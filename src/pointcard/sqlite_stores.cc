// Stores on SQLite: made by POST /api/v1/stores on the writer, read from
// the database (sqlite_store.h).
#include "pointcard/sqlite_store.h"

namespace hotrow::pointcard {

namespace sqlite = db::sqlite;

namespace {

// Whole literals, as the card's reads (no SQL built per read).
#define HOTROW_STORE_COLUMNS \
  "SELECT STORE_ID, STORE_ZIPCODE, STORE_ADDRESS, STORE_NAME, REGION_ID, S_LATITUDE, S_LONGITUDE FROM M_STORE "
constexpr const char* kSelectStore = HOTROW_STORE_COLUMNS "WHERE STORE_ID = ?1";
constexpr const char* kSelectRegionStores = HOTROW_STORE_COLUMNS "WHERE REGION_ID = ?1 ORDER BY STORE_ID";
#undef HOTROW_STORE_COLUMNS

StoreInfo ReadStore(const sqlite::Query& q) {
  return {q.Int(0),   std::string(q.Text(1)), std::string(q.Text(2)), std::string(q.Text(3)), q.Int(4), q.Double(5),
          q.Double(6)};
}

Result<StoreInfo> StoreById(sqlite::Connection& c, int64_t store_id) {
  auto q = c.Prepare(kSelectStore);
  if (!q.ok()) return q.status();
  auto row = q->Bind(1, store_id).Step();
  if (!row.ok()) return row.status();
  if (!*row) return NoSuchStore(store_id);
  StoreInfo s = ReadStore(*q);
  if (Status st = q->Run(); !st.ok()) return st;
  return s;
}

}  // namespace

Status StoreExists(sqlite::Connection& c, int64_t store_id) {
  auto q = c.Prepare("SELECT 1 FROM M_STORE WHERE STORE_ID = ?1");
  if (!q.ok()) return q.status();
  auto row = q->Bind(1, store_id).Step();
  if (!row.ok()) return row.status();
  if (!*row) return NoSuchStore(store_id);
  return q->Run();
}

void SqlitePointCardStore::GetStore(int64_t store_id, std::function<void(Result<StoreInfo>)> done) {
  auto conn = db_.Reader();
  if (!conn.ok()) return done(conn.status());
  done(StoreById(**conn, store_id));
}

void SqlitePointCardStore::ListStores(int64_t region_id, std::function<void(Result<std::vector<StoreInfo>>)> done) {
  auto conn = db_.Reader();
  if (!conn.ok()) return done(conn.status());
  auto q = (*conn)->Prepare(kSelectRegionStores);
  if (!q.ok()) return done(q.status());
  q->Bind(1, region_id);
  std::vector<StoreInfo> out;
  while (true) {
    auto row = q->Step();
    if (!row.ok()) return done(row.status());
    if (!*row) break;
    out.push_back(ReadStore(*q));
  }
  done(std::move(out));
}

void SqlitePointCardStore::CreateStore(NewStore store, std::string fingerprint,
                                       std::function<void(Result<std::pair<StoreInfo, bool>>)> done) {
  using Made = std::pair<StoreInfo, bool>;  // the store, replayed
  sqlite::SubmitCall<Made>(
      db_.writer(),
      [store = std::move(store), fp = std::move(fingerprint)](sqlite::Connection& c) -> Result<Made> {
        if (store.idempotency_key) {
          auto earlier = FindRequestKey(c, "stores", *store.idempotency_key, fp);
          if (!earlier.ok()) return earlier.status();
          if (*earlier) {
            auto made = StoreById(c, **earlier);
            if (!made.ok()) return made.status();
            return Made{std::move(made).value(), true};
          }
        }
        auto last = sqlite::QueryInt(c, "SELECT COALESCE(MAX(STORE_ID), 0) FROM M_STORE");
        if (!last.ok()) return last.status();
        if (*last >= kStoreIdMax) return NoStoreIdLeft();
        const int64_t id = *last + 1;
        auto insert = c.Prepare(
            "INSERT INTO M_STORE (STORE_ID, STORE_ZIPCODE, STORE_ADDRESS, STORE_NAME, REGION_ID, S_LATITUDE, "
            "S_LONGITUDE) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
        if (!insert.ok()) return insert.status();
        insert->Bind(1, id).Bind(2, store.zipcode).Bind(3, store.address).Bind(4, store.name).Bind(5, store.region_id);
        insert->BindDouble(6, store.latitude).BindDouble(7, store.longitude);
        if (Status s = insert->Run(); !s.ok()) return s;
        if (store.idempotency_key) {
          auto key = c.Prepare(
              "INSERT INTO P_REQUEST_KEY (ROUTE, KEY, FINGERPRINT, CREATED, RESULT_ID) VALUES ('stores', ?1, ?2, ?3, "
              "?4)");
          if (!key.ok()) return key.status();
          if (Status s = key->Bind(1, *store.idempotency_key).Bind(2, fp).Bind(3, NowUs()).Bind(4, id).Run(); !s.ok())
            return s;
        }
        return Made{
            StoreInfo{id, store.zipcode, store.address, store.name, store.region_id, store.latitude, store.longitude},
            false};
      },
      std::move(done));
}

}  // namespace hotrow::pointcard
