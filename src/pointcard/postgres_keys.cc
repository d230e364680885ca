// Store keys on PostgreSQL (M_STORE_KEY): made behind the stores' advisory
// lock (so the per-store limit holds across instances), listed in one
// statement, revoked in one READ COMMITTED transaction; a write checks its
// key inside its own transaction (hotrow_store_key_check_v1, called by
// hotrow_pay_v6 and hotrow_card_create_v2), and a revocation is stamped
// after every write that checked the key (postgres_store.h).
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
    -- or 0 when it is unknown, revoked or not this secret (decided before
    -- any lock: a wrong secret locks nothing). Then the key is held until the
    -- write commits, so that a revocation waits for it and is stamped after
    -- it (hotrow_store_key_revoke_v1):
    --   - a shared advisory lock on the key, which a revocation takes
    --     exclusively. The lock manager serves a waiting exclusive lock
    --     before later shared ones, so a busy key's payments cannot starve
    --     its revocation (row locks alone let each new FOR SHARE jump it);
    --   - the key's row, FOR SHARE: under SERIALIZABLE, a revocation that
    --     committed after this transaction's snapshot makes the lock fail
    --     (40001, retried, and the retry sees the key revoked). FOR UPDATE
    --     instead for the one write a minute that will move LAST_USED_TIME
    --     (two shared holders upgrading would deadlock); it is marked for
    --     hotrow_store_key_touch_v1, which the write calls when it commits
    --     something, so a refused write leaves LAST_USED_TIME as it was.
    CREATE OR REPLACE FUNCTION hotrow_store_key_check_v1(p_key_id text, p_key_sha text) RETURNS int
    LANGUAGE plpgsql SET enable_seqscan = off AS $$
    DECLARE
      sk M_STORE_KEY%ROWTYPE;
      stale boolean;
    BEGIN
      SELECT * INTO sk FROM M_STORE_KEY s WHERE s.KEY_ID = p_key_id;
      IF NOT FOUND OR sk.REVOKED_TIME IS NOT NULL OR sk.SECRET_SHA256 <> p_key_sha THEN
        RETURN 0;
      END IF;
      PERFORM pg_advisory_xact_lock_shared(72720007, hashtext(p_key_id));
      stale := sk.LAST_USED_TIME IS NULL
               OR sk.LAST_USED_TIME <= (clock_timestamp() AT TIME ZONE 'UTC') - interval '60 seconds';
      IF stale THEN
        SELECT * INTO sk FROM M_STORE_KEY s WHERE s.KEY_ID = p_key_id FOR UPDATE;
      ELSE
        SELECT * INTO sk FROM M_STORE_KEY s WHERE s.KEY_ID = p_key_id FOR SHARE;
      END IF;
      IF sk.REVOKED_TIME IS NOT NULL THEN
        RETURN 0;
      END IF;
      PERFORM set_config('hotrow.key_touch', CASE WHEN stale THEN p_key_id ELSE '' END, true);
      RETURN sk.STORE_ID;
    END $$;
    -- Moves LAST_USED_TIME of a key that hotrow_store_key_check_v1 marked (it
    -- holds the row FOR UPDATE); nothing for any other.
    CREATE OR REPLACE FUNCTION hotrow_store_key_touch_v1(p_key_id text) RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
      IF current_setting('hotrow.key_touch', true) = p_key_id THEN
        UPDATE M_STORE_KEY SET LAST_USED_TIME = clock_timestamp() AT TIME ZONE 'UTC' WHERE KEY_ID = p_key_id;
      END IF;
    END $$;
    -- Revokes a key (v0.10.0), stamped after every write that checked it:
    -- the key's advisory lock, exclusively, waits for those writes (and
    -- later ones queue behind it), and the time is taken after. Run at READ
    -- COMMITTED (postgres_keys.cc), so the UPDATE reads the row as those
    -- writes left it. A key revoked before answers as it is; no row, the
    -- store has no such key.
    CREATE OR REPLACE FUNCTION hotrow_store_key_revoke_v1(p_store int, p_key_id text)
    RETURNS TABLE (o_key text, o_store int, o_created_us bigint, o_last_used_us bigint, o_revoked_us bigint)
    LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_advisory_xact_lock(72720007, hashtext(p_key_id));
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
    // READ COMMITTED whatever the server's default: the revocation waits for
    // the key's writes, then updates the row as they left it (under
    // SERIALIZABLE its snapshot would predate their commits: 40001).
    // The COMMIT in a segment of its own ends the block whatever became of
    // the work (as RunSerializable's).
    const pg::Connection::Statement work[] = {{"BEGIN ISOLATION LEVEL READ COMMITTED"},
                                              {kRevokeKey, {std::to_string(store_id), key_id}}};
    const pg::Connection::Statement end[] = {{"COMMIT"}};
    const std::span<const pg::Connection::Statement> segments[] = {work, end};
    auto results = (*c)->PipelineSegments(segments);
    if (!results[0].ok()) return done(results[0].status());
    if (!results[1].ok()) return done(results[1].status());
    const pg::Rows& rows = (*results[0])[1];
    if (rows.empty()) return done(NoSuchKey(key_id, store_id));
    done(ReadKey(rows, 0, 0));
  });
}

}  // namespace hotrow::pointcard
