"""The checks, run after the faults stop and every process is back. Each
returns a list of violations (strings); an empty list is a pass.

The rules (issue 11, docs/reliability.md):
- counters and appends: every ok write is present, no fail write is, an
  info write at most once;
- overwritten values: the final value is one of the writes that no
  completed write follows in real time (an info write may take effect at
  any time after its invocation, so it always qualifies);
- read models on every instance equal the store of record within the
  staleness bound;
- hotrow's own answers: no 5xx but 503 with Retry-After, none slower than
  the bound, except from an instance under a fault.
"""

import bisect
import collections
import http.client
import json
import time

from workload import BEST_PLAYERS, CREATE_CATEGORY, EDIT_PLANS, HOT_PLANS, HOT_PLAYERS


def get_json(port, path, timeout=10):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path, headers={"Host": "rig"})
        r = c.getresponse()
        body = r.read()
        return r.status, (json.loads(body) if body else None)
    finally:
        c.close()


def by_outcome(ops):
    out = collections.defaultdict(list)
    for o in ops:
        out[o.outcome].append(o)
    return out


def candidates(writes, initial, value):
    """The values an overwritten register may hold at the end: those of the
    writes that no ok write invoked after their completion follows. (With M
    the latest invocation of an ok write, a write qualifies iff it did not
    complete before M; O(n).)"""
    oks = [w for w in writes if w.outcome == "ok"]
    out = set()
    if not oks:
        out.add(initial)
    latest_ok_invoke = max((o.invoke for o in oks), default=float("-inf"))
    for w in writes:
        if w.outcome == "fail":
            continue
        end = float("inf") if w.outcome == "info" else w.complete
        if latest_ok_invoke <= end:
            out.add(value(w))
    return out


def check_likes(history, truth, initial):
    v = []
    finals = truth.plans(HOT_PLANS)
    for plan in HOT_PLANS:
        ops = by_outcome(o for o in history.of("like") if o.args["plan"] == plan)
        delta = finals[plan][1] - initial[plan][1]
        ok, info = len(ops["ok"]), len(ops["info"])
        if not ok <= delta <= ok + info:
            v.append(f"likes on plan {plan}: the count grew by {delta}, not within [{ok} ok, {ok + info} ok+info]")
        counts = [o.value["like"] for o in ops["ok"]]
        if len(set(counts)) != len(counts):
            dup = [n for n, k in collections.Counter(counts).items() if k > 1][:5]
            v.append(f"likes on plan {plan}: two 200s carried the same count ({dup})")
        if counts and (min(counts) <= initial[plan][1] or max(counts) > finals[plan][1]):
            v.append(f"likes on plan {plan}: a 200's count {min(counts)}..{max(counts)} is outside "
                     f"{initial[plan][1] + 1}..{finals[plan][1]}")
    return v


def check_edits(history, truth, initial):
    v = []
    finals = truth.plans(EDIT_PLANS)
    for plan in EDIT_PLANS:
        writes = [o for o in history.of("edit") if o.args["plan"] == plan]
        allowed = candidates(writes, initial[plan][0], lambda w: w.args["title"])
        if finals[plan][0] not in allowed:
            v.append(f"plan {plan}: its final title {finals[plan][0]!r} is not one a last write could leave "
                     f"({len(allowed)} candidates)")
    return v


def check_creates(history, truth):
    v = []
    present = collections.Counter(t for _, t in truth.titles(CREATE_CATEGORY))
    deleted = {o.args["plan"]: o for o in history.of("delete")}
    ids = dict(truth.titles(CREATE_CATEGORY))
    for o in history.of("create"):
        title, n = o.args["title"], present.get(o.args["title"], 0)
        if n > 1:
            v.append(f"create {title}: present {n} times")
        if o.outcome == "fail" and n:
            v.append(f"create {title}: answered as failed ({o.status} {o.error}) but present")
        if o.outcome == "ok":
            d = deleted.get(o.value["id"])
            if d is None and not n:
                v.append(f"create {title} (plan {o.value['id']}): answered {o.status} but absent")
            if d is not None and d.outcome == "ok" and o.value["id"] in ids:
                v.append(f"plan {o.value['id']}: deleted (204) but still present")
            if d is not None and d.outcome == "fail" and o.value["id"] not in ids:
                v.append(f"plan {o.value['id']}: its delete failed ({d.status} {d.error}) but it is gone")
    return v


