#!/usr/bin/env python3
"""The fixed client scenario through pylibmc (libmemcached) with binary=True: memcached's binary protocol.

Usage: pylibmc_scenario.py host:port                  the whole scenario
       pylibmc_scenario.py host:port USER PASSWORD    against a server started with SASL (-S): the right
                                                      password, then a wrong one

Every operation prints one line "<op> -> <result>" (see common.py); CAS values print as "cas=<n>".
"""
import hashlib
import re
import sys
import time

import pylibmc

import common
from common import LARGE, TOO_LARGE, binary_value, large_value, show, stats_lines

# See pymemcache_scenario.py for why TTL 2 and a 3.1 s wait.
TTL = 2
TTL_WAIT = 3.1
# libmemcached's timeouts in milliseconds: loopback, generous.
TIMEOUT_MS = 5000

# libmemcached's error messages name its memcached_st by address ("(0x28888c80) AUTHENTICATION FAILURE").
POINTER = re.compile(r"\(0x[0-9a-f]+\) ")


def op(name, fn):
    """common.op, with the client's pointer taken out of the exception's message."""
    def run():
        try:
            return fn()
        except pylibmc.Error as e:
            raise type(e)(POINTER.sub("", str(e))) from None
    return common.op(name, run)


def refused(name, fn):
    """Run a get the server must refuse (no credentials): it answers "Auth failure" and closes. libmemcached
    reports that as a miss (None), or as a connection error when the close overtakes the answer (a reset),
    against memcached as against leasecached, as timing has it: both print as one outcome. A value would mean
    the get was served."""
    try:
        r = fn()
    except pylibmc.ConnectionError:
        r = None
    print("%s -> %s" % (name, "refused" if r is None else show(r)))
    sys.stdout.flush()


def sha1_of(v):
    """A short digest of v's repr."""
    return hashlib.sha1(repr(v).encode()).hexdigest()[:16]


def client(addr, **kw):
    behaviors = {"cas": True, "connect_timeout": TIMEOUT_MS, "send_timeout": TIMEOUT_MS * 1000,
                 "receive_timeout": TIMEOUT_MS * 1000, "_poll_timeout": TIMEOUT_MS}
    behaviors.update(kw.pop("behaviors", {}))
    return pylibmc.Client([addr], binary=True, behaviors=behaviors, **kw)


