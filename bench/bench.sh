#!/usr/bin/env bash
# make bench: the same workload matrix against memcached and leasecached (and THIRD), one table of medians,
# then lease-get hits vs get hits on leasecached, then the TLS table (both servers again with -Z). Every
# run's JSON line goes to bin/bench.jsonl.
# TLS_THIRD="cmd"       a third server in the TLS table ({cert} {key} and THIRD's placeholders are replaced),
#                       e.g. TLS_THIRD="memcached -p {port} -u root -Z -o ssl_chain_cert={cert},ssl_key={key}"
# TLS_LEASECACHED="cmd" leasecached's command in the TLS table instead of its own with -Z ("none": leave it out)
source "$(dirname "$0")/common.sh"
if [ -n "${TLS_THIRD:-}" ]; then bench_args+=(-tls-third "$TLS_THIRD"); fi
if [ -n "${TLS_LEASECACHED:-}" ]; then bench_args+=(-tls-leasecached "$TLS_LEASECACHED"); fi
exec bin/leasecached-bench compare -json-out bin/bench.jsonl "${bench_args[@]}"
