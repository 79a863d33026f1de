.DEFAULT_GOAL := help

.PHONY: help setup demo test fuzz soak protocol screenshots
FUZZTIME ?= 60s

# The nested modules: the demo service (SQLite, Prometheus), the peers measured by make bench, and
# a user's module that imports echotest as users do.
SERVICE  := examples/service
PEERS    := bench/peers
USERTEST := echotest/internal/usertest
# The integrations with heavy dependencies: nested modules of their own.
PROM     := contrib/prometheus
OTEL     := contrib/otel
# The dashboard's browser tests: chromedp drives Debian's chromium (.ci/install-chromium).
BROWSER  := dash/browsertest
DEMO_ARGS ?=
# The linter beside go vet, pinned, fetched from the module proxy by go run (staticcheck.conf).
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

setup: ## Install valkey-server and valkey-cli (.ci/install-valkey), promtool (.ci/install-promtool) and chromium (.ci/install-chromium) if missing
	bash .ci/install-valkey
	bash .ci/install-promtool
	bash .ci/install-chromium

demo: ## The main demo: Valkey + two service instances under a Zipf load, every read checked (DEMO_ARGS="-duration 60s -kill-at 15s")
	@# The service builds while Valkey installs: on a fresh machine both take about a minute.
	@bin=$$(mktemp -d)/service; \
	(cd $(SERVICE) && go build -o $$bin .) & build=$$!; \
	bash .ci/install-valkey || { kill $$build 2>/dev/null; exit 1; }; \
	wait $$build || { echo "demo: building $(SERVICE) failed" >&2; exit 1; }; \
	$$bin demo $(DEMO_ARGS); status=$$?; rm -rf $$(dirname $$bin); exit $$status

# The timing tests (valkeytest.Timing) assert bounds on time; they run alone, after the rest,
# and without the race detector, which slows the code they time several times over (the code
# paths they drive run under -race in the other tests).
TIMING_TESTS = ^(TestWorkerPickupOnTime|TestLaneRateProcesses|TestOutageDegradedMode|TestInvalidateDuringOutage|TestGetManyChunksWithinL2Timeout|TestLaneWorkerRateSleeps)$$

test: setup ## go vet and staticcheck, then all tests with the race detector; the nested modules (contrib/ too) are vetted and tested, promtool and chromium required
	go vet ./...
	go run $(STATICCHECK) ./...
	go test -race -count=1 -timeout 15m ./...
	ECHO_TIMING=1 go test -count=1 -p 1 -timeout 5m -run '$(TIMING_TESTS)' ./bus ./cache
	cd $(SERVICE) && go vet ./... && go run $(STATICCHECK) ./... && go test -count=1 -timeout 10m ./...
	cd $(USERTEST) && go vet ./... && go run $(STATICCHECK) ./... && go test -race -count=1 -timeout 5m ./...
	cd $(PROM) && go vet ./... && go run $(STATICCHECK) ./... && ECHOCACHE_REQUIRE_PROMTOOL=1 go test -race -count=1 -timeout 5m ./...
	cd $(OTEL) && go vet ./... && go run $(STATICCHECK) ./... && go test -race -count=1 -timeout 5m ./...
	cd $(BROWSER) && go vet ./... && go run $(STATICCHECK) ./... && ECHO_BROWSER_REQUIRED=1 go test -count=1 -timeout 5m ./...
	cd $(PEERS) && go vet ./... && go run $(STATICCHECK) ./...

protocol: ## Regenerate PROTOCOL.md from the grammar (keys/) and the script headers (lua/*.lua); a test fails when it is stale
	go run ./internal/protocolgen

screenshots: ## Rewrite docs/dash-overview.png, docs/dash-job.png and docs/dash-lanes.png from the browser test
	bash .ci/install-chromium
	cd $(BROWSER) && ECHO_BROWSER_REQUIRED=1 ECHO_DASH_SCREENSHOTS=1 go test -count=1 -run 'TestDashboardInBrowser' ./...

