"""What the stores of record hold, read straight from them (not through
hotrow): PostgreSQL and Redis for the cluster, the SQLite file for the
embedded case. The checks compare the history and every instance's answers
with this.
"""

import collections
import sqlite3
import subprocess
import time

# An applied grant's credit not folded yet (both backends' P_GRANT_CREDIT).
_APPLIED = "FROM P_GRANT_CREDIT c JOIN P_GRANT g ON g.GRANT_ID = c.GRANT_ID WHERE g.STATE = 'applied'"


def hold_states(rows):
    """{(card, amount): [(status, captured amount), ...]}: the rig's holds are
    of -id points, so (card, amount) names one logical hold."""
    out = collections.defaultdict(list)
    for card, amount, status, captured in rows:
        out[(int(card), int(amount))].append((status, int(captured)))
    return dict(out)


# Lots made, lots taken from, expiry rows written (the summary, not a check).
_LOTS = ("SELECT (SELECT count(*) FROM P_LOT), (SELECT count(*) FROM P_LOT WHERE REMAINING < AMOUNT), "
         "(SELECT count(*) FROM H_TRANSACTION WHERE KIND = 'expiry')")


class PgTruth:
    def __init__(self, pg, redis):
        self.pg = pg
        self.redis = redis
        self.url = pg.url

    def plans(self, ids):
        if not ids:
            return {}
        rows = self.pg.rows(f'SELECT id, title, "like" FROM datePlans WHERE id IN ({",".join(map(str, ids))})')
        return {int(r[0]): (r[1], int(r[2])) for r in rows}

    def titles(self, category):
        rows = self.pg.rows(f"SELECT id, title FROM datePlans WHERE category = '{category}'")
        return [(int(r[0]), r[1]) for r in rows]

    def ranking(self, limit):
        rows = self.pg.rows(f'SELECT id, "like" FROM datePlans ORDER BY "like" DESC, id LIMIT {limit}')
        return [(int(r[0]), int(r[1])) for r in rows]

    def payments(self, cards):
        rows = self.pg.rows("SELECT CARD_ID, STORE_ID, AMOUNT FROM H_TRANSACTION "
                            f"WHERE KIND IN ('payment', 'charge') AND CARD_ID IN ({','.join(map(str, cards))})")
        return collections.Counter((int(c), int(s), int(a)) for c, s, a in rows)

    def refunds(self, cards):
        rows = self.pg.rows("SELECT CARD_ID, REFUND_OF, AMOUNT FROM H_TRANSACTION "
                            f"WHERE KIND = 'refund' AND CARD_ID IN ({','.join(map(str, cards))})")
        return collections.Counter((int(c), int(r), int(a)) for c, r, a in rows)

    def holds(self, cards):
        # An open hold past its expiry is expired, written down or not.
        rows = self.pg.rows("SELECT CARD_ID, AMOUNT, CASE WHEN STATUS = 'open' AND EXPIRES_TIME <= "
                            "clock_timestamp() AT TIME ZONE 'UTC' THEN 'expired' ELSE STATUS END, "
                            f"COALESCE(CAPTURED_AMOUNT, 0) FROM P_HOLD WHERE CARD_ID IN ({','.join(map(str, cards))})")
        return hold_states((int(c), int(a), st, int(t)) for c, a, st, t in rows)

    def grants(self):
        # A 'staging' grant never answered (its lease runs out, and it goes).
        rows = self.pg.rows("SELECT GRANT_ID, CARDS, POINTS, COALESCE(IDEMPOTENCY_KEY, '') FROM P_GRANT "
                            "WHERE STATE <> 'staging' ORDER BY GRANT_ID")
        return [(int(g), int(c), int(p), k) for g, c, p, k in rows]

    def grant_rows(self):
        # Written grant rows plus an applied grant's credit not folded yet, in
        # one statement (one snapshot): any instance resumes a fold.
        (n, points), = self.pg.rows(
            "SELECT (SELECT count(*) FROM H_TRANSACTION WHERE KIND = 'grant') + (SELECT count(*) " + _APPLIED + "), "
            "(SELECT COALESCE(sum(AMOUNT), 0) FROM H_TRANSACTION WHERE KIND = 'grant') + "
            "(SELECT COALESCE(sum(c.POINTS), 0) " + _APPLIED + ")")
        return int(n), int(points)

    def lots(self):
        (made, used, expired), = self.pg.rows(_LOTS)
        return int(made), int(used), int(expired)

    def board_of(self, board_id):
        """A board's season 1: [(clientId, score)]."""
        out = self.redis.cli("ZREVRANGE", f"hotrow:lb:b:{board_id}:1:z", "0", "-1", "WITHSCORES").splitlines()
        return [(out[i][16:], int(out[i + 1])) for i in range(0, len(out), 2)]

    def names_of(self, board_id):
        """A board's season 1: {clientId: displayName} (the :p hash holds
        "<name bytes> <name><metadata>")."""
        out = self.redis.cli("HGETALL", f"hotrow:lb:b:{board_id}:1:p").splitlines()
        names = {}
        for i in range(0, len(out) - 1, 2):
            length, _, rest = out[i + 1].partition(" ")
            names[out[i]] = rest[:int(length)] if int(length) >= 0 else None
        return names

    def seasons_of(self, board_id):
        """Every season of a board held: {(clientId, season): score}."""
        out = {}
        for key in self.redis.cli("KEYS", f"hotrow:lb:b:{board_id}:*:z").split():
            season = int(key.rsplit(":", 2)[1])
            rows = self.redis.cli("ZRANGE", key, "0", "-1", "WITHSCORES").splitlines()
            for i in range(0, len(rows), 2):
                out[(rows[i][16:], season)] = int(rows[i + 1])
        return out

    def board(self):
        """The leaderboard in rank order: [(clientId, score)] (Redis's sorted set)."""
        out = self.redis.cli("ZREVRANGE", "hotrow:lb:b:default:1:z", "0", "-1", "WITHSCORES").splitlines()
        return [(out[i][16:], int(out[i + 1])) for i in range(0, len(out), 2)]


