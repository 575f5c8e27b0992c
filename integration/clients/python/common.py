"""Shared helpers of the Python client scenarios (see ../README.md).

Every operation prints exactly one line "<op> -> <result>" so that the Go
test can diff the run against memcached with the run against leasecached.
Only CAS values differ legitimately between servers; they are printed as
"cas=<n>" and normalized by the Go side.
"""
import hashlib
import sys

# Longest value shown verbatim; longer ones are shown as length + digest.
SHOW_MAX = 64
# Stats whose values are deterministic for a fixed scenario on a fresh server.
# get_expired is not one: whether a get finds an expired item or a background
# reaper took it first is a matter of timing, on memcached as on leasecached.
# Nor is total_items: memcached itself varies by one between runs of the same
# scenario (an incr copies the item when another thread holds a reference to it).
STABLE_STATS = (
    "cmd_get", "cmd_set", "cmd_flush", "cmd_touch",
    "get_hits", "get_misses", "get_flushed",
    "delete_hits", "delete_misses", "incr_hits", "incr_misses",
    "decr_hits", "decr_misses", "cas_hits", "cas_misses", "cas_badval",
    "touch_hits", "touch_misses", "curr_items", "threads",
    "evictions", "version", "pointer_size", "limit_maxbytes",
)
# The value sizes of the scenario: a large value that fits the default
# 1 MiB item limit and one that does not.
LARGE = 500 * 1024
TOO_LARGE = 2 * 1024 * 1024


def show(v):
    """Render a result: bytes shortened to length+sha1 when long."""
    if isinstance(v, (bytes, bytearray, str)) and len(v) > SHOW_MAX:
        b = v.encode() if isinstance(v, str) else bytes(v)
        return "%s len=%d sha1=%s" % (type(v).__name__, len(b), hashlib.sha1(b).hexdigest()[:16])
    if isinstance(v, dict):
        return "{" + ", ".join("%s: %s" % (show(k), show(v[k])) for k in sorted(v, key=repr)) + "}"
    if isinstance(v, (list, tuple)):
        return "(" + ", ".join(show(x) for x in v) + ")"
    return repr(v)


def op(name, fn):
    """Run fn, print its result or the exception the client raised."""
    try:
        r = fn()
    except Exception as e:  # the point is to print what the client raises
        print("%s -> raise %s: %s" % (name, type(e).__name__, e))
        sys.stdout.flush()
        return None
    print("%s -> %s" % (name, show(r)))
    sys.stdout.flush()
    return r


def stats_lines(name, stats):
    """Print the sorted stat names, then the deterministic values."""
    norm = {(k.decode() if isinstance(k, bytes) else k): v for k, v in stats.items()}
    # One line per stat name, so that a diff names each missing or extra stat.
    for k in sorted(norm):
        print("%s has %s" % (name, k))
    for k in STABLE_STATS:
        v = norm.get(k)
        if isinstance(v, bytes):
            v = v.decode()
        print("%s %s -> %s" % (name, k, v))
    sys.stdout.flush()


def binary_value():
    """Every byte value, with CR LF and the protocol's END marker inside."""
    return bytes(range(256)) + b"\r\nEND\r\n" + bytes(range(255, -1, -1))


def large_value(n):
    """A deterministic, incompressible-looking value of n bytes."""
    out = bytearray()
    i = 0
    while len(out) < n:
        out += hashlib.sha256(str(i).encode()).digest()
        i += 1
    return bytes(out[:n])