def check_scores(history, truth):
    v = []
    board = truth.board()
    scores = dict(board)
    rank = {c: i for i, (c, _) in enumerate(board)}
    for player in HOT_PLAYERS:
        writes = [o for o in history.of("score_hot") if o.args["player"] == player]
        if not writes:
            continue
        allowed = candidates(writes, None, lambda w: w.args["score"])
        if scores.get(player) not in allowed:
            v.append(f"player {player}: final score {scores.get(player)} is not one a last write could leave")
    for player in BEST_PLAYERS:
        ops = by_outcome(o for o in history.of("score_best") if o.args["player"] == player)
        if not ops["ok"]:
            continue
        best_ok = max(o.args["score"] for o in ops["ok"])
        possible = {o.args["score"] for o in ops["ok"] + ops["info"]}
        final = scores.get(player)
        if final is None or final < best_ok or final not in possible:
            v.append(f"player {player} (mode=best): final {final}, highest ok {best_ok}")
    ties = history.of("score_tie")
    for o in ties:
        p = o.args["player"]
        if o.outcome == "ok" and p not in scores:
            v.append(f"player {p}: score answered 200 but absent")
        if o.outcome == "fail" and p in scores:
            v.append(f"player {p}: score answered {o.status} ({o.error}) but present")
    # First to reach a score ranks higher: A's 200 before B's request was sent.
    present = sorted((o for o in ties if o.args["player"] in scores and o.outcome in ("ok", "info")),
                     key=lambda o: o.invoke)
    by_score = collections.defaultdict(list)
    for o in present:
        by_score[o.args["score"]].append(o)
    # Per score: sweep the players by invocation; every ok write that had
    # completed before this one was sent must rank above it (O(n log n)).
    inversions = 0
    for group in by_score.values():
        done = sorted((a for a in group if a.outcome == "ok"), key=lambda a: a.complete)
        i, worst = 0, None  # worst: the lowest-ranked (largest rank) of those completed so far
        for b in group:  # sorted by invoke
            while i < len(done) and done[i].complete < b.invoke:
                if worst is None or rank[done[i].args["player"]] > rank[worst.args["player"]]:
                    worst = done[i]
                i += 1
            if worst is not None and rank[worst.args["player"]] > rank[b.args["player"]]:
                inversions += 1
                if inversions <= 3:
                    v.append(f"tie order: {worst.args['player']} reached {worst.args['score']} first (200 before "
                             f"{b.args['player']} was sent) but ranks below it")
    if inversions > 3:
        v.append(f"tie order: {inversions} inversions in all")
    return v


def _retried_posts(history, kind):
    """Posts retried while their outcome is unknown (a key or a signature per
    logical post), by logical post: (player, amount, outcomes, their 200s)."""
    groups = collections.defaultdict(list)
    for o in history.of(kind):
        groups[o.args["logical"]].append(o)
    for logical, attempts in groups.items():
        oks = [o for o in attempts if o.outcome == "ok"]
        yield logical, attempts[0].args["player"], attempts[0].args["amount"], {o.outcome for o in attempts}, oks


def _subset_sums(amounts, limit=16):
    """The sums some of `amounts` make (each at most once); None past
    `limit` amounts (then only bounds are checked)."""
    if len(amounts) > limit:
        return None
    sums = {0}
    for amount in amounts:
        sums |= {s + amount for s in sums}
    return sums


def _total_violation(label, total, lo, unknown):
    """None when `total` is `lo` plus some of the `unknown` amounts (each at
    most once; amounts are unique, so a post applied twice, or one of the
    200s lost, makes none of them)."""
    sums = _subset_sums(unknown)
    hi = lo + sum(unknown)
    if lo <= total <= hi and (sums is None or total - lo in sums):
        return None
    return (f"{label}: total {total}, but the posts answered 200 add up to {lo} and those of unknown outcome to "
            f"{hi - lo} more (a post applied twice, lost, or a failed one applied)")


