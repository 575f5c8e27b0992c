#!/bin/bash
# make bench-instr: what --data-dir adds to the server's own work, in user-space instructions a request,
# counted by callgrind. Unlike CPU time on a shared 2-core machine, the count repeats within a few percent,
# so a change of 2% shows. It leaves out the kernel's work (the socket's reads and writes, the same with
# and without), which makes its ratio larger than the CPU ratio `make bench` reports, and cache misses,
# which make it smaller: it compares builds, it does not replace the CPU ratio. Work done by the second
# (timers, the hot-key sampler) is spread over the window's requests, so a run slowed by other load counts
# a little more a request: compare runs made at similar loads.
# The same binary runs each row twice: without a data directory and with one kept as by default (a live
# copy on /dev/shm's tmpfs). It is built with the callgrind tag (slab/mapcap_callgrind.go: valgrind cannot
# map the 1 TiB the items file's mapping reserves; not the valgrind tag, which is the Go runtime's own).
#   INSTR_SECS=20   seconds of counted load a run (after 30 s of warm-up and a prefill, not counted)
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
command -v valgrind >/dev/null || {
	echo "valgrind is not installed: run 'make bench-instr', which installs it" >&2
	exit 1
}
(cd tools/bench && "$GO" build -o ../../bin/leasecached-bench ./cmd/leasecached-bench)
work=$(mktemp -d /tmp/bench-instr.XXXXXX)
live=$(mktemp -d /dev/shm/bench-instr.XXXXXX) # the default's live copy goes to /dev/shm: here, a root of its own
server=
cleanup() {
	if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
	rm -rf "$work" "$live"
}
trap cleanup EXIT
"$GO" build -tags callgrind -o "$work/leasecached" ./cmd/leasecached
secs=${INSTR_SECS:-20}

# run NAME PIPELINE GET_RATIO VALUE_SIZE [server flags]: prints the instructions a request of one run.
run() {
	local name=$1 pipeline=$2 ratio=$3 size=$4
	shift 4
	local port out dump reqs ir
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	# Go's asynchronous preemption (a signal into running code) crashes the server under valgrind, and
	# valgrind 3.19 reports RDTSCP on AMD processors but cannot run it (runtime.cputicks: SIGILL).
	GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$work/$name.%p" \
		"$work/leasecached" -p "$port" -l 127.0.0.1 -t 2 -m 1024 -c 1024 "$@" >"$work/$name.log" 2>&1 &
	server=$!
	for _ in $(seq 1 100); do
		python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 1).close()" 2>/dev/null && break
		sleep 0.2
	done
	local load=(bin/leasecached-bench load -addr "127.0.0.1:$port" -pipeline "$pipeline" -get-ratio "$ratio"
		-value-size "$size" -gen-threads 2 -json)
	"${load[@]}" -duration 30s >/dev/null
	callgrind_control -i on "$server" >/dev/null 2>&1
	out=$("${load[@]}" -duration "${secs}s" -prefill=false)
	callgrind_control -d "$server" >/dev/null 2>&1
	callgrind_control -i off "$server" >/dev/null 2>&1
	kill "$server"
	wait "$server" 2>/dev/null || true
	server=
	dump=$(ls "$work/$name".*.1)
	ir=$(awk '/^summary:/ {print $2}' "$dump")
	reqs=$(echo "$out" | python3 -c 'import json, sys; print(json.load(sys.stdin)["requests"])')
	python3 -c "print(round($ir / $reqs))"
	rm -rf "$work/dd" "${live:?}"/*
}

printf '%-22s %12s %12s %7s\n' "row" "plain" "--data-dir" "ratio"
for row in "16 0.5 100" "16 0.9 4096" "1 0.9 100"; do
	read -r pipeline ratio size <<<"$row"
	name="p${pipeline}-get${ratio}-${size}B"
	plain=$(run "$name-plain" "$pipeline" "$ratio" "$size")
	dd=$(run "$name-dd" "$pipeline" "$ratio" "$size" --data-dir "$work/dd" --data-live "$live")
	printf '%-22s %12s %12s %7s\n' "$name" "$plain" "$dd" "$(python3 -c "print(f'{$dd / $plain:.3f}')")"
done
