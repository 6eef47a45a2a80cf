#!/usr/bin/env bash
# Runs every same-run benchmark of the repository serially (one at a time,
# so none takes CPU from another's timed runs) and prints each one's
# summary lines: the performance table of docs/performance.md, regenerated.
#
#   bash bench/all.sh [ROUNDS] [OUT_DIR]
#
# ROUNDS is each benchmark's -benchtime (default 5, i.e. 5x); OUT_DIR keeps
# the full output of each benchmark (default: a new temporary directory).
# It needs kcat, python3, the oracles' pyarrow (scripts/oracles) and the
# PostgreSQL the tests use (see docs/testing.md);
# a benchmark whose peer is missing says it skipped, and the script then
# exits 1. At 5 rounds the whole script took 8 minutes on one 2-core
# development machine and 5 on another.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds="${1:-5}"
out="${2:-$(mktemp -d -t replay-bench.XXXXXX)}"
mkdir -p "$out"
export REPLAY_BENCH_HTTP_RECORDS="${REPLAY_BENCH_HTTP_RECORDS:-200000}"

# steal prints the CPU time (s, all cores) the hypervisor gave other
# guests so far: the 8th number of /proc/stat's cpu line, in USER_HZ ticks.
steal() { awk -v hz="$(getconf CLK_TCK)" '/^cpu /{printf "%.1f", $9 / hz}' /proc/stat; }

run() { # name package pattern
	local name=$1 pkg=$2 pattern=$3
	local stolen
	stolen=$(steal)
	echo "== $name: go test -run '^\$' -bench '$pattern' -benchtime ${rounds}x $pkg ($(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg))"
	# -v: without it go test prints nothing of a skipped benchmark.
	if ! go test -v -run '^$' -bench "$pattern" -benchtime "${rounds}x" -timeout 60m "$pkg" >"$out/$name.txt" 2>&1; then
		# Ctrl-C stops the script, not only the benchmark running: go test
		# exits 1 on SIGINT, not by the signal, so bash would go on to the
		# next one (and runs no INT trap: it takes the signal as handled).
		if grep -q '^signal: interrupt' "$out/$name.txt"; then
			echo "interrupted; full output in $out"
			exit 130
		fi
		echo "FAILED: see $out/$name.txt"
		tail -20 "$out/$name.txt"
		return 1
	fi
	# The per-row summaries ("... (min / median / max) ...") and the metric lines.
	grep -E 'min / median / max|^Benchmark.*[[:space:]]+[0-9]+[[:space:]]' "$out/$name.txt" | sed -E 's/^[[:space:]]+//'
	# On a virtual machine, CPU time taken by other guests slows both sides
	# of a round unevenly; a run that lost much of it is worth repeating.
	echo "(CPU time stolen by the hypervisor during it: $(awk -v a="$stolen" -v b="$(steal)" 'BEGIN{printf "%.1f", b - a}') s)"
	# A skipped benchmark (its peer is missing) is a row the table lacks.
	if grep -q -- '--- SKIP' "$out/$name.txt"; then
		echo "SKIPPED:"
		grep -B1 -- '--- SKIP' "$out/$name.txt" | grep -v -- '^--$' | sed -E 's/^[[:space:]]+//'
		return 1
	fi
}

status=0
run jsonl ./cmd/replay 'ReplayVsKcat' || status=1
run postgres ./cmd/replay 'PostgresVsCopy' || status=1
run kafka ./cmd/replay 'KafkaSinkVsKcat' || status=1
run http ./cmd/replay 'HTTPSinkVsGoClient' || status=1
run sqlite ./sinks/sqlite 'SQLiteVsExecutemany' || status=1
run parquet ./cmd/replay 'ParquetVsKcatPyarrow' || status=1
echo "== done $(date -u +%H:%M:%S) UTC; full output in $out"
exit $status