fuzz: ## Fuzz every parser of what another process may have written, 60 s each (FUZZTIME=): keys/ (FuzzParse), the JSON codecs' parity with encoding/json and the msgpack decoder's with its library, the task envelope, L2 rows and codecs, invalidation messages, the sequence follower and its reconcile against a model of the record, lane limits, failure entries and schedule specs
	go test -run '^$$' -fuzz='^FuzzParse$$' -fuzztime=$(FUZZTIME) ./keys/
	go test -run '^$$' -fuzz='^FuzzParity$$' -fuzztime=$(FUZZTIME) ./internal/jsonfmt/
	go test -run '^$$' -fuzz='^FuzzMarshalParity$$' -fuzztime=$(FUZZTIME) ./internal/jsonfmt/
	go test -run '^$$' -fuzz='^FuzzTimeParity$$' -fuzztime=$(FUZZTIME) ./internal/jsonfmt/
	go test -run '^$$' -fuzz='^FuzzParity$$' -fuzztime=$(FUZZTIME) ./internal/msgpackfmt/
	go test -run '^$$' -fuzz='^FuzzEnvelopeHeaders$$' -fuzztime=$(FUZZTIME) ./bus/
	go test -run '^$$' -fuzz='^FuzzParseLimits$$' -fuzztime=$(FUZZTIME) ./bus/
	go test -run '^$$' -fuzz='^FuzzParseFailure$$' -fuzztime=$(FUZZTIME) ./bus/
	go test -run '^$$' -fuzz='^FuzzPeriodicSpec$$' -fuzztime=$(FUZZTIME) ./bus/
	go test -run '^$$' -fuzz='^FuzzParseRow$$' -fuzztime=$(FUZZTIME) ./cache/
	go test -run '^$$' -fuzz='^FuzzCodecDecode$$' -fuzztime=$(FUZZTIME) ./cache/
	go test -run '^$$' -fuzz='^FuzzParseInval$$' -fuzztime=$(FUZZTIME) ./cache/
	go test -run '^$$' -fuzz='^FuzzInvalSequence$$' -fuzztime=$(FUZZTIME) ./cache/
	go test -run '^$$' -fuzz='^FuzzReconcileModel$$' -fuzztime=$(FUZZTIME) ./cache/

.PHONY: bench bench-check bench-quick bench-profile bench-instructions

bench: setup ## Benchmarks: own valkey-server, core + peers, writes bench/REPORT.md (under 15 min)
	bash bench/run.sh report

bench-instructions: ## The server's instructions per job of the worker's scripts (callgrind: a figure the machine's load does not move), plain and with lanes; installs valgrind if missing
	bash bench/instructions.sh

bench-check: setup ## Fresh run; fails if a ratio of ours is worse than in bench/baseline.json by >BENCH_TOLERANCE (20%) and >its noise
	bash bench/run.sh check

bench-quick: setup ## Two short benchmark rounds, report into a temp dir (smoke test, numbers not for use)
	bash bench/run.sh quick

bench-profile: setup ## Where an EchoMQ worker's time goes: server µs/job by script, server and client CPU/job, jobs per claim, round trips in flight (PROFILE_C=20,100 PROFILE_JOBS=20000 PROFILE_ROUNDS=3 PROFILE_PREFETCH=, e.g. 0,-1,20: automatic, none, 20)
	bash bench/run.sh profile

soak: setup ## Crash and model soak: 100,000 jobs and 20 SIGKILLs, the zombie, the protocol model (with lanes) at 2,000 checks, the cluster soak at 3 x 20,000 jobs, delayed jobs picked up within 20 ms (p99), lanes: fairness behind 50,000 jobs, a cap across 8 SIGKILLs, a rate for 10 s
	EMQ_SOAK=1 ECHO_TIMING=1 go test -race -count=1 -timeout 60m -run '^(TestWorkerKill|TestWorkerZombie|TestProtocolModel|TestClusterSoak|TestLaneFairness|TestLaneCapProcesses)$$' ./bus/ -rapid.checks=2000
	# The soaks that measure time run alone, one after the other: beside the others, the two
	# cores are not the workers' to give (a rate of 200/s came out at 170 to 187 a second).
	EMQ_SOAK=1 ECHO_TIMING=1 go test -race -count=1 -parallel 1 -timeout 10m -run '^(TestWorkerPickupOnTime|TestLaneRateProcesses)$$' ./bus/