def check_keyed_scores(history, truth, kind="score_keyed", board_id="rig-coins", what="keyed score"):
    """Increments retried while the outcome is unknown (keyed on rig-coins;
    signed on rig-signed, kind score_signed): each player's total on the
    board is the sum of the posts answered 200, plus some of those whose
    outcome is unknown, never one that failed; two 200s of one post answer
    the same total (the replay is the first answer)."""
    v = []
    low, unknown = collections.Counter(), collections.defaultdict(list)
    for logical, player, amount, outcomes, oks in _retried_posts(history, kind):
        if oks:
            low[player] += amount
            totals = {(o.value or {}).get("score") for o in oks}
            if len(totals) > 1:
                v.append(f"{what} {logical} ({player}): its 200s answer different totals {sorted(totals)}")
        elif "info" in outcomes:
            unknown[player].append(amount)
    board = dict(truth.board_of(board_id))
    for player in set(low) | set(unknown) | set(board):
        found = _total_violation(f"player {player} on {board_id}", board.get(player, 0), low[player],
                                 unknown[player])
        if found:
            v.append(found)
    return v


def check_signed_scores(history, truth):
    return check_keyed_scores(history, truth, "score_signed", "rig-signed", "signed score")


def check_season_scores(history, truth):
    """Keyed increments on a board of short seasons: every 200 of one post
    names the same season; each player's total in a season is that of the
    posts answered 200 naming it plus some of those of unknown outcome
    (which may have landed in any season), each once; over all seasons, the
    200s plus a subset of the unknown ones."""
    v = []
    low, low_all = collections.Counter(), collections.Counter()
    unknown = collections.defaultdict(list)  # outcome unknown: applied or not, in any season
    unseasoned = collections.defaultdict(list)  # a 200 whose body was lost: applied, season not known
    for logical, player, amount, outcomes, oks in _retried_posts(history, "score_season"):
        if oks:
            seasons = {(o.value or {}).get("season") for o in oks} - {None}
            if len(seasons) > 1:
                v.append(f"season score {logical} ({player}): its 200s name different seasons {sorted(seasons)}")
            low_all[player] += amount
            if seasons:
                low[(player, min(seasons))] += amount
            else:
                unseasoned[player].append(amount)
        elif "info" in outcomes:
            unknown[player].append(amount)
    held = truth.seasons_of("rig-seasons")  # {(player, season): total}
    for key in set(low) | set(held):
        player, season = key
        total, lo, anywhere = held.get(key, 0), low[key], unknown[player] + unseasoned[player]
        sums = _subset_sums(anywhere)
        hi = lo + sum(anywhere)
        if not lo <= total <= hi or (sums is not None and total - lo not in sums):
            v.append(f"player {player} on rig-seasons, season {season}: total {total}, but the posts answered 200 "
                     f"naming it add up to {lo}, and those that may be in any season to {hi - lo} more (as no subset "
                     f"of them)")
    totals = collections.Counter()
    for (player, _), total in held.items():
        totals[player] += total
    for player in set(low_all) | set(unknown) | set(totals):
        found = _total_violation(f"player {player} on rig-seasons (all seasons)", totals[player], low_all[player],
                                 unknown[player])
        if found:
            v.append(found)
    return v


def check_named_scores(history, truth):
    """Posts that set a score and a displayName (each unique): the name a
    player keeps is that of a post answered 200, or of unknown outcome, that
    no post answered 200 came after (one sent after it had its answer); a
    player with a 200 is on the board, one with only failed posts is not."""
    v = []
    posts = collections.defaultdict(list)
    for o in history.of("score_named"):
        posts[o.args["player"]].append(o)
    names = truth.names_of("rig-names")
    for player, ops in posts.items():
        oks = [o for o in ops if o.outcome == "ok"]
        candidates = {o.args["name"] for o in ops if o.outcome in ("ok", "info")
                      and not any(q.invoke > o.complete for q in oks)}
        name = names.get(player)
        if player not in names:
            if oks:
                v.append(f"named score: {player} had {len(oks)} post(s) answered 200 and is not on rig-names")
        elif name not in candidates:
            v.append(f"named score: {player} is named {name!r}, which is not the name of a post no 200 came after "
                     f"({sorted(candidates)[:5]})")
    for player in set(names) - set(posts):
        v.append(f"named score: {player} is on rig-names without a post")
    return v


