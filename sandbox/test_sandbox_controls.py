"""Tests of the sandbox's fault rules, clock, 429 reasons, payout and charge status
controls and the listing filters. Run by `python3 -m unittest sandbox.test_stripe_sandbox`
(which imports these classes), or alone: `python3 -m unittest sandbox.test_sandbox_controls`.
"""

import email.utils
from datetime import datetime, timedelta, timezone
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import unittest

from .sandbox_case import KEY, PREVIEW, SERVER, SandboxCase, payout_body

OBP = "/v2/money_management/outbound_payments"
V2 = {"Stripe-Version": PREVIEW}


def http_date_ts(value):
    return email.utils.parsedate_to_datetime(value).timestamp()


class ControlsTest(SandboxCase):
    def rules(self, *rules):
        return self.ctl("POST", "/_sandbox/faults", {"rules": list(rules)})["rules"]

    def ctl_status(self, method, path, body):
        """A control call that may refuse: (status, body)."""
        c = self.conn()
        try:
            c.request(method, path, body=json.dumps(body).encode(),
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            return r.status, json.loads(r.read())
        finally:
            c.close()

    def stats(self):
        return self.ctl("GET", "/_sandbox/stats")

    # -- fault rules ---------------------------------------------------------------
    def test_rules_set_read_clear_and_validate(self):
        self.assertEqual(self.ctl("GET", "/_sandbox/faults"), {"rules": []})
        got = self.rules({"path_prefix": "/v1/transfers", "action": "status", "status": 500})
        self.assertEqual(got, [{"method": None, "path_prefix": "/v1/transfers", "on": "any",
                                "nth": None, "times": None, "action": "status", "status": 500,
                                "code": None, "type": None, "message": None, "body": None,
                                "raw_body": None, "content_type": None, "headers": None,
                                "reason": None, "matched": 0, "fired": 0}])
        for bad in ({"action": "explode"}, {"action": "status"},
                    {"action": "status", "status": 400, "reason": "global-rate"},
                    {"action": "stall"}, {"action": "reset", "seconds": 1},
                    {"action": "reset", "on": "sometimes"}, {"action": "reset", "nth": 0}):
            st, body = self.ctl_status("POST", "/_sandbox/faults", {"rules": [bad]})
            self.assertEqual(st, 400, bad)
        st, _ = self.ctl_status("POST", "/_sandbox/faults", [])
        self.assertEqual(st, 400)
        # a refused update keeps the rules that were there
        self.assertEqual(len(self.ctl("GET", "/_sandbox/faults")["rules"]), 1)
        self.assertEqual(self.rules(), [])
        # reset clears them
        self.rules({"action": "reset"})
        self.ctl("POST", "/_sandbox/reset", {"empty": True})
        self.assertEqual(self.ctl("GET", "/_sandbox/faults"), {"rules": []})

    def test_status_rule_first_then_passes_and_is_not_saved(self):
        self.rules({"method": "POST", "path_prefix": "/v1/transfers", "on": "first",
                    "action": "status", "status": 500, "code": "injected"})
        st, body, h = self.transfer(100, src="ch_1", key="k-first")
        self.assertEqual(st, 500)
        self.assertEqual(body["error"]["type"], "api_error")
        self.assertEqual(body["error"]["code"], "injected")
        self.assertEqual(self.effects(), [])
        # the retry is not "first": it runs, as a new request (nothing was saved)
        st, tr, h = self.transfer(100, src="ch_1", key="k-first")
        self.assertEqual(st, 200, tr)
        self.assertNotIn("idempotent-replayed", h)
        self.assertEqual(len(self.effects()), 1)
        # GETs and other paths do not match
        self.assertEqual(self.call("GET", "/v1/charges/ch_1")[0], 200)
        (rule,) = self.ctl("GET", "/_sandbox/faults")["rules"]
        self.assertEqual((rule["matched"], rule["fired"]), (1, 1))
        stats = self.stats()
        self.assertEqual(stats["faults"]["rules"], 1)
        self.assertEqual(stats["rule_faults"], {"status": 1})
        self.assertEqual(stats["by_status"]["500"], 1)

    def test_retry_rule_sees_keys_that_were_never_committed(self):
        self.rules({"on": "first", "times": 1, "action": "status", "status": 503},
                   {"on": "retry", "times": 1, "action": "status", "status": 400,
                    "code": "parameter_invalid"})
        self.assertEqual(self.transfer(100, src="ch_1", key="k-r")[0], 503)
        self.assertError(self.transfer(100, src="ch_1", key="k-r"), 400, "parameter_invalid")
        self.assertEqual(self.effects(), [])
        st, tr, h = self.transfer(100, src="ch_1", key="k-r")
        self.assertEqual(st, 200, tr)
        self.assertNotIn("idempotent-replayed", h)
        # a request without a key is never a retry: the first rule is used up, so it passes
        self.assertEqual(self.transfer(100, src="ch_1")[0], 200)
        self.assertEqual([(r["matched"], r["fired"])
                          for r in self.ctl("GET", "/_sandbox/faults")["rules"]],
                         [(2, 1), (2, 1)])

    def test_status_rule_on_retry_with_raw_body_then_replay(self):
        st, tr, _ = self.transfer(100, src="ch_1", key="k-html")
        self.assertEqual(st, 200)
        self.rules({"on": "retry", "times": 1, "action": "status", "status": 403,
                    "raw_body": "<html><body>Forbidden</body></html>"})
        st, raw, h = self.raw_call("POST", "/v1/transfers",
                                   {"amount": "100", "currency": "usd", "destination": "acct_a",
                                    "source_transaction": "ch_1"}, key="k-html")
        self.assertEqual((st, raw), (403, b"<html><body>Forbidden</body></html>"))
        self.assertTrue(h["content-type"].startswith("text/html"))
        st, again, h = self.transfer(100, src="ch_1", key="k-html")
        self.assertEqual((st, again["id"], h.get("idempotent-replayed")), (200, tr["id"], "true"))
        self.assertEqual(len(self.effects()), 1)

    def test_status_rule_with_body_and_nth(self):
        self.rules({"method": "GET", "path_prefix": "/v1/charges/", "nth": 2, "action": "status",
                    "status": 404, "body": {"error": {"type": "invalid_request_error",
                                                      "code": "resource_missing"}}})
        self.assertEqual(self.call("GET", "/v1/charges/ch_1")[0], 200)
        st, body, _ = self.call("GET", "/v1/charges/ch_1")
        self.assertEqual((st, body), (404, {"error": {"type": "invalid_request_error",
                                                      "code": "resource_missing"}}))
        self.assertEqual(self.call("GET", "/v1/charges/ch_1")[0], 200)
        (rule,) = self.ctl("GET", "/_sandbox/faults")["rules"]
        self.assertEqual((rule["matched"], rule["fired"]), (3, 1))

    def test_status_rule_v2_shape(self):
        self.rules({"path_prefix": "/v2/", "action": "status", "status": 401})
        st, body, _ = self.payout(payout_body(), key="k-v2")
        self.assertEqual(st, 401)
        self.assertEqual(set(body["error"]), {"type", "code", "message"})
        self.assertEqual(self.effects(), [])

    def test_drop_after_commit_rule_drops_replays_too(self):
        self.rules({"path_prefix": "/v1/transfers", "action": "drop_after_commit", "times": 2})
        for _ in range(2):
            with self.assertRaises((http.client.RemoteDisconnected, ConnectionError)):
                self.transfer(1500, src="ch_1", key="k-d")
        eff = self.effects()
        self.assertEqual([(e["amount"], e["idempotency_key"]) for e in eff], [(1500, "k-d")])
        st, tr, h = self.transfer(1500, src="ch_1", key="k-d")
        self.assertEqual((st, tr["id"], h.get("idempotent-replayed")), (200, eff[0]["id"], "true"))
        stats = self.stats()
        self.assertEqual(stats["by_status"]["dropped"], 2)
        self.assertEqual(stats["faults"]["drop_after_commit"], 0)  # that one is the dice's
        self.assertEqual(stats["rule_faults"], {"drop_after_commit": 2})

    def test_redirect_html_garbage_have_no_effect(self):
        form = {"amount": "100", "currency": "usd", "destination": "acct_a",
                "source_transaction": "ch_1"}
        self.rules({"times": 1, "action": "redirect", "location": "https://portal.invalid/x"},
                   {"times": 1, "action": "html"},
                   {"times": 1, "action": "garbage"})
        st, raw, h = self.raw_call("POST", "/v1/transfers", form, key="k-x")
        self.assertEqual((st, h["location"], raw), (302, "https://portal.invalid/x", b""))
        st, raw, h = self.raw_call("POST", "/v1/transfers", form, key="k-x")
        self.assertEqual(st, 200)
        self.assertTrue(h["content-type"].startswith("text/html"))
        self.assertIn(b"<html>", raw)
        st, raw, h = self.raw_call("POST", "/v1/transfers", form, key="k-x")
        self.assertEqual((st, h["content-type"]), (200, "application/json"))
        with self.assertRaises(ValueError):
            json.loads(raw)
        self.assertEqual(self.effects(), [])
        st, tr, h = self.transfer(100, src="ch_1", key="k-x")
        self.assertEqual(st, 200)
        self.assertNotIn("idempotent-replayed", h)
        self.assertEqual(self.stats()["rule_faults"], {"redirect": 1, "html": 1, "garbage": 1})

    def test_reset_rule(self):
        self.rules({"times": 1, "action": "reset"})
        with self.assertRaises(ConnectionResetError):
            self.transfer(100, src="ch_1", key="k-rst")
        self.assertEqual(self.effects(), [])
        self.assertEqual(self.stats()["by_status"]["reset"], 1)
        st, tr, h = self.transfer(100, src="ch_1", key="k-rst")
        self.assertEqual(st, 200)
        self.assertNotIn("idempotent-replayed", h)

    def test_stall_rule_client_times_out_then_effect_happens(self):
        self.rules({"method": "POST", "times": 1, "action": "stall", "seconds": 2})
        form = {"amount": "100", "currency": "usd", "destination": "acct_a",
                "source_transaction": "ch_1"}
        with self.assertRaises(socket.timeout):
            self.raw_call("POST", "/v1/transfers", form, key="k-stall", timeout=0.3)
        # the stalled request holds its key: a retry meanwhile is told to wait
        self.assertError(self.transfer(100, src="ch_1", key="k-stall"), 409,
                         "idempotency_key_in_use")
        deadline = time.time() + 15
        while not self.effects() and time.time() < deadline:
            time.sleep(0.1)
        (eff,) = self.effects()
        st, tr, h = self.transfer(100, src="ch_1", key="k-stall")
        self.assertEqual((st, tr["id"], h.get("idempotent-replayed")), (200, eff["id"], "true"))

    def test_rule_429_reasons(self):
        self.rules({"times": 1, "action": "status", "status": 429,
                    "reason": "endpoint-concurrency"},
                   {"times": 1, "action": "status", "status": 429, "reason": "lock-timeout"},
                   {"times": 1, "action": "status", "status": 429})
        st, body, h = self.call("GET", "/v1/charges/ch_1")
        self.assertEqual((st, body["error"]["code"], h["stripe-rate-limited-reason"]),
                         (429, "rate_limit", "endpoint-concurrency"))
        st, body, h = self.call("GET", "/v1/charges/ch_1")
        self.assertEqual((st, body["error"]["code"], h["stripe-rate-limited-reason"]),
                         (429, "lock_timeout", "lock-timeout"))
        st, body, h = self.call("GET", "/v1/charges/ch_1")
        self.assertEqual((st, body["error"]["code"], h["stripe-rate-limited-reason"]),
                         (429, "rate_limit", "global-rate"))

    # -- 429 reasons ----------------------------------------------------------------
    def test_fail_429_reasons_and_rate_limit_reason(self):
        self.ctl("POST", "/_sandbox/config", {"fail_429": 1.0, "fail_429_reasons": ["lock-timeout"]})
        st, body, h = self.transfer(100, src="ch_1", key="k-429")
        self.assertEqual((st, body["error"]["code"], h["stripe-rate-limited-reason"]),
                         (429, "lock_timeout", "lock-timeout"))
        self.ctl("POST", "/_sandbox/config", {"fail_429_reasons": ["endpoint-rate"]})
        st, body, h = self.transfer(100, src="ch_1", key="k-429")
        self.assertEqual((st, body["error"]["code"], h["stripe-rate-limited-reason"]),
                         (429, "rate_limit", "endpoint-rate"))
        self.ctl("POST", "/_sandbox/config",
                 {"fail_429_reasons": ["global-concurrency", "endpoint-concurrency"]})
        seen = {self.call("GET", "/v1/charges/ch_1")[2]["stripe-rate-limited-reason"]
                for _ in range(20)}
        self.assertEqual(seen, {"global-concurrency", "endpoint-concurrency"})
        for bad in (["slow"], [], "global-rate"):
            st, _ = self.ctl_status("POST", "/_sandbox/config", {"fail_429_reasons": bad})
            self.assertEqual(st, 400, bad)
        self.assertEqual(self.effects(), [])
        # the token bucket says global-rate
        self.ctl("POST", "/_sandbox/config", {"fail_429": 0, "rate_limit": 1})
        c = self.conn()
        try:
            answers = [self.call("GET", "/v1/charges/ch_1", conn=c) for _ in range(4)]
        finally:
            c.close()
        limited = [h for s, _, h in answers if s == 429]
        self.assertGreaterEqual(len(limited), 1)
        self.assertEqual({h["stripe-rate-limited-reason"] for h in limited}, {"global-rate"})

    # -- clock ------------------------------------------------------------------------
    def test_date_header_and_clock_offset(self):
        st, _, h = self.call("GET", "/v1/charges/ch_1")
        self.assertRegex(h["date"], r"^[A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT$")
        self.assertLess(abs(http_date_ts(h["date"]) - time.time()), 60)
        c = self.conn()  # control answers carry it too
        c.request("GET", "/_sandbox/health")
        r = c.getresponse()
        r.read()
        c.close()
        self.assertIsNotNone(r.getheader("Date"))
        self.ctl("POST", "/_sandbox/config", {"clock_offset_s": 90000})
        st, tr, h = self.transfer(100, src="ch_1")
        self.assertLess(abs(http_date_ts(h["date"]) - (time.time() + 90000)), 60)
        self.assertLess(abs(tr["created"] - (time.time() + 90000)), 60)
        st, obp, _ = self.payout(payout_body())
        created = http_date_ts(h["date"])
        obp_ts = datetime.fromisoformat(obp["created"].replace("Z", "+00:00")).timestamp()
        self.assertLess(abs(obp_ts - created), 60)
        st, _ = self.ctl_status("POST", "/_sandbox/config", {"clock_offset_s": "soon"})
        self.assertEqual(st, 400)
        self.ctl("POST", "/_sandbox/config", {"clock_offset_s": -3600})
        st, _, h = self.call("GET", "/v1/balance")
        self.assertLess(abs(http_date_ts(h["date"]) - (time.time() - 3600)), 60)

    def test_v1_key_expires_after_24h(self):
        st, first, _ = self.transfer(100, src="ch_1", key="k-exp")
        self.ctl("POST", "/_sandbox/config", {"clock_offset_s": 23 * 3600})
        st, again, h = self.transfer(100, src="ch_1", key="k-exp")
        self.assertEqual((again["id"], h.get("idempotent-replayed")), (first["id"], "true"))
        self.ctl("POST", "/_sandbox/config", {"clock_offset_s": 25 * 3600})
        st, second, h = self.transfer(100, src="ch_1", key="k-exp")
        self.assertEqual(st, 200)
        self.assertNotEqual(second["id"], first["id"])
        self.assertNotIn("idempotent-replayed", h)
        self.assertEqual(len(self.effects()), 2)
        # an expired key is a new key: other parameters are fine, and it is "first" again
        self.ctl("POST", "/_sandbox/config", {"clock_offset_s": 50 * 3600})
        self.rules({"on": "retry", "action": "status", "status": 400})
        self.assertEqual(self.transfer(200, src="ch_1", key="k-exp")[0], 200)

    def test_v2_key_expires_after_30_days(self):
        st, first, _ = self.payout(payout_body(), key="k-v2exp")
        self.ctl("POST", "/_sandbox/config", {"clock_offset_s": 25 * 3600})
        st, again, h = self.payout(payout_body(), key="k-v2exp")
        self.assertEqual((again["id"], h.get("idempotent-replayed")), (first["id"], "true"))
        self.ctl("POST", "/_sandbox/config", {"clock_offset_s": 31 * 86400})
        st, second, h = self.payout(payout_body(), key="k-v2exp")
        self.assertEqual(st, 200, second)
        self.assertNotEqual(second["id"], first["id"])
        self.assertEqual(len(self.effects()), 2)

    # -- payouts ------------------------------------------------------------------------
    def get_obp(self, obp_id):
        st, body, _ = self.call("GET", f"{OBP}/{obp_id}", headers=V2)
        self.assertEqual(st, 200, body)
        return body

    def test_payout_processing_then_posted_on_read(self):
        st, obp, _ = self.payout(payout_body(), key="p-auto")
        self.assertEqual((obp["status"], obp["status_transitions"]["posted_at"]),
                         ("processing", None))
        got = self.get_obp(obp["id"])
        self.assertEqual(got["status"], "posted")
        self.assertIsNotNone(got["status_transitions"]["posted_at"])
        self.assertIsNone(got["status_details"])
        # the replay is the saved answer of the create, as on Stripe
        st, replay, h = self.payout(payout_body(), key="p-auto")
        self.assertEqual((replay["status"], h.get("idempotent-replayed")), ("processing", "true"))
        self.ctl("POST", "/_sandbox/config", {"payout_initial_status": "posted"})
        st, posted, _ = self.payout(payout_body(ins="ins_p2"))
        self.assertEqual(posted["status"], "posted")
        self.assertIsNotNone(posted["status_transitions"]["posted_at"])
        st, _ = self.ctl_status("POST", "/_sandbox/config", {"payout_initial_status": "failed"})
        self.assertEqual(st, 400)

    def test_payout_returned_after_posted_credits_back(self):
        self.ctl("POST", "/_sandbox/config", {"payout_auto_post": False})
        st, obp, _ = self.payout(payout_body(value=3000), key="p-ret")
        self.assertEqual(self.get_obp(obp["id"])["status"], "processing")
        out = self.ctl("POST", f"/_sandbox/outbound_payments/{obp['id']}/status",
                       {"status": "posted"})
        self.assertEqual((out["ok"], out["changed"], out["outbound_payment"]["status"]),
                         (True, True, "posted"))
        fa = lambda: self.ctl("GET", "/_sandbox/state")["financial_accounts"]["fa_1"]["balance"]["usd"]  # noqa: E731
        self.assertEqual(fa(), 7000)
        out = self.ctl("POST", f"/_sandbox/outbound_payments/{obp['id']}/status",
                       {"status": "returned", "reason": "payout_method_closed"})
        got = self.get_obp(obp["id"])
        self.assertEqual(got, out["outbound_payment"])
        self.assertEqual(got["status"], "returned")
        self.assertEqual(got["status_details"], {"returned": {"reason": "payout_method_closed"}})
        self.assertIsNotNone(got["status_transitions"]["returned_at"])
        self.assertIsNotNone(got["status_transitions"]["posted_at"])
        self.assertEqual(fa(), 10000)
        eff = self.effects()
        self.assertEqual([e["type"] for e in eff], ["outbound_payment", "outbound_payment_returned"])
        self.assertEqual({k: eff[1][k] for k in ("id", "amount", "currency", "reason",
                                                  "recipient", "financial_account",
                                                  "idempotency_key")},
                         {"id": obp["id"], "amount": 3000, "currency": "usd",
                          "reason": "payout_method_closed", "recipient": "acct_drv",
                          "financial_account": "fa_1", "idempotency_key": "p-ret"})
        self.assertNotIn("metadata", eff[1])
        # a returned payment stays returned; the same status again changes nothing
        st, body = self.ctl_status("POST", f"/_sandbox/outbound_payments/{obp['id']}/status",
                                   {"status": "posted"})
        self.assertEqual(st, 400, body)
        out = self.ctl("POST", f"/_sandbox/outbound_payments/{obp['id']}/status",
                       {"status": "returned"})
        self.assertFalse(out["changed"])
        self.assertEqual((fa(), len(self.effects())), (10000, 2))

    def test_payout_forced_failed_and_canceled_while_processing(self):
        st, a, _ = self.payout(payout_body(value=1000, ins="a"))
        st, b, _ = self.payout(payout_body(value=2000, ins="b"))
        st, c, _ = self.payout(payout_body(value=500, ins="c"))
        self.ctl("POST", f"/_sandbox/outbound_payments/{a['id']}/status",
                 {"status": "failed", "reason": "payout_method_expired"})
        self.ctl("POST", f"/_sandbox/outbound_payments/{b['id']}/status", {"status": "canceled"})
        self.ctl("POST", f"/_sandbox/outbound_payments/{c['id']}/status",
                 {"status": "processing"})  # held: auto-post leaves it alone
        st, lst, _ = self.call("GET", OBP, headers=V2)
        by_id = {o["id"]: o for o in lst["data"]}
        self.assertEqual(by_id[a["id"]]["status"], "failed")
        self.assertEqual(by_id[a["id"]]["status_details"],
                         {"failed": {"reason": "payout_method_expired"}})
        self.assertIsNotNone(by_id[a["id"]]["status_transitions"]["failed_at"])
        self.assertEqual((by_id[b["id"]]["status"], by_id[b["id"]]["status_details"]),
                         ("canceled", None))
        self.assertIsNotNone(by_id[b["id"]]["status_transitions"]["canceled_at"])
        self.assertEqual(by_id[c["id"]]["status"], "processing")
        self.assertEqual(self.get_obp(c["id"])["status"], "processing")
        self.assertEqual(self.ctl("GET", "/_sandbox/state")["financial_accounts"]["fa_1"]
                         ["balance"]["usd"], 10000 - 500)
        self.assertEqual([(e["type"], e["amount"]) for e in self.effects()][3:],
                         [("outbound_payment_failed", 1000), ("outbound_payment_canceled", 2000)])
        st, body = self.ctl_status("POST", "/_sandbox/outbound_payments/obp_nope/status",
                                   {"status": "posted"})
        self.assertEqual(st, 404)
        st, body = self.ctl_status("POST", f"/_sandbox/outbound_payments/{c['id']}/status",
                                   {"status": "lost"})
        self.assertEqual(st, 400)
        st, body = self.ctl_status("POST", f"/_sandbox/outbound_payments/{c['id']}/status",
                                   {"status": "canceled", "reason": "x"})
        self.assertEqual(st, 400)

    # -- charges ---------------------------------------------------------------------------
    def test_charge_status_changes(self):
        self.ctl("POST", "/_sandbox/fixtures", {"charges": [
            {"id": "ch_debit", "amount": 5000, "currency": "usd", "status": "pending",
             "payment_method_type": "us_bank_account"}]})
        self.assertEqual(self.transfer(1000, src="ch_debit")[0], 200)  # pending is accepted
        out = self.ctl("POST", "/_sandbox/charges/ch_debit/status", {"status": "failed"})
        self.assertEqual((out["ok"], out["charge"]["status"]), (True, "failed"))
        st, ch, _ = self.call("GET", "/v1/charges/ch_debit")
        self.assertEqual((ch["status"], ch["paid"], ch["amount_captured"]), ("failed", False, 0))
        self.assertError(self.transfer(1000, src="ch_debit"), 400, "charge_failed")
        self.ctl("POST", "/_sandbox/charges/ch_debit/status", {"status": "succeeded"})
        st, ch, _ = self.call("GET", "/v1/charges/ch_debit", {"expand[0]": "balance_transaction"})
        self.assertEqual((ch["status"], ch["paid"], ch["balance_transaction"]["status"]),
                         ("succeeded", True, "available"))
        self.assertEqual(self.transfer(4000, src="ch_debit")[0], 200)
        self.ctl("POST", "/_sandbox/charges/ch_1/status", {"status": "pending"})
        self.assertEqual(self.call("GET", "/v1/charges/ch_1")[1]["status"], "pending")
        st, _ = self.ctl_status("POST", "/_sandbox/charges/ch_nope/status", {"status": "failed"})
        self.assertEqual(st, 404)
        st, _ = self.ctl_status("POST", "/_sandbox/charges/ch_1/status", {"status": "refunded"})
        self.assertEqual(st, 400)

    # -- listing for a ledger rebuild ----------------------------------------------------
    def test_list_transfers_by_created_with_reversal_metadata(self):
        t0 = int(time.time())
        old = [self.transfer(100, src="ch_1", **{"metadata[settle_instruction]": f"o{i}"})[1]
               for i in range(2)]
        self.ctl("POST", "/_sandbox/config", {"clock_offset_s": 1000})
        new = [self.transfer(100, src="ch_1", **{"metadata[settle_instruction]": f"n{i}"})[1]
               for i in range(3)]
        st, rev, _ = self.call("POST", f"/v1/transfers/{new[0]['id']}/reversals",
                               {"amount": "40", "metadata[settle_instruction]": "r1"})
        self.assertEqual(st, 200, rev)
        mid = str(t0 + 500)
        st, page, _ = self.call("GET", "/v1/transfers", {"created[gte]": mid, "limit": "2"})
        self.assertEqual(st, 200, page)
        self.assertEqual([t["id"] for t in page["data"]], [new[2]["id"], new[1]["id"]])
        self.assertTrue(page["has_more"])
        st, page2, _ = self.call("GET", "/v1/transfers", {"created[gte]": mid, "limit": "2",
                                                          "starting_after": new[1]["id"]})
        self.assertEqual([t["id"] for t in page2["data"]], [new[0]["id"]])
        self.assertFalse(page2["has_more"])
        listed = page2["data"][0]
        self.assertEqual(listed["metadata"], {"settle_instruction": "n0"})
        self.assertEqual(listed["amount_reversed"], 40)
        self.assertEqual([(r["id"], r["metadata"]) for r in listed["reversals"]["data"]],
                         [(rev["id"], {"settle_instruction": "r1"})])
        st, page, _ = self.call("GET", "/v1/transfers", {"created[lte]": mid})
        self.assertEqual([t["id"] for t in page["data"]], [old[1]["id"], old[0]["id"]])
        self.assertEqual([t["metadata"]["settle_instruction"] for t in page["data"]], ["o1", "o0"])
        st, page, _ = self.call("GET", "/v1/transfers",
                                {"created[gte]": str(t0 - 5), "created[lte]": str(t0 + 2000)})
        self.assertEqual(len(page["data"]), 5)
        self.assertError(self.call("GET", "/v1/transfers", {"created[gte]": "yesterday"}), 400,
                         "parameter_invalid_integer")
        self.assertError(self.call("GET", "/v1/transfers", {"created[since]": "1"}), 400,
                         "parameter_unknown")

    def test_list_outbound_payments_by_created_all_recipients(self):
        self.ctl("POST", "/_sandbox/fixtures", {"payout_methods": [
            {"id": "pm_ap_o", "recipient": "acct_other2"}]})
        old = [self.payout(payout_body(value=100, ins=f"o{i}"))[1] for i in range(2)]
        self.ctl("POST", "/_sandbox/config", {"clock_offset_s": 7200})
        new = [self.payout(payout_body(value=100, ins="n0"))[1],
               self.payout(payout_body(value=100, pm="pm_ap_o", recipient="acct_other2",
                                       ins="n1"))[1],
               self.payout(payout_body(value=100, ins="n2"))[1]]
        mid = (datetime.now(timezone.utc) + timedelta(seconds=3600)).strftime("%Y-%m-%dT%H:%M:%SZ")
        st, page, _ = self.call("GET", OBP, {"created_gte": mid, "limit": "2"}, headers=V2)
        self.assertEqual(st, 200, page)
        self.assertEqual([o["id"] for o in page["data"]], [new[2]["id"], new[1]["id"]])
        nxt = page["next_page_url"]
        self.assertIn("created_gte=", nxt)
        st, page2, _ = self.call("GET", nxt, headers=V2)
        self.assertEqual([o["id"] for o in page2["data"]], [new[0]["id"]])
        self.assertIsNone(page2["next_page_url"])
        self.assertEqual(page2["data"][0]["metadata"], {"settle_instruction": "n0"})
        st, page, _ = self.call("GET", OBP, {"created_lte": mid}, headers=V2)
        self.assertEqual([o["id"] for o in page["data"]], [old[1]["id"], old[0]["id"]])
        st, page, _ = self.call("GET", OBP, {"created_gte": mid, "recipient": "acct_other2"},
                                headers=V2)
        self.assertEqual([o["id"] for o in page["data"]], [new[1]["id"]])
        st, body, _ = self.call("GET", OBP, {"created_gte": "last week"}, headers=V2)
        self.assertEqual((st, body["error"]["code"]), (400, "invalid_fields"))


class ClockFlagTest(unittest.TestCase):
    """`--clock-offset-s` at start, and the script started from another directory."""

    def test_flag_and_other_working_directory(self):
        with tempfile.TemporaryDirectory() as tmp:
            port_file = os.path.join(tmp, "port")
            proc = subprocess.Popen(
                [sys.executable, os.path.abspath(SERVER), "--port", "0", "--port-file", port_file,
                 "--quiet", "--seed", "7", "--clock-offset-s", "86400"],
                cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            try:
                deadline = time.time() + 10
                while not os.path.exists(port_file):
                    if proc.poll() is not None or time.time() > deadline:
                        self.fail("sandbox did not start: " + proc.stderr.read())
                    time.sleep(0.02)
                with open(port_file) as f:
                    port = int(f.read().strip())
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                c.request("GET", "/_sandbox/config")
                r = c.getresponse()
                config = json.loads(r.read())
                self.assertEqual(config["clock_offset_s"], 86400)
                self.assertLess(abs(http_date_ts(r.getheader("Date")) - (time.time() + 86400)), 60)
                c.request("GET", "/v1/balance", headers={"Authorization": f"Bearer {KEY}"})
                r = c.getresponse()
                self.assertEqual(r.status, 200)
                r.read()
                c.request("POST", "/_sandbox/shutdown", body=b"",
                          headers={"Content-Type": "application/json"})
                c.getresponse().read()
                c.close()
                proc.wait(timeout=10)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                proc.stderr.close()
            self.assertFalse(os.path.exists(port_file))


if __name__ == "__main__":
    unittest.main()
