#!/usr/bin/env python3
"""The checks must be able to fail: each test feeds one a history and a store
that break its rule, and one that keeps it. Runs in make test (no servers,
well under a second): python3 faults/test_checks.py
"""

import collections
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import checks  # noqa: E402
from history import History, Op, classify  # noqa: E402


def op(kind, outcome, invoke, complete, write=True, status=200, value=None, **args):
    o = Op(kind, args.pop("target", "hotrow-1"), args, write=write)
    o.outcome, o.invoke, o.complete, o.status, o.value, o.server = outcome, invoke, complete, status, value, "hotrow"
    return o


def history(*ops):
    h = History()
    for o in ops:
        h.add(o)
    return h


class FakeTruth:
    def __init__(self, plans=None, board=(), payments=None, grants=(), grant_rows=(0, 0), titles=(), names=None,
                 seasons=None, refunds=None, holds=None):
        self._names, self._seasons = names or {}, seasons or {}
        self._refunds = refunds or collections.Counter()
        self._holds = holds or {}
        self._plans, self._board, self._payments = plans or {}, list(board), payments or collections.Counter()
        self._grants, self._grant_rows, self._titles = list(grants), grant_rows, list(titles)

    def plans(self, ids):
        return {i: self._plans[i] for i in ids if i in self._plans}

    def board(self):
        return self._board

    def board_of(self, board_id):
        return self._board

    def names_of(self, board_id):
        return self._names

    def seasons_of(self, board_id):
        return self._seasons

    def payments(self, cards):
        return self._payments

    def holds(self, cards):
        return self._holds

    def refunds(self, cards):
        return self._refunds

    def grants(self):
        return self._grants

    def grant_rows(self):
        return self._grant_rows

    def titles(self, category):
        return self._titles


INITIAL = {1: ("p1", 10), 2: ("p2", 0), 3: ("p3", 0), 4: ("t4", 0), 5: ("t5", 0)}


class Likes(unittest.TestCase):
    def test_a_lost_like_is_found(self):
        h = history(op("like", "ok", 0, 1, plan=1, value={"like": 11}), op("like", "ok", 2, 3, plan=1, value={"like": 12}))
        t = FakeTruth(plans={**INITIAL, 1: ("p1", 11)})
        self.assertTrue(any("grew by 1" in v for v in checks.check_likes(h, t, INITIAL)))

    def test_info_likes_may_or_may_not_count(self):
        h = history(op("like", "ok", 0, 1, plan=1, value={"like": 11}), op("like", "info", 2, 3, plan=1))
        for n in (11, 12):
            self.assertEqual(checks.check_likes(h, FakeTruth(plans={**INITIAL, 1: ("p1", n)}), INITIAL), [])
        self.assertTrue(checks.check_likes(h, FakeTruth(plans={**INITIAL, 1: ("p1", 13)}), INITIAL))

    def test_two_200s_with_one_count_are_found(self):
        h = history(op("like", "ok", 0, 1, plan=1, value={"like": 11}), op("like", "ok", 0, 1, plan=1, value={"like": 11}))
        v = checks.check_likes(h, FakeTruth(plans={**INITIAL, 1: ("p1", 12)}), INITIAL)
        self.assertTrue(any("same count" in x for x in v))


class Registers(unittest.TestCase):
    def test_a_value_overwritten_by_a_later_completed_write_is_refused(self):
        h = history(op("edit", "ok", 0, 1, plan=4, title="a"), op("edit", "ok", 2, 3, plan=4, title="b"))
        ok = FakeTruth(plans={**INITIAL, 4: ("b", 0)})
        stale = FakeTruth(plans={**INITIAL, 4: ("a", 0)})
        self.assertEqual(checks.check_edits(h, ok, INITIAL), [])
        self.assertTrue(checks.check_edits(h, stale, INITIAL))

    def test_concurrent_writes_may_end_either_way_and_info_always_may(self):
        h = history(op("edit", "ok", 0, 3, plan=4, title="a"), op("edit", "ok", 1, 2, plan=4, title="b"),
                    op("edit", "info", 0.5, 0.6, plan=4, title="c"), op("edit", "fail", 0, 9, plan=4, title="d"))
        for title in "abc":
            self.assertEqual(checks.check_edits(h, FakeTruth(plans={**INITIAL, 4: (title, 0)}), INITIAL), [])
        self.assertTrue(checks.check_edits(h, FakeTruth(plans={**INITIAL, 4: ("d", 0)}), INITIAL))


