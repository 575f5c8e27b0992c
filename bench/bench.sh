#!/usr/bin/env bash
# make bench: the same workload matrix against memcached and leasecached (and THIRD), one table of medians,
# then lease-get hits vs get hits on leasecached. Every run's JSON line goes to bin/bench.jsonl.
source "$(dirname "$0")/common.sh"
exec bin/leasecached-bench compare -json-out bin/bench.jsonl "${bench_args[@]}"
