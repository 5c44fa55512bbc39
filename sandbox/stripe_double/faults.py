"""Fault injection: probabilistic faults, the token-bucket rate limit, 429 reasons,
and targeted fault rules set at run time (`/_sandbox/faults`)."""

from __future__ import annotations

import json
import time

from .errors import ApiError, Raw

# Values of Stripe-Rate-Limited-Reason the sandbox answers 429s with.
RATE_LIMITED_REASONS = ("global-rate", "global-concurrency", "endpoint-concurrency",
                        "endpoint-rate", "lock-timeout")

RULE_ACTIONS = ("drop_after_commit", "status", "redirect", "html", "garbage", "stall", "reset")
# Which rule fields each action takes beyond the common ones.
_ACTION_FIELDS = {
    "drop_after_commit": set(),
    "reset": set(),
    "status": {"status", "code", "type", "message", "body", "raw_body", "content_type",
               "headers", "reason"},
    "redirect": {"status", "location", "headers"},
    "html": {"raw_body", "headers"},
    "garbage": {"raw_body", "content_type", "headers"},
    "stall": {"seconds"},
}
_COMMON_FIELDS = {"method", "path_prefix", "on", "nth", "times", "action"}
DEFAULT_HTML = ("<!DOCTYPE html><html><head><title>Sign in to the network</title></head>"
                "<body><h1>Sign in</h1><p>You must log in to this network.</p></body></html>")
DEFAULT_GARBAGE = b'{"id": "tr_\x00\xff\xfe<<garbage>>'
DEFAULT_LOCATION = "https://sandbox.invalid/login"


def rate_limited(reason: str, why: str) -> ApiError:
    """A 429 with its Stripe-Rate-Limited-Reason; `lock-timeout` answers `lock_timeout`."""
    if reason == "lock-timeout":
        err = ApiError(429, "invalid_request_error", "lock_timeout",
                       "This object cannot be accessed right now because another API request "
                       f"or Stripe process is currently accessing it ({why}).", save=False)
    else:
        err = ApiError(429, "invalid_request_error", "rate_limit",
                       f"Too many requests hit the API too quickly ({why}).", save=False)
    err.headers = {"Stripe-Should-Retry": "true", "Stripe-Rate-Limited-Reason": reason}
    return err


def _int_or_none(rule, name, minimum):
    v = rule.get(name)
    if v is None:
        return None
    if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
        raise ValueError(f"rule {name} must be an integer >= {minimum} or null")
    return v


def _opt_str(rule, name):
    v = rule.get(name)
    if v is not None and not isinstance(v, str):
        raise ValueError(f"rule {name} must be a string")
    return v


def validate_rule(rule) -> dict:
    """A rule as given (JSON) -> its normalized form. Raises ValueError."""
    if not isinstance(rule, dict):
        raise ValueError("a fault rule must be a JSON object")
    action = rule.get("action")
    if action not in RULE_ACTIONS:
        raise ValueError(f"rule action must be one of: {', '.join(RULE_ACTIONS)}")
    for k in rule:
        if k not in _COMMON_FIELDS and k not in _ACTION_FIELDS[action]:
            raise ValueError(f"unknown field for a {action} rule: {k}")
    method = rule.get("method")
    if method is not None and method not in ("GET", "POST", "DELETE"):
        raise ValueError("rule method must be GET, POST, DELETE or null")
    on = rule.get("on") or "any"
    if on not in ("first", "retry", "any"):
        raise ValueError("rule on must be first, retry or any")
    out = {"method": method, "path_prefix": _opt_str(rule, "path_prefix"), "on": on,
           "nth": _int_or_none(rule, "nth", 1), "times": _int_or_none(rule, "times", 0),
           "action": action}
    headers = rule.get("headers")
    if headers is not None and (not isinstance(headers, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items())):
        raise ValueError("rule headers must be an object of strings")
    if action == "status":
        status = rule.get("status")
        if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 599:
            raise ValueError("a status rule needs an HTTP status (100..599)")
        reason = rule.get("reason")
        if reason is not None:
            if status != 429 or reason not in RATE_LIMITED_REASONS:
                raise ValueError("rule reason is for status 429, one of: "
                                 + ", ".join(RATE_LIMITED_REASONS))
        elif status == 429:
            reason = "global-rate"
        body = rule.get("body")
        if body is not None and "raw_body" in rule:
            raise ValueError("a rule takes body or raw_body, not both")
        out.update(status=status, code=_opt_str(rule, "code"), type=_opt_str(rule, "type"),
                   message=_opt_str(rule, "message"), body=body,
                   raw_body=_opt_str(rule, "raw_body"),
                   content_type=_opt_str(rule, "content_type"), headers=headers, reason=reason)
    elif action == "redirect":
        status = rule.get("status", 302)
        if status not in (301, 302, 303, 307, 308):
            raise ValueError("a redirect rule's status is 301, 302, 303, 307 or 308")
        out.update(status=status, location=_opt_str(rule, "location") or DEFAULT_LOCATION,
                   headers=headers)
    elif action in ("html", "garbage"):
        out.update(raw_body=_opt_str(rule, "raw_body"), headers=headers)
        if action == "garbage":
            out["content_type"] = _opt_str(rule, "content_type")
    elif action == "stall":
        s = rule.get("seconds")
        if not isinstance(s, (int, float)) or isinstance(s, bool) or not 0 <= s <= 3600:
            raise ValueError("a stall rule needs seconds (0..3600)")
        out["seconds"] = s
    return out


