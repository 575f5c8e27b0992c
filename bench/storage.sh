#!/usr/bin/env bash
# make bench-storage: bytes per item, RSS at the limit, hit ratio and leasecached's GC, side by side.
source "$(dirname "$0")/common.sh"
exec bin/leasecached-bench storage "${bench_args[@]}"
