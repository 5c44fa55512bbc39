"""Fault injection: probabilistic faults and the token-bucket rate limit."""

from __future__ import annotations

import time


class FaultsMixin:
    """Needs `self.lock`, `self.config`, `self.rng`, `self.stats`, `self.bucket`."""

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
