#!/usr/bin/env bash
# Runs EchoCache's benchmarks and writes the report. Called by make:
#
#   bench/run.sh report   make bench: writes bench/REPORT.md, chart.svg,
#                         baseline.json and raw.txt, prints the table
#   bench/run.sh check    make bench-check: a fresh run into a temp dir,
#                         compared with bench/baseline.json: fails when a
#                         ratio of ours is worse by more than BENCH_TOLERANCE
#                         and more than the two runs' spreads added
#   bench/run.sh quick    make bench-quick: 2 short rounds into a temp dir,
#                         to see that everything runs; numbers not for use
#   bench/run.sh profile  make bench-profile: where an EchoMQ worker's time
#                         goes (bench/cmd/emqprofile): server µs per job by
#                         script, server and client CPU per job, jobs per
#                         claim, round trips in flight; prints a table
#
# One throwaway valkey-server (no persistence, loopback, a free port) serves
# the whole run: both modules' benchmark binaries get it as VALKEY_ADDR.
# Rounds are interleaved (core, peers, core jobs, peers jobs, BullMQ jobs;
# repeat) so that drift during the run affects both sides of every ratio alike.
# BullMQ is a Node peer: bench/peers/bullmq pins it in package-lock.json and
# the run installs it there with `npm ci` (Node and npm must be installed;
# without them, or when the install fails, its rows say not measured).
#
# Knobs (environment): BENCH_COUNT rounds (default 8; at least 5 for a
# report: more, shorter rounds give the medians and the outlier filter more
# to work with than fewer long ones), BENCH_TIME -benchtime of the ordinary
# benchmarks (default 500ms), BENCH_JOBS -benchtime of the end-to-end job
# benchmarks (default 4000x: jobs are enqueued before the timer, so b.N is
# fixed; BenchmarkCompareJobsLanes drains 5 times that, six times a round), BENCH_TOLERANCE for check (default 0.20), BENCH_GUARD_ALL=1 to
# make check compare every row with a direction, the baselines' and peers'
# too, not only the rows of our code.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

mode=${1:-report}
case $mode in
report | check)
	count=${BENCH_COUNT:-8}
	btime=${BENCH_TIME:-500ms}
	jobs=${BENCH_JOBS:-4000x}
	;;
quick)
	count=${BENCH_COUNT:-2}
	btime=${BENCH_TIME:-100ms}
	jobs=${BENCH_JOBS:-500x}
	;;
profile)
	# Knobs: PROFILE_JOBS jobs per drain (default 20000), PROFILE_ROUNDS
	# (default 3), PROFILE_C concurrencies (default 20,100), PROFILE_PREFETCH
	# WorkerConfig.Prefetch values to compare: 0 automatic, -1 none, N fixed
	# (default: the worker's default).
	count=5
	;;
*)
	echo "usage: $0 report|check|quick|profile" >&2
	exit 2
	;;
esac
tolerance=${BENCH_TOLERANCE:-0.20}
if [ "$mode" != quick ] && [ "$count" -lt 5 ]; then
	echo "bench: BENCH_COUNT=$count: a report or a check needs at least 5 rounds" >&2
	exit 2
fi

log() { printf 'bench: %s\n' "$*" >&2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/echocache-bench.XXXXXX")
server_pid=
cleanup() {
	if [ -n "$server_pid" ]; then
		kill "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

case $mode in
report) out=$root/bench ;;
*) out=$work/out && mkdir -p "$out" ;;
esac
raw=$work/raw.txt
errlog=$work/stderr.txt
: >"$raw"
: >"$errlog"

started=$(date +%s)
load_start=$(cut -d' ' -f1 /proc/loadavg)

peers=0
bullmq=0
if [ "$mode" = profile ]; then
	log "building the profile tool"
	go build -o "$work/emqprofile" ./bench/cmd/emqprofile
