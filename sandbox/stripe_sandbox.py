#!/usr/bin/env python3
"""A local, stateful Stripe API sandbox for testing `settle`.

Standard library only (Python 3.11+). It implements the endpoints settle calls
(v1 transfers, reversals, charges; v2 payout methods and outbound payments) with
idempotency, and injects faults (latency, 5xx, 429, dropped responses, rate
limit) so that settle's retry and crash-recovery paths can be tested.

    python3 sandbox/stripe_sandbox.py --port 0 --port-file /tmp/port --fixtures f.json

See sandbox/README.md for the endpoints, the control API and the fixture format.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import http.server
import ipaddress
import itertools
import json
import os
import random
import re
import signal
import socket
import string
import sys
import threading
import time
import traceback
import urllib.parse

DEFAULT_CONFIG = {
    "latency_ms": 0,
    "fail_5xx": 0.0,
    "fail_429": 0.0,
    "drop_after_commit": 0.0,
    "rate_limit": 0.0,
    # Keys Stripe no longer accepts (answered 401), e.g. a rolled key.
    "revoked_keys": [],
    "seed": None,
}

AUTH_RE = re.compile(r"^Bearer\s+(?:sk|rk)_(test|live)_\S+$")
FORM_KEY_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?:\[([^\[\]]*)\])?$")
CURRENCY_RE = re.compile(r"^[a-z]{3}$")
ALNUM = string.ascii_letters + string.digits
AUTO_CHARGE_AMOUNT = 10 ** 12  # "unlimited" charge amount for auto_charges
MAX_KEY_LEN = 255
DROP = object()  # handler result: close the socket without answering


def _now() -> int:
    return int(time.time())


def _rfc3339(ts: float | None = None) -> str:
    d = _dt.datetime.fromtimestamp(time.time() if ts is None else ts, _dt.timezone.utc)
    return d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{d.microsecond // 1000:03d}Z"


class ApiError(Exception):
    """A refusal. `save` = whether a v1 idempotency key keeps it (business refusals
    are saved, parameter validation errors are not, as on Stripe)."""

    def __init__(self, status, type_, code, message, param=None, save=True, headers=None):
        super().__init__(message)
        self.status, self.type, self.code, self.message = status, type_, code, message
        self.param, self.save, self.headers = param, save, headers or {}

    def body(self, family):
        if family == "v2":
            return {"error": {"type": self.type, "code": self.code, "message": self.message}}
        err = {"type": self.type, "code": self.code, "message": self.message, "param": self.param}
        if self.code:
            err["doc_url"] = f"https://stripe.com/docs/error-codes/{self.code.replace('_', '-')}"
        return {"error": err}


def invalid(code, message, param=None, status=400, save=True):
    return ApiError(status, "invalid_request_error", code, message, param, save)


def bad_param(code, message, param):
    return invalid(code, message, param, save=False)


# ---------------------------------------------------------------- form parsing

def parse_form(raw: str) -> dict:
    """Stripe's form encoding: `a=1&metadata[k]=v&expand[0]=x` ->
    {"a": "1", "metadata": {"k": "v"}, "expand": {"0": "x"}}."""
    out: dict = {}
    try:
        pairs = urllib.parse.parse_qsl(raw, keep_blank_values=True, strict_parsing=False,
                                       errors="strict")
    except (UnicodeDecodeError, ValueError):
        raise bad_param("parameter_invalid", "The request body is not valid form encoding.", None)
    for key, value in pairs:
        m = FORM_KEY_RE.match(key)
        if not m:
            raise bad_param("parameter_unknown", f"Received unknown parameter: {key}", key)
        name, sub = m.group(1), m.group(2)
        if sub is None:
            if isinstance(out.get(name), dict):
                raise bad_param("parameter_invalid", f"Invalid value for {name}.", name)
            out[name] = value
        else:
            cur = out.get(name)
            if cur is None or cur == "":
                cur = out[name] = {}
            if not isinstance(cur, dict):
                raise bad_param("parameter_invalid", f"Invalid value for {name}.", name)
            cur[sub if sub != "" else str(len(cur))] = value
    return out


def check_unknown(params: dict, allowed: set):
    for k in params:
        if k not in allowed:
            raise bad_param("parameter_unknown", f"Received unknown parameter: {k}", k)


def get_str(params, name, required=False):
    v = params.get(name)
    if v is None or v == "":
        if required:
            raise bad_param("parameter_missing", f"Missing required param: {name}.", name)
        return None
    if not isinstance(v, str):
        raise bad_param("parameter_invalid", f"Invalid string: {name}.", name)
    return v


def get_amount(params, name="amount", required=True):
    v = get_str(params, name, required)
    if v is None:
        return None
    if not re.fullmatch(r"-?[0-9]+", v):
        raise bad_param("parameter_invalid_integer", f"Invalid integer: {v}", name)
    n = int(v)
    if n < 1:
        raise bad_param("amount_too_small", "Amount must be at least 1 minor unit.", name)
    return n


def get_currency(params, required=True):
    v = get_str(params, "currency", required)
    if v is None:
        return None
    if not CURRENCY_RE.match(v.lower()):
        raise bad_param("parameter_invalid", f"Invalid currency: {v}.", "currency")
    return v.lower()


def get_metadata(params, name="metadata"):
    md = params.get(name)
    if md is None or md == "":
        return {}
    if not isinstance(md, dict):
        raise bad_param("parameter_invalid", "Invalid metadata: must be a hash.", name)
    if len(md) > 50:
        raise bad_param("parameter_invalid", "Metadata can have at most 50 keys.", name)
    out = {}
    for k, v in md.items():
        if len(k) > 40 or len(v) > 500:
            raise bad_param("parameter_invalid",
                            "Metadata keys are at most 40 characters, values at most 500.",
                            f"{name}[{k}]")
        if v != "":
            out[k] = v
    return out


def get_expand(params):
    e = params.get("expand")
    if e is None or e == "":
        return []
    if isinstance(e, dict):
        return list(e.values())
    return [e]


def get_limit(params, default=10):
    v = params.get("limit")
    if v is None or v == "":
        return default
    if not isinstance(v, str) or not re.fullmatch(r"[0-9]+", v) or not 1 <= int(v) <= 100:
        raise bad_param("parameter_invalid_integer",
                        "This value must be between 1 and 100 (inclusive).", "limit")
    return int(v)


def canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


# ---------------------------------------------------------------- state

class Sandbox:
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
            self.bucket = {"rate": None, "tokens": 0.0, "last": 0.0}
            prev = getattr(self, "stats", None) or {}
            self.stats = {"requests": 0, "by_status": {}, "faults": {
                "fail_5xx": 0, "fail_429": 0, "rate_limit": 0, "drop_after_commit": 0},
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
                pm = _fixture_payout_method(p)
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
                    "balance_transaction": "txn_" + t["id"].split("_", 1)[-1], "created": _now(),
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
        created = int(c.get("created", _now()))
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

    def fault(self, kind):
        with self.lock:
            self.stats["faults"][kind] += 1

    def roll(self, kind) -> bool:
        with self.lock:
            p = float(self.config.get(kind) or 0)
            return p > 0 and self.rng.random() < p

    def take_token(self) -> bool:
        with self.lock:
            rate = float(self.config.get("rate_limit") or 0)
            if rate <= 0:
                return True
            b = self.bucket
            now = time.monotonic()
            cap = max(1.0, rate)
            if b["rate"] != rate:
                b.update(rate=rate, tokens=cap, last=now)
            b["tokens"] = min(cap, b["tokens"] + (now - b["last"]) * rate)
            b["last"] = now
            if b["tokens"] >= 1:
                b["tokens"] -= 1
                return True
            return False

    def add_effect(self, **fields):
        self.effects.append({"seq": len(self.effects) + 1, **fields})

    # -- v1: transfers ---------------------------------------------------------
    TRANSFER_PARAMS = {"amount", "currency", "destination", "source_transaction",
                       "transfer_group", "description", "metadata", "expand"}

    def create_transfer(self, p, ctx):
        check_unknown(p, self.TRANSFER_PARAMS)
        amount = get_amount(p)
        currency = get_currency(p)
        dest = get_str(p, "destination", required=True)
        src = get_str(p, "source_transaction")
        group = get_str(p, "transfer_group")
        desc = get_str(p, "description")
        metadata = get_metadata(p)
        if not dest.startswith("acct_"):
            raise invalid("resource_missing", f"No such destination: '{dest}'", "destination")
        acct = self.accounts.get(dest)
        if acct is not None and acct["transfers_disabled"]:
            raise invalid("transfers_not_allowed",
                          f"Transfers to {dest} are not allowed: the account does not have "
                          "the transfers capability enabled.", "destination")
        if src:
            ch = self.charges.get(src)
            if ch is None and self.auto_charges and src.startswith(("ch_", "py_")):
                ch = self._fixture_charge({"id": src, "amount": AUTO_CHARGE_AMOUNT,
                                           "currency": currency})
                self.charges[src] = ch
            if ch is None:
                raise invalid("resource_missing", f"No such charge: '{src}'", "source_transaction")
            if ch["status"] == "failed":
                raise invalid("charge_failed", f"The source transaction {src} has failed.",
                              "source_transaction")
            if ch["currency"] != currency:
                raise invalid("parameter_invalid",
                              f"The currency of source_transaction's balance transaction "
                              f"({ch['currency']}) must be the same as the transfer currency "
                              f"({currency}).", "currency")
            left = ch["amount"] - ch["amount_refunded"] - ch["transferred"]
            if amount > left:
                raise invalid("amount_too_large",
                              f"Transfer amount ({amount}) exceeds the amount left on the "
                              f"source transaction {src} ({max(left, 0)}).", "amount")
            if ch["transfer_group"]:
                group = ch["transfer_group"]
            elif not group and ch["payment_intent"]:
                group = ch["transfer_group"] = f"group_{ch['payment_intent']}"
            ch["transferred"] += amount
        else:
            have = self.platform_balance.get(currency, 0)
            if have < amount:
                raise invalid("balance_insufficient",
                              f"You have insufficient funds in your Stripe account for this "
                              f"transfer: available {have} {currency}, requested {amount}.",
                              None)
            self.platform_balance[currency] = have - amount
        acct = self._account(dest)
        acct["balance"][currency] = acct["balance"].get(currency, 0) + amount
        tr_id = self.new_id("tr")
        tr = {
            "id": tr_id, "object": "transfer", "amount": amount, "amount_reversed": 0,
            "balance_transaction": self.new_id("txn"), "created": _now(),
            "currency": currency, "description": desc, "destination": dest,
            "destination_payment": self.new_id("py"), "livemode": ctx["livemode"],
            "metadata": metadata, "reversed": False, "source_transaction": src,
            "source_type": "card", "transfer_group": group,
        }
        self.transfers[tr_id] = tr
        self.transfer_order.append(tr_id)
        self.add_effect(type="transfer", id=tr_id, amount=amount, currency=currency,
                        idempotency_key=ctx["idempotency_key"], metadata=dict(metadata),
                        destination=dest, source_transaction=src, transfer_group=group)
        return 200, self.render_transfer(tr)

    def render_transfer(self, tr):
        out = dict(tr)
        revs = [self.reversals[r] for r in tr.get("_reversals", [])]
        out.pop("_reversals", None)
        out["metadata"] = dict(tr["metadata"])
        out["reversals"] = {"object": "list", "data": [dict(r) for r in reversed(revs)],
                            "has_more": False, "total_count": len(revs),
                            "url": f"/v1/transfers/{tr['id']}/reversals"}
        return out

    def get_transfer(self, p, ctx, tr_id):
        tr = self.transfers.get(tr_id)
        if tr is None:
            raise invalid("resource_missing", f"No such transfer: '{tr_id}'", "id", status=404)
        return 200, self.render_transfer(tr)

    def list_transfers(self, p, ctx):
        check_unknown(p, {"transfer_group", "destination", "limit", "starting_after",
                          "ending_before", "expand", "created"})
        limit = get_limit(p)
        group = get_str(p, "transfer_group")
        dest = get_str(p, "destination")
        items = [self.transfers[t] for t in reversed(self.transfer_order)]
        if group is not None:
            items = [t for t in items if t["transfer_group"] == group]
        if dest is not None:
            items = [t for t in items if t["destination"] == dest]
        after = get_str(p, "starting_after")
        before = get_str(p, "ending_before")
        if after:
            idx = next((i for i, t in enumerate(items) if t["id"] == after), None)
            if idx is None:
                raise invalid("resource_missing", f"No such transfer: '{after}'", "starting_after",
                              status=404)
            items = items[idx + 1:]
            page, more = items[:limit], len(items) > limit
        elif before:
            idx = next((i for i, t in enumerate(items) if t["id"] == before), None)
            if idx is None:
                raise invalid("resource_missing", f"No such transfer: '{before}'", "ending_before",
                              status=404)
            items = items[:idx]
            page, more = items[-limit:], len(items) > limit
        else:
            page, more = items[:limit], len(items) > limit
        return 200, {"object": "list", "data": [self.render_transfer(t) for t in page],
                     "has_more": more, "url": "/v1/transfers"}

    # -- v1: reversals ---------------------------------------------------------
    def create_reversal(self, p, ctx, tr_id):
        check_unknown(p, {"amount", "description", "metadata", "refund_application_fee", "expand"})
        amount = get_amount(p, required=False)
        desc = get_str(p, "description")
        metadata = get_metadata(p)
        tr = self.transfers.get(tr_id)
        if tr is None:
            raise invalid("resource_missing", f"No such transfer: '{tr_id}'", "id", status=404)
        left = tr["amount"] - tr["amount_reversed"]
        if left <= 0:
            raise invalid("transfer_already_reversed",
                          f"Transfer {tr_id} has already been fully reversed.", None)
        if amount is None:
            amount = left
        if amount > left:
            raise invalid("amount_too_large",
                          f"Reversal amount ({amount}) is greater than the amount left on "
                          f"transfer {tr_id} ({left}).", "amount")
        cur = tr["currency"]
        acct = self._account(tr["destination"])
        have = acct["balance"].get(cur, 0)
        if have < amount:
            raise invalid("balance_insufficient",
                          f"Insufficient funds in the connected account {tr['destination']} "
                          f"to reverse {amount} {cur} (available {have}).", None)
        acct["balance"][cur] = have - amount
        if tr["source_transaction"] and tr["source_transaction"] in self.charges:
            self.charges[tr["source_transaction"]]["transferred"] -= amount
        else:
            self.platform_balance[cur] = self.platform_balance.get(cur, 0) + amount
        tr["amount_reversed"] += amount
        tr["reversed"] = tr["amount_reversed"] >= tr["amount"]
        rev_id = self.new_id("trr")
        rev = {"id": rev_id, "object": "transfer_reversal", "amount": amount,
               "balance_transaction": self.new_id("txn"), "created": _now(), "currency": cur,
               "description": desc, "destination_payment_refund": self.new_id("pyr"),
               "metadata": metadata, "source_refund": None, "transfer": tr_id}
        self.reversals[rev_id] = rev
        tr.setdefault("_reversals", []).append(rev_id)
        self.add_effect(type="reversal", id=rev_id, amount=amount, currency=cur,
                        idempotency_key=ctx["idempotency_key"], metadata=dict(metadata),
                        destination=tr["destination"], transfer=tr_id)
        out = dict(rev)
        out["metadata"] = dict(metadata)
        return 200, out

    def list_reversals(self, p, ctx, tr_id):
        tr = self.transfers.get(tr_id)
        if tr is None:
            raise invalid("resource_missing", f"No such transfer: '{tr_id}'", "id", status=404)
        return 200, self.render_transfer(tr)["reversals"]

    # -- v1: charges, balance --------------------------------------------------
    def get_charge(self, p, ctx, ch_id):
        ch = self.charges.get(ch_id)
        if ch is None and self.auto_charges and ch_id.startswith(("ch_", "py_")):
            ch = self.charges[ch_id] = self._fixture_charge({"id": ch_id,
                                                              "amount": AUTO_CHARGE_AMOUNT})
        if ch is None:
            raise invalid("resource_missing", f"No such charge: '{ch_id}'", "id", status=404)
        bt = ch["balance_transaction"]
        if "balance_transaction" in get_expand(p):
            gross = ch["amount_captured"]
            bt = {"id": bt, "object": "balance_transaction", "amount": gross,
                  "available_on": ch["available_on"], "created": ch["created"],
                  "currency": ch["currency"], "fee": ch["fee"], "net": gross - ch["fee"],
                  "status": ch["balance_status"], "type": "charge", "source": ch["id"]}
        return 200, {
            "id": ch["id"], "object": "charge", "amount": ch["amount"],
            "amount_captured": ch["amount_captured"], "amount_refunded": ch["amount_refunded"],
            "balance_transaction": bt, "captured": ch["status"] != "failed",
            "created": ch["created"], "currency": ch["currency"], "livemode": ctx["livemode"],
            "paid": ch["status"] == "succeeded", "payment_intent": ch["payment_intent"],
            "payment_method_details": {"type": ch["payment_method_type"]},
            "refunded": ch["amount_refunded"] >= ch["amount"] > 0,
            "status": ch["status"], "transfer_group": ch["transfer_group"],
        }

    def get_balance(self, p, ctx):
        return 200, {"object": "balance", "livemode": ctx["livemode"],
                     "available": [{"amount": a, "currency": c}
                                   for c, a in sorted(self.platform_balance.items())],
                     "pending": []}

    # -- v2: payout methods ----------------------------------------------------
    def _payout_method_for(self, pm_id, ctx):
        pm = self.payout_methods.get(pm_id)
        if pm is None or pm["recipient"] != ctx["stripe_context"]:
            raise ApiError(404, "invalid_request_error", "not_found",
                           f"No such payout method: '{pm_id}'")
        return pm

    def render_payout_method(self, pm, ctx):
        out = {"id": pm["id"], "object": "v2.money_management.payout_method",
               "type": pm["type"], "available_payout_speeds": list(pm["speeds"]),
               "usage_status": {"payments": pm["usage_status"], "transfers": "invalid"},
               "archived": pm["archived"], "restricted": pm["restricted"],
               "created": pm["created"], "livemode": ctx["livemode"],
               "latest_outbound_setup_intent": None}
        out[pm["type"]] = {"dynamic_last4": pm["dynamic_last4"], "last4": pm["last4"],
                           "exp_month": pm["exp_month"], "exp_year": pm["exp_year"],
                           "supported_currencies": list(pm["currencies"])}
        return out

    def get_payout_method(self, p, ctx, pm_id):
        return 200, self.render_payout_method(self._payout_method_for(pm_id, ctx), ctx)

    def list_payout_methods(self, p, ctx):
        items = [pm for pm in self.payout_methods.values()
                 if pm["recipient"] == ctx["stripe_context"]]
        return 200, {"data": [self.render_payout_method(pm, ctx) for pm in items],
                     "next_page_url": None, "previous_page_url": None}

    # -- v2: outbound payments -------------------------------------------------
    def create_outbound_payment(self, body, ctx):
        problems = []

        def obj(name, parent, required=True):
            v = parent.get(name) if isinstance(parent, dict) else None
            if v is None:
                if required:
                    problems.append(f"{name} is required")
                return {}
            if not isinstance(v, dict):
                problems.append(f"{name} must be an object")
                return {}
            return v

        def text(d, name, where, required=True):
            v = d.get(name)
            if v is None:
                if required:
                    problems.append(f"{where}.{name} is required")
                return None
            if not isinstance(v, str) or not v:
                problems.append(f"{where}.{name} must be a non-empty string")
                return None
            return v

        if not isinstance(body, dict):
            raise ApiError(400, "invalid_request_error", "invalid_fields",
                           "The request body must be a JSON object.")
        allowed = {"from", "to", "amount", "delivery_options", "description", "metadata",
                   "recipient_notification", "statement_descriptor", "outbound_payment_quote"}
        for k in body:
            if k not in allowed:
                problems.append(f"unknown field: {k}")
        frm, to, amt = obj("from", body), obj("to", body), obj("amount", body)
        fa_id = text(frm, "financial_account", "from")
        from_cur = text(frm, "currency", "from", required=False)
        recipient = text(to, "recipient", "to")
        pm_id = text(to, "payout_method", "to")
        to_cur = text(to, "currency", "to", required=False)
        value = amt.get("value")
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            problems.append("amount.value must be a positive integer (minor units)")
        amt_cur = text(amt, "currency", "amount")
        for c in (from_cur, to_cur, amt_cur):
            if c is not None and c != "usd":
                problems.append(f"unsupported currency {c!r}: outbound payments are USD only")
        speed = obj("delivery_options", body, required=False).get("speed")
        if speed is not None and speed not in ("instant", "standard"):
            problems.append("delivery_options.speed must be instant or standard")
        desc = body.get("description")
        if desc is not None and not isinstance(desc, str):
            problems.append("description must be a string")
        metadata = body.get("metadata") or {}
        if not isinstance(metadata, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            problems.append("metadata must be an object of strings")
            metadata = {}
        if recipient is not None and not recipient.startswith("acct_"):
            problems.append("to.recipient must be an account id (acct_...)")
        if problems:
            raise ApiError(400, "invalid_request_error", "invalid_fields", "; ".join(problems))
        fa = self.financial_accounts.get(fa_id)
        if fa is None:
            raise ApiError(404, "invalid_request_error", "not_found",
                           f"No such financial account: '{fa_id}'")
        pm = self.payout_methods.get(pm_id)
        reason = None
        if pm is None or pm["recipient"] != recipient:
            reason = f"payout method {pm_id} does not belong to recipient {recipient}"
        elif pm["type"] != "apple_pay":
            reason = f"payout method {pm_id} is of type {pm['type']}, not apple_pay"
        elif pm["archived"]:
            reason = f"payout method {pm_id} is archived"
        elif pm["restricted"]:
            reason = f"payout method {pm_id} is restricted"
        elif pm["usage_status"] != "eligible":
            reason = f"payout method {pm_id} is not eligible for payments ({pm['usage_status']})"
        elif "instant" not in pm["speeds"] or (speed or "instant") not in pm["speeds"]:
            reason = f"payout method {pm_id} does not support {speed or 'instant'} payouts"
        elif "usd" not in pm["currencies"]:
            reason = f"payout method {pm_id} does not support usd"
        if reason:
            raise ApiError(400, "invalid_payout_method", "invalid_payout_method", reason)
        have = fa["balance"].get("usd", 0)
        if have < value:
            raise ApiError(400, "insufficient_funds", "insufficient_funds",
                           f"Financial account {fa_id} has {have} usd available; "
                           f"the payment needs {value}.")
        fa["balance"]["usd"] = have - value
        obp_id = self.new_id("obp")
        created = _rfc3339()
        money = {"value": value, "currency": "usd"}
        obp = {
            "id": obp_id, "object": "v2.money_management.outbound_payment",
            "amount": dict(money), "cancelable": False, "created": created,
            "delivery_options": {"speed": speed or "instant"}, "description": desc,
            "expected_arrival_date": created, "financial_account": fa_id,
            "from": {"financial_account": fa_id, "currency": "usd", "debited": dict(money)},
            "to": {"recipient": recipient, "payout_method": pm_id, "currency": "usd",
                   "credited": dict(money)},
            "livemode": ctx["livemode"], "metadata": dict(metadata),
            "statement_descriptor": body.get("statement_descriptor"),
            "status": "posted", "status_details": None,
            "status_transitions": {"posted_at": created},
        }
        self.outbound_payments[obp_id] = obp
        self.obp_order.append(obp_id)
        self.add_effect(type="outbound_payment", id=obp_id, amount=value, currency="usd",
                        idempotency_key=ctx["idempotency_key"], metadata=dict(metadata),
                        recipient=recipient, payout_method=pm_id, financial_account=fa_id)
        return 200, json.loads(json.dumps(obp))

    def get_outbound_payment(self, p, ctx, obp_id):
        obp = self.outbound_payments.get(obp_id)
        if obp is None:
            raise ApiError(404, "invalid_request_error", "not_found",
                           f"No such outbound payment: '{obp_id}'")
        return 200, json.loads(json.dumps(obp))

    def list_outbound_payments(self, p, ctx):
        limit = get_limit(p, default=20)
        recipient = get_str(p, "recipient")
        page_tok = get_str(p, "page") or "0"
        if not page_tok.isdigit():
            raise ApiError(400, "invalid_request_error", "invalid_fields", "invalid page token")
        start = int(page_tok)
        items = [self.outbound_payments[o] for o in reversed(self.obp_order)]
        if recipient:
            items = [o for o in items if o["to"]["recipient"] == recipient]
        page = items[start:start + limit]
        nxt = None
        if start + limit < len(items):
            q = {"limit": str(limit), "page": str(start + limit)}
            if recipient:
                q["recipient"] = recipient
            nxt = "/v2/money_management/outbound_payments?" + urllib.parse.urlencode(q)
        return 200, {"data": json.loads(json.dumps(page)), "next_page_url": nxt,
                     "previous_page_url": None}

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


def _fixture_payout_method(p):
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
        "created": _rfc3339(),
    }


# ---------------------------------------------------------------- routing

_ID = r"([A-Za-z0-9_\-]+)"
ROUTES = [
    ("POST", re.compile(r"^/v1/transfers$"), "create_transfer"),
    ("GET", re.compile(r"^/v1/transfers$"), "list_transfers"),
    ("GET", re.compile(rf"^/v1/transfers/{_ID}$"), "get_transfer"),
    ("POST", re.compile(rf"^/v1/transfers/{_ID}/reversals$"), "create_reversal"),
    ("GET", re.compile(rf"^/v1/transfers/{_ID}/reversals$"), "list_reversals"),
    ("GET", re.compile(rf"^/v1/charges/{_ID}$"), "get_charge"),
    ("GET", re.compile(r"^/v1/balance$"), "get_balance"),
    ("GET", re.compile(rf"^/v2/money_management/payout_methods/{_ID}$"), "get_payout_method"),
    ("GET", re.compile(r"^/v2/money_management/payout_methods$"), "list_payout_methods"),
    ("POST", re.compile(r"^/v2/money_management/outbound_payments$"), "create_outbound_payment"),
    ("GET", re.compile(r"^/v2/money_management/outbound_payments$"), "list_outbound_payments"),
    ("GET", re.compile(rf"^/v2/money_management/outbound_payments/{_ID}$"), "get_outbound_payment"),
]

_req_counter = itertools.count(1)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "stripe-sandbox/1.0"
    sys_version = ""
    timeout = 300  # idle keep-alive connections are closed after this

    def version_string(self):
        return self.server_version

    # -- plumbing ------------------------------------------------------------
    @property
    def sb(self) -> Sandbox:
        return self.server.sandbox

    def setup(self):
        super().setup()
        self.sb.connection(+1)

    def finish(self):
        try:
            super().finish()
        finally:
            self.sb.connection(-1)

    def log_message(self, fmt, *args):
        if not self.server.quiet:
            super().log_message(fmt, *args)

    def do_GET(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    def do_DELETE(self):
        self._dispatch("DELETE")

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                line = self.rfile.readline(65537)
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline(65537)
            return b"".join(chunks)
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def _send(self, status, body, headers=None):
        data = (json.dumps(body) + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Request-Id", f"req_sb{next(_req_counter):010d}")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self._status = status

    def _drop(self):
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _dispatch(self, method):
        self._status = None
        self._delayed = False
        try:
            body = self._read_body()
        except (ValueError, OSError):
            self.close_connection = True
            self._send(400, {"error": {"type": "invalid_request_error", "code": None,
                                       "message": "Could not read the request body.",
                                       "param": None}})
            return
        url = urllib.parse.urlsplit(self.path)
        path = url.path
        try:
            if path.startswith("/_sandbox/") or path == "/_sandbox":
                self._control(method, path, url.query, body)
            elif path.startswith(("/v1/", "/v2/")):
                self._api(method, path, url.query, body)
            else:
                self._send(404, ApiError(404, "invalid_request_error", None,
                                         f"Unrecognized request URL ({method}: {path}).").body("v1"))
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    # -- control API -----------------------------------------------------------
    def _control(self, method, path, query, raw):
        sb = self.sb
        try:
            data = json.loads(raw) if raw.strip() else {}
        except ValueError:
            return self._send(400, {"error": "body is not valid JSON"})
        try:
            if method == "POST" and path == "/_sandbox/reset":
                sb.reset(empty=bool(isinstance(data, dict) and data.get("empty")))
                return self._send(200, {"ok": True, "config": sb.config})
            if method == "POST" and path == "/_sandbox/fixtures":
                sb.load_fixtures(data)
                return self._send(200, {"ok": True, "state": sb.snapshot()})
            if path == "/_sandbox/config" and method in ("GET", "POST"):
                if method == "POST":
                    if not isinstance(data, dict):
                        raise ValueError("config must be a JSON object")
                    sb.set_config(data)
                with sb.lock:
                    return self._send(200, dict(sb.config))
            if method == "GET" and path == "/_sandbox/effects":
                q = dict(urllib.parse.parse_qsl(query))
                since = int(q.get("since", "0") or 0)
                with sb.lock:
                    data = json.loads(json.dumps([e for e in sb.effects if e["seq"] > since]))
                return self._send(200, {"data": data})
            if method == "GET" and path == "/_sandbox/stats":
                with sb.lock:
                    return self._send(200, json.loads(json.dumps(sb.stats)))
            if method == "GET" and path == "/_sandbox/state":
                return self._send(200, sb.snapshot())
            if method == "GET" and path == "/_sandbox/health":
                return self._send(200, {"ok": True})
            if method == "POST" and path == "/_sandbox/shutdown":
                self.close_connection = True
                self._send(200, {"ok": True})
                threading.Thread(target=self.server.shutdown, daemon=True).start()
                return
        except ValueError as e:
            return self._send(400, {"error": str(e)})
        return self._send(404, {"error": f"unknown control endpoint {method} {path}"})

    # -- Stripe API ------------------------------------------------------------------
    def _delay(self):
        if not self._delayed:
            self._delayed = True
            ms = float(self.sb.config.get("latency_ms") or 0)
            if ms > 0:
                time.sleep(ms / 1000.0)

    def _api(self, method, path, query, raw):
        sb = self.sb
        family = path[1:3]
        sb.begin_request()
        try:
            try:
                result = self._api_inner(method, path, query, raw, family)
            except ApiError as e:
                self._delay()
                hdrs = dict(e.headers)
                result = (e.status, e.body(family), hdrs)
            except Exception:  # a bug in the sandbox: say so, loudly
                traceback.print_exc()
                self._delay()
                result = (500, ApiError(500, "api_error", None,
                                        "Internal sandbox error.").body(family),
                          {"Stripe-Should-Retry": "false"})
            if result is DROP:
                sb.fault("drop_after_commit")
                self._status = "dropped"
                self._drop()
                return
            status, body, hdrs = result
            ver = self.headers.get("Stripe-Version")
            if ver:
                hdrs.setdefault("Stripe-Version", ver)
            self._send(status, body, hdrs)
        finally:
            sb.end_request(self._status if self._status is not None else "error")

    def _api_inner(self, method, path, query, raw, family):
        sb = self.sb
        auth = self.headers.get("Authorization", "")
        m = AUTH_RE.match(auth.strip())
        if not m:
            raise ApiError(401, "invalid_request_error", None,
                           "Invalid API Key provided." if auth else
                           "You did not provide an API key.")
        if auth.strip().split(" ", 1)[-1] in sb.config.get("revoked_keys", []):
            raise ApiError(401, "invalid_request_error", "api_key_expired", "Expired API Key provided.")
        livemode = m.group(1) == "live"
        if not sb.take_token():
            sb.fault("rate_limit")
            raise ApiError(429, "invalid_request_error", "rate_limit",
                           "Too many requests hit the API too quickly (sandbox rate limit).",
                           headers={"Stripe-Should-Retry": "true"})
        if sb.roll("fail_429"):
            sb.fault("fail_429")
            raise ApiError(429, "invalid_request_error", "rate_limit",
                           "Too many requests hit the API too quickly (injected).",
                           headers={"Stripe-Should-Retry": "true"})
        if sb.roll("fail_5xx"):
            sb.fault("fail_5xx")
            raise ApiError(500, "api_error", None,
                           "An unknown error occurred (injected); nothing was done.",
                           headers={"Stripe-Should-Retry": "true"})
        if family == "v2":
            ver = self.headers.get("Stripe-Version", "")
            if not ver:
                raise ApiError(400, "invalid_request_error", "missing_api_version",
                               "The Stripe-Version header is required for v2 requests.")
            if path.startswith("/v2/money_management/") and not ver.endswith(".preview"):
                raise ApiError(400, "invalid_request_error", "invalid_api_version",
                               f"Money management requires a preview API version "
                               f"(ending in .preview); got {ver!r}.")
        for r_method, pattern, name in ROUTES:
            rm = pattern.match(path)
            if rm and r_method == method:
                break
        else:
            raise ApiError(404, "invalid_request_error", None,
                           f"Unrecognized request URL ({method}: {path}).")
        handler = getattr(sb, name)
        key = self.headers.get("Idempotency-Key")
        ctx = {"livemode": livemode, "idempotency_key": key if method == "POST" else None,
               "stripe_context": self.headers.get("Stripe-Context"), "family": family}
        if method != "POST":
            params = parse_form(query)
            self._delay()
            with sb.lock:
                status, body = handler(params, ctx, *rm.groups())
            return status, body, {}

        # POST: parse, then idempotency
        if family == "v1":
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise bad_param("parameter_invalid", "The request body is not UTF-8.", None)
            params = parse_form(text)
        else:
            try:
                params = json.loads(raw) if raw.strip() else {}
            except ValueError:
                raise ApiError(400, "invalid_request_error", "invalid_fields",
                               "The request body is not valid JSON.")
        if key is not None:
            if not key or len(key) > MAX_KEY_LEN:
                raise bad_param("parameter_invalid",
                                f"Idempotency-Key must be 1 to {MAX_KEY_LEN} characters.", None)
            scope = (family, key)
            fingerprint = canonical([method, path, params])
            with sb.lock:
                entry = sb.idem.get(scope)
                if entry is not None:
                    if entry["fingerprint"] != fingerprint:
                        raise ApiError(400, "idempotency_error",
                                       "idempotency_error" if family == "v2" else None,
                                       "Keys for idempotent requests can only be used with the "
                                       "same parameters they were first used with. Try using a "
                                       f"key other than '{key}' if you meant to execute a "
                                       "different request.", save=False)
                    if entry["state"] == "running":
                        raise ApiError(409, "invalid_request_error", "idempotency_key_in_use",
                                       "There is currently another in-progress request using "
                                       "this Stripe token (probably the same idempotency key). "
                                       "Retry your request after a short delay.",
                                       headers={"Stripe-Should-Retry": "true"})
                    sb.stats["replays"] += 1
                    status, body = entry["response"]
                    replay = (status, json.loads(json.dumps(body)),
                              {"Idempotent-Replayed": "true", "Idempotency-Key": key})
                else:
                    sb.idem[scope] = {"fingerprint": fingerprint, "state": "running",
                                      "response": None}
                    replay = None
            if replay is not None:
                self._delay()
                return replay
        self._delay()  # the request "executes" while its key is held: 409 territory
        saved = True
        try:
            with sb.lock:
                try:
                    status, body = handler(params, ctx, *rm.groups())
                except ApiError as e:
                    status, body = e.status, e.body(family)
                    saved = e.save and family == "v1"
        except BaseException:
            if key is not None:
                with sb.lock:
                    sb.idem.pop((family, key), None)
            raise
        headers = {"Idempotency-Key": key} if key is not None else {}
        if key is not None:
            with sb.lock:
                if saved:
                    sb.idem[(family, key)].update(state="done", response=(status, body))
                else:
                    sb.idem.pop((family, key), None)
        if 200 <= status < 300 and sb.roll("drop_after_commit"):
            return DROP
        return status, body, headers


class SandboxServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    allow_reuse_address = True


def _check_loopback(host: str) -> str:
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except socket.gaierror as e:
        raise SystemExit(f"stripe_sandbox: cannot resolve {host!r}: {e}")
    addrs = {info[4][0] for info in infos}
    if not addrs or not all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addrs):
        raise SystemExit(f"stripe_sandbox: refusing to bind to non-loopback host {host!r}")
    return sorted(addrs, key=lambda a: ":" in a)[0]


def _write_port_file(path: str, port: int):
    d = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(d, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        f.write(f"{port}\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Local stateful Stripe API sandbox for settle.")
    ap.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)")
    ap.add_argument("--port", type=int, default=0, help="port; 0 picks a free one")
    ap.add_argument("--port-file", help="write the port here (atomically) once listening")
    ap.add_argument("--fixtures", help="JSON fixtures file loaded at start and on reset")
    ap.add_argument("--latency-ms", type=float, default=0)
    ap.add_argument("--fail-5xx", type=float, default=0.0)
    ap.add_argument("--fail-429", type=float, default=0.0)
    ap.add_argument("--drop-after-commit", type=float, default=0.0)
    ap.add_argument("--rate-limit", type=float, default=0.0, help="requests/s over all API calls; 0 = off")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--quiet", action="store_true", help="no per-request log lines")
    args = ap.parse_args(argv)

    addr = _check_loopback(args.host)
    fixtures = None
    if args.fixtures:
        with open(args.fixtures, encoding="utf-8") as f:
            fixtures = json.load(f)
    config = {"latency_ms": args.latency_ms, "fail_5xx": args.fail_5xx,
              "fail_429": args.fail_429, "drop_after_commit": args.drop_after_commit,
              "rate_limit": args.rate_limit, "seed": args.seed}
    sandbox = Sandbox(config={}, fixtures=None)
    try:
        sandbox.set_config(config)
        sandbox.startup_fixtures = fixtures
        sandbox.reset()
    except ValueError as e:
        raise SystemExit(f"stripe_sandbox: {e}")

    if ":" in addr:
        SandboxServer.address_family = socket.AF_INET6
    server = SandboxServer((addr, args.port), Handler)
    server.sandbox = sandbox
    server.quiet = args.quiet
    port = server.server_address[1]

    def _stop(signum, frame):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    if args.port_file:
        _write_port_file(args.port_file, port)
    shown = f"[{addr}]" if ":" in addr else addr
    print(f"sandbox listening on http://{shown}:{port}", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
        if args.port_file:
            try:
                os.remove(args.port_file)
            except OSError:
                pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