class Payments(unittest.TestCase):
    def pay(self, outcome, logical, attempt=0, key=None, value=None):
        return op("pay", outcome, 0, 1, card=1, store=1, amount=-logical, key=key, logical=logical, attempt=attempt,
                  value=value)

    def test_double_effects_missing_oks_present_fails_and_strays_are_found(self):
        h = history(self.pay("ok", 1), self.pay("ok", 2), self.pay("fail", 3), self.pay("info", 4, key="k"),
                    self.pay("info", 4, 1, key="k"))
        rows = collections.Counter({(1, 1, -1): 2, (1, 1, -3): 1, (1, 1, -4): 1, (1, 1, -99): 1})
        v = " | ".join(checks.check_payments(h, FakeTruth(payments=rows), collections.Counter(), [1]))
        self.assertIn("payment 1 (card 1, amount -1, key None): applied 2 times", v)
        self.assertIn("payment 2", v)  # answered 201, absent
        self.assertIn("payment 3", v)  # failed, present
        self.assertNotIn("payment 4", v)  # info: once is allowed
        self.assertIn("no request explains", v)

    def test_a_clean_history_passes(self):
        h = history(self.pay("ok", 1), self.pay("info", 2), self.pay("fail", 3))
        rows = collections.Counter({(1, 1, -1): 1, (1, 1, -50): 3})
        self.assertEqual(checks.check_payments(h, FakeTruth(payments=rows), collections.Counter({(1, 1, -50): 3}), [1]),
                         [])


class Refunds(unittest.TestCase):
    def refund(self, outcome, logical, attempt=0, value=None):
        return op("refund", outcome, 0, 1, card=1, of=100 + logical, amount=logical, key=f"r-{logical}",
                  logical=logical, attempt=attempt, value=value)

    def test_double_effects_missing_oks_present_fails_and_strays_are_found(self):
        h = history(self.refund("ok", 1, value={"transactionId": 7}), self.refund("ok", 2, value={"transactionId": 8}),
                    self.refund("fail", 3), self.refund("info", 4), self.refund("info", 4, 1),
                    self.refund("info", 5), self.refund("ok", 5, 1, value={"transactionId": 9}),
                    self.refund("ok", 5, 2, value={"transactionId": 10}))
        rows = collections.Counter({(1, 101, 1): 2, (1, 103, 3): 1, (1, 104, 4): 1, (1, 105, 5): 1, (1, 199, 9): 1})
        v = " | ".join(checks.check_refunds(h, FakeTruth(refunds=rows), collections.Counter(), [1]))
        self.assertIn("refund 1 (card 1, of 101, amount 1): applied 2 times", v)
        self.assertIn("refund 2", v)  # answered 201, absent
        self.assertIn("refund 3", v)  # failed, present
        self.assertNotIn("refund 4", v)  # info: once is allowed
        self.assertIn("refund 5 (card 1, of 105, amount 5): its 201s name different rows", v)
        self.assertIn("no request explains", v)

    def test_a_clean_history_passes(self):
        h = history(self.refund("ok", 1, value={"transactionId": 7}), self.refund("info", 2), self.refund("fail", 3))
        rows = collections.Counter({(1, 101, 1): 1, (1, 150, 50): 1})
        self.assertEqual(checks.check_refunds(h, FakeTruth(refunds=rows), collections.Counter({(1, 150, 50): 1}), [1]),
                         [])


