"""Which Sandbox method answers which Stripe path."""

from __future__ import annotations

import re

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


def match(method: str, path: str):
    """(handler name, path groups) for a Stripe path, or None."""
    for r_method, pattern, name in ROUTES:
        rm = pattern.match(path)
        if rm and r_method == method:
            return name, rm.groups()
    return None
