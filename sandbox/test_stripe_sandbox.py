"""Tests for the Stripe sandbox, over real HTTP against a subprocess.

    python3 -m unittest sandbox.test_stripe_sandbox -v   # from the repository root

This module also runs the tests of the newer controls (test_sandbox_controls.py).
"""

import http.client
import threading
import time
import unittest

from .sandbox_case import PREVIEW, SandboxCase, payout_body
from .test_sandbox_controls import ClockFlagTest, ControlsTest  # noqa: F401  (run them too)


class SandboxTest(SandboxCase):
    # -- basics ----------------------------------------------------------------
    def test_banner_auth_and_request_id(self):
        self.assertEqual(self.banner, f"sandbox listening on http://127.0.0.1:{self.port}")
        st, body, h = self.call("GET", "/v1/charges/ch_1", auth="pk_test_nope")
        self.assertEqual(st, 401)
        self.assertEqual(body["error"]["type"], "invalid_request_error")
        self.assertTrue(h["request-id"].startswith("req_"))
        st, _, h = self.call("GET", "/v1/charges/ch_1", auth=None)
        self.assertEqual(st, 401)
        for k in ("rk_test_abc", "sk_live_abc"):
            st, body, h = self.call("GET", "/v1/charges/ch_1", auth=k)
            self.assertEqual(st, 200, body)
            self.assertTrue(h["request-id"].startswith("req_"))
        self.assertTrue(body["livemode"])

    def test_keep_alive(self):
        c = self.conn()
        try:
            for _ in range(5):
                st, body, h = self.call("GET", "/v1/charges/ch_1", conn=c)
                self.assertEqual(st, 200)
                self.assertIn("content-length", h)
        finally:
            c.close()
        self.assertEqual(self.ctl("GET", "/_sandbox/stats")["max_connections"] >= 1, True)

    def test_charge_lookup(self):
        st, body, _ = self.call("GET", "/v1/charges/ch_1", {"expand[0]": "balance_transaction"})
        self.assertEqual(st, 200)
        self.assertEqual((body["amount"], body["amount_captured"], body["amount_refunded"]),
                         (10000, 10000, 0))
        self.assertEqual(body["status"], "succeeded")
        self.assertEqual(body["transfer_group"], "ORDER100")
        self.assertEqual(body["payment_intent"], "pi_1")
        self.assertEqual(body["payment_method_details"]["type"], "card")
        bt = body["balance_transaction"]
        self.assertEqual((bt["fee"], bt["net"], bt["currency"], bt["status"]),
                         (320, 9680, "usd", "available"))
        st, body, _ = self.call("GET", "/v1/charges/ch_1")
        self.assertIsInstance(body["balance_transaction"], str)
        self.assertError(self.call("GET", "/v1/charges/ch_nope"), 404, "resource_missing")

    # -- transfers -------------------------------------------------------------
    def test_transfer_with_source_transaction(self):
        st, tr, _ = self.transfer(7000, src="ch_1", transfer_group="OTHER",
                                  **{"metadata[settle_instruction]": "ins_1"})
        self.assertEqual(st, 200, tr)
        self.assertTrue(tr["id"].startswith("tr_"))
        self.assertEqual(tr["object"], "transfer")
        self.assertEqual((tr["amount"], tr["amount_reversed"], tr["currency"]), (7000, 0, "usd"))
        self.assertEqual(tr["transfer_group"], "ORDER100")  # the charge's group wins
        self.assertEqual(tr["source_transaction"], "ch_1")
        self.assertEqual(tr["metadata"], {"settle_instruction": "ins_1"})
        self.assertTrue(tr["destination_payment"].startswith("py_"))
        self.assertTrue(tr["balance_transaction"].startswith("txn_"))
        self.assertFalse(tr["reversed"])
        # 3000 left on the charge
        self.assertError(self.transfer(3001, dest="acct_b", src="ch_1"), 400, "amount_too_large")
        st, tr2, _ = self.transfer(3000, dest="acct_b", src="ch_1")
        self.assertEqual(st, 200, tr2)
        self.assertError(self.transfer(1, src="ch_1"), 400, "amount_too_large")
        # refunded part is not available; failed charge; wrong currency; unknown charge
        self.assertError(self.transfer(6001, src="ch_refunded"), 400, "amount_too_large")
        self.assertEqual(self.transfer(6000, src="ch_refunded")[0], 200)
        self.assertError(self.transfer(100, src="ch_failed"), 400, "charge_failed")
        self.assertError(self.transfer(100, src="ch_1", currency="eur"), 400, "parameter_invalid")
        st, body, _ = self.transfer(100, src="ch_missing")
        self.assertError((st, body, _), 400, "resource_missing")
        self.assertEqual(body["error"]["param"], "source_transaction")
        # no group on the charge and none sent: group_<payment_intent>
        st, tr3, _ = self.transfer(100, src="ch_nogroup", currency="eur")
        self.assertEqual(tr3["transfer_group"], "group_pi_9")
        # transfers do not touch the platform's available balance
        state = self.ctl("GET", "/_sandbox/state")
        self.assertEqual(state["platform_balance"], {"usd": 5000})
        self.assertEqual(state["accounts"]["acct_a"]["balance"], {"usd": 13000, "eur": 100})
        self.assertEqual([e["type"] for e in self.effects()], ["transfer"] * 4)

    def test_transfer_from_balance(self):
        self.assertError(self.transfer(5001), 400, "balance_insufficient")
        st, tr, _ = self.transfer(5000, transfer_group="G1")
        self.assertEqual(st, 200, tr)
        self.assertEqual(tr["transfer_group"], "G1")
        self.assertIsNone(tr["source_transaction"])
        self.assertError(self.transfer(1), 400, "balance_insufficient")
        self.assertError(self.transfer(10, dest="acct_blocked", src="ch_1"), 400,
                         "transfers_not_allowed")
        self.assertError(self.transfer("12.5", src="ch_1"), 400, "parameter_invalid_integer")
        self.assertError(self.call("POST", "/v1/transfers", {"amount": "1", "currency": "usd"}),
                         400, "parameter_missing")
        self.assertError(self.transfer(1, src="ch_1", bogus="x"), 400, "parameter_unknown")
        self.assertEqual(len(self.effects()), 1)

    def test_auto_charges(self):
        self.assertError(self.transfer(100, src="ch_auto1"), 400, "resource_missing")
        self.ctl("POST", "/_sandbox/fixtures", {"auto_charges": True})
        st, tr, _ = self.transfer(123456789, src="ch_auto1", currency="eur")
        self.assertEqual(st, 200, tr)
        self.assertEqual(self.call("GET", "/v1/charges/ch_auto2")[0], 200)

    def test_list_transfers(self):
        ids = []
        for i in range(5):
            st, tr, _ = self.transfer(100, dest="acct_a" if i % 2 == 0 else "acct_b", src="ch_1")
            ids.append(tr["id"])
        self.transfer(100, dest="acct_a", src="ch_nogroup", currency="eur")
        st, page, _ = self.call("GET", "/v1/transfers",
                                {"transfer_group": "ORDER100", "destination": "acct_a",
                                 "limit": "2"})
        self.assertEqual(st, 200)
        self.assertEqual(page["object"], "list")
        self.assertEqual(page["url"], "/v1/transfers")
        self.assertEqual([t["id"] for t in page["data"]], [ids[4], ids[2]])  # newest first
        self.assertTrue(page["has_more"])
        st, page2, _ = self.call("GET", "/v1/transfers",
                                 {"transfer_group": "ORDER100", "destination": "acct_a",
                                  "limit": "2", "starting_after": ids[2]})
        self.assertEqual([t["id"] for t in page2["data"]], [ids[0]])
        self.assertFalse(page2["has_more"])
        self.assertError(self.call("GET", "/v1/transfers", {"limit": "101"}), 400,
                         "parameter_invalid_integer")
        st, one, _ = self.call("GET", f"/v1/transfers/{ids[1]}")
        self.assertEqual((st, one["id"], one["destination"]), (200, ids[1], "acct_b"))
        self.assertError(self.call("GET", "/v1/transfers/tr_nope"), 404, "resource_missing")

    # -- reversals ---------------------------------------------------------------
    def test_reversals(self):
        st, tr, _ = self.transfer(3000, src="ch_1")
        path = f"/v1/transfers/{tr['id']}/reversals"
        self.assertError(self.call("POST", path, {"amount": "3001"}), 400, "amount_too_large")
        st, rev, _ = self.call("POST", path, {"amount": "1000", "description": "refund",
                                              "metadata[settle_instruction]": "ins_r"})
        self.assertEqual(st, 200, rev)
        self.assertTrue(rev["id"].startswith("trr_"))
        self.assertEqual((rev["object"], rev["amount"], rev["currency"], rev["transfer"]),
                         ("transfer_reversal", 1000, "usd", tr["id"]))
        self.assertEqual(rev["metadata"], {"settle_instruction": "ins_r"})
        # the destination's balance must cover it
        self.ctl("POST", "/_sandbox/fixtures",
                 {"accounts": [{"id": "acct_a", "balance": {"usd": 500}}]})
        self.assertError(self.call("POST", path, {"amount": "600"}), 400, "balance_insufficient")
        self.ctl("POST", "/_sandbox/fixtures",
                 {"accounts": [{"id": "acct_a", "balance": {"usd": 5000}}]})
        st, rev2, _ = self.call("POST", path, {})  # default: all that is left
        self.assertEqual((st, rev2["amount"]), (200, 2000))
        st, t, _ = self.call("GET", f"/v1/transfers/{tr['id']}")
        self.assertEqual((t["amount_reversed"], t["reversed"]), (3000, True))
        self.assertEqual(t["reversals"]["total_count"], 2)
        self.assertError(self.call("POST", path, {"amount": "1"}), 400,
                         "transfer_already_reversed")
        self.assertError(self.call("POST", "/v1/transfers/tr_nope/reversals", {}), 404,
                         "resource_missing")
        eff = self.effects()
        self.assertEqual([e["type"] for e in eff], ["transfer", "reversal", "reversal"])
        self.assertEqual(eff[1]["transfer"], tr["id"])
        self.assertEqual(eff[1]["destination"], "acct_a")

    # -- idempotency ----------------------------------------------------------------
    def test_idempotent_replay(self):
        p = {"amount": "7000", "currency": "usd", "destination": "acct_a",
             "source_transaction": "ch_1", "metadata[settle_instruction]": "ins_1"}
        st, first, h1 = self.call("POST", "/v1/transfers", p, key="settle-ins_1-a1")
        self.assertEqual(st, 200)
        self.assertNotIn("idempotent-replayed", h1)
        reordered = dict(reversed(list(p.items())))
        st, again, h2 = self.call("POST", "/v1/transfers", reordered, key="settle-ins_1-a1")
        self.assertEqual(st, 200)
        self.assertEqual(again["id"], first["id"])
        self.assertEqual(h2.get("idempotent-replayed"), "true")
        self.assertEqual(len(self.effects()), 1)
        # same key, other params
        p2 = dict(p, amount="7001")
        self.assertError(self.call("POST", "/v1/transfers", p2, key="settle-ins_1-a1"), 400,
                         None, type_="idempotency_error")
        # keys are scoped per API family: the same key on v2 is a new request
        st, obp, _ = self.payout(payout_body(), key="settle-ins_1-a1")
        self.assertEqual(st, 200, obp)
        self.assertEqual(len(self.effects()), 2)
        self.assertEqual(self.effects()[0]["idempotency_key"], "settle-ins_1-a1")

    def test_v1_refusal_is_saved_v2_refusal_is_reexecuted(self):
        self.assertError(self.transfer(6000, key="k-bal"), 400, "balance_insufficient")
        self.ctl("POST", "/_sandbox/fixtures", {"balances": {"usd": 100000}})
        st, body, h = self.transfer(6000, key="k-bal")
        self.assertError((st, body, h), 400, "balance_insufficient")
        self.assertEqual(h.get("idempotent-replayed"), "true")
        # v2: insufficient funds, then funded, same key -> executed
        self.assertError(self.payout(payout_body(value=20000), key="k-obp"), 400,
                         "insufficient_funds", type_="insufficient_funds")
        self.ctl("POST", "/_sandbox/fixtures",
                 {"financial_accounts": [{"id": "fa_1", "balance": {"usd": 50000}}]})
        st, obp, h = self.payout(payout_body(value=20000), key="k-obp")
        self.assertEqual(st, 200, obp)
        self.assertNotIn("idempotent-replayed", h)
        st, obp2, h = self.payout(payout_body(value=20000), key="k-obp")
        self.assertEqual((st, obp2["id"], h.get("idempotent-replayed")), (200, obp["id"], "true"))
        st, body, _ = self.payout(payout_body(value=1), key="k-obp")
        self.assertEqual((st, body["error"]["type"]), (400, "idempotency_error"))
        self.assertEqual(len(self.effects()), 1)

    def test_key_in_use_409(self):
        self.ctl("POST", "/_sandbox/config", {"latency_ms": 600})
        out = {}

        def first():
            out["first"] = self.transfer(100, src="ch_1", key="k-slow")

        t = threading.Thread(target=first)
        t.start()
        time.sleep(0.2)
        self.assertError(self.transfer(100, src="ch_1", key="k-slow"), 409,
                         "idempotency_key_in_use")
        t.join()
        self.assertEqual(out["first"][0], 200)
        self.assertEqual(len(self.effects()), 1)

    # -- payouts ----------------------------------------------------------------------
    def test_payout_method_lookup(self):
        path = "/v2/money_management/payout_methods/pm_ap_1"
        st, pm, _ = self.call("GET", path, headers={"Stripe-Version": PREVIEW,
                                                    "Stripe-Context": "acct_drv"})
        self.assertEqual(st, 200, pm)
        self.assertEqual((pm["type"], pm["available_payout_speeds"], pm["archived"],
                          pm["restricted"], pm["usage_status"]["payments"]),
                         ("apple_pay", ["instant"], False, False, "eligible"))
        self.assertEqual(pm["apple_pay"]["supported_currencies"], ["usd"])
        st, body, _ = self.call("GET", path, headers={"Stripe-Version": PREVIEW,
                                                      "Stripe-Context": "acct_other"})
        self.assertEqual(st, 404)
        self.assertEqual(set(body["error"]), {"type", "code", "message"})

    def test_payouts(self):
        st, obp, _ = self.payout(payout_body(value=2000), key="p1")
        self.assertEqual(st, 200, obp)
        self.assertTrue(obp["id"].startswith("obp_"))
        self.assertEqual((obp["object"], obp["status"]),
                         ("v2.money_management.outbound_payment", "processing"))
        self.assertEqual(obp["amount"], {"value": 2000, "currency": "usd"})
        self.assertEqual((obp["to"]["recipient"], obp["to"]["payout_method"]),
                         ("acct_drv", "pm_ap_1"))
        self.assertEqual(obp["from"]["financial_account"], "fa_1")
        self.assertRegex(obp["created"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
        self.assertError(self.payout(payout_body(pm="pm_ap_archived")), 400,
                         "invalid_payout_method", type_="invalid_payout_method")
        self.assertError(self.payout(payout_body(pm="pm_ap_other")), 400,
                         "invalid_payout_method", type_="invalid_payout_method")
        self.assertError(self.payout(payout_body(value=8001)), 400, "insufficient_funds",
                         type_="insufficient_funds")
        self.assertError(self.payout(payout_body(), version="2026-11-18"), 400,
                         "invalid_api_version")
        bad = payout_body()
        bad["amount"]["value"] = "20"
        self.assertError(self.payout(bad), 400, "invalid_fields")
        self.assertEqual(self.ctl("GET", "/_sandbox/state")["financial_accounts"]["fa_1"]
                         ["balance"]["usd"], 8000)
        st, lst, _ = self.call("GET", "/v2/money_management/outbound_payments",
                               {"recipient": "acct_drv"}, headers={"Stripe-Version": PREVIEW})
        self.assertEqual(st, 200)
        self.assertEqual([o["id"] for o in lst["data"]], [obp["id"]])
        self.assertIsNone(lst["next_page_url"])
        st, one, _ = self.call("GET", f"/v2/money_management/outbound_payments/{obp['id']}",
                               headers={"Stripe-Version": PREVIEW})
        self.assertEqual((st, one["id"]), (200, obp["id"]))
        eff = self.effects()
        self.assertEqual(len(eff), 1)
        self.assertEqual((eff[0]["type"], eff[0]["recipient"], eff[0]["amount"],
                          eff[0]["idempotency_key"]), ("outbound_payment", "acct_drv", 2000, "p1"))

    # -- faults -----------------------------------------------------------------------
    def test_drop_after_commit(self):
        self.ctl("POST", "/_sandbox/config", {"drop_after_commit": 1.0})
        with self.assertRaises((http.client.RemoteDisconnected, ConnectionError)):
            self.transfer(1500, src="ch_1", key="k-drop")
        eff = self.effects()
        self.assertEqual(len(eff), 1)
        self.assertEqual((eff[0]["idempotency_key"], eff[0]["amount"]), ("k-drop", 1500))
        # the retry with the same key is a replay (replays are never dropped)
        st, tr, h = self.transfer(1500, src="ch_1", key="k-drop")
        self.assertEqual((st, tr["id"], h.get("idempotent-replayed")), (200, eff[0]["id"], "true"))
        self.assertEqual(len(self.effects()), 1)
        stats = self.ctl("GET", "/_sandbox/stats")
        self.assertEqual(stats["faults"]["drop_after_commit"], 1)
        # v2 too
        with self.assertRaises((http.client.RemoteDisconnected, ConnectionError)):
            self.payout(payout_body(), key="k-drop2")
        st, obp, _ = self.payout(payout_body(), key="k-drop2")
        self.assertEqual((st, obp["id"]), (200, self.effects()[1]["id"]))

    def test_fail_5xx_and_429(self):
        self.ctl("POST", "/_sandbox/config", {"fail_5xx": 1.0})
        st, body, h = self.transfer(100, src="ch_1", key="k-5xx")
        self.assertEqual((st, body["error"]["type"]), (500, "api_error"))
        self.assertEqual(self.effects(), [])
        self.ctl("POST", "/_sandbox/config", {"fail_5xx": 0, "fail_429": 1.0})
        self.assertError(self.transfer(100, src="ch_1", key="k-5xx"), 429, "rate_limit")
        self.assertEqual(self.effects(), [])
        self.ctl("POST", "/_sandbox/config", {"fail_429": 0})
        st, tr, h = self.transfer(100, src="ch_1", key="k-5xx")  # not saved under the key
        self.assertEqual(st, 200)
        self.assertNotIn("idempotent-replayed", h)
        # control endpoints are never faulted
        self.ctl("POST", "/_sandbox/config", {"fail_5xx": 1.0})
        self.ctl("GET", "/_sandbox/stats")
        stats = self.ctl("GET", "/_sandbox/stats")
        self.assertEqual((stats["faults"]["fail_5xx"], stats["faults"]["fail_429"]), (1, 1))

    def test_rate_limit(self):
        self.ctl("POST", "/_sandbox/config", {"rate_limit": 5})
        c = self.conn()
        try:
            statuses = [self.call("GET", "/v1/charges/ch_1", conn=c) for _ in range(15)]
        finally:
            c.close()
        codes = [s for s, _, _ in statuses]
        self.assertGreaterEqual(codes.count(200), 5)
        self.assertGreaterEqual(codes.count(429), 5)
        limited = next(b for s, b, _ in statuses if s == 429)
        self.assertEqual(limited["error"]["code"], "rate_limit")
        self.assertEqual(self.ctl("GET", "/_sandbox/stats")["faults"]["rate_limit"],
                         codes.count(429))

    def test_concurrent_load(self):
        """64 keep-alive connections with 100 ms latency; no lost or double effects."""
        self.ctl("POST", "/_sandbox/config", {"latency_ms": 100})
        self.ctl("POST", "/_sandbox/fixtures", {"auto_charges": True})
        errors = []

        def worker(n):
            c = self.conn()
            try:
                for j in range(4):
                    key = f"load-{n}-{j}"
                    for _ in range(2):  # every request is sent twice with the same key
                        st, body, _ = self.call(
                            "POST", "/v1/transfers",
                            {"amount": "10", "currency": "usd", "destination": f"acct_{n}",
                             "source_transaction": f"ch_load{n}"}, key=key, conn=c)
                        if st != 200:
                            errors.append((st, body))
            except Exception as e:  # pragma: no cover
                errors.append(repr(e))
            finally:
                c.close()

        t0 = time.time()
        threads = [threading.Thread(target=worker, args=(n,)) for n in range(64)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.time() - t0
        self.assertEqual(errors, [])
        self.assertEqual(len(self.effects()), 64 * 4)
        stats = self.ctl("GET", "/_sandbox/stats")
        self.assertEqual(stats["replays"], 64 * 4)
        self.assertGreaterEqual(stats["max_concurrent"], 32)
        self.assertLess(elapsed, 5.0)  # 512 requests: > 100 requests/s


if __name__ == "__main__":
    unittest.main()
