#!/usr/bin/env bash
# ir.sh: instructions per operation of the root package's benchmarks,
# counted by callgrind, which repeats to the instruction for one binary
# where times on a shared machine swing by a third.
#
#   scripts/ir.sh                 print the counts of every benchmark below
#   scripts/ir.sh -check          compare them with scripts/ir-baseline.txt:
#                                 fail if one grew by more than 3%
#   scripts/ir.sh -record         write scripts/ir-baseline.txt anew
#
# Each count is the difference of two runs at two iteration counts over the
# difference of the counts, so set-up and the benchmark framework cancel
# out. GOMAXPROCS=1, the collector off and no asynchronous preemption (its
# signals also trip callgrind): one thread, so that a count depends as
# little as can be on how goroutines met. A count is only comparable with one made by the same Go toolchain:
# with another, -check says so and skips, loudly, without failing.
set -euo pipefail
cd "$(dirname "$0")/.."

# name|benchmark|operations per iteration
benches=(
	"RunSync/uncontended|^BenchmarkRunSync\$/^uncontended\$|1"
	"Submit/burst-10k (per job)|^BenchmarkSubmit\$/^burst-10k\$|10000"
	"Submit/many-10k (per job)|^BenchmarkSubmit\$/^many-10k\$|10000"
)
small=${IR_SMALL:-2000}
large=${IR_LARGE:-22000}
burst_small=4
burst_large=44

mode=${1:-}
baseline=scripts/ir-baseline.txt
toolchain=$(go env GOVERSION)/$(go env GOARCH)

command -v valgrind >/dev/null || {
	echo "ir.sh: valgrind is missing (apt-get install -y valgrind)" >&2
	exit 2
}

bin=$(mktemp -d)/fairsched.test
trap 'rm -rf "$(dirname "$bin")"' EXIT
go test -c -o "$bin" .

# total N BENCH: the instructions of one run at N iterations.
total() {
	local dir
	dir=$(mktemp -d)
	local n
	# cpu.rdtscp=off: a runtime lock met contended reads the cycle counter,
	# with RDTSCP where the processor has it, which valgrind does not
	# emulate (the run dies of SIGILL on a loaded machine); this takes
	# the LFENCE and RDTSC it does, off every path measured.
	if ! GOMAXPROCS=1 GOGC=off GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off valgrind --tool=callgrind --callgrind-out-file="$dir/out" --log-file="$dir/log" \
		"$bin" -test.run '^$' -test.bench "$2" -test.benchtime "${1}x" >"$dir/stdout" 2>&1; then
		echo "ir.sh: the run of $2 at ${1}x failed:" >&2
		tail -n 20 "$dir/log" "$dir/stdout" >&2
		rm -rf "$dir"
		return 1
	fi
	n=$(awk '/Collected :/ { gsub(",", "", $NF); print $NF }' "$dir/log")
	rm -rf "$dir"
	# A count that is not a number is a measurement that failed, not a
	# cheap one: it must not pass the check.
	if ! [[ "$n" =~ ^[0-9]+$ ]]; then
		echo "ir.sh: the run of $2 at ${1}x counted no instructions" >&2
		return 1
	fi
	echo "$n"
}

# measure BENCH PER: the instructions of one operation of BENCH, an
# iteration of which is PER operations.
measure() {
	local lo=$small hi=$large a b
	if [ "$2" != 1 ]; then lo=$burst_small hi=$burst_large; fi
	a=$(total "$lo" "$1") || return 1
	b=$(total "$hi" "$1") || return 1
	echo $(((b - a) / ((hi - lo) * $2)))
}

declare -A got
for row in "${benches[@]}"; do
	IFS='|' read -r name bench per <<<"$row"
	got[$name]=$(measure "$bench" "$per")
	printf '%-28s %6d instructions\n' "$name" "${got[$name]}"
done

case "$mode" in
-record)
	{
		echo "# instructions per operation, scripts/ir.sh; toolchain $toolchain"
		for row in "${benches[@]}"; do
			IFS='|' read -r name _ _ <<<"$row"
			echo "$name|${got[$name]}"
		done
	} >"$baseline"
	echo "recorded in $baseline"
	;;
-check)
	recorded=$(sed -n 's/^# .*toolchain //p' "$baseline")
	if [ "$recorded" != "$toolchain" ]; then
		echo "ir.sh: SKIPPED: the baseline was recorded with $recorded, this is $toolchain;"
		echo "ir.sh: counts differ between toolchains. Record it anew: scripts/ir.sh -record"
		exit 0
	fi
	fail=0
	while IFS='|' read -r name want; do
		case "$name" in "#"* | "") continue ;; esac
		have=${got[$name]:-}
		if [ -z "$have" ]; then
			echo "ir.sh: $name is in the baseline but not measured"
			fail=1
			continue
		fi
		# A burst's count moves by about 1% with how its goroutines
		# met: a count over the bound is taken twice more, and the
		# least of the three stands.
		for again in 1 2; do
			[ $((have * 100)) -gt $((want * 103)) ] || break
			IFS='|' read -r _ bench per < <(printf '%s\n' "${benches[@]}" | grep -F "$name|")
			retry=$(measure "$bench" "$per")
			[ "$retry" -lt "$have" ] && have=$retry
		done
		if [ $((have * 100)) -gt $((want * 103)) ]; then
			echo "ir.sh: $name: $have instructions, more than 3% over the baseline's $want"
			fail=1
		else
			echo "ir.sh: $name: $have against the baseline's $want: ok"
		fi
	done <"$baseline"
	if [ "$fail" = 1 ]; then
		echo "ir.sh: a change that adds instructions on purpose records the baseline anew (scripts/ir.sh -record) in the same commit"
		exit 1
	fi
	;;
esac
