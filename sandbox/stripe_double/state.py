"""All of the sandbox's state, behind one lock: config, fixtures, objects, effects, stats."""

from __future__ import annotations

import itertools
import json
import random
import string
import threading
import time

from .clock import rfc3339
from .faults import RATE_LIMITED_REASONS, FaultsMixin
from .payouts import V2Mixin
from .transfers import V1Mixin

DEFAULT_CONFIG = {
    "latency_ms": 0,
    "fail_5xx": 0.0,
    "fail_429": 0.0,
    "drop_after_commit": 0.0,
    "rate_limit": 0.0,
    # Keys Stripe no longer accepts (answered 401), e.g. a rolled key.
    "revoked_keys": [],
    "seed": None,
    # Seconds added to the real clock: `Date`, every `created`, idempotency expiry.
    "clock_offset_s": 0,
    # What a `fail_429` answers, picked with the fault dice (Stripe-Rate-Limited-Reason).
    "fail_429_reasons": ["global-rate"],
    # The status a new outbound payment answers with: "processing" or "posted".
    "payout_initial_status": "processing",
    # A processing payout no test has set turns `posted` when it is next read.
    "payout_auto_post": True,
}
ALNUM = string.ascii_letters + string.digits


class Sandbox(FaultsMixin, V1Mixin, V2Mixin):
    """All state, behind one lock."""

    def __init__(self, config: dict | None = None, fixtures: dict | None = None):
        self.lock = threading.RLock()
        self.config = dict(DEFAULT_CONFIG)
        self.config.update(config or {})
        self.startup_fixtures = fixtures
        self._id_counter = itertools.count(1)
        self.reset()

    # -- lifecycle -------------------------------------------------------
    def reset(self, empty=False):
        with self.lock:
            seed = self.config.get("seed")
            self.rng = random.Random(seed)
            self.id_rng = random.Random(seed)
            self.platform_balance: dict[str, int] = {}
            self.accounts: dict[str, dict] = {}
            self.charges: dict[str, dict] = {}
            self.auto_charges = False
            self.financial_accounts: dict[str, dict] = {}
            self.payout_methods: dict[str, dict] = {}
            self.transfers: dict[str, dict] = {}
            self.transfer_order: list[str] = []
            self.reversals: dict[str, dict] = {}
            self.outbound_payments: dict[str, dict] = {}
            self.obp_order: list[str] = []
            self.effects: list[dict] = []
            self.idem: dict[tuple, dict] = {}
            # (family, key) -> sandbox time first seen, for fault rules' `on: retry`.
            self.seen_keys: dict[tuple, float] = {}
            self.fault_rules: list[dict] = []
            self.bucket = {"rate": None, "tokens": 0.0, "last": 0.0}
            prev = getattr(self, "stats", None) or {}
            self.stats = {"requests": 0, "by_status": {}, "faults": {
                "fail_5xx": 0, "fail_429": 0, "rate_limit": 0, "drop_after_commit": 0, "rules": 0},
                "rule_faults": {},
                "replays": 0, "in_flight": prev.get("in_flight", 0),
                "max_concurrent": prev.get("in_flight", 0),
                "open_connections": prev.get("open_connections", 0),
                "max_connections": prev.get("open_connections", 0)}
            if self.startup_fixtures and not empty:
                self.load_fixtures(self.startup_fixtures)

    def set_config(self, updates: dict):
        with self.lock:
            for k, v in updates.items():
                if k not in DEFAULT_CONFIG:
                    raise ValueError(f"unknown config key: {k}")
                if k == "revoked_keys":
                    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                        raise ValueError("revoked_keys must be a list of strings")
                elif k == "clock_offset_s":
                    if not isinstance(v, (int, float)) or isinstance(v, bool):
                        raise ValueError("clock_offset_s must be a number of seconds")
                elif k == "fail_429_reasons":
                    if (not isinstance(v, list) or not v
                            or not all(x in RATE_LIMITED_REASONS for x in v)):
                        raise ValueError("fail_429_reasons must be a non-empty list of: "
                                         + ", ".join(RATE_LIMITED_REASONS))
                    v = list(v)
                elif k == "payout_initial_status":
                    if v not in ("processing", "posted"):
                        raise ValueError("payout_initial_status must be processing or posted")
                elif k == "payout_auto_post":
                    if not isinstance(v, bool):
                        raise ValueError("payout_auto_post must be true or false")
                elif k == "seed":
                    if v is not None and not isinstance(v, int):
                        raise ValueError("seed must be an integer or null")
                    self.rng = random.Random(v)
                    self.id_rng = random.Random(v)
                elif not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
                    raise ValueError(f"{k} must be a non-negative number")
                elif k in ("fail_5xx", "fail_429", "drop_after_commit") and v > 1:
                    raise ValueError(f"{k} is a probability (0..1)")
                self.config[k] = v
            return dict(self.config)

    def now(self) -> float:
        """The sandbox's clock: real time shifted by `clock_offset_s`."""
        return time.time() + float(self.config.get("clock_offset_s") or 0)

    def new_id(self, prefix: str) -> str:
        rand = "".join(self.id_rng.choice(ALNUM) for _ in range(14))
        return f"{prefix}_sb{next(self._id_counter):06d}{rand}"

    # -- fixtures --------------------------------------------------------
    def load_fixtures(self, fx: dict):
        """Merge fixtures into the state (objects with the same id are replaced,
        account balances are updated currency by currency)."""
        if not isinstance(fx, dict):
            raise ValueError("fixtures must be a JSON object")
        known = {"balances", "charges", "accounts", "financial_accounts", "payout_methods",
                 "transfers", "auto_charges"}
        for k in fx:
            if k not in known:
                raise ValueError(f"unknown fixture key: {k}")
        with self.lock:
            for cur, amt in _balance_map(fx.get("balances", {}), "balances").items():
                self.platform_balance[cur] = amt
            for c in fx.get("charges", []):
                ch = self._fixture_charge(c)
                self.charges[ch["id"]] = ch
            for a in fx.get("accounts", []):
                if not isinstance(a, dict) or not str(a.get("id", "")).startswith("acct_"):
                    raise ValueError(f"account needs an acct_ id: {a!r}")
                acct = self._account(a["id"])
                if "transfers_disabled" in a:
                    acct["transfers_disabled"] = bool(a["transfers_disabled"])
                acct["balance"].update(_balance_map(a.get("balance", {}), "account balance"))
            for f in fx.get("financial_accounts", []):
                if not isinstance(f, dict) or not f.get("id"):
                    raise ValueError(f"financial account needs an id: {f!r}")
                fa = self.financial_accounts.setdefault(f["id"], {"id": f["id"], "balance": {}})
                fa["balance"].update(_balance_map(f.get("balance", {}), "financial account balance"))
            for p in fx.get("payout_methods", []):
                pm = _fixture_payout_method(p, self.now())
                self.payout_methods[pm["id"]] = pm
            for t in fx.get("transfers", []):
                # Transfers made before settle (for example by an earlier system): not effects.
                if not isinstance(t, dict) or not str(t.get("id", "")).startswith("tr_"):
                    raise ValueError(f"transfer needs a tr_ id: {t!r}")
                if not isinstance(t.get("amount"), int) or not str(t.get("destination", "")).startswith("acct_"):
                    raise ValueError(f"transfer {t['id']}: needs an integer amount and an acct_ destination")
                tr = {
                    "id": t["id"], "object": "transfer", "amount": t["amount"],
                    "amount_reversed": int(t.get("amount_reversed", 0)),
                    "balance_transaction": "txn_" + t["id"].split("_", 1)[-1], "created": int(t.get("created", self.now())),
                    "currency": str(t.get("currency", "usd")).lower(), "description": t.get("description"),
                    "destination": t["destination"], "destination_payment": "py_" + t["id"].split("_", 1)[-1],
                    "livemode": False, "metadata": dict(t.get("metadata", {})), "reversed": False,
                    "source_transaction": t.get("source_transaction"), "source_type": "card",
                    "transfer_group": t.get("transfer_group"),
                }
                if t["id"] not in self.transfers:
                    self.transfer_order.append(t["id"])
                self.transfers[t["id"]] = tr
                self._account(t["destination"])
            if "auto_charges" in fx:
                self.auto_charges = bool(fx["auto_charges"])

    def _fixture_charge(self, c: dict) -> dict:
        if not isinstance(c, dict) or not isinstance(c.get("id"), str) or not c["id"]:
            raise ValueError(f"charge needs an id: {c!r}")
        amount = c.get("amount")
        if not isinstance(amount, int) or amount < 0:
            raise ValueError(f"charge {c['id']}: amount must be a non-negative integer")
        status = c.get("status", "succeeded")
        if status not in ("succeeded", "pending", "failed"):
            raise ValueError(f"charge {c['id']}: bad status {status!r}")
        created = int(c.get("created", self.now()))
        return {
            "id": c["id"], "amount": amount,
            "currency": str(c.get("currency", "usd")).lower(),
            "status": status,
            "amount_captured": int(c.get("amount_captured", amount if status != "failed" else 0)),
            "amount_refunded": int(c.get("amount_refunded", 0)),
            "transfer_group": c.get("transfer_group"),
            "payment_intent": c.get("payment_intent"),
            "fee": int(c.get("fee", 0)),
            "payment_method_type": c.get("payment_method_type", "card"),
            "balance_status": c.get("balance_status",
                                    "available" if status == "succeeded" else "pending"),
            "available_on": int(c.get("available_on", created)),
            "balance_transaction": c.get("balance_transaction", "txn_" + c["id"].split("_", 1)[-1]),
            "created": created,
            "transferred": 0,  # net of reversals
        }

    def _account(self, acct_id: str) -> dict:
        a = self.accounts.get(acct_id)
        if a is None:
            a = self.accounts[acct_id] = {"id": acct_id, "transfers_disabled": False, "balance": {}}
        return a

    # -- request bookkeeping ------------------------------------------------
    def begin_request(self):
        with self.lock:
            s = self.stats
            s["requests"] += 1
            # Wall-clock times of the first and the latest request (benchmarks/apply.sh).
            s["last_request_at"] = time.time()
            s.setdefault("first_request_at", s["last_request_at"])
            s["in_flight"] += 1
            s["max_concurrent"] = max(s["max_concurrent"], s["in_flight"])

    def end_request(self, status):
        with self.lock:
            s = self.stats
            s["in_flight"] -= 1
            key = str(status)
            s["by_status"][key] = s["by_status"].get(key, 0) + 1

    def connection(self, delta):
        with self.lock:
            s = self.stats
            s["open_connections"] += delta
            s["max_connections"] = max(s["max_connections"], s["open_connections"])

    def add_effect(self, **fields):
        self.effects.append({"seq": len(self.effects) + 1, **fields})

    # -- inspection --------------------------------------------------------------
    def snapshot(self):
        with self.lock:
            return json.loads(json.dumps({
                "platform_balance": self.platform_balance,
                "accounts": self.accounts,
                "financial_accounts": self.financial_accounts,
                "charges": {k: {"amount": c["amount"], "currency": c["currency"],
                                "status": c["status"], "transferred": c["transferred"],
                                "transfer_group": c["transfer_group"]}
                            for k, c in self.charges.items()},
                "auto_charges": self.auto_charges,
                "counts": {"transfers": len(self.transfers), "reversals": len(self.reversals),
                           "outbound_payments": len(self.outbound_payments),
                           "effects": len(self.effects),
                           "idempotency_keys": len(self.idem)},
            }))


def _balance_map(m, what):
    if not isinstance(m, dict):
        raise ValueError(f"{what} must be an object of currency -> integer")
    out = {}
    for cur, amt in m.items():
        if not isinstance(amt, int) or isinstance(amt, bool):
            raise ValueError(f"{what}: amount for {cur} must be an integer")
        out[str(cur).lower()] = amt
    return out


def _fixture_payout_method(p, now):
    if not isinstance(p, dict) or not p.get("id") or not str(p.get("recipient", "")).startswith("acct_"):
        raise ValueError(f"payout method needs an id and an acct_ recipient: {p!r}")
    return {
        "id": p["id"], "recipient": p["recipient"], "type": p.get("type", "apple_pay"),
        "archived": bool(p.get("archived", False)), "restricted": bool(p.get("restricted", False)),
        "usage_status": p.get("usage_status", "eligible"),
        "speeds": list(p.get("speeds", ["instant"])),
        "currencies": [c.lower() for c in p.get("currencies", ["usd"])],
        "last4": p.get("last4", "4242"), "dynamic_last4": p.get("dynamic_last4", "1234"),
        "exp_month": p.get("exp_month", 12), "exp_year": p.get("exp_year", 2030),
        "created": rfc3339(now),
    }
