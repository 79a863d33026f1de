#!/usr/bin/env bash
# make bench-instructions: the server's instructions per job of the scripts an EchoMQ worker
# runs (bench/cmd/scriptcost), counted by valgrind's callgrind on a valkey-server of its own,
# inside EVALSHA and EVAL only (--toggle-collect): the server's timers (its periodic jobs run
# more often the longer a run takes) would make the whole server's count move with the
# machine's load. A figure for comparing a change to a claim script before and after. The server runs about 50 times slower under callgrind; the run
# takes about a minute. Knobs: SCRIPTCOST_JOBS jobs per drain (default 2000), SCRIPTCOST_PER
# jobs claimed per call (default 18).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'bench-instructions: %s\n' "$*" >&2; }

command -v valkey-server >/dev/null || bash .ci/install-valkey
bash .ci/install-valgrind >&2

work=$(mktemp -d "${TMPDIR:-/tmp}/echocache-instructions.XXXXXX")
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

go build -o "$work/scriptcost" ./bench/cmd/scriptcost
port=$((20000 + RANDOM % 30000))
valgrind --tool=callgrind --toggle-collect=evalShaCommand --toggle-collect=evalCommand --callgrind-out-file="$work/cg.%p.out" \
	valkey-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" >"$work/valgrind.log" 2>&1 &
server_pid=$!
for _ in $(seq 300); do
	[ "$(valkey-cli -p "$port" ping 2>/dev/null)" = PONG ] && break
	kill -0 "$server_pid" 2>/dev/null || { log "valkey-server under callgrind exited:"; tail -5 "$work/valgrind.log" >&2; exit 1; }
	sleep 0.1
done
[ "$(valkey-cli -p "$port" ping 2>/dev/null)" = PONG ] || { log "valkey-server under callgrind did not answer"; exit 1; }
log "valkey-server $(valkey-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p') under $(valgrind --version) on port $port"
"$work/scriptcost" -addr "127.0.0.1:$port" -pid "$server_pid" -dumps "$work" \
	-jobs "${SCRIPTCOST_JOBS:-2000}" -per "${SCRIPTCOST_PER:-18}"