def scenario(addr):
    c = client(addr)
    nr = client(addr, behaviors={"no_block": True})  # buffered, quiet (noreply) stores
    op("flush_all", c.flush_all)
    op("set a", lambda: c.set("a", b"alpha"))
    op("set s (str)", lambda: c.set("s", "text"))
    op("set i (int)", lambda: c.set("i", 42))
    op("set obj (pickled)", lambda: c.set("obj", {"x": [1, 2]}))
    op("get a", lambda: c.get("a"))
    op("get s", lambda: c.get("s"))
    op("get i", lambda: c.get("i"))
    op("get obj", lambda: c.get("obj"))
    op("get missing", lambda: c.get("missing"))
    op("get missing default", lambda: c.get("missing", b"dflt"))
    op("get_multi a i obj missing", lambda: c.get_multi(["a", "i", "obj", "missing"]))
    op("get_multi with prefix", lambda: c.get_multi(["1", "2", "3"], key_prefix="p"))
    op("set_multi", lambda: c.set_multi({"m1": b"one", "m2": b"two"}))
    op("set_multi prefix", lambda: c.set_multi({"1": b"p-one", "2": b"p-two"}, key_prefix="p"))
    op("get_multi with prefix after set", lambda: c.get_multi(["1", "2", "3"], key_prefix="p"))
    op("add_multi (one exists)", lambda: sorted(c.add_multi({"m1": b"x", "m3": b"three"})))
    op("get_multi m1 m2 m3", lambda: c.get_multi(["m1", "m2", "m3"]))
    op("set_multi 500, get_multi 600", lambda: (c.set_multi({"bulk%d" % i: b"v%d" % i * (i % 50) for i in range(500)}),
                                                 sha1_of(sorted(c.get_multi(["bulk%d" % i for i in range(600)]).items()))))
    op("set_multi 20 values of 100 KB", lambda: c.set_multi({"big%d" % i: large_value(100 * 1024 + i) for i in range(20)}))
    op("get_multi 20 values of 100 KB", lambda: all(v == large_value(100 * 1024 + int(k[3:]))
                                                     for k, v in c.get_multi(["big%d" % i for i in range(20)]).items()))
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
    print("gets a -> %s cas=%s" % (show(g[0]), cas1))
    op("cas a (current)", lambda: c.cas("a", b"swapped", cas1))
    op("cas a (stale)", lambda: c.cas("a", b"again", cas1))
    op("get a after cas", lambda: c.get("a"))
    op("cas changed after cas", lambda: c.gets("a")[1] != cas1)
    op("cas missing", lambda: c.cas("missing", b"x", cas1))
    op("gets missing", lambda: c.gets("missing"))

    op("delete a", lambda: c.delete("a"))
    op("delete a again", lambda: c.delete("a"))
    op("delete_multi m1 m2 missing", lambda: c.delete_multi(["m1", "m2", "missing"]))
    op("get m1", lambda: c.get("m1"))

    op("set n 10", lambda: c.set("n", b"10"))
    op("incr n 5", lambda: c.incr("n", 5))
    op("decr n 3", lambda: c.decr("n", 3))
    op("decr n 100 (floors at 0)", lambda: c.decr("n", 100))
    op("incr n (default 1)", lambda: c.incr("n"))
    op("set big 2^64-1", lambda: c.set("big", b"18446744073709551615"))
    op("incr big 1 (wraps)", lambda: c.incr("big", 1))
    op("incr missing", lambda: c.incr("missing", 1))
    op("decr missing", lambda: c.decr("missing", 1))
    op("incr c (non-numeric)", lambda: c.incr("c", 1))
    op("get c after failed incr", lambda: c.get("c"))
    op("incr i (int)", lambda: c.incr("i", 1))
    op("get i after incr", lambda: c.get("i"))
    op("incr_multi", lambda: c.incr_multi(["n", "i"], delta=2))
    op("get_multi n i after incr_multi", lambda: c.get_multi(["n", "i"]))

    op("touch c", lambda: c.touch("c", 100))
    op("touch missing", lambda: c.touch("missing", 100))

    big = large_value(LARGE)
    op("set large 500KB", lambda: c.set("large", big))
    op("get large", lambda: c.get("large"))
    op("get large equal", lambda: c.get("large") == big)
    op("set toolarge 2MB", lambda: c.set("toolarge", large_value(TOO_LARGE)))
    op("get toolarge", lambda: c.get("toolarge"))
    op("get c after too large", lambda: c.get("c"))

    bv = binary_value()
    op("set bin", lambda: c.set("bin", bv))
    op("get bin equal", lambda: c.get("bin") == bv)
    op("set empty", lambda: c.set("empty", b""))
    op("get empty", lambda: c.get("empty"))
    op("set unicode key", lambda: c.set("ключ-ü", b"value"))
    op("get unicode key", lambda: c.get("ключ-ü"))
    op("set key with space", lambda: c.set("has space", b"x"))
    op("get key with space", lambda: c.get("has space"))
    op("set key 250 chars", lambda: c.set("k" * 250, b"x"))
    op("get key 250 chars", lambda: c.get("k" * 250))
    op("set key 251 chars", lambda: c.set("k" * 251, b"x"))
    op("get key 251 chars", lambda: c.get("k" * 251))
    op("get c after bad keys", lambda: c.get("c"))

    op("set noreply (no_block)", lambda: nr.set("nr", b"quiet"))
    op("add noreply exists (no_block)", lambda: nr.add("nr", b"loud"))
    op("get nr (same connection)", lambda: nr.get("nr"))

    # Over 30 days a TTL is an absolute Unix time: one in the future, one in the past.
    op("set absolute expiry in 100 s", lambda: c.set("abs", b"x", time=int(time.time()) + 100))
    op("get absolute expiry in 100 s", lambda: c.get("abs"))
    op("set absolute expiry 100 s ago", lambda: c.set("past", b"x", time=int(time.time()) - 100))
    op("get absolute expiry 100 s ago", lambda: c.get("past"))
    op("set ttl %d" % TTL, lambda: c.set("ttl", b"short", time=TTL))
    op("get ttl now", lambda: c.get("ttl"))
    op("set touch-ttl (no expiry)", lambda: c.set("touchttl", b"t"))
    op("touch touch-ttl %d" % TTL, lambda: c.touch("touchttl", TTL))
    time.sleep(TTL_WAIT)
    op("get ttl after expiry", lambda: c.get("ttl"))
    op("get touch-ttl after expiry", lambda: c.get("touchttl"))

    st = c.get_stats()
    stats_lines("stats", st[0][1] if st else {})
    op("get_stats items non-empty", lambda: len(c.get_stats("items")[0][1]) > 0)
    op("get_stats settings maxbytes", lambda: c.get_stats("settings")[0][1].get("maxbytes"))
    op("flush_all", c.flush_all)
    op("get c after flush", lambda: c.get("c"))
    op("flush_all time=0", lambda: c.flush_all(time=0))
    # A delayed flush: the item is there until the delay has passed. memcached flushes what was stored up
    # to delay-1 s after the flush on its one-second clock, so with TTL+1 the read just after the flush is
    # never flushed however the clock ticks, and the read after TTL_WAIT always is.
    op("set fl", lambda: c.set("fl", b"until the flush"))
    op("flush_all time=%d" % (TTL + 1), lambda: c.flush_all(time=TTL + 1))
    op("get fl before the flush time", lambda: c.get("fl"))
    time.sleep(TTL_WAIT)
    op("get fl after the flush time", lambda: c.get("fl"))
    op("set fl again", lambda: c.set("fl", b"after"))
    op("get fl again", lambda: c.get("fl"))
    c.disconnect_all()
    nr.disconnect_all()


def sasl_scenario(addr, user, password):
    c = client(addr, username=user, password=password)
    op("auth: set", lambda: c.set("s", b"secret value"))
    op("auth: get", lambda: c.get("s"))
    op("auth: get_multi", lambda: c.get_multi(["s", "missing"]))
    op("auth: set_multi, get_multi", lambda: (c.set_multi({"q%d" % i: b"v" for i in range(50)}),
                                              len(c.get_multi(["q%d" % i for i in range(55)]))))
    op("auth: touch", lambda: c.touch("s", 100))
    op("auth: incr missing", lambda: c.incr("ctr", 1))
    op("auth: delete", lambda: c.delete("s"))
    op("auth: stats curr_items", lambda: c.get_stats()[0][1].get("curr_items"))
    op("auth: set s for the refused gets", lambda: c.set("s", b"kept secret"))
    c.disconnect_all()
    bad = client(addr, username=user, password=password + "-wrong")
    op("wrong password: get", lambda: bad.get("s"))
    op("wrong password: set", lambda: bad.set("s", b"x"))
    bad.disconnect_all()
    none = client(addr)
    refused("no credentials: get", lambda: none.get("s"))
    op("no credentials: set", lambda: none.set("s", b"x"))
    none.disconnect_all()


def main():
    if len(sys.argv) == 4:
        sasl_scenario(sys.argv[1], sys.argv[2], sys.argv[3])
    else:
        scenario(sys.argv[1])


if __name__ == "__main__":
    main()
