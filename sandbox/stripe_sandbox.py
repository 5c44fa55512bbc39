#!/usr/bin/env python3
"""A local, stateful Stripe API sandbox for testing `settle`.

Standard library only (Python 3.11+). It implements the endpoints settle calls
(v1 transfers, reversals, charges; v2 payout methods and outbound payments) with
idempotency, and injects faults (latency, 5xx, 429, dropped responses, rate
limit) so that settle's retry and crash-recovery paths can be tested.

    python3 sandbox/stripe_sandbox.py --port 0 --port-file /tmp/port --fixtures f.json

See sandbox/README.md for the endpoints, the control API and the fixture format.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import signal
import socket
import sys
import threading

# The package lives next to this script; make it importable whatever the working
# directory and however the script is started (as a file or as `sandbox.stripe_sandbox`).
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from stripe_double import Handler, Sandbox, SandboxServer  # noqa: E402


def _check_loopback(host: str) -> str:
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except socket.gaierror as e:
        raise SystemExit(f"stripe_sandbox: cannot resolve {host!r}: {e}")
    addrs = {info[4][0] for info in infos}
    if not addrs or not all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addrs):
        raise SystemExit(f"stripe_sandbox: refusing to bind to non-loopback host {host!r}")
    return sorted(addrs, key=lambda a: ":" in a)[0]


def _write_port_file(path: str, port: int):
    d = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(d, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        f.write(f"{port}\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Local stateful Stripe API sandbox for settle.")
    ap.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)")
    ap.add_argument("--port", type=int, default=0, help="port; 0 picks a free one")
    ap.add_argument("--port-file", help="write the port here (atomically) once listening")
    ap.add_argument("--fixtures", help="JSON fixtures file loaded at start and on reset")
    ap.add_argument("--latency-ms", type=float, default=0)
    ap.add_argument("--fail-5xx", type=float, default=0.0)
    ap.add_argument("--fail-429", type=float, default=0.0)
    ap.add_argument("--drop-after-commit", type=float, default=0.0)
    ap.add_argument("--rate-limit", type=float, default=0.0, help="requests/s over all API calls; 0 = off")
    ap.add_argument("--clock-offset-s", type=float, default=0,
                    help="seconds added to the sandbox's clock (Date, created, key expiry)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--quiet", action="store_true", help="no per-request log lines")
    args = ap.parse_args(argv)

    addr = _check_loopback(args.host)
    fixtures = None
    if args.fixtures:
        with open(args.fixtures, encoding="utf-8") as f:
            fixtures = json.load(f)
    config = {"latency_ms": args.latency_ms, "fail_5xx": args.fail_5xx,
              "fail_429": args.fail_429, "drop_after_commit": args.drop_after_commit,
              "rate_limit": args.rate_limit, "seed": args.seed,
              "clock_offset_s": args.clock_offset_s}
    sandbox = Sandbox(config={}, fixtures=None)
    try:
        sandbox.set_config(config)
        sandbox.startup_fixtures = fixtures
        sandbox.reset()
    except ValueError as e:
        raise SystemExit(f"stripe_sandbox: {e}")

    if ":" in addr:
        SandboxServer.address_family = socket.AF_INET6
    server = SandboxServer((addr, args.port), Handler)
    server.sandbox = sandbox
    server.quiet = args.quiet
    port = server.server_address[1]

    def _stop(signum, frame):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    if args.port_file:
        _write_port_file(args.port_file, port)
    shown = f"[{addr}]" if ":" in addr else addr
    print(f"sandbox listening on http://{shown}:{port}", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
        if args.port_file:
            try:
                os.remove(args.port_file)
            except OSError:
                pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
