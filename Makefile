# The two commands of the README:
#   make run    plan and apply the samples against the local Stripe sandbox
#   make test   every test (Swift unit, integration and end-to-end; the sandbox's own tests)
# Both install missing Debian -dev packages first, so a fresh machine needs nothing else.

SHELL := /bin/bash
DEBIAN_PACKAGES := zlib1g-dev libxml2-dev libcurl4-openssl-dev libsqlite3-dev libssl-dev pkg-config python3
SAMPLES := samples/orders-2026-11-29.csv.gz samples/orders-2026-11-29.xml.gz
AS_OF := 2026-11-29

PREFIX ?= /usr/local

.PHONY: run test deps test-deps build golden bench fuzz clean install man

deps:
	@missing=""; for p in $(DEBIAN_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=""; [ "$$(id -u)" -ne 0 ] && SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

build: deps
	swift build -c release

run: build
	@bash scripts/run-samples.sh

# What the operator-facing tests drive: Prometheus's own parser reads the metrics file,
# headless Chromium renders report.html.
test-deps:
	@python3 -c 'import prometheus_client' 2>/dev/null || pip install -q prometheus_client || pip install -q --break-system-packages prometheus_client
	@command -v chromium >/dev/null || { SUDO=""; [ "$$(id -u)" -ne 0 ] && SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium; }

# The sandbox's own tests first, so the run ends with swift test's summary line. The Swift
# tests' folders go under one temporary folder (0755: one test runs settle as nobody in its
# own folder there), removed when every test passes (kept, and named, when one fails): a run
# leaves no 2,800 folders in /tmp. The daily-loop simulation (simulation/daily_sim.py: seeded
# days of exports, faults, kills, rebuilds, checked for exactly-once against the sandbox's
# effects) runs its fixed seeds on the debug binary; SETTLE_SIM_SEEDS=1-200 runs others.
test: deps test-deps
	swift format lint --strict -r Sources Tests
	python3 -m unittest sandbox.test_stripe_sandbox
	swift build --build-tests
	SETTLE_BIN=.build/debug/settle python3 -m unittest simulation.test_daily_sim
	@tmp=$$(mktemp -d /tmp/settle-tests.XXXXXX) && chmod 755 "$$tmp" && \
	if TMPDIR=$$tmp swift test --skip-build; then rm -rf "$$tmp" || echo "could not remove $$tmp"; else echo "the tests' files are kept in $$tmp"; exit 1; fi

# Regenerates the expected output folders after an intended change of behaviour.
golden: deps
	swift build
	@for sample in $(SAMPLES); do \
	  name=$$(basename $$sample .gz | tr . -); \
	  rm -rf /tmp/settle-golden && SETTLE_RUN_ID=run_golden .build/debug/settle plan $$sample --out /tmp/settle-golden --as-of $(AS_OF) -q; \
	  mkdir -p samples/expected/$$name; \
	  for f in results.csv errors.csv deferred.csv instructions.jsonl summary.csv charges.csv; do cp /tmp/settle-golden/$$f samples/expected/$$name/; done; \
	done

# Outside CI: the rules' properties on many random batches, then the CSV reader and the
# amount parser under random and mutated bytes for a fixed time each. A failure prints
# its seed; SETTLE_PROPERTY_SEED=<seed> replays it.
FUZZ_CASES ?= 20000
FUZZ_SECONDS ?= 120
fuzz: deps
	swift build --build-tests
	SETTLE_PROPERTY_CASES=$(FUZZ_CASES) swift test --skip-build --filter PlannerPropertyTests
	SETTLE_FUZZ_SECONDS=$(FUZZ_SECONDS) swift test --skip-build --filter ReaderFuzzTests

bench: build
	bash benchmarks/run.sh

# The man page is generated from the help text (Sources/SettleCLI/Help.swift), never edited.
man:
	swift build
	.build/debug/settle help --roff > docs/settle.1

install: build
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 .build/release/settle $(DESTDIR)$(PREFIX)/bin/settle
	install -m 644 docs/settle.1 $(DESTDIR)$(PREFIX)/share/man/man1/settle.1

clean:
	rm -rf .build out