def check_payments(history, truth, baseline, cards):
    v = []
    now = truth.payments(cards)
    added = now - baseline
    groups = collections.defaultdict(list)
    for o in history.of("pay"):
        groups[o.args["logical"]].append(o)
    explained = collections.Counter()
    for logical, attempts in groups.items():
        a0 = attempts[0].args
        row = (a0["card"], a0["store"], a0["amount"])
        n = added.get(row, 0)
        explained[row] += n
        outcomes = {o.outcome for o in attempts}
        desc = f"payment {logical} (card {a0['card']}, amount {a0['amount']}, key {a0['key']})"
        if n > 1:
            v.append(f"{desc}: applied {n} times")
        # A keyed payment's attempts share one effect: any 201 means it
        # happened; a refusal (409) is recorded with the key, so its retries
        # are refused too.
        if "ok" in outcomes and n != 1:
            v.append(f"{desc}: answered 201 but present {n} times")
        if outcomes == {"fail"} and n:
            v.append(f"{desc}: answered as failed ({attempts[-1].status} {attempts[-1].error}) but present")
        oks = [o.value for o in attempts if o.outcome == "ok"]
        if any(x != oks[0] for x in oks):
            v.append(f"{desc}: its 201s differ ({oks[:2]})")
    stray = added - explained
    if stray:
        v.append(f"payments: {sum(stray.values())} history row(s) no request explains, e.g. {list(stray)[:3]}")
    return v


def check_refunds(history, truth, baseline, cards):
    """Each refund the rig sends (keyed, of its own acknowledged payment,
    once) is present once when answered 201, absent when it only failed, at
    most once when its outcome is unknown; its 201s name one row; and no
    refund row is left unexplained."""
    v = []
    added = truth.refunds(cards) - baseline
    groups = collections.defaultdict(list)
    for o in history.of("refund"):
        groups[o.args["logical"]].append(o)
    explained = collections.Counter()
    for logical, attempts in groups.items():
        a0 = attempts[0].args
        row = (a0["card"], a0["of"], a0["amount"])
        n = added.get(row, 0)
        explained[row] += n
        outcomes = {o.outcome for o in attempts}
        desc = f"refund {logical} (card {a0['card']}, of {a0['of']}, amount {a0['amount']})"
        if n > 1:
            v.append(f"{desc}: applied {n} times")
        if "ok" in outcomes and n != 1:
            v.append(f"{desc}: answered 201 but present {n} times")
        if outcomes == {"fail"} and n:
            v.append(f"{desc}: answered as failed ({attempts[-1].status} {attempts[-1].error}) but present")
        ids = {o.value.get("transactionId") if isinstance(o.value, dict) else None
               for o in attempts if o.outcome == "ok"}
        if len(ids) > 1:
            v.append(f"{desc}: its 201s name different rows ({sorted(ids)})")
    stray = added - explained
    if stray:
        v.append(f"refunds: {sum(stray.values())} refund row(s) no request explains, e.g. {list(stray)[:3]}")
    return v


