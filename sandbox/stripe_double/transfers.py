"""v1 endpoints: transfers, reversals, charges and the balance."""

from __future__ import annotations

import re

from .errors import bad_param, invalid
from .params import (check_unknown, get_amount, get_currency, get_expand, get_limit,
                     get_metadata, get_str)

AUTO_CHARGE_AMOUNT = 10 ** 12 - 1  # "unlimited" charge amount for auto_charges: 12 digits, the most settle accepts


class V1Mixin:
    """Handlers for /v1; called with the state lock held."""

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
            "balance_transaction": self.new_id("txn"), "created": int(self.now()),
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
        created = _created_filter(p)
        ordered = list(reversed(self.transfer_order))  # newest first
        position = {t: i for i, t in enumerate(ordered)}
        items = [self.transfers[t] for t in ordered]
        if group is not None:
            items = [t for t in items if t["transfer_group"] == group]
        if dest is not None:
            items = [t for t in items if t["destination"] == dest]
        items = [t for t in items if created(t["created"])]
        after = get_str(p, "starting_after")
        before = get_str(p, "ending_before")
        if after:
            if after not in position:
                raise invalid("resource_missing", f"No such transfer: '{after}'", "starting_after",
                              status=404)
            items = [t for t in items if position[t["id"]] > position[after]]
            page, more = items[:limit], len(items) > limit
        elif before:
            if before not in position:
                raise invalid("resource_missing", f"No such transfer: '{before}'", "ending_before",
                              status=404)
            items = [t for t in items if position[t["id"]] < position[before]]
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
               "balance_transaction": self.new_id("txn"), "created": int(self.now()), "currency": cur,
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
        return 200, self.render_charge(ch, ctx["livemode"], "balance_transaction" in get_expand(p))

    def render_charge(self, ch, livemode=False, expand_bt=False):
        bt = ch["balance_transaction"]
        if expand_bt:
            gross = ch["amount_captured"]
            bt = {"id": bt, "object": "balance_transaction", "amount": gross,
                  "available_on": ch["available_on"], "created": ch["created"],
                  "currency": ch["currency"], "fee": ch["fee"], "net": gross - ch["fee"],
                  "status": ch["balance_status"], "type": "charge", "source": ch["id"]}
        return {
            "id": ch["id"], "object": "charge", "amount": ch["amount"],
            "amount_captured": ch["amount_captured"], "amount_refunded": ch["amount_refunded"],
            "balance_transaction": bt, "captured": ch["status"] != "failed",
            "created": ch["created"], "currency": ch["currency"], "livemode": livemode,
            "paid": ch["status"] == "succeeded", "payment_intent": ch["payment_intent"],
            "payment_method_details": {"type": ch["payment_method_type"]},
            "refunded": ch["amount_refunded"] >= ch["amount"] > 0,
            "status": ch["status"], "transfer_group": ch["transfer_group"],
        }

    def set_charge_status(self, ch_id, status, balance_status=None):
        """The control endpoint `POST /_sandbox/charges/{id}/status`: a pending bank debit
        succeeds or fails (or a charge goes back to pending). Raises KeyError / ValueError."""
        with self.lock:
            ch = self.charges.get(ch_id)
            if ch is None:
                raise KeyError(ch_id)
            if status not in ("succeeded", "failed", "pending"):
                raise ValueError("status must be succeeded, failed or pending")
            if balance_status is not None and balance_status not in ("available", "pending"):
                raise ValueError("balance_status must be available or pending")
            ch["status"] = status
            ch["amount_captured"] = 0 if status == "failed" else ch["amount"]
            ch["balance_status"] = balance_status or (
                "available" if status == "succeeded" else "pending")
            return {"ok": True, "charge": self.render_charge(ch, expand_bt=True)}

    def get_balance(self, p, ctx):
        return 200, {"object": "balance", "livemode": ctx["livemode"],
                     "available": [{"amount": a, "currency": c}
                                   for c, a in sorted(self.platform_balance.items())],
                     "pending": []}


def _created_filter(p):
    """`created=N` or `created[gt|gte|lt|lte]=N` (Unix seconds) -> a predicate."""
    v = p.get("created")
    if v is None or v == "":
        return lambda ts: True
    parts = {"eq": v} if isinstance(v, str) else v
    bounds = {}
    for op, text in parts.items():
        if op not in ("eq", "gt", "gte", "lt", "lte"):
            raise bad_param("parameter_unknown", f"Received unknown parameter: created[{op}]",
                            f"created[{op}]")
        if not isinstance(text, str) or not re.fullmatch(r"-?[0-9]+", text):
            raise bad_param("parameter_invalid_integer", f"Invalid integer: {text}",
                            "created" if op == "eq" else f"created[{op}]")
        bounds[op] = int(text)

    def ok(ts):
        return ((("eq" not in bounds) or ts == bounds["eq"])
                and (("gt" not in bounds) or ts > bounds["gt"])
                and (("gte" not in bounds) or ts >= bounds["gte"])
                and (("lt" not in bounds) or ts < bounds["lt"])
                and (("lte" not in bounds) or ts <= bounds["lte"]))
    return ok
