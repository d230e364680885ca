// Stores on PostgreSQL: made by POST /api/v1/stores behind one advisory
// lock (RunSerializable's, on "card" -1: no card has it), read from the
// database so a store another instance made is there at once
// (postgres_store.h).
#include "pointcard/postgres_store.h"

namespace hotrow::pointcard {

namespace pg = db::pg;

Status CreatePostgresStoreFunctions(pg::Connection& conn) {
  return conn.Exec(R"sql(
    -- Makes a store (v0.9.0) with the next id. outcome: 0 made, 1 replayed
    -- (an earlier request with this key made it), 2 key mismatch, 3 no id
    -- is left (M_STORE.STORE_ID is an int); then the store (NULL for 2, 3).
    CREATE OR REPLACE FUNCTION hotrow_store_create_v1(p_region int, p_name text, p_zip text, p_address text,
                                                      p_lat double precision, p_lon double precision, p_key text,
                                                      p_fp text)
    RETURNS TABLE (o_outcome smallint, s_id int, s_zip text, s_address text, s_name text, s_region int,
                   s_lat double precision, s_lon double precision)
    LANGUAGE plpgsql SET enable_seqscan = off AS $$
    DECLARE
      k P_REQUEST_KEY%ROWTYPE;
      id bigint;
      res smallint;
    BEGIN
      IF p_key IS NOT NULL THEN
        SELECT * INTO k FROM P_REQUEST_KEY r WHERE r.ROUTE = 'stores' AND r.KEY = p_key;
      END IF;
      IF p_key IS NOT NULL AND FOUND THEN
        res := CASE WHEN k.FINGERPRINT <> p_fp THEN 2 ELSE 1 END;
        id := CASE WHEN res = 1 THEN k.RESULT_ID END;
      ELSE
        SELECT COALESCE(MAX(m.STORE_ID)::bigint, 0) + 1 INTO id FROM M_STORE m;
        IF id > 2147483647 THEN
          res := 3;
          id := NULL;
        ELSE
          INSERT INTO M_STORE (STORE_ID, STORE_ZIPCODE, STORE_ADDRESS, STORE_NAME, REGION_ID, S_LATITUDE, S_LONGITUDE)
            VALUES (id, p_zip, p_address, p_name, p_region, p_lat, p_lon);
          IF p_key IS NOT NULL THEN
            INSERT INTO P_REQUEST_KEY (ROUTE, KEY, FINGERPRINT, CREATED, RESULT_ID)
              VALUES ('stores', p_key, p_fp, clock_timestamp() AT TIME ZONE 'UTC', id);
          END IF;
          res := 0;
        END IF;
      END IF;
      RETURN QUERY SELECT res, m.STORE_ID, m.STORE_ZIPCODE::text, m.STORE_ADDRESS::text, m.STORE_NAME::text,
                          m.REGION_ID, m.S_LATITUDE, m.S_LONGITUDE
        FROM (SELECT 1) one LEFT JOIN M_STORE m ON m.STORE_ID = id;
    END $$;
  )sql");
}

namespace {

#define HOTROW_STORE_COLUMNS \
  "SELECT STORE_ID, STORE_ZIPCODE, STORE_ADDRESS, STORE_NAME, REGION_ID, S_LATITUDE, S_LONGITUDE FROM M_STORE "
constexpr pg::NamedSql kSelectStore{"pointcard_store", HOTROW_STORE_COLUMNS "WHERE STORE_ID = $1"};
constexpr pg::NamedSql kSelectRegionStores{"pointcard_region_stores",
                                           HOTROW_STORE_COLUMNS "WHERE REGION_ID = $1 ORDER BY STORE_ID"};
#undef HOTROW_STORE_COLUMNS
constexpr pg::NamedSql kCreateStore{"pointcard_store_create",
                                    "SELECT * FROM hotrow_store_create_v1($1, $2, $3, $4, $5, $6, $7, $8)"};
constexpr int64_t kStoreLock = -1;  // RunSerializable's lock for every store made

StoreInfo ReadStore(const pg::Rows& rows, int row, int at) {
  return StoreInfo{.store_id = rows.Int(row, at),
                   .zipcode = std::string(rows.Text(row, at + 1)),
                   .address = std::string(rows.Text(row, at + 2)),
                   .name = std::string(rows.Text(row, at + 3)),
                   .region_id = rows.Int(row, at + 4),
                   .latitude = rows.Double(row, at + 5),
                   .longitude = rows.Double(row, at + 6)};
}

std::string DoubleText(double v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

void PostgresPointCardStore::GetStore(int64_t store_id, std::function<void(Result<StoreInfo>)> done) {
  pool_.Submit([store_id, done = std::move(done)](Result<pg::Connection*> c) {
    if (!c.ok()) return done(c.status());
    auto rows = (*c)->Query(kSelectStore, {std::to_string(store_id)});
    if (!rows.ok()) return done(rows.status());
    if (rows->empty()) return done(NoSuchStore(store_id));
    done(ReadStore(*rows, 0, 0));
  });
}

void PostgresPointCardStore::ListStores(int64_t region_id, std::function<void(Result<std::vector<StoreInfo>>)> done) {
  pool_.Submit([region_id, done = std::move(done)](Result<pg::Connection*> c) {
    if (!c.ok()) return done(c.status());
    auto rows = (*c)->Query(kSelectRegionStores, {std::to_string(region_id)});
    if (!rows.ok()) return done(rows.status());
    std::vector<StoreInfo> out;
    for (int i = 0; i < rows->size(); ++i) out.push_back(ReadStore(*rows, i, 0));
    done(std::move(out));
  });
}

void PostgresPointCardStore::CreateStore(NewStore store, std::string fingerprint,
                                         std::function<void(Result<std::pair<StoreInfo, bool>>)> done) {
  pool_.Submit(
      [store = std::move(store), fp = std::move(fingerprint), done = std::move(done)](Result<pg::Connection*> c) {
        if (!c.ok()) return done(c.status());
        const std::vector<pg::Param> params = {std::to_string(store.region_id),
                                               store.name,
                                               store.zipcode,
                                               store.address,
                                               DoubleText(store.latitude),
                                               DoubleText(store.longitude),
                                               store.idempotency_key ? pg::Param(*store.idempotency_key) : pg::Param(),
                                               fp};
        auto rows = RunSerializableRetried(**c, kStoreLock, kCreateStore, params);
        if (!rows.ok()) return done(rows.status());
        const int64_t outcome = rows->Int(0, 0);
        if (outcome == 2)
          return done(Status(ErrorCode::kIdempotencyMismatch,
                             "Idempotency-Key '" + *store.idempotency_key + "' was used for a different request",
                             "Idempotency-Key"));
        if (outcome == 3) return done(NoStoreIdLeft());
        if ((outcome != 0 && outcome != 1) || rows->IsNull(0, 1))
          return done(Status::Internal("hotrow_store_create_v1 answered outcome " + std::to_string(outcome)));
        done(std::make_pair(ReadStore(*rows, 0, 1), outcome == 1));
      });
}

}  // namespace hotrow::pointcard
