"""The mixed workload: likes on a few hot plans, plan edits, creates and
deletes, scores (the same players, distinct players with tied scores, a
`best` board, keyed increments on a board of their own, posts that set a
displayName on another, signed increments on an `hmac` board, keyed
increments on a board of 20-second seasons), payments with and without
Idempotency-Key, refunds of acknowledged payments, holds (captured in part,
voided or left to expire), and grants (half of them expiring: lots).

Each worker draws its operations from its own random.Random(seed, worker),
so a seed reproduces the workload (not the interleaving). Values are chosen
so that the checks can tell every write apart in the stores afterwards:
titles carry the operation's id, a replace score is 100000 + id, a payment's
amount is +-id on its card, a refund names its payment (each is refunded
once, for half of what it took), a hold is of -id points on its card.
"""

import datetime
import hashlib
import hmac
import itertools
import json
import random
import threading
import time

from history import Client, Op, next_id

HOT_PLANS = [1, 2, 3]
EDIT_PLANS = [4, 5]
CREATE_CATEGORY = "RigCreated"
HOT_PLAYERS = ["hot-0", "hot-1", "hot-2"]
BEST_PLAYERS = ["best-0", "best-1"]
TIE_SCORES = [10, 20, 30]
COIN_BOARD = "rig-coins"  # an increment board: every keyed post adds its amount once
COIN_PLAYERS = ["coin-0", "coin-1"]
NAME_BOARD = "rig-names"  # a replace board: each post sets a score and a displayName
NAME_PLAYERS = ["named-0", "named-1", "named-2"]
SIGNED_BOARD = "rig-signed"  # an increment board with auth hmac: each signed post adds its amount once
SIGNED_PLAYERS = ["signed-0", "signed-1"]
# An increment board whose seasons last SEASON_SECONDS (the servers run with
# --test-hooks): keyed posts, each counted in the season its answer names.
# keepSeasons 1000 (the most) must outlast the clock steps: each sets an
# offset of +-60-7200 s from real time, so two clocks in a row may be
# 14,400 s apart, 720 seasons of 20 s, and nothing is purged.
SEASON_BOARD = "rig-seasons"
SEASON_SECONDS = 20
SEASON_PLAYERS = ["season-0", "season-1"]
CARDS = [1, 2, 3, 4, 5, 6]
STORES = [1, 2, 3]

WEIGHTS = [
    ("like", 30), ("edit", 6), ("create", 3), ("delete", 2), ("score_hot", 10), ("score_best", 4),
    ("score_tie", 5), ("score_keyed", 5), ("score_named", 3), ("score_signed", 3), ("score_season", 3), ("pay", 14),
    ("pay_keyed", 10), ("refund", 4), ("hold", 4), ("read", 16),
]


# Payments count on their own, so that their amounts (+-n, |amount| at most
# 1,000,000) stay unique through a long run.
_payments = itertools.count(1)
_payments_lock = threading.Lock()


def next_payment():
    with _payments_lock:
        return next(_payments)