class Holds(unittest.TestCase):
    def hold(self, outcome, logical, attempt=0):
        return op("hold", outcome, 0, 1, status=201 if outcome == "ok" else 409, card=1, store=1, amount=-logical,
                  logical=logical, attempt=attempt, value={"holdId": logical} if outcome == "ok" else None)

    def end(self, kind, outcome, logical, taken=None):
        args = dict(card=1, hold=logical, amount=-logical, logical=logical)
        if taken is not None:
            args["taken"] = taken
        return op(kind, outcome, 2, 3, status=200 if outcome == "ok" else 409, **args)

    def test_double_holds_missing_oks_present_fails_wrong_ends_and_strays_are_found(self):
        h = history(self.hold("ok", 1), self.hold("ok", 2), self.hold("fail", 3), self.hold("ok", 4),
                    self.end("capture", "ok", 4, -2), self.hold("ok", 5), self.end("void", "ok", 5),
                    self.hold("ok", 6), self.end("capture", "fail", 6, -3), self.hold("info", 7))
        rows = {(1, -1): [("open", 0), ("open", 0)], (1, -3): [("open", 0)], (1, -4): [("captured", -1)],
                (1, -5): [("expired", 0)], (1, -6): [("captured", -3)], (1, -7): [("open", 0)],
                (1, -99): [("open", 0)]}
        v = " | ".join(checks.check_holds(h, FakeTruth(holds=rows), set(), [1]))
        self.assertIn("hold 1 (card 1, amount -1): made 2 times", v)
        self.assertIn("hold 2", v)  # answered 201, absent
        self.assertIn("hold 3", v)  # failed, present
        self.assertIn("hold 4 (card 1, amount -4): its capture of -2 answered 200, but it is captured for -1", v)
        self.assertIn("hold 5 (card 1, amount -5): its void answered 200, but it is expired", v)
        self.assertIn("hold 6 (card 1, amount -6): its capture only failed", v)
        self.assertNotIn("hold 7", v)  # info: once is allowed
        self.assertIn("no request explains", v)

    def test_a_clean_history_passes(self):
        h = history(self.hold("ok", 1), self.end("capture", "ok", 1, -1), self.hold("ok", 2),
                    self.end("void", "ok", 2), self.hold("ok", 3), self.hold("info", 4), self.hold("fail", 5),
                    self.hold("ok", 6), self.end("capture", "fail", 6, -3))
        rows = {(1, -1): [("captured", -1)], (1, -2): [("voided", 0)], (1, -3): [("expired", 0)],
                (1, -6): [("expired", 0)], (1, -50): [("open", 0)]}
        self.assertEqual(checks.check_holds(h, FakeTruth(holds=rows), {(1, -50)}, [1]), [])


class Scores(unittest.TestCase):
    def test_the_first_to_reach_a_tied_score_must_rank_above(self):
        a = op("score_tie", "ok", 0, 1, player="tie-a", score=10)
        b = op("score_tie", "ok", 2, 3, player="tie-b", score=10)
        good = FakeTruth(board=[("tie-a", 10), ("tie-b", 10)])
        bad = FakeTruth(board=[("tie-b", 10), ("tie-a", 10)])
        self.assertEqual(checks.check_scores(history(a, b), good), [])
        self.assertTrue(any("tie order" in v for v in checks.check_scores(history(a, b), bad)))

    def test_a_failed_score_that_is_present_is_found(self):
        a = op("score_tie", "fail", 0, 1, player="tie-a", score=10, status=400)
        self.assertTrue(checks.check_scores(history(a), FakeTruth(board=[("tie-a", 10)])))


class KeyedScores(unittest.TestCase):
    def ops(self):
        ok = op("score_keyed", "ok", 0, 1, value={"score": 5}, player="coin-0", amount=5, logical=5, key="coin-5")
        replay = op("score_keyed", "ok", 2, 3, value={"score": 5}, player="coin-0", amount=5, logical=5, key="coin-5")
        lost = op("score_keyed", "info", 4, 5, status=None, player="coin-0", amount=7, logical=7, key="coin-7")
        failed = op("score_keyed", "fail", 6, 7, status=400, player="coin-1", amount=9, logical=9, key="coin-9")
        return history(ok, replay, lost, failed)

    def test_a_double_or_lost_or_failed_increment_is_found(self):
        for board in ([("coin-0", 10)], [("coin-0", 0)], [("coin-0", 5), ("coin-1", 9)], [("coin-0", 17)]):
            self.assertTrue(checks.check_keyed_scores(self.ops(), FakeTruth(board=board)), board)

    def test_unknown_outcomes_may_or_may_not_count(self):
        for board in ([("coin-0", 5)], [("coin-0", 12)]):
            self.assertEqual(checks.check_keyed_scores(self.ops(), FakeTruth(board=board)), [])


