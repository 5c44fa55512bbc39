"""Idempotency keys: scoped per API family (`v1`, `v2`), bound to a request fingerprint.

An entry is {"fingerprint", "state": "running"|"done", "response": (status, body)|None,
"at": sandbox time of the first request}. A finished entry expires after `TTL[family]`
seconds of sandbox time (v1 24 h, v2 30 days); a request with an expired key runs as new.
"""

from __future__ import annotations

import json

from .errors import ApiError, bad_param
from .params import canonical

MAX_KEY_LEN = 255
TTL = {"v1": 24 * 3600, "v2": 30 * 24 * 3600}


def expired(sb, family: str, at: float) -> bool:
    return sb.now() - at >= TTL[family]


def note_key(sb, family: str, key: str) -> bool:
    """Records that a request with this key arrived; True when one had already come
    (within the key's window), whatever became of it."""
    if not key or len(key) > MAX_KEY_LEN:
        return False
    with sb.lock:
        at = sb.seen_keys.get((family, key))
        seen = at is not None and not expired(sb, family, at)
        if not seen:
            sb.seen_keys[(family, key)] = sb.now()
        return seen


def check_key(key: str):
    if not key or len(key) > MAX_KEY_LEN:
        raise bad_param("parameter_invalid",
                        f"Idempotency-Key must be 1 to {MAX_KEY_LEN} characters.", None)


def claim(sb, family: str, key: str, method: str, path: str, params):
    """Takes the key for a new request (returns None), or returns the saved answer
    (status, body, headers) for a replay. Raises the 400 (other parameters) or the
    409 (the first request still runs)."""
    scope = (family, key)
    fingerprint = canonical([method, path, params])
    with sb.lock:
        entry = sb.idem.get(scope)
        if entry is not None and entry["state"] == "done" and expired(sb, family, entry["at"]):
            entry = None
        if entry is None:
            sb.idem[scope] = {"fingerprint": fingerprint, "state": "running", "response": None,
                              "at": sb.now()}
            return None
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
        return (status, json.loads(json.dumps(body)),
                {"Idempotent-Replayed": "true", "Idempotency-Key": key})


def release(sb, family: str, key: str):
    """Forgets a key whose request is not saved (it failed or was refused unsaved)."""
    with sb.lock:
        sb.idem.pop((family, key), None)


def commit(sb, family: str, key: str, status: int, body):
    with sb.lock:
        sb.idem[(family, key)].update(state="done", response=(status, body))
