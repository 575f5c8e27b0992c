"""Plain get/set readers of one hot key through pymemcache (see ../README.md, "Herd").

Usage: pymemcache_herd.py HOST:PORT READERS SECONDS

Each reader thread loops: get the key; on a miss, "query the database" (100 ms), then set the key with
a 2 s TTL. Every refill prints "refill <unix ms>"; the Go test groups them into one episode per expiry.
Nothing here knows about grace or hold: the client is unchanged.
"""
import random
import sys
import threading
import time

from pymemcache.client.base import Client

KEY = "herd:hot"
REFILL = 0.1
TTL = 2


def reader(addr, until, lock):
    host, port = addr.rsplit(":", 1)
    c = Client((host, int(port)), connect_timeout=5, timeout=10)
    while time.time() < until:
        if c.get(KEY) is None:
            t = int(time.time() * 1000)
            time.sleep(REFILL)
            c.set(KEY, b"fresh", expire=TTL)
            with lock:
                print("refill %d" % t, flush=True)
        time.sleep(random.uniform(0.005, 0.015))
    c.close()


def main():
    addr, readers, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    until = time.time() + seconds
    lock = threading.Lock()
    threads = [threading.Thread(target=reader, args=(addr, until, lock)) for _ in range(readers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("done")


main()