class SignedScores(unittest.TestCase):
    def ops(self):
        ok = op("score_signed", "ok", 0, 1, value={"score": 5}, player="signed-0", amount=5, logical=5)
        replay = op("score_signed", "ok", 2, 3, value={"score": 5}, player="signed-0", amount=5, logical=5)
        lost = op("score_signed", "info", 4, 5, status=None, player="signed-0", amount=7, logical=7)
        refused = op("score_signed", "fail", 6, 7, status=401, player="signed-1", amount=9, logical=9)
        return history(ok, replay, lost, refused)

    def test_a_replay_applied_again_or_a_refused_post_applied_is_found(self):
        for board in ([("signed-0", 10)], [("signed-0", 5), ("signed-1", 9)], [("signed-0", 0)]):
            self.assertTrue(checks.check_signed_scores(self.ops(), FakeTruth(board=board)), board)

    def test_unknown_outcomes_may_or_may_not_count(self):
        for board in ([("signed-0", 5)], [("signed-0", 12)]):
            self.assertEqual(checks.check_signed_scores(self.ops(), FakeTruth(board=board)), [])


class SeasonScores(unittest.TestCase):
    def ops(self):
        a = op("score_season", "ok", 0, 1, value={"score": 5, "season": 3}, player="season-0", amount=5, logical=5)
        a_again = op("score_season", "ok", 2, 3, value={"score": 5, "season": 3}, player="season-0", amount=5,
                     logical=5)
        b = op("score_season", "ok", 4, 5, value={"score": 7, "season": 4}, player="season-0", amount=7, logical=7)
        lost = op("score_season", "info", 6, 7, status=None, player="season-0", amount=11, logical=11)
        failed = op("score_season", "fail", 8, 9, status=400, player="season-1", amount=13, logical=13)
        return history(a, a_again, b, lost, failed)

    def test_a_post_in_the_wrong_season_or_twice_or_failed_is_found(self):
        for held in ({("season-0", 3): 7, ("season-0", 4): 5},  # each in the other's season
                     {("season-0", 3): 10, ("season-0", 4): 7},  # the first twice
                     {("season-0", 3): 5, ("season-0", 4): 7, ("season-1", 4): 13},  # a failed one applied
                     {("season-0", 3): 5},  # one lost
                     {("season-0", 3): 5, ("season-0", 4): 7, ("season-0", 5): 12},  # an unknown one, wrong sum
                     {("season-0", 3): 11, ("season-0", 4): 12}):  # 5 in season 4, the unknown 11 in season 3
            self.assertTrue(checks.check_season_scores(self.ops(), FakeTruth(seasons=held)), held)
        split = op("score_season", "ok", 2, 3, value={"score": 5, "season": 9}, player="season-0", amount=5,
                   logical=5)
        h = self.ops()
        h.add(split)
        self.assertTrue(checks.check_season_scores(h, FakeTruth(seasons={("season-0", 3): 5, ("season-0", 4): 7})))

    def test_a_200_without_its_body_counts_in_some_season(self):
        h = self.ops()
        h.add(op("score_season", "ok", 10, 11, value=None, player="season-0", amount=17, logical=17))
        base = {("season-0", 3): 5, ("season-0", 4): 7}
        self.assertEqual(checks.check_season_scores(h, FakeTruth(seasons={**base, ("season-0", 9): 17})), [])
        self.assertTrue(checks.check_season_scores(h, FakeTruth(seasons=base)), "the 200 lost")

    def test_an_unknown_post_may_land_in_any_season(self):
        for held in ({("season-0", 3): 5, ("season-0", 4): 7},
                     {("season-0", 3): 5, ("season-0", 4): 7, ("season-0", 8): 11},
                     {("season-0", 3): 16, ("season-0", 4): 7}):
            self.assertEqual(checks.check_season_scores(self.ops(), FakeTruth(seasons=held)), [])


class NamedScores(unittest.TestCase):
    def ops(self):
        first = op("score_named", "ok", 0, 1, player="named-0", name="n1")
        second = op("score_named", "ok", 2, 3, player="named-0", name="n2")
        lost = op("score_named", "info", 4, 6, status=None, player="named-0", name="n3")
        failed = op("score_named", "fail", 0, 1, status=400, player="named-1", name="n4")
        return history(first, second, lost, failed)

    def test_an_older_or_failed_or_missing_name_is_found(self):
        for names in ({"named-0": "n1"}, {"named-0": "n2", "named-1": "n4"}, {}, {"named-0": "n9"}):
            self.assertTrue(checks.check_named_scores(self.ops(), FakeTruth(names=names)), names)

    def test_the_last_name_or_an_unknown_later_one_passes(self):
        for names in ({"named-0": "n2"}, {"named-0": "n3"}):
            self.assertEqual(checks.check_named_scores(self.ops(), FakeTruth(names=names)), [])


