"""Time as the sandbox tells it: the real clock shifted by config `clock_offset_s`.

`Sandbox.now()` is the one source; these helpers only format and parse.
"""

from __future__ import annotations

import datetime as _dt
import email.utils


def rfc3339(ts: float) -> str:
    d = _dt.datetime.fromtimestamp(ts, _dt.timezone.utc)
    return d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{d.microsecond // 1000:03d}Z"


def parse_rfc3339(text: str) -> float:
    """Seconds since the epoch; a string without an offset is UTC. Raises ValueError."""
    if not isinstance(text, str) or "T" not in text:
        raise ValueError(f"not an RFC 3339 timestamp: {text!r}")
    d = _dt.datetime.fromisoformat(text.replace("z", "Z"))
    if d.tzinfo is None:
        d = d.replace(tzinfo=_dt.timezone.utc)
    return d.timestamp()


def http_date(ts: float) -> str:
    """RFC 7231 IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`."""
    return email.utils.formatdate(ts, usegmt=True)