class SqliteTruth:
    def __init__(self, path):
        self.path = path
        self.cards_path = path + ".pointcard.db"  # the point card's own file (src/pointcard/sqlite_file.h)
        self.url = f"sqlite:{path}"

    def _query(self, sql, path=None):
        conn = sqlite3.connect(f"file:{path or self.path}?mode=ro", uri=True, timeout=30)
        try:
            return conn.execute(sql).fetchall()
        finally:
            conn.close()

    def plans(self, ids):
        if not ids:
            return {}
        rows = self._query(f'SELECT id, title, "like" FROM datePlans WHERE id IN ({",".join(map(str, ids))})')
        return {r[0]: (r[1], r[2]) for r in rows}

    def titles(self, category):
        return self._query(f"SELECT id, title FROM datePlans WHERE category = '{category}'")

    def ranking(self, limit):
        return self._query(f'SELECT id, "like" FROM datePlans ORDER BY "like" DESC, id LIMIT {limit}')

    def payments(self, cards):
        rows = self._query("SELECT CARD_ID, STORE_ID, AMOUNT FROM H_TRANSACTION "
                           f"WHERE KIND IN ('payment', 'charge') AND CARD_ID IN ({','.join(map(str, cards))})",
                           self.cards_path)
        return collections.Counter(rows)

    def refunds(self, cards):
        rows = self._query("SELECT CARD_ID, REFUND_OF, AMOUNT FROM H_TRANSACTION "
                           f"WHERE KIND = 'refund' AND CARD_ID IN ({','.join(map(str, cards))})", self.cards_path)
        return collections.Counter(rows)

    def holds(self, cards):
        now = int(time.time() * 1e6)
        rows = self._query(f"SELECT CARD_ID, AMOUNT, CASE WHEN STATUS = 'open' AND EXPIRES_TIME <= {now} "
                           "THEN 'expired' ELSE STATUS END, COALESCE(CAPTURED_AMOUNT, 0) FROM P_HOLD "
                           f"WHERE CARD_ID IN ({','.join(map(str, cards))})", self.cards_path)
        return hold_states(rows)

    def grants(self):
        # A 'staging' grant never answered and is invisible (deleted at start).
        return self._query("SELECT GRANT_ID, CARDS, POINTS, COALESCE(IDEMPOTENCY_KEY, '') FROM P_GRANT "
                           "WHERE STATE <> 'staging' ORDER BY GRANT_ID", self.cards_path)

    def grant_rows(self):
        # Written grant rows plus an applied grant's credit not folded yet, in
        # one snapshot (a fold resumes after a crash: src/pointcard/sqlite_store.h).
        (n, points), = self._query(
            "SELECT (SELECT count(*) FROM H_TRANSACTION WHERE KIND = 'grant') + (SELECT count(*) " + _APPLIED + "), "
            "(SELECT COALESCE(sum(AMOUNT), 0) FROM H_TRANSACTION WHERE KIND = 'grant') + "
            "(SELECT COALESCE(sum(c.POINTS), 0) " + _APPLIED + ")", self.cards_path)
        return n, points

    def lots(self):
        return self._query(_LOTS, self.cards_path)[0]

    def board_of(self, board_id):
        return self._query(f"SELECT client_id, score FROM lb_score WHERE board_id = '{board_id}' AND season = 1")

    def names_of(self, board_id):
        return dict(self._query(f"SELECT client_id, display_name FROM lb_score WHERE board_id = '{board_id}' "
                                "AND season = 1"))

    def seasons_of(self, board_id):
        rows = self._query(f"SELECT client_id, season, score FROM lb_score WHERE board_id = '{board_id}'")
        return {(c, s): score for c, s, score in rows}

    def board(self):
        return self._query("SELECT client_id, score FROM lb_score WHERE board_id = 'default' AND season = 1 "
                           "ORDER BY score DESC, seq")


def check_pointcard(binary, url):
    """hotrow check pointcard: (passed, its report)."""
    r = subprocess.run([binary, "check", "pointcard", "--db", url], capture_output=True, text=True, timeout=300)
    return r.returncode == 0, (r.stdout + r.stderr).strip()
