"""Time as the sandbox tells it."""

from __future__ import annotations

import datetime as _dt
import time


def _now() -> int:
    return int(time.time())


def _rfc3339(ts: float | None = None) -> str:
    d = _dt.datetime.fromtimestamp(time.time() if ts is None else ts, _dt.timezone.utc)
    return d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{d.microsecond // 1000:03d}Z"