else
	log "building benchmark binaries and the report tool"
	go build -o "$work/benchreport" ./bench/cmd/benchreport
	go test -c -o "$work/core.test" ./bench
	peers=1
	if ! (cd bench/peers && go test -c -o "$work/peers.test" .) 2>"$work/peers-build.txt"; then
		peers=0
		log "the peers module (bench/peers) does not build; its rows will say not measured:"
		cat "$work/peers-build.txt" >&2
	fi
	bullmq=0
	if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
		log "node or npm is missing: the BullMQ rows will say not measured"
	elif (cd bench/peers/bullmq && npm ci --no-audit --no-fund --loglevel=error) >"$work/bullmq-install.txt" 2>&1; then
		bullmq=1
	else
		log "npm ci in bench/peers/bullmq failed; the BullMQ rows will say not measured:"
		tail -5 "$work/bullmq-install.txt" >&2
	fi
fi

command -v valkey-server >/dev/null || bash .ci/install-valkey
command -v valkey-cli >/dev/null || bash .ci/install-valkey

# A loopback port that nothing answers on; if another process takes it before
# the server binds, the server exits and the loop below tries another.
free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 30000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
}
for attempt in 1 2 3 4 5; do
	port=$(free_port)
	valkey-server --port "$port" --bind 127.0.0.1 --protected-mode no \
		--save '' --appendonly no --dir "$work" --logfile "$work/valkey.log" &
	server_pid=$!
	for _ in $(seq 100); do
		if ! kill -0 "$server_pid" 2>/dev/null; then
			break
		fi
		if [ "$(valkey-cli -p "$port" ping 2>/dev/null)" = PONG ]; then
			break
		fi
		sleep 0.1
	done
	if kill -0 "$server_pid" 2>/dev/null &&
		valkey-cli -p "$port" info server 2>/dev/null | tr -d '\r' | grep -qx "process_id:$server_pid"; then
		break
	fi
	kill "$server_pid" 2>/dev/null || true
	wait "$server_pid" 2>/dev/null || true
	server_pid=
	[ "$attempt" = 5 ] && { log "could not start valkey-server; see $work/valkey.log"; tail -5 "$work/valkey.log" >&2; exit 1; }
done
export VALKEY_ADDR=127.0.0.1:$port
valkey_version=$(valkey-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p')
log "valkey-server $valkey_version on $VALKEY_ADDR (pid $server_pid)"

if [ "$mode" = profile ]; then
	pargs=(-jobs "${PROFILE_JOBS:-20000}" -rounds "${PROFILE_ROUNDS:-3}" -c "${PROFILE_C:-20,100}")
	[ -n "${PROFILE_PREFETCH:-}" ] && pargs+=(-prefetch "$PROFILE_PREFETCH")
	log "load average (1 min) at start: $(cut -d' ' -f1 /proc/loadavg) (above 2 on 2 cores: other work competes for the CPU)"
	"$work/emqprofile" "${pargs[@]}"
	log "valkey-server $valkey_version, $(go env GOVERSION), $(nproc) cores; load average (1 min) at end: $(cut -d' ' -f1 /proc/loadavg)"
	exit 0
fi

# run BINARY DIR BENCHTIME ARGS...: one invocation, one round of the chosen
# benchmarks. A failing benchmark prints --- FAIL in the output (the report
# says so); the run goes on, and the exit status says so at the end.
failures=0
run() {
	local bin=$1 dir=$2 bt=$3
	shift 3
	if ! (cd "$dir" && "$bin" -test.run '^$' -test.benchtime "$bt" -test.count 1 -test.timeout 30m "$@") >>"$raw" 2>>"$errlog"; then
		failures=$((failures + 1))
		log "$(basename "$bin") $* failed (see the report's Note column and stderr below)"
	fi
}

# run_bullmq: one round of BullMQ's end-to-end jobs, as many jobs as the Go
# job benchmarks run (BENCH_JOBS without its x).
run_bullmq() {
	if ! (cd bench/peers/bullmq && node jobs.mjs "${jobs%x}" 1,8,20,100) >>"$raw" 2>>"$errlog"; then
		failures=$((failures + 1))
		log "node bench/peers/bullmq/jobs.mjs failed (see the report's Note column and stderr below)"
	fi
}

# The five steps of a round; odd rounds run them in this order, even rounds in the reverse,
# so that a drift within a round (the server's state grows with each benchmark's leftovers)
# does not always land on the same side of a ratio.
step() {
	case $1 in
	1) run "$work/core.test" bench "$btime" -test.bench . -test.skip 'Jobs|Ceiling' ;;
	2) [ $peers = 1 ] && run "$work/peers.test" bench/peers "$btime" -test.bench . -test.skip Jobs ;;
	3) run "$work/core.test" bench "$jobs" -test.bench 'Jobs|Ceiling' ;;
	4) [ $peers = 1 ] && run "$work/peers.test" bench/peers "$jobs" -test.bench Jobs ;;
	5) [ $bullmq = 1 ] && run_bullmq ;;
	esac
	return 0
}
for round in $(seq "$count"); do
	log "round $round/$count"
	order="1 2 3 4 5"
	[ $((round % 2)) = 0 ] && order="5 4 3 2 1"
	for s in $order; do step "$s"; done
