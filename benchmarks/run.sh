#!/usr/bin/env bash
# settle's throughput benchmark (issue 4). Not a test: CI never runs it.
# See benchmarks/README.md for what it measures and the figures it gave.
set -euo pipefail

usage() {
    cat <<'EOF'
usage: benchmarks/run.sh [--size N] [--scaling] [--no-xml] [--seed S] [--level L] [--keep]

  --size N     orders in the export (default 2700000: ~6.75 M lines, ~1 GB CSV uncompressed);
               use e.g. --size 50000 for a smoke run
  --scaling    instead of the main table: settle plan at N/100, N/10 and N (plain and
               shuffled CSV), time and peak RSS per size, to show linear growth
  --no-xml     skip the XML rows (and generating the XML export)
  --seed S     settle-gen seed (default 1)
  --level L    gzip level for the generated exports (default 6)
  --keep       keep settle's output folders under benchmarks/data/work/

Generated exports are cached in benchmarks/data/ (gitignored), keyed by size, seed, level
and a hash of settle-gen's source; delete them to regenerate.
EOF
}

SIZE=2700000
SCALING=0
XML=1
SEED=1
LEVEL=6
KEEP=0
AS_OF=2026-11-29
while [ $# -gt 0 ]; do
    case "$1" in
        --size) SIZE=$2; shift 2 ;;
        --scaling) SCALING=1; shift ;;
        --no-xml) XML=0; shift ;;
        --seed) SEED=$2; shift 2 ;;
        --level) LEVEL=$2; shift 2 ;;
        --keep) KEEP=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "run.sh: unknown argument $1" >&2; usage >&2; exit 64 ;;
    esac
done

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DATA=$ROOT/benchmarks/data
WORK=$DATA/work
mkdir -p "$DATA"
rm -rf "$WORK"
mkdir -p "$WORK"

# ---- tools ---------------------------------------------------------------------------
apt_install() {
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "installing Debian package(s): $*" >&2
        apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
    else
        echo "run.sh: missing Debian package(s) $*: install them (apt-get install $*)" >&2
        exit 1
    fi
}
[ -x /usr/bin/time ] || apt_install time
command -v xmllint >/dev/null || apt_install libxml2-utils
[ -f /usr/include/zlib.h ] || apt_install zlib1g-dev
command -v cc >/dev/null || apt_install gcc
# DuckDB (the issue's yardstick) from PyPI when it is missing; the row says n/a without it.
python3 -c 'import duckdb' 2>/dev/null || pip install -q duckdb >/dev/null 2>&1 \
    || pip install -q --break-system-packages duckdb >/dev/null 2>&1 || true

# ---- build -----------------------------------------------------------------------------
cd "$ROOT"
echo "building settle (release)..." >&2
swift build -c release >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log" >&2; exit 1; }
BIN=$(swift build -c release --show-bin-path)
SETTLE=$BIN/settle
GEN=$BIN/settle-gen
INFLATE=$DATA/inflate
cc -O2 -o "$INFLATE" "$ROOT/benchmarks/inflate.c" -lz

