#!/usr/bin/env bash
# Apply against the local sandbox with 300 ms latency per request and a sandbox rate limit of
# 100 requests/s, with --rate 100. A benchmark, not a test: CI never runs it.
#
#   bash benchmarks/apply.sh [N=5000] [CONCURRENCY=40] [FAIL_429=0]
#     Plans N transfer instructions (`settle plan --online`), applies them all (`settle
#     apply`) and prints: the time to the first request, the sustained rate (requests from
#     the first to the last one at the sandbox), the overall rate, the 429s the sandbox sent,
#     and apply's peak RSS. Takes ~N/100 seconds.
#   bash benchmarks/apply.sh --first-request N [SECONDS=5]
#     Plans N instructions, starts `settle apply`, and prints the time to its first request
#     and its peak RSS after sending for SECONDS more; then stops it (a throwaway ledger).
#     For a large plan: what apply checks before sending (seals, instruction ids) and
#     whether memory follows the plan or the requests in flight.
# FAIL_429: the share of requests the sandbox answers with a random global-rate 429.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=all
if [ "${1:-}" = "--first-request" ]; then
  MODE=first
  shift
  N=${1:-100000}
  HOLD=${2:-5}
  CONCURRENCY=40
  FAIL_429=0
else
  N=${1:-5000}
  CONCURRENCY=${2:-40}
  FAIL_429=${3:-0}
fi
work=$(mktemp -d)
sandbox=
settle_pid=
cleanup() {
  [ -n "$settle_pid" ] && kill "$settle_pid" 2>/dev/null || true
  [ -n "$sandbox" ] && kill "$sandbox" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
# SETTLE=path/to/settle compares another build (e.g. main's) on the same script.
if [ -z "${SETTLE:-}" ]; then swift build -c release >/dev/null; fi
settle=${SETTLE:-.build/release/settle}
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
base="http://127.0.0.1:$port"
export STRIPE_API_KEY=sk_test_benchmark
$settle ledger init --ledger "$work/ledger.sqlite" -q
plan_start=$(date +%s.%N)
$settle plan --online "$work/orders.csv" --out "$work/out" --ledger "$work/ledger.sqlite" --api-base "$base" \
  --as-of 2026-11-29 --progress off -q || true
plan_end=$(date +%s.%N)
before=$(curl -s "$base/_sandbox/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests"])')
# This CSV names its charges' status, so planning looks nothing up: every request the
# sandbox sees from here on (and its first_request_at) is apply's.
if [ "$before" != 0 ]; then echo "settle plan --online sent $before requests: the figures below include them" >&2; fi

if [ "$MODE" = first ]; then
  start=$(date +%s.%N)
  $settle apply "$work/out" --ledger "$work/ledger.sqlite" --api-base "$base" --rate 100 \
    --concurrency "$CONCURRENCY" --progress off -q &
  settle_pid=$!
  first=
  while kill -0 "$settle_pid" 2>/dev/null; do
    first=$(curl -s "$base/_sandbox/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("first_request_at", ""))')
    [ -n "$first" ] && break
    sleep 0.05
  done
  sleep "$HOLD"
  rss=$(awk '/VmHWM/ {print $2}' "/proc/$settle_pid/status" 2>/dev/null || echo 0)
  kill "$settle_pid" 2>/dev/null || true
  wait "$settle_pid" 2>/dev/null || true
  settle_pid=
  python3 - "$start" "$first" "$rss" "$HOLD" "$work/out" "$plan_start" "$plan_end" <<'PY'
import json, os, sys
start, first, rss, hold, out = float(sys.argv[1]), sys.argv[2], int(sys.argv[3] or 0), sys.argv[4], sys.argv[5]
manifest = json.load(open(os.path.join(out, "manifest.json")))
size = os.path.getsize(os.path.join(out, "instructions.jsonl"))
print(f"plan: {manifest['instructions']} instructions, instructions.jsonl {size / 1e6:.1f} MB, "
      f"settle plan took {float(sys.argv[7]) - float(sys.argv[6]):.1f} s")
print(f"time to the first request of settle apply: {float(first) - start:.2f} s" if first else "no request was sent")
print(f"peak RSS of settle apply after {hold} s of sending: {rss / 1024:.0f} MB")
PY
  exit 0
fi

start=$(date +%s.%N)
/usr/bin/time -f "%M" -o "$work/rss" $settle apply "$work/out" --ledger "$work/ledger.sqlite" --api-base "$base" \
  --rate 100 --concurrency "$CONCURRENCY" --progress off -q || true
end=$(date +%s.%N)
curl -s "$base/_sandbox/stats" > "$work/stats.json"
python3 - "$start" "$end" "$work/stats.json" "$work/out/manifest.json" "$work/rss" "$before" "$plan_start" "$plan_end" <<'PY'
import json, sys
start, end = float(sys.argv[1]), float(sys.argv[2])
stats = json.load(open(sys.argv[3]))
manifest = json.load(open(sys.argv[4]))
rss_kb = int(open(sys.argv[5]).read().split()[-1])
apply = manifest.get("apply", {})
requests = stats["requests"]
status = stats.get("by_status", {})
wall = end - start
print(f"instructions: {manifest['instructions']}, lines settled: {manifest['counts'].get('settled')}; "
      f"settle plan --online took {float(sys.argv[8]) - float(sys.argv[7]):.1f} s and {sys.argv[6]} requests")
print(f"requests at the sandbox during apply: {requests}, 429s sent: {status.get('429', 0)}, "
      f"5xx: {sum(v for k, v in status.items() if k.startswith('5'))}")
first, last = stats.get("first_request_at"), stats.get("last_request_at")
if first and last and requests > 1:
    print(f"time to the first request: {first - start:.2f} s; the last request {end - last:.2f} s before apply ended")
    print(f"sustained: {requests - 1} requests in {last - first:.1f} s from the first to the last, "
          f"{(requests - 1) / (last - first):.1f} requests/s")
print(f"wall time of settle apply: {wall:.1f} s, overall {requests / wall:.1f} requests/s")
print(f"peak RSS of settle apply: {rss_kb / 1024:.0f} MB")
print(f"settle's own count: {apply.get('requests')} requests, {apply.get('retries')} retries, {apply.get('rate_limited')} rate-limited")
PY
