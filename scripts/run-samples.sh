#!/usr/bin/env bash
# The main job on the samples, end to end: start the local Stripe sandbox (a stateful
# Stripe double on 127.0.0.1, seeded with the samples' charges and payout methods), then
# `settle run` both sample exports against it into out/, then show what happened.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf out out-again out-ledger.sqlite out-ledger.sqlite-wal out-ledger.sqlite-shm out-ledger.sqlite.lock out-ledger.sqlite.mark
# A ledger is created explicitly, never by accident (README, exactly once).
.build/release/settle ledger init --ledger out-ledger.sqlite
port_file=$(mktemp)
python3 sandbox/stripe_sandbox.py --port 0 --port-file "$port_file" --fixtures sandbox/fixtures/samples.json --quiet &
sandbox=$!
trap 'kill $sandbox 2>/dev/null || true; rm -f "$port_file"' EXIT
for _ in $(seq 100); do [ -s "$port_file" ] && break; sleep 0.1; done
port=$(cat "$port_file")
echo "sandbox on http://127.0.0.1:$port"

run() {
  STRIPE_API_KEY=sk_test_settle_demo_key .build/release/settle run \
    samples/orders-2026-11-29.csv.gz samples/orders-2026-11-29.xml.gz \
    --out "$1" --as-of 2026-11-29 --ledger out-ledger.sqlite \
    --api-base "http://127.0.0.1:$port" --financial-account fa_1SettleDemo --progress off
}
set +e
run out
status=$?
set -e
echo
echo "settle run exited with $status (65: some sample lines are rejected or refused on purpose; see out/errors.csv)"
echo "statuses in out/results.csv:"
tail -n +2 out/results.csv | awk -F, '{print $9}' | sort | uniq -c
echo "money moved in the sandbox: $(curl -s "http://127.0.0.1:$port/_sandbox/effects" | python3 -c 'import json,sys; e=json.load(sys.stdin)["data"]; print(len(e), "effects:", ", ".join(sorted({x["type"] for x in e})))')"
echo
echo "Running the same inputs again moves no money (every line is already settled):"
set +e
run out-again >/dev/null 2>&1
again=$?
set -e
echo "second run exited with $again; statuses:"
tail -n +2 out-again/results.csv | awk -F, '{print $9}' | sort | uniq -c
echo "effects in the sandbox after the second run: $(curl -s "http://127.0.0.1:$port/_sandbox/effects" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["data"]))')"
echo
echo "files: $(ls out | tr '\n' ' ')"
[ "$status" -eq 0 ] || [ "$status" -eq 65 ]
