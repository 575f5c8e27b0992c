#!/usr/bin/env python3
"""A short scenario through pymemcache over TLS (its tls_context argument).

Usage: pymemcache_tls.py host:port CA_FILE [CERT_FILE KEY_FILE]

Prints one line per operation. A failure to connect, to complete the handshake
or to read the first reply prints "refused" and stops: the exception differs
between servers (an alert from OpenSSL or from Go's crypto/tls surfaces as an
ssl.SSLError, a plain close as a pymemcache error), so only the fact is
compared; the exception goes to stderr for the record.
"""
import ssl
import sys

from pymemcache.client.base import Client

# Socket timeouts in seconds: loopback, generous, but bounded.
TIMEOUT = 5


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=sys.argv[2])
    if len(sys.argv) > 4:
        ctx.load_cert_chain(sys.argv[3], sys.argv[4])
    c = Client((host, int(port)), tls_context=ctx, default_noreply=False,
               connect_timeout=TIMEOUT, timeout=TIMEOUT)
    try:
        # The first operation carries the handshake; under TLS 1.3 a refused
        # client certificate shows only when the first reply is read.
        print("set", c.set("tls:a", b"hello"))
    except Exception as e:  # noqa: BLE001 - any failure is the same outcome here
        print("refused")
        print("first operation failed: %s: %s" % (type(e).__name__, e), file=sys.stderr)
        return
    print("get", c.get("tls:a"))
    print("add existing", c.add("tls:a", b"x"))
    print("incr missing", c.incr("tls:n", 1))
    c.set("tls:n", b"41")
    print("incr", c.incr("tls:n", 1))
    big = bytes(i % 251 for i in range(100000))
    print("set big", c.set("tls:big", big))
    print("get big intact", c.get("tls:big") == big)
    print("get_many", sorted(c.get_many(["tls:a", "tls:n", "tls:missing"]).items()))
    print("delete", c.delete("tls:a"))
    print("get after delete", c.get("tls:a"))
    c.close()


if __name__ == "__main__":
    main()