def rfc3339(epoch):
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Workload:
    def __init__(self, history, targets, admin_token, seed, sqlite=False, timeout=15.0, workers=8):
        self.history = history
        self.targets = targets  # name -> port; "nginx" first when there is one
        self.admin = {"Authorization": f"Bearer {admin_token}"}
        self.seed = seed
        self.sqlite = sqlite
        self.timeout = timeout
        self.workers = workers
        self.stop = threading.Event()
        self.threads = []
        self.created = []  # ids of plans created ok, for deletes
        self.created_lock = threading.Lock()
        self.paid = []  # (card, transactionId, points) of payments answered 201, each refunded once
        self.paid_lock = threading.Lock()
        self.start_epoch = time.time()
        self.signed_secret = None

    def make_boards(self):
        """The boards of the keyed, named, signed and seasonal posts, on the
        first instance that answers (201, or 409: made by an earlier phase,
        whose signing secret is then rotated: this phase's is new)."""
        for board in ({"id": COIN_BOARD, "operator": "increment"}, {"id": NAME_BOARD},
                      {"id": SEASON_BOARD, "operator": "increment", "reset": {"everySeconds": SEASON_SECONDS},
                       "keepSeasons": 1000}):
            self._admin_post("/api/v1/boards", board, (201, 409))
        made = self._admin_post("/api/v1/boards", {"id": SIGNED_BOARD, "operator": "increment", "auth": "hmac"},
                                (201, 409))
        if made.status == 409:
            made = self._admin_post(f"/api/v1/boards/{SIGNED_BOARD}/secret", {}, (201,))
        self.signed_secret = made.value["secret"]

    def _admin_post(self, path, body, wanted):
        for _ in range(50):
            for port in self.targets.values():
                client = Client(port, 5.0)
                op = Op("setup", "setup", {}, write=False)
                client.call(op, "POST", path, body, self.admin)
                client.close()
                if op.status in wanted:
                    if op.value is None and op.status == 201:
                        continue  # a 201 whose body was lost: another try (only setup posts: a board, a secret)
                    return op
            time.sleep(0.2)
        raise RuntimeError(f"cannot POST {path} {body}")

    def start(self, grant_every=(2.0, 5.0)):
        self.make_boards()
        self.stop.clear()
        for w in range(self.workers):
            t = threading.Thread(target=self._worker, args=(random.Random(f"{self.seed}/{w}"),), daemon=True)
            t.start()
            self.threads.append(t)
        if grant_every:
            t = threading.Thread(target=self._granter, args=(random.Random(f"{self.seed}/grants"), grant_every),
                                 daemon=True)
            t.start()
            self.threads.append(t)

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(130)  # a grant's client waits up to 120 s; its op must be in the history before the checks
        self.threads = []

    def _pick_target(self, rng):
        names = list(self.targets)
        if "nginx" in self.targets and rng.random() < 0.5:
            return "nginx"
        return rng.choice(names)

    def _worker(self, rng):
        clients = {}
        kinds = [k for k, _ in WEIGHTS]
        weights = [w for _, w in WEIGHTS]
        while not self.stop.is_set():
            target = self._pick_target(rng)
            client = clients.get(target)
            if client is None:
                client = clients[target] = Client(self.targets[target], self.timeout)
            kind = rng.choices(kinds, weights)[0]
            getattr(self, f"_do_{kind}")(rng, client, target)
        for c in clients.values():
            c.close()

    def _run(self, client, op, method, path, body=None, headers=None):
        client.call(op, method, path, body, headers, sqlite=self.sqlite)
        self.history.add(op)
        if op.error.startswith("refused"):
            time.sleep(0.05)  # the instance is down: do not spin
        return op

    def _do_like(self, rng, client, target):
        plan = rng.choice(HOT_PLANS)
        self._run(client, Op("like", target, {"plan": plan}), "POST", f"/datePlan/{plan}/like")

    def _do_edit(self, rng, client, target):
        plan = rng.choice(EDIT_PLANS)
        op = Op("edit", target, {"plan": plan})
        op.args["title"] = f"e{op.id}"
        self._run(client, op, "PUT", f"/datePlan/{plan}",
                  {"title": op.args["title"], "content": "", "category": "RigEdited"}, self.admin)

    def _do_create(self, rng, client, target):
        op = Op("create", target, {})
        op.args["title"] = f"c{op.id}"
        self._run(client, op, "POST", "/datePlan", {"title": op.args["title"], "content": "",
                                                     "category": CREATE_CATEGORY})
        if op.outcome == "ok":
            with self.created_lock:
                self.created.append(op.value["id"])

    def _do_delete(self, rng, client, target):
        with self.created_lock:
            if not self.created:
                return
            plan = self.created.pop(rng.randrange(len(self.created)))
        self._run(client, Op("delete", target, {"plan": plan}), "DELETE", f"/datePlan/{plan}", None, self.admin)

    def _do_score_hot(self, rng, client, target):
        player = rng.choice(HOT_PLAYERS)
        op = Op("score_hot", target, {"player": player})
        op.args["score"] = 100000 + op.id
        self._run(client, op, "POST", "/api/v1/score", {"score": op.args["score"]}, {"ClientId": player})

    def _do_score_best(self, rng, client, target):
        player = rng.choice(BEST_PLAYERS)
        op = Op("score_best", target, {"player": player})
        op.args["score"] = 200000 + rng.randrange(1000000)
        self._run(client, op, "POST", "/api/v1/score?mode=best", {"score": op.args["score"]}, {"ClientId": player})

    def _do_score_tie(self, rng, client, target):
        op = Op("score_tie", target, {})
        op.args["player"] = f"tie-{op.id}"
        op.args["score"] = rng.choice(TIE_SCORES)
        self._run(client, op, "POST", "/api/v1/score", {"score": op.args["score"]}, {"ClientId": op.args["player"]})

    def _pay(self, rng, client, target, keyed):
        card, store = rng.choice(CARDS), rng.choice(STORES)
        logical = next_payment()
        amount = logical if rng.random() < 0.4 else -logical
        key = f"rig-{logical}" if keyed else None
        # A keyed payment whose outcome is unknown is retried with the same
        # key and body, as docs/api.md tells a client to; an unkeyed one is not.
        op = self._retried(client, "pay", target, {"card": card, "store": store, "amount": amount, "key": key,
                                                   "logical": logical},
                           f"/api/v1/cards/{card}/transactions", {"storeId": store, "amount": amount},
                           {"Idempotency-Key": key} if key else None, attempts=3 if keyed else 1)
        if amount < 0 and op.outcome == "ok" and isinstance(op.value, dict) and "transactionId" in op.value:
            with self.paid_lock:
                self.paid.append((card, op.value["transactionId"], -amount))

    def _do_refund(self, rng, client, target):
        # Half of an acknowledged payment, with a key (refunds require one),
        # retried with it while the outcome is unknown.
        with self.paid_lock:
            if not self.paid:
                return
            card, paid, points = self.paid.pop(rng.randrange(len(self.paid)))
        logical = next_payment()
        amount = max(1, points // 2)
        key = f"refund-{logical}"
        self._retried(client, "refund", target, {"card": card, "of": paid, "amount": amount, "key": key,
                                                 "logical": logical},
                      f"/api/v1/cards/{card}/transactions/{paid}/refund", {"amount": amount},
                      {"Idempotency-Key": key})

    def _do_hold(self, rng, client, target):
        # A keyed hold of -id points, retried while its outcome is unknown;
        # one answered 201 is captured in part (60%), voided (20%) or left
        # to expire (its 1, 2 or 60 seconds), each keyed and retried.
        card, store = rng.choice(CARDS), rng.choice(STORES)
        logical = next_payment()
        seconds = rng.choice([1, 2, 60])
        op = self._retried(client, "hold", target, {"card": card, "store": store, "amount": -logical,
                                                    "logical": logical},
                           f"/api/v1/cards/{card}/holds",
                           {"storeId": store, "amount": -logical, "expiresInSeconds": seconds},
                           {"Idempotency-Key": f"hold-{logical}"})
        if op.outcome != "ok" or not isinstance(op.value, dict):
            return
        hold, draw = op.value["holdId"], rng.random()
        args = {"card": card, "hold": hold, "amount": -logical, "logical": logical}
        if draw < 0.6:
            taken = -max(1, logical // 2)
            self._retried(client, "capture", target, dict(args, taken=taken),
                          f"/api/v1/cards/{card}/holds/{hold}/capture", {"amount": taken},
                          {"Idempotency-Key": f"capture-{logical}"})
        elif draw < 0.8:
            self._retried(client, "void", target, args, f"/api/v1/cards/{card}/holds/{hold}/void", None,
                          {"Idempotency-Key": f"void-{logical}"})

    def _retried(self, client, kind, target, args, path, body, headers, attempts=3):
        """POSTs one logical request, sent again as it was (same key, or
        same signature) while its outcome is unknown: an op per attempt."""
        for attempt in range(attempts):
            op = Op(kind, target, dict(args, attempt=attempt))
            self._run(client, op, "POST", path, body, headers)
            if op.outcome != "info" or self.stop.is_set():
                break
        return op

    def _do_score_keyed(self, rng, client, target):
        # A unique amount per logical post (the payments' counter), retried
        # with its key while its outcome is unknown, as a client should.
        player, logical = rng.choice(COIN_PLAYERS), next_payment()
        key = f"coin-{logical}"
        self._retried(client, "score_keyed", target, {"player": player, "amount": logical, "logical": logical,
                                                      "key": key},
                      f"/api/v1/boards/{COIN_BOARD}/scores", {"score": logical},
                      {"ClientId": player, "Idempotency-Key": key})

    def _do_score_named(self, rng, client, target):
        # A score and a displayName unique to the post: the name the store
        # keeps must be that of a post no acknowledged post came after.
        op = Op("score_named", target, {"player": rng.choice(NAME_PLAYERS)})
        op.args["name"] = f"n{op.id}"
        self._run(client, op, "POST", f"/api/v1/boards/{NAME_BOARD}/scores",
                  {"score": op.id, "displayName": op.args["name"]}, {"ClientId": op.args["player"]})

    def _do_score_signed(self, rng, client, target):
        # Signed as docs/api.md says, over the exact body sent; a post whose
        # outcome is unknown is sent again as it was (same timestamp and
        # signature): the kept signature replays the first answer.
        player, logical = rng.choice(SIGNED_PLAYERS), next_payment()
        path = f"/api/v1/boards/{SIGNED_BOARD}/scores"
        body = {"score": logical}
        stamp = str(int(time.time()))
        message = f"POST\n{path}\n{player}\n{stamp}\n{json.dumps(body)}".encode()
        signature = hmac.new(self.signed_secret.encode(), message, hashlib.sha256).hexdigest()
        self._retried(client, "score_signed", target, {"player": player, "amount": logical, "logical": logical},
                      path, body, {"ClientId": player, "X-Timestamp": stamp, "X-Signature": signature})

    def _do_score_season(self, rng, client, target):
        player, logical = rng.choice(SEASON_PLAYERS), next_payment()
        key = f"season-{logical}"
        self._retried(client, "score_season", target, {"player": player, "amount": logical, "logical": logical,
                                                       "key": key},
                      f"/api/v1/boards/{SEASON_BOARD}/scores", {"score": logical},
                      {"ClientId": player, "Idempotency-Key": key})

    def _do_pay(self, rng, client, target):
        self._pay(rng, client, target, False)

    def _do_pay_keyed(self, rng, client, target):
        self._pay(rng, client, target, True)

    def _do_read(self, rng, client, target):
        path = rng.choice(["/datePlan/ranking", f"/datePlan/{rng.choice(HOT_PLANS)}", "/api/v1/leaderboard",
                           f"/api/v1/leaderboard/{rng.choice(HOT_PLAYERS)}",
                           f"/api/v1/cards/{rng.choice(CARDS)}/transactions?limit=5", "/datePlan"])
        self._run(client, Op("read", target, {"path": path}, write=False), "GET", path)

    def _granter(self, rng, every):
        client = None
        while not self.stop.wait(rng.uniform(*every)):
            target = self._pick_target(rng)
            if client is None or client.port != self.targets[target]:
                if client:
                    client.close()
                client = Client(self.targets[target], 120.0)
            key = f"grant-{next_id()}"
            body = {"from": rfc3339(self.start_epoch - 3600), "to": rfc3339(time.time() - 1), "ratePercent": 1,
                    "allowOverlap": True}
            # Half of them expiring: in 3-20 s, so that lots expire among
            # the payments, holds, refunds and faults (a server whose clock
            # a step put ahead refuses one already past with 400); or in a
            # day, so that lots are taken from and refunded to.
            draw = rng.random()
            if draw < 0.25:
                body["expiresAt"] = rfc3339(time.time() + rng.uniform(3, 20))
            elif draw < 0.5:
                body["expiresInDays"] = 1
            self._retried(client, "grant", target, {"key": key}, "/api/v1/grants", body,
                          dict(self.admin, **{"Idempotency-Key": key}))
        if client:
            client.close()