def check_holds(history, truth, baseline, cards):
    """Each hold the rig sends (keyed, of -id points) is present once when
    answered 201, absent when it only failed, at most once when its outcome
    is unknown; a capture answered 200 left its hold captured for the amount
    asked, one that only failed captured nothing; a void answered 200 left
    its hold voided; and no hold is left unexplained. (`hotrow check
    pointcard`, invariant 13, holds every hold and capture row to its rules.)"""
    v = []
    now = truth.holds(cards)
    added = {k: rows for k, rows in now.items() if k not in baseline}
    ends = collections.defaultdict(list)
    for o in history.of("capture", "void"):
        ends[o.args["logical"]].append(o)
    groups = collections.defaultdict(list)
    for o in history.of("hold"):
        groups[o.args["logical"]].append(o)
    explained = set()
    for logical, attempts in groups.items():
        a0 = attempts[0].args
        key = (a0["card"], a0["amount"])
        explained.add(key)
        rows = added.get(key, [])
        outcomes = {o.outcome for o in attempts}
        desc = f"hold {logical} (card {a0['card']}, amount {a0['amount']})"
        if len(rows) > 1:
            v.append(f"{desc}: made {len(rows)} times")
        if "ok" in outcomes and len(rows) != 1:
            v.append(f"{desc}: answered 201 but present {len(rows)} times")
        if outcomes == {"fail"} and rows:
            v.append(f"{desc}: answered as failed ({attempts[-1].status} {attempts[-1].error}) but present")
        if len(rows) != 1:
            continue
        status, captured = rows[0]
        end = ends.get(logical, [])
        end_outcomes = {o.outcome for o in end}
        if not end:
            if status not in ("open", "expired"):
                v.append(f"{desc}: neither captured nor voided by the rig, but {status}")
            continue
        kind = end[0].kind
        if kind == "capture":
            taken = end[0].args["taken"]
            if "ok" in end_outcomes and (status, captured) != ("captured", taken):
                v.append(f"{desc}: its capture of {taken} answered 200, but it is {status} for {captured}")
            if end_outcomes == {"fail"} and status == "captured":
                v.append(f"{desc}: its capture only failed ({end[-1].status} {end[-1].error}), but it is captured")
            if status == "voided":
                v.append(f"{desc}: only a capture was sent, but it is voided")
        else:
            if "ok" in end_outcomes and status != "voided":
                v.append(f"{desc}: its void answered 200, but it is {status}")
            if end_outcomes == {"fail"} and status == "voided":
                v.append(f"{desc}: its void only failed ({end[-1].status} {end[-1].error}), but it is voided")
            if status == "captured":
                v.append(f"{desc}: only a void was sent, but it is captured")
    stray = set(added) - explained
    if stray:
        v.append(f"holds: {len(stray)} hold(s) no request explains, e.g. {sorted(stray)[:3]}")
    return v


def check_grants(history, truth, grants_before):
    """Every grant the rig sends carries an Idempotency-Key, so each is
    checked by its key: one with a 201 is recorded once, one that only
    failed is not recorded, one whose outcome is unknown at most once; a
    201's grantId is the recorded one; and the grant rows (KIND grant: expiry
    rows are store 0 too), with an applied grant's credit not folded yet on
    SQLite, add up to the recorded grants' cards and points (a half-applied
    grant)."""
    v = []
    grants = truth.grants()
    before = {g[0] for g in grants_before}
    recorded = collections.defaultdict(list)
    for g in grants:
        if g[0] not in before:
            recorded[g[3]].append(g)
    by_key = collections.defaultdict(list)
    for o in history.of("grant"):
        by_key[o.args["key"]].append(o)
    for key, attempts in by_key.items():
        outcomes = {o.outcome for o in attempts}
        rows = recorded.get(key, [])
        if len(rows) > 1:
            v.append(f"grant {key}: recorded {len(rows)} times")
        if "ok" in outcomes:
            if len(rows) != 1:
                v.append(f"grant {key}: answered 201 but recorded {len(rows)} times")
            for o in attempts:
                if o.outcome == "ok" and rows and o.value["grantId"] != rows[0][0]:
                    v.append(f"grant {key}: answered grantId {o.value['grantId']}, recorded {rows[0][0]}")
        elif outcomes == {"fail"} and rows:
            v.append(f"grant {key}: answered as failed ({attempts[-1].status} {attempts[-1].error}) but recorded")
    strays = [k for k in recorded if k not in by_key]
    if strays:
        v.append(f"grants: {len(strays)} recorded that no request explains, e.g. {strays[:3]}")
    rows, points = truth.grant_rows()
    want_rows, want_points = sum(g[1] for g in grants), sum(g[2] for g in grants)
    if (rows, points) != (want_rows, want_points):
        v.append(f"grants: {rows} grant rows with {points} points, the grants say {want_rows} and {want_points} "
                 "(a half-applied grant)")
    return v


