"""v2 money-management endpoints: payout methods and outbound payments."""

from __future__ import annotations

import json
import urllib.parse

from .clock import parse_rfc3339, rfc3339
from .errors import ApiError
from .params import get_limit, get_str


OBP_STATUSES = ("processing", "posted", "failed", "returned", "canceled")
# From -> the statuses a test may move an outbound payment to.
OBP_TRANSITIONS = {
    "processing": {"processing", "posted", "failed", "returned", "canceled"},
    "posted": {"returned"},
}
# status_details reason when the test gives none.
DEFAULT_OBP_REASON = {"failed": "payout_method_declined", "returned": "payout_method_closed"}


def _public(obj: dict) -> dict:
    """A deep copy without the sandbox's own `_` fields."""
    return json.loads(json.dumps({k: v for k, v in obj.items() if not k.startswith("_")}))


class V2Mixin:
    """Handlers for /v2; called with the state lock held."""

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
        now = self.now()
        created = rfc3339(now)
        status = self.config.get("payout_initial_status") or "processing"
        money = {"value": value, "currency": "usd"}
        obp = {
            "id": obp_id, "object": "v2.money_management.outbound_payment",
            "amount": dict(money), "cancelable": status == "processing", "created": created,
            "delivery_options": {"speed": speed or "instant"}, "description": desc,
            "expected_arrival_date": created, "financial_account": fa_id,
            "from": {"financial_account": fa_id, "currency": "usd", "debited": dict(money)},
            "to": {"recipient": recipient, "payout_method": pm_id, "currency": "usd",
                   "credited": dict(money)},
            "livemode": ctx["livemode"], "metadata": dict(metadata),
            "statement_descriptor": body.get("statement_descriptor"),
            "status": status, "status_details": None,
            "status_transitions": {"canceled_at": None, "failed_at": None,
                                   "posted_at": created if status == "posted" else None,
                                   "returned_at": None},
            "_pinned": False, "_key": ctx["idempotency_key"],
        }
        self.outbound_payments[obp_id] = obp
        self.obp_order.append(obp_id)
        self.add_effect(type="outbound_payment", id=obp_id, amount=value, currency="usd",
                        idempotency_key=ctx["idempotency_key"], metadata=dict(metadata),
                        recipient=recipient, payout_method=pm_id, financial_account=fa_id)
        return 200, _public(obp)

    def _read_obp(self, obp):
        """An outbound payment as a read shows it: with `payout_auto_post`, a processing
        payment that no test has set turns posted when it is read."""
        if (obp["status"] == "processing" and not obp["_pinned"]
                and self.config.get("payout_auto_post", True)):
            self._move_obp(obp, "posted", None)
        return _public(obp)

    def _move_obp(self, obp, status, reason):
        now = rfc3339(self.now())
        obp["status"] = status
        obp["cancelable"] = status == "processing"
        tr = obp["status_transitions"]
        if status != "processing":
            tr[f"{status}_at"] = now
        if status == "returned" and tr["posted_at"] is None:
            tr["posted_at"] = now  # a return follows a posting
        if status in ("failed", "returned"):
            obp["status_details"] = {status: {"reason": reason or DEFAULT_OBP_REASON[status]}}
        if status in ("failed", "returned", "canceled"):
            # The money comes back to the financial account.
            fa = self.financial_accounts.setdefault(
                obp["financial_account"], {"id": obp["financial_account"], "balance": {}})
            value = obp["amount"]["value"]
            fa["balance"]["usd"] = fa["balance"].get("usd", 0) + value
            fields = {"reason": obp["status_details"][status]["reason"]
                      if obp["status_details"] else None}
            self.add_effect(type=f"outbound_payment_{status}", id=obp["id"], amount=value,
                            currency="usd", idempotency_key=obp["_key"],
                            recipient=obp["to"]["recipient"],
                            payout_method=obp["to"]["payout_method"],
                            financial_account=obp["financial_account"], **fields)

    def set_outbound_payment_status(self, obp_id, status, reason=None):
        """The control endpoint `POST /_sandbox/outbound_payments/{id}/status`.
        Raises KeyError (unknown payment) or ValueError (a move Stripe would not make)."""
        with self.lock:
            obp = self.outbound_payments.get(obp_id)
            if obp is None:
                raise KeyError(obp_id)
            if status not in OBP_STATUSES:
                raise ValueError(f"status must be one of: {', '.join(OBP_STATUSES)}")
            if reason is not None and (not isinstance(reason, str) or not reason):
                raise ValueError("reason must be a non-empty string")
            if reason is not None and status not in ("failed", "returned"):
                raise ValueError("a reason is for failed or returned")
            changed = status != obp["status"]
            if changed:
                if status not in OBP_TRANSITIONS.get(obp["status"], set()):
                    raise ValueError(f"outbound payment {obp_id} is {obp['status']}; "
                                     f"it cannot become {status}")
                self._move_obp(obp, status, reason)
            obp["_pinned"] = True
            return {"ok": True, "changed": changed, "outbound_payment": _public(obp)}

    def get_outbound_payment(self, p, ctx, obp_id):
        obp = self.outbound_payments.get(obp_id)
        if obp is None:
            raise ApiError(404, "invalid_request_error", "not_found",
                           f"No such outbound payment: '{obp_id}'")
        return 200, self._read_obp(obp)

    def list_outbound_payments(self, p, ctx):
        limit = get_limit(p, default=20)
        recipient = get_str(p, "recipient")
        page_tok = get_str(p, "page") or "0"
        if not page_tok.isdigit():
            raise ApiError(400, "invalid_request_error", "invalid_fields", "invalid page token")
        start = int(page_tok)
        bounds = {}
        for name in ("created_gte", "created_gt", "created_lte", "created_lt"):
            v = get_str(p, name)
            if v is not None:
                try:
                    bounds[name] = parse_rfc3339(v)
                except ValueError:
                    raise ApiError(400, "invalid_request_error", "invalid_fields",
                                   f"{name} must be an RFC 3339 timestamp; got {v!r}")
        items = [self.outbound_payments[o] for o in reversed(self.obp_order)]
        if recipient:
            items = [o for o in items if o["to"]["recipient"] == recipient]
        items = [o for o in items if _within(parse_rfc3339(o["created"]), bounds)]
        page = items[start:start + limit]
        nxt = None
        if start + limit < len(items):
            q = {"limit": str(limit), "page": str(start + limit)}
            if recipient:
                q["recipient"] = recipient
            for name in bounds:
                q[name] = p[name]
            nxt = "/v2/money_management/outbound_payments?" + urllib.parse.urlencode(q)
        return 200, {"data": [self._read_obp(o) for o in page], "next_page_url": nxt,
                     "previous_page_url": None}


def _within(ts: float, bounds: dict) -> bool:
    """`created_gte` etc.: whole milliseconds, as the RFC 3339 strings show them."""
    ms = int(round(ts * 1000))
    for name, b in bounds.items():
        b = int(round(b * 1000))
        if ((name == "created_gte" and ms < b) or (name == "created_gt" and ms <= b)
                or (name == "created_lte" and ms > b) or (name == "created_lt" and ms >= b)):
            return False
    return True
