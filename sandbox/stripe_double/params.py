"""Stripe's form encoding and the typed parameter readers the endpoints use."""

from __future__ import annotations

import json
import re
import urllib.parse

from .errors import bad_param

FORM_KEY_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?:\[([^\[\]]*)\])?$")
CURRENCY_RE = re.compile(r"^[a-z]{3}$")


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
