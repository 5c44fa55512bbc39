#!/usr/bin/env python3
"""The output-bytes floor SPEC's own files set (issue 12's output target).

usage: python3 benchmarks/spec_floor.py PLAN_FOLDER RAW_INPUT_BYTES

Prints each file of a plan folder with its bytes and its ratio to the input's uncompressed
size, then the bytes the files SPEC names would take at the least: instructions.jsonl cut
to SPEC's fields (id, kind, method, path, idempotency_key, stripe_context, params, lines)
in compact JSON, with every other file as written. The spool (the input itself, for apply
to read again) and settle's own index files come on top of that floor.
"""
import json
import os
import sys

SPEC_FIELDS = ("id", "kind", "method", "path", "idempotency_key", "stripe_context", "params", "lines")
SPEC_FILES = ("results.csv", "errors.csv", "deferred.csv", "summary.csv", "charges.csv",
              "manifest.json", "report.html")


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 64
    folder, raw = sys.argv[1], int(sys.argv[2])
    sizes = {}
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            sizes[os.path.relpath(path, folder)] = os.path.getsize(path)
    for name, size in sorted(sizes.items(), key=lambda item: -item[1]):
        print(f"{name:34} {size:>14,} bytes  {size / raw:6.3f} x raw")
    total = sum(sizes.values())
    print(f"{'plan folder':34} {total:>14,} bytes  {total / raw:6.3f} x raw")
    minimal = 0
    with open(os.path.join(folder, "instructions.jsonl"), "rb") as lines:
        for line in lines:
            record = json.loads(line)
            missing = [field for field in SPEC_FIELDS if field not in record]
            if missing:
                print(f"instruction {record.get('id')} lacks SPEC's {missing}", file=sys.stderr)
                return 1
            kept = {field: record[field] for field in SPEC_FIELDS}
            minimal += len(json.dumps(kept, separators=(",", ":"), ensure_ascii=False).encode()) + 1
    floor = minimal + sum(sizes.get(name, 0) for name in SPEC_FILES)
    print(f"{'instructions.jsonl, SPEC fields':34} {minimal:>14,} bytes  {minimal / raw:6.3f} x raw")
    print(f"{'SPEC floor (files SPEC names)':34} {floor:>14,} bytes  {floor / raw:6.3f} x raw")
    return 0


if __name__ == "__main__":
    sys.exit(main())
