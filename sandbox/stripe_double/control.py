"""The `/_sandbox/*` control API (no auth, never faulted)."""

from __future__ import annotations

import json
import re
import threading
import urllib.parse

OBP_STATUS = re.compile(r"^/_sandbox/outbound_payments/([A-Za-z0-9_\-]+)/status$")
CHARGE_STATUS = re.compile(r"^/_sandbox/charges/([A-Za-z0-9_\-]+)/status$")


def handle(h, method, path, query, raw):
    """Answers one control request on handler `h` (uses `h.sb`, `h._send`)."""
    sb = h.sb
    try:
        data = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return h._send(400, {"error": "body is not valid JSON"})
    try:
        if method == "POST" and path == "/_sandbox/reset":
            sb.reset(empty=bool(isinstance(data, dict) and data.get("empty")))
            return h._send(200, {"ok": True, "config": sb.config})
        if method == "POST" and path == "/_sandbox/fixtures":
            sb.load_fixtures(data)
            return h._send(200, {"ok": True, "state": sb.snapshot()})
        if path == "/_sandbox/config" and method in ("GET", "POST"):
            if method == "POST":
                if not isinstance(data, dict):
                    raise ValueError("config must be a JSON object")
                sb.set_config(data)
            with sb.lock:
                return h._send(200, dict(sb.config))
        if path == "/_sandbox/faults" and method in ("GET", "POST"):
            if method == "POST":
                if not isinstance(data, dict) or set(data) != {"rules"}:
                    raise ValueError('the body must be {"rules": [rule, ...]}')
                sb.set_fault_rules(data["rules"])
            return h._send(200, {"rules": sb.fault_rules_view()})
        m = OBP_STATUS.match(path)
        if m and method == "POST":
            body = _object(data, {"status", "reason"})
            try:
                return h._send(200, sb.set_outbound_payment_status(
                    m.group(1), body.get("status"), body.get("reason")))
            except KeyError:
                return h._send(404, {"error": f"no outbound payment {m.group(1)}"})
        m = CHARGE_STATUS.match(path)
        if m and method == "POST":
            body = _object(data, {"status", "balance_status"})
            try:
                return h._send(200, sb.set_charge_status(
                    m.group(1), body.get("status"), body.get("balance_status")))
            except KeyError:
                return h._send(404, {"error": f"no charge {m.group(1)}"})
        if method == "GET" and path == "/_sandbox/effects":
            q = dict(urllib.parse.parse_qsl(query))
            since = int(q.get("since", "0") or 0)
            with sb.lock:
                data = json.loads(json.dumps([e for e in sb.effects if e["seq"] > since]))
            return h._send(200, {"data": data})
        if method == "GET" and path == "/_sandbox/stats":
            with sb.lock:
                return h._send(200, json.loads(json.dumps(sb.stats)))
        if method == "GET" and path == "/_sandbox/state":
            return h._send(200, sb.snapshot())
        if method == "GET" and path == "/_sandbox/health":
            return h._send(200, {"ok": True})
        if method == "POST" and path == "/_sandbox/shutdown":
            h.close_connection = True
            h._send(200, {"ok": True})
            threading.Thread(target=h.server.shutdown, daemon=True).start()
            return
    except ValueError as e:
        return h._send(400, {"error": str(e)})
    return h._send(404, {"error": f"unknown control endpoint {method} {path}"})


def _object(data, allowed: set) -> dict:
    if not isinstance(data, dict):
        raise ValueError("the body must be a JSON object")
    for k in data:
        if k not in allowed:
            raise ValueError(f"unknown field: {k}")
    return data