GENV=$(cat "$ROOT"/Sources/SettleGen/*.swift | sha256sum | cut -c1-8)

# gen NAME SIZE [settle-gen flags...]: the cached export's path on stdout.
gen() {
    local name=$1 size=$2
    shift 2
    local file=$DATA/$name-$size-s$SEED-l$LEVEL-$GENV
    case " $* " in *" --format xml "*) file=$file.xml.gz ;; *) file=$file.csv.gz ;; esac
    if [ ! -s "$file" ]; then
        echo "generating $file..." >&2
        "$GEN" --orders "$size" --seed "$SEED" --gzip --level "$LEVEL" "$@" --out "$file" 2>"$file.info"
        cat "$file.info" >&2
    fi
    echo "$file"
}

# ---- measuring -------------------------------------------------------------------------
ROWS=()   # label|file|wall|cpu|rss|rc|base-key

# measure LABEL BASEKEY OKCODES CMD...: runs CMD under /usr/bin/time -v, stdout discarded.
measure() {
    local label=$1 base=$2 ok=$3
    shift 3
    local tf=$WORK/time.txt
    echo "  running: $*" >&2
    set +e
    /usr/bin/time -v -o "$tf" "$@" >/dev/null 2>>"$WORK/stderr.log"
    local rc=$?
    set -e
    local wall user sys rss
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {
        n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; printf "%.2f", s }' "$tf")
    user=$(awk -F': ' '/User time/ {print $2}' "$tf")
    sys=$(awk -F': ' '/System time/ {print $2}' "$tf")
    rss=$(awk -F': ' '/Maximum resident set size/ {printf "%.0f", $2 / 1024}' "$tf")
    local cpu
    cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN {printf "%.2f", u + s}')
    local status=ok
    case ",$ok," in *",$rc,"*) ;; *) status="exit $rc" ;; esac
    ROWS+=("$label|$wall|$cpu|$rss|$status|$base")
    LAST_WALL=$wall LAST_CPU=$cpu LAST_RSS=$rss LAST_STATUS=$status
}

na_row() { ROWS+=("$1|n/a|n/a|n/a|$3|$2"); }   # LABEL INPUT NOTE

# settle plan into a fresh folder; the folder is removed afterwards unless --keep.
plan() {
    local label=$1 base=$2 file=$3
    shift 3
    local out=$WORK/plan-$((${#ROWS[@]}))
    measure "$label" "$base" 0,65 "$SETTLE" plan "$file" --out "$out" --as-of "$AS_OF" "$@"
    # Every byte the plan folder holds (outputs, spool, line index): the issue's output-bytes target.
    local bytes
    bytes=$(du -sb "$out" 2>/dev/null | cut -f1)
    ROWS[${#ROWS[@]}-1]+="|${bytes:-}"
    LAST_OUT=${bytes:-}
    if [ "$KEEP" = 0 ]; then rm -rf "$out"; fi
}

lines_of() { sed -n 's/.* orders, \([0-9]*\) lines, \([0-9]*\) bytes.*/\1/p' "$1.info"; }
bytes_of() { sed -n 's/.* orders, \([0-9]*\) lines, \([0-9]*\) bytes.*/\2/p' "$1.info"; }
mb() { awk -v b="$1" 'BEGIN {printf "%.0f", b / 1e6}'; }

machine() {
    echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1); $(uname -sr); $(swift --version 2>&1 | head -1)"
    echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
}

cd "$WORK"   # settle's default ledger path is the current folder: keep it in here

# ---- scaling ---------------------------------------------------------------------------
if [ "$SCALING" = 1 ]; then
    printf '\n%-9s %-10s %9s %9s %8s %8s %8s %10s %12s\n' input orders lines "MB(raw)" "wall s" "CPU s" "RSS MB" "s/M lines" "RSS MB/M lines"
    for size in $((SIZE / 100)) $((SIZE / 10)) "$SIZE"; do
        for kind in plain shuffled; do
            if [ "$kind" = plain ]; then f=$(gen orders "$size"); else f=$(gen orders-shuffled "$size" --shuffle); fi
            cat "$f" >/dev/null
            plan "settle plan" csv "$f"
            lines=$(lines_of "$f")
            printf '%-9s %-10s %9s %9s %8s %8s %8s %10s %12s\n' "$kind" "$size" "$lines" "$(mb "$(bytes_of "$f")")" \
                "$LAST_WALL" "$LAST_CPU" "$LAST_RSS" \
                "$(awk -v w="$LAST_WALL" -v l="$lines" 'BEGIN {printf "%.2f", w / (l / 1e6)}')" \
                "$(awk -v r="$LAST_RSS" -v l="$lines" 'BEGIN {printf "%.0f", r / (l / 1e6)}')"
            [ "$LAST_STATUS" = ok ] || echo "  ($kind $size: settle plan $LAST_STATUS; see $WORK/stderr.log)"
        done
    done
    machine
    exit 0
fi

# ---- main table ------------------------------------------------------------------------
CSV=$(gen orders "$SIZE")
SHUF=$(gen orders-shuffled "$SIZE" --shuffle)
if [ "$XML" = 1 ]; then XMLF=$(gen orders "$SIZE" --format xml); fi

# Warm the page cache so that every command reads from memory.
cat "$CSV" "$SHUF" ${XMLF:+"$XMLF"} >/dev/null

measure "zcat > /dev/null" csv 0 zcat "$CSV";            declare -A BASE_ZCAT=([csv]=$LAST_WALL)
measure "inflate (zlib, C)" csv 0 "$INFLATE" "$CSV";      declare -A BASE_INFLATE=([csv]=$LAST_WALL)
plan "settle plan" csv "$CSV"
# The daily case: a plan reads what earlier runs settled from the ledger (here a fresh one,
# so every look-up misses, as today's new lines do on a ledger of earlier days).
rm -f "$WORK"/bench-ledger.sqlite*
"$SETTLE" ledger init --ledger "$WORK/bench-ledger.sqlite" -q
plan "settle plan --ledger" csv "$CSV" --ledger "$WORK/bench-ledger.sqlite"
measure "settle validate" csv 0,65 "$SETTLE" validate "$CSV" --as-of "$AS_OF"

