# Shared by bench.sh and storage.sh: build the load tool and assemble the flags the environment asks for.
# BENCH_QUICK=1   the short variant of the run
# THIRD="cmd"     a third server ({port} {threads} {mem} {conns} are replaced), e.g. THIRD="pogocache -p {port}"
# BENCH_ARGS=...  extra flags for leasecached-bench (see: bin/leasecached-bench compare -h)
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
(cd tools/bench && "$GO" build -o ../../bin/leasecached-bench ./cmd/leasecached-bench) # the load tool's own module
"$GO" build -o bin/leasecached ./cmd/leasecached
MEMCACHED=$(command -v memcached || true)
if [ -z "$MEMCACHED" ]; then
	echo "memcached is not installed: run 'make test-deps' (or apt-get install memcached)" >&2
	exit 1
fi
bench_args=(-leasecached bin/leasecached -memcached "$MEMCACHED")
case "${BENCH_QUICK:-0}" in 0 | "" | false | no) ;; *) bench_args+=(-quick) ;; esac
if [ -n "${THIRD:-}" ]; then bench_args+=(-third "$THIRD"); fi
# shellcheck disable=SC2206 # BENCH_ARGS is split into flags on purpose
bench_args+=(${BENCH_ARGS:-})
