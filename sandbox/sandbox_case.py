"""The base of the sandbox's tests: one sandbox subprocess per test class, reset
before every test, and helpers to call it. No tests here."""

import http.client
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "stripe_sandbox.py")
KEY = "sk_test_sandbox"
PREVIEW = "2026-11-18.preview"

FIXTURES = {
    "balances": {"usd": 5000},
    "charges": [
        {"id": "ch_1", "amount": 10000, "currency": "usd", "status": "succeeded",
         "transfer_group": "ORDER100", "payment_intent": "pi_1", "fee": 320,
         "payment_method_type": "card", "amount_refunded": 0},
        {"id": "ch_refunded", "amount": 10000, "currency": "usd", "amount_refunded": 4000},
        {"id": "ch_failed", "amount": 5000, "currency": "usd", "status": "failed",
         "payment_method_type": "sepa_debit"},
        {"id": "ch_nogroup", "amount": 5000, "currency": "eur", "payment_intent": "pi_9"},
    ],
    "accounts": [{"id": "acct_blocked", "transfers_disabled": True}],
    "financial_accounts": [{"id": "fa_1", "balance": {"usd": 10000}}],
    "payout_methods": [
        {"id": "pm_ap_1", "recipient": "acct_drv"},
        {"id": "pm_ap_archived", "recipient": "acct_drv", "archived": True},
        {"id": "pm_ap_other", "recipient": "acct_other"},
    ],
}


def payout_body(value=2000, pm="pm_ap_1", recipient="acct_drv", fa="fa_1", ins="ins_p1"):
    return {"from": {"financial_account": fa, "currency": "usd"},
            "to": {"recipient": recipient, "payout_method": pm, "currency": "usd"},
            "amount": {"value": value, "currency": "usd"},
            "delivery_options": {"speed": "instant"},
            "description": "payout", "metadata": {"settle_instruction": ins}}


class SandboxCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.port_file = os.path.join(cls.tmp.name, "port")
        cls.proc = subprocess.Popen(
            [sys.executable, SERVER, "--port", "0", "--port-file", cls.port_file,
             "--quiet", "--seed", "7"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 10
        while not os.path.exists(cls.port_file):
            if cls.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("sandbox did not start: " + cls.proc.stderr.read())
            time.sleep(0.02)
        with open(cls.port_file) as f:
            cls.port = int(f.read().strip())
        cls.banner = cls.proc.stdout.readline().strip()

    @classmethod
    def tearDownClass(cls):
        try:
            cls.ctl("POST", "/_sandbox/shutdown")
        except OSError:
            pass
        try:
            cls.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            cls.proc.kill()
            cls.proc.wait()
        cls.proc.stdout.close()
        cls.proc.stderr.close()
        cls.tmp.cleanup()

    def setUp(self):
        self.ctl("POST", "/_sandbox/reset", {"empty": True})
        self.ctl("POST", "/_sandbox/config", {"latency_ms": 0, "fail_5xx": 0, "fail_429": 0,
                                              "drop_after_commit": 0, "rate_limit": 0,
                                              "seed": 7, "clock_offset_s": 0,
                                              "fail_429_reasons": ["global-rate"],
                                              "payout_initial_status": "processing",
                                              "payout_auto_post": True})
        self.ctl("POST", "/_sandbox/fixtures", FIXTURES)

    # -- helpers -------------------------------------------------------------
    @classmethod
    def conn(cls):
        return http.client.HTTPConnection("127.0.0.1", cls.port, timeout=10)

    @classmethod
    def ctl(cls, method, path, body=None):
        c = cls.conn()
        try:
            data = json.dumps(body).encode() if body is not None else None
            c.request(method, path, body=data, headers={"Content-Type": "application/json"})
            r = c.getresponse()
            out = json.loads(r.read() or b"null")
            assert r.status == 200, (r.status, out)
            return out
        finally:
            c.close()

    def call(self, method, path, params=None, key=None, auth=KEY, headers=None, conn=None,
             json_body=None):
        """Returns (status, body, headers)."""
        h = {}
        if auth:
            h["Authorization"] = f"Bearer {auth}"
        if key:
            h["Idempotency-Key"] = key
        h.update(headers or {})
        body = None
        if json_body is not None:
            body = json.dumps(json_body).encode()
            h["Content-Type"] = "application/json"
        elif params is not None and method == "POST":
            body = urllib.parse.urlencode(params).encode()
            h["Content-Type"] = "application/x-www-form-urlencoded"
        elif params:
            path += "?" + urllib.parse.urlencode(params)
        c = conn or self.conn()
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            raw = r.read()
            return r.status, json.loads(raw), {k.lower(): v for k, v in r.getheaders()}
        finally:
            if conn is None:
                c.close()

    def transfer(self, amount, dest="acct_a", src=None, key=None, currency="usd", **extra):
        p = {"amount": str(amount), "currency": currency, "destination": dest}
        if src:
            p["source_transaction"] = src
        p.update(extra)
        return self.call("POST", "/v1/transfers", p, key=key)

    def payout(self, body, key=None, version=PREVIEW):
        return self.call("POST", "/v2/money_management/outbound_payments", key=key,
                         json_body=body, headers={"Stripe-Version": version})

    def effects(self):
        return self.ctl("GET", "/_sandbox/effects")["data"]

    def assertError(self, resp, status, code, type_="invalid_request_error"):
        st, body, _ = resp
        self.assertEqual(st, status, body)
        self.assertEqual(body["error"]["code"], code, body)
        self.assertEqual(body["error"]["type"], type_, body)

    def raw_call(self, method, path, body=None, key=None, headers=None, timeout=10):
        """(status, raw body bytes, lowercased headers), for answers that are not JSON."""
        h = {"Authorization": f"Bearer {KEY}"}
        if key:
            h["Idempotency-Key"] = key
        h.update(headers or {})
        data = None
        if body is not None:
            data = urllib.parse.urlencode(body).encode()
            h["Content-Type"] = "application/x-www-form-urlencoded"
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request(method, path, body=data, headers=h)
            r = c.getresponse()
            return r.status, r.read(), {k.lower(): v for k, v in r.getheaders()}
        finally:
            c.close()