measure "zcat > /dev/null" shuf 0 zcat "$SHUF";           BASE_ZCAT[shuf]=$LAST_WALL
measure "inflate (zlib, C)" shuf 0 "$INFLATE" "$SHUF";    BASE_INFLATE[shuf]=$LAST_WALL
plan "settle plan" shuf "$SHUF"
measure "settle validate" shuf 0,65 "$SETTLE" validate "$SHUF" --as-of "$AS_OF"

if python3 -c 'import duckdb' 2>/dev/null; then
    measure "duckdb core job" csv 0 python3 "$ROOT/benchmarks/duckdb_core.py" "$CSV" "$WORK/duckdb-groups.csv"
    BASE_DUCKDB=$LAST_WALL
    rm -f "$WORK/duckdb-groups.csv"
else
    na_row "duckdb core job" csv "duckdb not installed (pip install duckdb)"
fi

declare -A BASE_XMLLINT=()
if [ "$XML" = 1 ]; then
    measure "zcat > /dev/null" xml 0 zcat "$XMLF";         BASE_ZCAT[xml]=$LAST_WALL
    measure "inflate (zlib, C)" xml 0 "$INFLATE" "$XMLF";   BASE_INFLATE[xml]=$LAST_WALL
    measure "xmllint --stream --noout" xml 0 xmllint --stream --noout "$XMLF"; BASE_XMLLINT[xml]=$LAST_WALL
    # Does this build read XML? Probe a tiny export: results.csv must have its lines.
    probe=$WORK/probe.xml
    "$GEN" --orders 3 --format xml --out "$probe" 2>/dev/null
    rm -rf "$WORK/probe-out"
    "$SETTLE" plan "$probe" --out "$WORK/probe-out" --as-of "$AS_OF" -q >/dev/null 2>&1 || true
    if [ "$(wc -l <"$WORK/probe-out/results.csv" 2>/dev/null || echo 0)" -gt 1 ]; then
        plan "settle plan" xml "$XMLF"
        measure "settle validate" xml 0,65 "$SETTLE" validate "$XMLF" --as-of "$AS_OF"
    else
        na_row "settle plan" xml "XML not supported by this build"
        na_row "settle validate" xml "XML not supported by this build"
    fi
fi

# ---- report ----------------------------------------------------------------------------
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "n/a" || b == "" || b + 0 == 0) print "-"; else printf "%.2f", a / b }'; }
describe() {
    local f=$1
    echo "$(basename "$f"): $(lines_of "$f") lines, $(mb "$(bytes_of "$f")") MB raw, $(mb "$(stat -c %s "$f")") MB gzip (level $LEVEL)"
}
echo
echo "settle benchmark: $SIZE orders, as-of $AS_OF"
echo "  csv:  $(describe "$CSV")"
echo "  shuf: $(describe "$SHUF") (lines in random order)"
if [ "$XML" = 1 ]; then echo "  xml:  $(describe "$XMLF")"; fi
echo
declare -A RAW=([csv]=$(bytes_of "$CSV") [shuf]=$(bytes_of "$SHUF"))
if [ "$XML" = 1 ]; then RAW[xml]=$(bytes_of "$XMLF"); fi
printf '%-26s %-5s %8s %8s %8s %7s %9s %9s %8s %8s %6s  %s\n' command input "wall s" "CPU s" "RSS MB" "×zcat" "×inflate" "×xmllint" "×duckdb" "out MB" "×raw" note
for row in "${ROWS[@]}"; do
    IFS='|' read -r label wall cpu rss status in out <<<"$row"
    z=$(ratio "$wall" "${BASE_ZCAT[$in]:-}")
    i=$(ratio "$wall" "${BASE_INFLATE[$in]:-}")
    x=$(ratio "$wall" "${BASE_XMLLINT[$in]:-}")
    d=$(ratio "$wall" "${BASE_DUCKDB:-}")
    o=-; r=-
    if [ -n "${out:-}" ]; then o=$(mb "$out"); r=$(ratio "$out" "${RAW[$in]:-}"); fi
    note=""
    [ "$status" = ok ] || note=$status
    printf '%-26s %-5s %8s %8s %8s %7s %9s %9s %8s %8s %6s  %s\n' "$label" "$in" "$wall" "$cpu" "$rss" "$z" "$i" "$x" "$d" "$o" "$r" "$note"
done
echo
machine
echo "(settle exits 65 on these exports by design: ~0.7 % of card charges failed → charge_failed rows)"