def read_models(truth, instances, created_ids, bound):
    """Every instance's plans, ranking, leaderboard pages and ranks equal the
    store of record, within `bound` seconds. Returns (violations, seconds the
    slowest instance took)."""
    plan_ids = HOT_PLANS + EDIT_PLANS + sorted(created_ids)[:20]

    def differences(port):
        diffs = []
        want = truth.plans(plan_ids)
        for pid in plan_ids:
            status, body = get_json(port, f"/datePlan/{pid}")
            have = (body["title"], body["like"]) if status == 200 else None
            if have != want.get(pid):
                diffs.append(f"plan {pid}: {have} instead of {want.get(pid)}")
        status, body = get_json(port, "/datePlan/ranking?limit=10")
        have = [(p["id"], p["like"]) for p in body["plans"]] if status == 200 else status
        if have != [tuple(r) for r in truth.ranking(10)]:
            diffs.append(f"ranking {have} instead of {truth.ranking(10)}")
        board = truth.board()
        pages = []
        for offset in range(0, max(len(board), 1), 100):
            status, body = get_json(port, f"/api/v1/leaderboard?limit=100&offset={offset}")
            if status != 200:
                diffs.append(f"leaderboard page at {offset}: {status}")
                break
            pages += [(e["clientId"], e["score"]) for e in body["entries"]]
        if pages != [tuple(b) for b in board]:
            diffs.append(f"leaderboard: {len(pages)} entries differ from the store's {len(board)}")
        for i, (player, score) in enumerate(board[:5]):
            status, body = get_json(port, f"/api/v1/leaderboard/{player}")
            if status != 200 or (body["rank"], body["score"]) != (i + 1, score):
                diffs.append(f"rank of {player}: {body} instead of rank {i + 1} score {score}")
        return diffs

    v, slowest = [], 0.0
    for name, port in instances.items():
        start = time.monotonic()
        while True:
            try:
                diffs = differences(port)
            except (OSError, http.client.HTTPException) as e:
                diffs = [f"cannot read: {e}"]
            if not diffs or time.monotonic() - start > bound:
                break
            time.sleep(0.2)
        slowest = max(slowest, time.monotonic() - start)
        for d in diffs[:5]:
            v.append(f"{name}: {d} (after {bound:.0f} s)")
    return v, slowest


def check_answers(history, faults, instances_by_port, bound):
    """From an instance that was under no fault of its own at the time: 5xx
    other than 503 with Retry-After, answers slower than the bound (grants
    excepted: they are long-running by design), and connections dropped
    without an answer (a connection opened after the instance's last fault,
    so not one that a kill or a restart broke)."""
    v = []

    # One fault at a time: sorted by start, their ends increase too, so the
    # faults that overlap [invoke, complete] are found by bisection.
    faults = sorted(faults, key=lambda f: f.start)
    starts = [f.start for f in faults]

    def applies(f, who):
        return f.target == who or f.target == "*" or (who == "" and f.target.startswith("hotrow"))

    def exempt(o, who):
        j = bisect.bisect_right(starts, o.complete) - 1
        while j >= 0 and faults[j].end >= o.invoke:
            if applies(faults[j], who):
                return True
            j -= 1
        return False

    def conn_outlived_a_fault(o, who):
        lo, hi = bisect.bisect_left(starts, o.conn_since), bisect.bisect_right(starts, o.complete)
        return any(faults[j].target == who for j in range(lo, hi))

    counts = collections.Counter()

    def report(kind, text):
        counts[kind] += 1
        if counts[kind] <= 5:
            v.append(text)

    for o in history.ops:
        # Who answered: the target when it was an instance; through nginx,
        # the instance nginx names, and no one in particular without an answer.
        who = o.answered_by(instances_by_port) if (o.server == "hotrow" or o.target != "nginx") else ""
        if o.server == "hotrow" and o.status >= 500 and not (o.status == 503 and o.retry_after):
            if not exempt(o, who):
                report("5xx", f"{o.kind} to {o.target} ({who}): {o.status} {o.error!r} under no fault of that instance")
        took = o.complete - o.invoke
        timed_out = o.status == 0 and "timed out" in o.error
        if o.kind != "grant" and (took > bound or timed_out) and not exempt(o, who):
            report("slow", f"{o.kind} to {o.target} ({who}): took {took:.1f} s ({o.status or o.error})")
        dropped = o.status == 0 and not o.error.startswith("refused") and not timed_out
        if dropped and o.target != "nginx" and not exempt(o, who) and not conn_outlived_a_fault(o, who):
            report("dropped", f"{o.kind} to {o.target}: the connection ended without an answer ({o.error})")
    for kind, what in (("5xx", "unexpected 5xx"), ("slow", f"answers slower than {bound:.1f} s"),
                       ("dropped", "connections dropped without an answer")):
        if counts[kind] > 5:
            v.append(f"{counts[kind]} {what} in all")
    return v