def rule_response(rule: dict, family: str):
    """The answer of a status / redirect / html / garbage rule: a Raw, or an ApiError to raise."""
    action, extra = rule["action"], dict(rule.get("headers") or {})
    if action == "status":
        status = rule["status"]
        if rule["raw_body"] is not None:
            return Raw(status, rule["raw_body"].encode(),
                       rule["content_type"] or "text/html; charset=utf-8", extra)
        if status == 429:
            err = rate_limited(rule["reason"], "sandbox fault rule")
            err.headers.update(extra)
        else:
            err = ApiError(status, rule["type"] or ("api_error" if status >= 500
                                                   else "invalid_request_error"),
                           rule["code"], rule["message"] or
                           f"Injected by a sandbox fault rule (HTTP {status}); nothing was done.",
                           save=False, headers=extra)
        if rule["code"] is not None:
            err.code = rule["code"]
        if rule["type"] is not None:
            err.type = rule["type"]
        if rule["message"] is not None:
            err.message = rule["message"]
        if rule["body"] is not None:
            return Raw(status, (json.dumps(rule["body"]) + "\n").encode(),
                       rule["content_type"] or "application/json", err.headers)
        return err
    if action == "redirect":
        extra["Location"] = rule["location"]
        return Raw(rule["status"], b"", None, extra)
    if action == "html":
        body = rule["raw_body"] if rule["raw_body"] is not None else DEFAULT_HTML
        return Raw(200, body.encode(), "text/html; charset=utf-8", extra)
    if action == "garbage":
        body = rule["raw_body"].encode() if rule["raw_body"] is not None else DEFAULT_GARBAGE
        return Raw(200, body, rule["content_type"] or "application/json", extra)
    raise AssertionError(action)


class FaultsMixin:
    """Needs `self.lock`, `self.config`, `self.rng`, `self.stats`, `self.bucket`,
    `self.fault_rules`, `self.seen_keys`, `self.now()`."""

    def fault(self, kind):
        with self.lock:
            self.stats["faults"][kind] += 1

    def roll(self, kind) -> bool:
        with self.lock:
            p = float(self.config.get(kind) or 0)
            return p > 0 and self.rng.random() < p

    def fail_429_reason(self) -> str:
        with self.lock:
            reasons = self.config.get("fail_429_reasons") or ["global-rate"]
            return reasons[0] if len(reasons) == 1 else self.rng.choice(reasons)

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

    # -- fault rules -------------------------------------------------------------
    def set_fault_rules(self, rules) -> list:
        if not isinstance(rules, list):
            raise ValueError('the body must be {"rules": [rule, ...]}')
        normalized = [validate_rule(r) for r in rules]
        with self.lock:
            self.fault_rules = [dict(r, matched=0, fired=0) for r in normalized]
            return self.fault_rules_view()

    def fault_rules_view(self) -> list:
        with self.lock:
            return json.loads(json.dumps(self.fault_rules))

    def match_fault_rule(self, method: str, path: str, retry: bool):
        """The first rule that fires on this request (counted), or None."""
        with self.lock:
            for rule in self.fault_rules:
                if rule["method"] is not None and rule["method"] != method:
                    continue
                if rule["path_prefix"] is not None and not path.startswith(rule["path_prefix"]):
                    continue
                if rule["on"] == ("first" if retry else "retry"):
                    continue
                rule["matched"] += 1
                if rule["nth"] is not None and rule["matched"] != rule["nth"]:
                    continue
                if rule["times"] is not None and rule["fired"] >= rule["times"]:
                    continue
                rule["fired"] += 1
                self.stats["faults"]["rules"] += 1
                by = self.stats["rule_faults"]
                by[rule["action"]] = by.get(rule["action"], 0) + 1
                return dict(rule)
            return None
