#!/usr/bin/env bash
# make bench-restart: issue 30's measurement. Restart times and items recovered, leasecached --data-dir
# (after SIGTERM, kill -9 right after a fill, kill -9 during sets) against memcached -e (after SIGUSR1,
# its only warm restart; then after kill -9), and each server's RSS after the fill with and without.
# BENCH_QUICK=1: 1M items only. BENCH_ARGS: see bin/leasecached-bench restart -h.
unset THIRD # no third server here
source "$(dirname "$0")/common.sh"
exec bin/leasecached-bench restart "${bench_args[@]}"
