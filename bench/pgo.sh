#!/usr/bin/env bash
# make pgo: regenerate cmd/leasecached/default.pgo, the CPU profile that `go build` uses for profile-guided
# optimisation of the daemon (Go's default -pgo=auto picks up default.pgo in the main package). The daemon
# runs under a mix of `make bench`'s workloads (pipelined and not; gets, sets, 10-key gets, Zipf keys, 4 KB
# values) with --cpuprofile; the profile replaces default.pgo. Rebuild afterwards (make build).
# Profiling a binary that was itself built with the previous profile is what Go's PGO guide recommends.
# PGO_PORT picks the loopback port (default 21911).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
(cd tools/bench && "$GO" build -o ../../bin/leasecached-bench ./cmd/leasecached-bench) # the load tool's own module
"$GO" build -o bin/leasecached ./cmd/leasecached
port=${PGO_PORT:-21911}
prof=$(mktemp)
bin/leasecached -l 127.0.0.1 -p "$port" -t 2 -m 1024 -c 4096 --cpuprofile "$prof" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; rm -f "$prof"' EXIT
load() { bin/leasecached-bench load -addr "127.0.0.1:$port" -conns 50 -keys 100000 -json "$@" >/dev/null; }
for _ in $(seq 50); do # wait for the port, at most 5 s
	bin/leasecached-bench load -addr "127.0.0.1:$port" -conns 1 -keys 1 -duration 10ms -json >/dev/null 2>&1 && break
	sleep 0.1
done
load -pipeline 16 -get-ratio 0.9 -dist uniform -duration 8s
load -pipeline 16 -get-ratio 0.9 -dist zipf -duration 4s
load -pipeline 16 -get-ratio 0.5 -dist uniform -duration 4s
load -pipeline 16 -multiget 10 -get-ratio 1 -dist uniform -duration 4s
load -pipeline 16 -get-ratio 0.9 -value-size 4096 -dist uniform -duration 3s
load -pipeline 1 -get-ratio 0.9 -dist uniform -duration 5s
load -pipeline 16 -get-cmd lease-get -get-ratio 1 -dist uniform -duration 3s
kill -TERM "$pid"
wait "$pid" || true
cp "$prof" cmd/leasecached/default.pgo
chmod 644 cmd/leasecached/default.pgo
echo "wrote cmd/leasecached/default.pgo ($(wc -c < cmd/leasecached/default.pgo) bytes); now: make build"
