#!/usr/bin/env python3
"""The fixed client scenario through pymemcache (text protocol only).

Usage: pymemcache_scenario.py host:port
"""
import sys
import time

from pymemcache.client.base import Client

from common import LARGE, TOO_LARGE, binary_value, large_value, op, show, stats_lines

# Client socket timeout in seconds: loopback, generous.
TIMEOUT = 5
# Expiry of the TTL case and how long to wait for it to pass (memcached's
# clock ticks once a second, so an item set with TTL 2 lives 1-2 s).
TTL = 2
TTL_WAIT = 3.1


class RawSerde:
    """Stores bytes as given and returns (flags, value) so flags are visible."""

    def serialize(self, key, value):
        return value, 0

    def deserialize(self, key, value, flags):
        return (flags, value)


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    server = (host, int(port))
    c = Client(server, serde=RawSerde(), default_noreply=False, connect_timeout=TIMEOUT, timeout=TIMEOUT)
    nr = Client(server, serde=RawSerde(), connect_timeout=TIMEOUT, timeout=TIMEOUT)  # default noreply
    uc = Client(server, serde=RawSerde(), default_noreply=False, allow_unicode_keys=True,
                encoding="utf8", connect_timeout=TIMEOUT, timeout=TIMEOUT)

    op("version", c.version)
    op("flush_all", c.flush_all)
    op("set a", lambda: c.set("a", b"alpha"))
    op("set b flags=7", lambda: c.set("b", b"beta", flags=7))
    op("get a", lambda: c.get("a"))
    op("get b", lambda: c.get("b"))
    op("get missing", lambda: c.get("missing"))
    op("get_many a b missing", lambda: c.get_many(["a", "b", "missing"]))
    op("set_many", lambda: c.set_many({"m1": b"one", "m2": b"two"}))
    op("gets_many m1 m2", lambda: {k: (v[0], v[1] and "cas") for k, v in c.gets_many(["m1", "m2"]).items()})
    op("add a (exists)", lambda: c.add("a", b"x"))
    op("add c", lambda: c.add("c", b"gamma"))
    op("replace a", lambda: c.replace("a", b"alpha2"))
    op("replace missing", lambda: c.replace("missing", b"x"))
    op("append a", lambda: c.append("a", b"+app"))
    op("prepend a", lambda: c.prepend("a", b"pre+"))
    op("get a after append/prepend", lambda: c.get("a"))
    op("append missing", lambda: c.append("missing", b"x"))
    op("prepend missing", lambda: c.prepend("missing", b"x"))

    g = c.gets("a")
    cas1 = g[1]
    print("gets a -> %s cas=%s" % (show(g[0]), int(cas1) if cas1 is not None else None))
    op("cas a (current)", lambda: c.cas("a", b"swapped", cas1))
    op("cas a (stale)", lambda: c.cas("a", b"again", cas1))
    op("get a after cas", lambda: c.get("a"))
    g2 = c.gets("a")
    print("cas changed after cas -> %s" % (g2[1] != cas1))
    op("cas missing", lambda: c.cas("missing", b"x", cas1))

    op("delete a", lambda: c.delete("a"))
    op("delete a again", lambda: c.delete("a"))
    op("delete_many m1 m2 missing", lambda: c.delete_many(["m1", "m2", "missing"]))
    op("get m1", lambda: c.get("m1"))

    op("set n 10", lambda: c.set("n", b"10"))
    op("incr n 5", lambda: c.incr("n", 5))
    op("decr n 3", lambda: c.decr("n", 3))
    op("decr n 100 (floors at 0)", lambda: c.decr("n", 100))
    op("set big 2^64-1", lambda: c.set("big", b"18446744073709551615"))
    op("incr big 1 (wraps)", lambda: c.incr("big", 1))
    op("incr missing", lambda: c.incr("missing", 1))
    op("decr missing", lambda: c.decr("missing", 1))
    op("incr b (non-numeric)", lambda: c.incr("b", 1))
    op("set sp '5 '", lambda: c.set("sp", b"5 "))
    op("incr sp (trailing space)", lambda: c.incr("sp", 1))
    op("set w 99", lambda: c.set("w", b"99"))
    op("incr w 1 (length grows)", lambda: c.incr("w", 1))
    op("get w", lambda: c.get("w"))
    op("incr n -1 (negative delta)", lambda: c.incr("n", -1))

    op("touch b", lambda: c.touch("b", 100))
    op("touch missing", lambda: c.touch("missing", 100))

    big = large_value(LARGE)
    op("set large 500KB", lambda: c.set("large", big))
    op("get large", lambda: c.get("large"))
    op("get large equal", lambda: c.get("large") == (0, big))
    op("set toolarge 2MB", lambda: c.set("toolarge", large_value(TOO_LARGE)))
    op("get toolarge", lambda: c.get("toolarge"))
    op("get b after too large", lambda: c.get("b"))
    op("set large over existing with too large", lambda: c.set("large", large_value(TOO_LARGE)))
    op("get large after refused overwrite", lambda: c.get("large") is None)

    binv = binary_value()
    op("set bin", lambda: c.set("bin", binv))
    op("get bin equal", lambda: c.get("bin") == (0, binv))
    op("set empty", lambda: c.set("empty", b""))
    op("get empty", lambda: c.get("empty"))

    op("set unicode key", lambda: uc.set("ключ-ü", "значение".encode()))
    op("get unicode key", lambda: uc.get("ключ-ü"))
    op("get unicode key (bytes)", lambda: c.get("ключ-ü".encode()))
    op("set key with space", lambda: c.set("has space", b"x"))
    op("set key 250 chars", lambda: c.set("k" * 250, b"x"))
    op("get key 250 chars", lambda: c.get("k" * 250))
    op("set key 251 chars", lambda: c.set("k" * 251, b"x"))
    op("get key with newline", lambda: c.get("a\nb"))

    op("set noreply (default client)", lambda: nr.set("nr", b"quiet"))
    op("add noreply exists (default client)", lambda: nr.add("nr", b"loud"))
    op("get nr (same connection: the noreply commands were read first)", lambda: nr.get("nr"))

    op("set ttl %d" % TTL, lambda: c.set("ttl", b"short", expire=TTL))
    op("get ttl now", lambda: c.get("ttl"))
    op("set ttl-touch", lambda: c.set("ttl2", b"short", expire=100))
    op("touch ttl-touch to %d" % TTL, lambda: c.touch("ttl2", TTL))
    op("set negative expire", lambda: c.set("neg", b"gone", expire=-1))
    op("get negative expire", lambda: c.get("neg"))
    time.sleep(TTL_WAIT)
    op("get ttl after expiry", lambda: c.get("ttl"))
    op("get ttl-touch after expiry", lambda: c.get("ttl2"))

    stats_lines("stats", c.stats())
    op("stats slabs has total_malloced", lambda: "total_malloced" in {k.decode() if isinstance(k, bytes) else k: 1 for k in c.stats("slabs")})
    op("stats bogus", lambda: c.stats("bogus"))
    op("flush_all", c.flush_all)
    op("get b after flush", lambda: c.get("b"))
    op("flush_all delay 0 noreply", lambda: c.flush_all(0, noreply=True))
    op("cache_memlimit 64", lambda: c.cache_memlimit(64))
    op("cache_memlimit 1 (under memcached's 8 MB floor)", lambda: c.cache_memlimit(1))
    op("shutdown (not enabled without -A)", lambda: c.shutdown())
    op("version after shutdown", c.version)
    op("quit", c.quit)
    op("get b after quit (reconnects)", lambda: c.get("b"))
    for cl in (c, nr, uc):
        cl.close()


if __name__ == "__main__":
    main()
