#!/usr/bin/env python3
"""The fixed client scenario through python-memcache (the `memcache` module).

Usage: python_memcache_scenario.py host:port

python-memcache checks keys and value sizes on the client side; a second
client with check_keys=False and a raised value limit sends what the first
refuses, so the server's own error paths are reached too.
"""
import sys
import time

import memcache

from common import LARGE, TOO_LARGE, binary_value, large_value, op, stats_lines

# Client socket timeout in seconds: loopback, generous.
TIMEOUT = 5
# See pymemcache_scenario.py.
TTL = 2
TTL_WAIT = 3.1
# Value limit given to the unchecked client: past the server's 1 MiB.
UNCHECKED_MAX_VALUE = 4 * 1024 * 1024


def main():
    addr = sys.argv[1]
    c = memcache.Client([addr], socket_timeout=TIMEOUT, cache_cas=True, dead_retry=0)
    raw = memcache.Client([addr], socket_timeout=TIMEOUT, check_keys=False, dead_retry=0,
                          server_max_value_length=UNCHECKED_MAX_VALUE)

    op("flush_all", c.flush_all)
    op("set a", lambda: c.set("a", b"alpha"))
    op("set s (str)", lambda: c.set("s", "text"))
    op("set i (int)", lambda: c.set("i", 42))
    op("set l (pickled list)", lambda: c.set("l", [1, "two"]))
    op("get a", lambda: c.get("a"))
    op("get s", lambda: c.get("s"))
    op("get i", lambda: c.get("i"))
    op("get l", lambda: c.get("l"))
    op("get missing", lambda: c.get("missing"))
    op("get_multi a s missing", lambda: c.get_multi(["a", "s", "missing"]))
    op("set_multi", lambda: c.set_multi({"m1": b"one", "m2": b"two"}))
    op("get_multi key_prefix", lambda: c.get_multi(["1", "2"], key_prefix="m"))
    op("add a (exists)", lambda: c.add("a", b"x"))
    op("add c", lambda: c.add("c", b"gamma"))
    op("replace a", lambda: c.replace("a", b"alpha2"))
    op("replace missing", lambda: c.replace("missing", b"x"))
    op("append a", lambda: c.append("a", b"+app"))
    op("prepend a", lambda: c.prepend("a", b"pre+"))
    op("get a after append/prepend", lambda: c.get("a"))
    op("append missing", lambda: c.append("missing", b"x"))

    op("gets a", lambda: c.gets("a"))
    op("cas a (current)", lambda: c.cas("a", b"swapped"))
    op("cas a (no gets since: plain set)", lambda: c.cas("a", b"set-by-cas"))
    op("gets a again", lambda: c.gets("a"))
    op("set a behind the client's back", lambda: raw.set("a", b"other"))
    op("cas a (stale)", lambda: c.cas("a", b"again"))
    op("get a after stale cas", lambda: c.get("a"))
    c.reset_cas()

    op("delete a", lambda: c.delete("a"))
    op("delete a again", lambda: c.delete("a"))
    op("delete_multi m1 m2 missing", lambda: c.delete_multi(["m1", "m2", "missing"]))

    op("set n 10", lambda: c.set("n", "10"))
    op("incr n 5", lambda: c.incr("n", 5))
    op("decr n 3", lambda: c.decr("n", 3))
    op("decr n 100 (floors at 0)", lambda: c.decr("n", 100))
    op("set big 2^64-1", lambda: c.set("big", "18446744073709551615"))
    op("incr big 1 (wraps)", lambda: c.incr("big", 1))
    op("incr missing", lambda: c.incr("missing", 1))
    op("decr missing", lambda: c.decr("missing", 1))
    op("incr s (non-numeric)", lambda: c.incr("s", 1))
    op("get s after failed incr", lambda: c.get("s"))

    op("touch s", lambda: c.touch("s", 100))
    op("touch missing", lambda: c.touch("missing", 100))

    big = large_value(LARGE)
    op("set large 500KB", lambda: c.set("large", big))
    op("get large", lambda: c.get("large"))
    op("get large equal", lambda: c.get("large") == big)
    op("set toolarge 2MB (client-side check)", lambda: c.set("toolarge", large_value(TOO_LARGE)))
    op("set toolarge 2MB (unchecked)", lambda: raw.set("toolarge", large_value(TOO_LARGE)))
    op("get toolarge", lambda: c.get("toolarge"))
    op("get s after too large", lambda: raw.get("s"))

    binv = binary_value()
    op("set bin", lambda: c.set("bin", binv))
    op("get bin equal", lambda: c.get("bin") == binv)

    op("set unicode key", lambda: c.set("ключ-ü", "значение"))
    op("get unicode key", lambda: c.get("ключ-ü"))
    op("set key with space", lambda: c.set("has space", b"x"))
    op("set key with space (unchecked)", lambda: raw.set("has space", b"x"))
    op("get has (after unchecked space key)", lambda: raw.get("has"))
    op("set key 251 chars", lambda: c.set("k" * 251, b"x"))
    op("set key 251 chars (unchecked)", lambda: raw.set("k" * 251, b"x"))
    op("get key 251 chars (unchecked)", lambda: raw.get("k" * 251))
    op("get s after bad keys", lambda: raw.get("s"))

    op("set ttl %d" % TTL, lambda: c.set("ttl", b"short", time=TTL))
    op("get ttl now", lambda: c.get("ttl"))
    time.sleep(TTL_WAIT)
    op("get ttl after expiry", lambda: c.get("ttl"))

    st = c.get_stats()
    op("get_stats servers", lambda: len(st))
    stats_lines("stats", st[0][1] if st else {})
    op("flush_all", c.flush_all)
    op("get s after flush", lambda: c.get("s"))
    c.disconnect_all()
    raw.disconnect_all()


if __name__ == "__main__":
    main()
