"""The Stripe double behind `sandbox/stripe_sandbox.py`, split by concern:

- `state`: the Sandbox object (config, fixtures, objects, effects, stats) behind one lock;
- `transfers`, `payouts`: the v1 and v2 endpoint handlers (mixins of Sandbox);
- `routes`: which handler answers which path;
- `idempotency`: keys, fingerprints, replays;
- `faults`: probabilistic faults and the rate limit;
- `control`: the `/_sandbox/*` API;
- `http_server`: the HTTP plumbing and the per-request pipeline;
- `params`, `errors`, `clock`: small shared helpers.
"""

from .http_server import Handler, SandboxServer
from .state import DEFAULT_CONFIG, Sandbox

__all__ = ["DEFAULT_CONFIG", "Handler", "Sandbox", "SandboxServer"]
