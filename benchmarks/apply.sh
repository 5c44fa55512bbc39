#!/usr/bin/env bash
# Apply throughput: settle run on N transfer instructions against the local sandbox with
# 300 ms latency per request and a sandbox rate limit of 100 requests/s, with --rate 100.
# Prints requests/s and how many 429s the sandbox sent. A benchmark, not a test: CI never runs it.
#   bash benchmarks/apply.sh [N=5000] [CONCURRENCY=40] [FAIL_429=0]
# FAIL_429: the share of requests the sandbox answers with a random global-rate 429.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-5000}
CONCURRENCY=${2:-40}
FAIL_429=${3:-0}
work=$(mktemp -d)
trap 'kill $sandbox 2>/dev/null || true; rm -rf "$work"' EXIT
swift build -c release >/dev/null
python3 - "$N" > "$work/orders.csv" <<'PY'
import sys
n = int(sys.argv[1])
print("line_id,order_id,amount,currency,transfer_group,destination,source_transaction,charge_amount,charge_currency,charge_status")
for i in range(1, n + 1):
    print(f"B{i},{i},{10 + i % 90}.{i % 100:02d},usd,ORDER{i},acct_b{i % 50},ch_b{i},200.00,usd,succeeded")
PY
echo '{"auto_charges": true}' > "$work/fixtures.json"
python3 sandbox/stripe_sandbox.py --port 0 --port-file "$work/port" --fixtures "$work/fixtures.json" \
  --latency-ms 300 --rate-limit 100 --fail-429 "$FAIL_429" --quiet &
sandbox=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(cat "$work/port")
.build/release/settle ledger init --ledger "$work/ledger.sqlite" -q
start=$(date +%s.%N)
STRIPE_API_KEY=sk_test_benchmark .build/release/settle run "$work/orders.csv" --out "$work/out" \
  --ledger "$work/ledger.sqlite" --api-base "http://127.0.0.1:$port" --as-of 2026-11-29 \
  --rate 100 --concurrency "$CONCURRENCY" --progress off -q || true
end=$(date +%s.%N)
curl -s "http://127.0.0.1:$port/_sandbox/stats" > "$work/stats.json"
python3 - "$start" "$end" "$work/stats.json" "$work/out/manifest.json" <<'PY'
import json, sys
start, end = float(sys.argv[1]), float(sys.argv[2])
stats = json.load(open(sys.argv[3]))
manifest = json.load(open(sys.argv[4]))
apply = manifest.get("apply", {})
requests = stats["requests"]
status = stats.get("by_status", {})
wall = end - start
print(f"instructions: {manifest['instructions']}, lines settled: {manifest['counts'].get('settled')}")
print(f"requests at the sandbox: {requests}, 429s sent: {status.get('429', 0)}, 5xx: {sum(v for k, v in status.items() if k.startswith('5'))}")
print(f"wall time of settle run: {wall:.1f} s, overall {requests / wall:.1f} requests/s")
print(f"settle's own count: {apply.get('requests')} requests, {apply.get('retries')} retries, {apply.get('rate_limited')} rate-limited")
PY