class Grants(unittest.TestCase):
    def test_a_half_applied_grant_is_found(self):
        g = op("grant", "ok", 0, 1, key="g1", attempt=0, value={"grantId": 1})
        t = FakeTruth(grants=[(1, 5, 100, "g1")], grant_rows=(4, 90))
        self.assertTrue(any("half-applied" in v for v in checks.check_grants(history(g), t, [])))
        ok = FakeTruth(grants=[(1, 5, 100, "g1")], grant_rows=(5, 100))
        self.assertEqual(checks.check_grants(history(g), ok, []), [])

    def test_grants_are_checked_by_key(self):
        ok = op("grant", "ok", 0, 1, key="g1", attempt=0, value={"grantId": 1})
        failed = op("grant", "fail", 0, 1, key="g2", attempt=0, status=409)
        unknown = op("grant", "info", 0, 1, key="g3", attempt=0)
        t = FakeTruth(grants=[(2, 1, 1, "g2"), (3, 1, 1, "g3")], grant_rows=(2, 2))
        v = " | ".join(checks.check_grants(history(ok, failed, unknown), t, []))
        self.assertIn("grant g1: answered 201 but recorded 0 times", v)
        self.assertIn("grant g2: answered as failed", v)
        self.assertNotIn("g3", v)


class Answers(unittest.TestCase):
    def test_a_500_or_a_slow_answer_outside_a_fault_is_found_and_inside_one_is_not(self):
        class F:
            kind, target, start, end = "kill9", "hotrow-1", 10.0, 12.0
        bad = op("like", "info", 0, 0.1, plan=1, status=500)
        slow = op("like", "ok", 0, 9, plan=1)
        excused = op("like", "info", 10.5, 10.6, plan=1, status=500)
        v = checks.check_answers(history(bad, slow, excused), [F()], {}, 5.5)
        self.assertEqual(len(v), 2, v)
        no_retry = op("like", "fail", 0, 0.1, plan=1, status=503)
        self.assertEqual(len(checks.check_answers(history(no_retry), [], {}, 5.5)), 1)

    def test_a_connection_dropped_without_an_answer_is_found_unless_a_fault_broke_it(self):
        class F:
            kind, target, start, end = "kill9", "hotrow-1", 10.0, 12.0
        dropped = op("like", "info", 20, 20.1, plan=1, status=0)
        dropped.error, dropped.conn_since = "RemoteDisconnected: Remote end closed connection", 15.0
        broken = op("like", "info", 20, 20.1, plan=1, status=0)
        broken.error, broken.conn_since = "BrokenPipeError: [Errno 32] Broken pipe", 5.0  # opened before the kill
        v = checks.check_answers(history(dropped, broken), [F()], {}, 5.5)
        self.assertEqual(len(v), 1, v)
        self.assertIn("without an answer", v[0])

    def test_a_grant_is_exempt_from_the_latency_bound_but_not_from_the_5xx_rule(self):
        slow = op("grant", "ok", 0, 60, key="g", attempt=0)
        failed = op("grant", "info", 0, 1, key="h", attempt=0, status=500)
        v = checks.check_answers(history(slow, failed), [], {}, 5.5)
        self.assertEqual(len(v), 1, v)
        self.assertIn("500", v[0])

    def test_classification_follows_the_docs(self):
        def c(status, message, server="hotrow", sqlite=False):
            o = Op("pay", "hotrow-1", {})
            o.status, o.server = status, server
            return classify(o, {"error": {"message": message}}, sqlite)
        self.assertEqual(c(409, "card 1 has a balance of 0"), "fail")
        self.assertEqual(c(503, "the database connection was lost; the outcome of a write is unknown"), "info")
        self.assertEqual(c(503, "Redis connection lost"), "info")
        self.assertEqual(c(503, "the server is shutting down"), "fail")
        self.assertEqual(c(503, "Redis has lost its primary; nothing was written"), "fail")
        self.assertEqual(c(503, "the disk holding the database is full; nothing was written"), "fail")
        self.assertEqual(c(503, "the disk holding the database is full; the outcome of a write is unknown"), "info")
        self.assertEqual(c(503, "the request did not finish within 4000 ms; whether it took effect is unknown"),
                         "info")
        self.assertEqual(c(502, "", server="nginx/1.22.1"), "info")
        self.assertEqual(c(500, "internal error"), "info")
        self.assertEqual(c(500, "internal error", sqlite=True), "fail")


if __name__ == "__main__":
    unittest.main()
