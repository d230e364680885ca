// Store keys on PostgreSQL (M_STORE_KEY): made behind the stores' advisory
// lock (so the per-store limit holds across instances), listed and revoked
// in one statement each; a payment checks its key inside hotrow_pay_v6,
// and a revocation is stamped after every payment that checked the key
// (postgres_store.h).
#include "pointcard/postgres_store.h"

namespace hotrow::pointcard {

namespace pg = db::pg;

Status CreatePostgresKeyFunctions(pg::Connection& conn) {
  return conn.Exec(R"sql(
    -- Makes a store key (v0.10.0). outcome: 0 made, 1 no such store, 2 the
    -- store has p_max keys not revoked; then the key's creation time.
    CREATE OR REPLACE FUNCTION hotrow_store_key_create_v1(p_store int, p_key_id text, p_sha text, p_max int)
    RETURNS TABLE (o_outcome smallint, o_created_us bigint) LANGUAGE plpgsql SET enable_seqscan = off AS $$
    DECLARE
      t timestamp := clock_timestamp() AT TIME ZONE 'UTC';
    BEGIN
      IF NOT EXISTS (SELECT 1 FROM M_STORE m WHERE m.STORE_ID = p_store) THEN
        RETURN QUERY SELECT 1::smallint, NULL::bigint;
      ELSIF (SELECT COUNT(*) FROM M_STORE_KEY k WHERE k.STORE_ID = p_store AND k.REVOKED_TIME IS NULL) >= p_max THEN
        RETURN QUERY SELECT 2::smallint, NULL::bigint;
      ELSE
        INSERT INTO M_STORE_KEY (KEY_ID, STORE_ID, SECRET_SHA256, CREATED_TIME) VALUES (p_key_id, p_store, p_sha, t);
        RETURN QUERY SELECT 0::smallint, hotrow_us(t);
      END IF;
    END $$;
    -- A write's store key (v0.10.0), in the write's transaction: its store,
    -- or 0 when it is unknown, revoked or not this secret. The key's row
    -- stays locked until the write commits, so a revocation waits for it
    -- and is stamped after it (hotrow_store_key_revoke_v1): shared, so one
    -- key's writes do not queue on each other; exclusive for the one write
    -- a minute that moves LAST_USED_TIME (two shared holders upgrading
    -- would deadlock).
    CREATE OR REPLACE FUNCTION hotrow_store_key_check_v1(p_key_id text, p_key_sha text) RETURNS int
    LANGUAGE plpgsql SET enable_seqscan = off AS $$
    DECLARE
      sk M_STORE_KEY%ROWTYPE;
      used boolean;
    BEGIN
      SELECT * INTO sk FROM M_STORE_KEY s WHERE s.KEY_ID = p_key_id;
      used := FOUND AND (sk.LAST_USED_TIME IS NULL
                         OR sk.LAST_USED_TIME <= (clock_timestamp() AT TIME ZONE 'UTC') - interval '60 seconds');
      IF used THEN
        SELECT * INTO sk FROM M_STORE_KEY s WHERE s.KEY_ID = p_key_id FOR UPDATE;
      ELSE
        SELECT * INTO sk FROM M_STORE_KEY s WHERE s.KEY_ID = p_key_id FOR SHARE;
      END IF;
      IF NOT FOUND OR sk.REVOKED_TIME IS NOT NULL OR sk.SECRET_SHA256 <> p_key_sha THEN
        RETURN 0;
      END IF;
      IF used THEN
        UPDATE M_STORE_KEY SET LAST_USED_TIME = clock_timestamp() AT TIME ZONE 'UTC' WHERE KEY_ID = p_key_id;
      END IF;
      RETURN sk.STORE_ID;
    END $$;
    -- Issues a card with a store key (v0.10.0): hotrow_card_create_v1, after
    -- the key; outcome 4, the key is unknown, revoked or not this secret.
    CREATE OR REPLACE FUNCTION hotrow_card_create_v2(p_region int, p_ref text, p_key text, p_fp text, p_key_id text,
                                                     p_key_sha text)
    RETURNS TABLE (o_outcome smallint, c_card bigint, c_balance bigint, c_region int, c_last_us bigint,
                   c_pending bigint, c_ref text, c_status text, c_closed_us bigint)
    LANGUAGE plpgsql AS $$
    BEGIN
      IF p_key_id IS NOT NULL AND hotrow_store_key_check_v1(p_key_id, p_key_sha) = 0 THEN
        RETURN QUERY SELECT 4::smallint, NULL::bigint, NULL::bigint, NULL::int, NULL::bigint, NULL::bigint,
                            NULL::text, NULL::text, NULL::bigint;
        RETURN;
      END IF;
      RETURN QUERY SELECT * FROM hotrow_card_create_v1(p_region, p_ref, p_key, p_fp);
    END $$;
    -- Revokes a key (v0.10.0), stamped after every payment that checked
    -- it: the row is locked first, which waits for those payments' shared
    -- locks (hotrow_pay_v6), and the time is taken after. A key revoked
    -- before answers as it is; no row, the store has no such key.
    CREATE OR REPLACE FUNCTION hotrow_store_key_revoke_v1(p_store int, p_key_id text)
    RETURNS TABLE (o_key text, o_store int, o_created_us bigint, o_last_used_us bigint, o_revoked_us bigint)
    LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM 1 FROM M_STORE_KEY k WHERE k.KEY_ID = p_key_id AND k.STORE_ID = p_store FOR UPDATE;
      UPDATE M_STORE_KEY k SET REVOKED_TIME = clock_timestamp() AT TIME ZONE 'UTC'
        WHERE k.KEY_ID = p_key_id AND k.STORE_ID = p_store AND k.REVOKED_TIME IS NULL;
      RETURN QUERY SELECT k.KEY_ID, k.STORE_ID, hotrow_us(k.CREATED_TIME), hotrow_us(k.LAST_USED_TIME),
                          hotrow_us(k.REVOKED_TIME)
        FROM M_STORE_KEY k WHERE k.KEY_ID = p_key_id AND k.STORE_ID = p_store;
    END $$;
  )sql");
}

namespace {

#define HOTROW_KEY_COLUMNS \
  "k.KEY_ID, k.STORE_ID, hotrow_us(k.CREATED_TIME), hotrow_us(k.LAST_USED_TIME), hotrow_us(k.REVOKED_TIME) "
constexpr pg::NamedSql kCreateKey{"pointcard_key_create", "SELECT * FROM hotrow_store_key_create_v1($1, $2, $3, $4)"};
// The store's row first: none, an unknown store; one with a NULL key, a
// store without keys.
constexpr pg::NamedSql kListKeys{"pointcard_keys", "SELECT m.STORE_ID, " HOTROW_KEY_COLUMNS
                                                   "FROM M_STORE m LEFT JOIN M_STORE_KEY k ON k.STORE_ID = m.STORE_ID "
                                                   "WHERE m.STORE_ID = $1 ORDER BY k.CREATED_TIME, k.KEY_ID"};
constexpr pg::NamedSql kRevokeKey{"pointcard_key_revoke", "SELECT * FROM hotrow_store_key_revoke_v1($1, $2)"};
#undef HOTROW_KEY_COLUMNS
constexpr int64_t kStoreLock = -1;  // the stores' lock (postgres_stores.cc): keys are counted under it

StoreKey ReadKey(const pg::Rows& rows, int row, int at) {
  StoreKey k{.key_id = std::string(rows.Text(row, at)),
             .store_id = rows.Int(row, at + 1),
             .created_us = rows.Int(row, at + 2)};
  if (!rows.IsNull(row, at + 3)) k.last_used_us = rows.Int(row, at + 3);
  if (!rows.IsNull(row, at + 4)) k.revoked_us = rows.Int(row, at + 4);
  return k;
}

}  // namespace

void PostgresPointCardStore::CreateStoreKey(StoreKey key, std::string secret_sha256,
                                            std::function<void(Result<StoreKey>)> done) {
  pool_.Submit([key = std::move(key), digest = std::move(secret_sha256),
                done = std::move(done)](Result<pg::Connection*> c) mutable {
    if (!c.ok()) return done(c.status());
    const std::vector<pg::Param> params = {std::to_string(key.store_id), key.key_id, digest,
                                           std::to_string(kStoreKeysMax)};
    auto rows = RunSerializableRetried(**c, kStoreLock, kCreateKey, params);
    if (!rows.ok()) return done(rows.status());
    const int64_t outcome = rows->Int(0, 0);
    if (outcome == 1) return done(NoSuchStore(key.store_id));
    if (outcome == 2) return done(TooManyKeys(key.store_id));
    if (outcome != 0 || rows->IsNull(0, 1))
      return done(Status::Internal("hotrow_store_key_create_v1 answered outcome " + std::to_string(outcome)));
    key.created_us = rows->Int(0, 1);
    done(std::move(key));
  });
}

void PostgresPointCardStore::ListStoreKeys(int64_t store_id, std::function<void(Result<std::vector<StoreKey>>)> done) {
  pool_.Submit([store_id, done = std::move(done)](Result<pg::Connection*> c) {
    if (!c.ok()) return done(c.status());
    auto rows = (*c)->Query(kListKeys, {std::to_string(store_id)});
    if (!rows.ok()) return done(rows.status());
    if (rows->empty()) return done(NoSuchStore(store_id));
    std::vector<StoreKey> out;
    for (int i = 0; i < rows->size(); ++i)
      if (!rows->IsNull(i, 1)) out.push_back(ReadKey(*rows, i, 1));
    done(std::move(out));
  });
}

void PostgresPointCardStore::RevokeStoreKey(int64_t store_id, std::string key_id,
                                            std::function<void(Result<StoreKey>)> done) {
  pool_.Submit([store_id, key_id = std::move(key_id), done = std::move(done)](Result<pg::Connection*> c) {
    if (!c.ok()) return done(c.status());
    auto rows = (*c)->Query(kRevokeKey, {std::to_string(store_id), key_id});
    if (!rows.ok()) return done(rows.status());
    if (rows->empty()) return done(NoSuchKey(key_id, store_id));
    done(ReadKey(*rows, 0, 0));
  });
}

}  // namespace hotrow::pointcard