done

elapsed=$(($(date +%s) - started))
if [ -s "$errlog" ]; then
	log "stderr of the benchmark binaries:"
	tail -20 "$errlog" >&2
fi

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
mem=$(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)
peers_note="built and run"
[ $peers = 1 ] || peers_note="FAILED TO BUILD (rows say not measured)"
bullmq_note="BullMQ $(cd bench/peers/bullmq && node -p "require('./node_modules/bullmq/package.json').version" 2>/dev/null || echo '?') on Node $(node --version 2>/dev/null || echo '?'), installed by npm ci"
[ $bullmq = 1 ] || bullmq_note="NOT INSTALLED (rows say not measured)"
args=(
	-env "command=make bench ($mode: $count interleaved rounds, -benchtime $btime, end-to-end jobs -benchtime $jobs)"
	-env "date=$(date -u +%Y-%m-%dT%H:%MZ)"
	-env "wall time of the run=$((elapsed / 60))m$((elapsed % 60))s (build, server start and all rounds)"
	-env "machine=$(nproc) cores ($cpu), $mem, $(uname -sr); shared with other work, so absolute figures are noisy"
	-env "load average (1 min) at start and end=$load_start, $(cut -d' ' -f1 /proc/loadavg) (above 2 on 2 cores: other work competed for the CPU)"
	-env "Go=$(go env GOVERSION), GOMAXPROCS=${GOMAXPROCS:-$(nproc)}"
	-env "valkey-server=$valkey_version (one throwaway instance, no persistence, loopback)"
	-env "peers module=$peers_note"
	-env "Node peer=$bullmq_note"
	-env "benchmark binaries failing=$failures invocation(s)"
)

status=0
case $mode in
report)
	cp "$raw" "$out/raw.txt"
	"$work/benchreport" "${args[@]}" -md "$out/REPORT.md" -svg "$out/chart.svg" -json "$out/baseline.json" "$out/raw.txt" || status=$?
	log "wrote bench/REPORT.md, bench/chart.svg, bench/baseline.json, bench/raw.txt in $((elapsed / 60))m$((elapsed % 60))s"
	;;
check)
	guard=()
	[ "${BENCH_GUARD_ALL:-0}" = 1 ] && guard=(-guard-all)
	"$work/benchreport" "${args[@]}" -check "$root/bench/baseline.json" -tolerance "$tolerance" "${guard[@]}" "$raw" || status=$?
	;;
quick)
	"$work/benchreport" "${args[@]}" "$raw" || status=$?
	;;
esac
if [ "$failures" -gt 0 ] && [ "$status" = 0 ]; then
	log "$failures benchmark invocation(s) failed"
	status=1
fi
exit "$status"
