#!/usr/bin/env python3
"""pymemcache, unchanged, authenticating to a server started with -Y (memcached's text-protocol auth).

Usage: pymemcache_auth.py host:port USER PASSWORD [CA_FILE]

The -Y handshake is an ordinary set whose data is "user password", which any client can send; before it,
every command is refused. With CA_FILE the connection is TLS (tls_context), as -Y is meant to be used off
loopback. Prints one line per operation: an error reply shows as the exception pymemcache raises.
"""
import ssl
import sys

from pymemcache.client.base import Client

TIMEOUT = 5


def attempt(name, fn):
    try:
        print(name, fn())
    except Exception as e:  # noqa: BLE001 - the server's reply is what is compared
        print(name, "raised", type(e).__name__, e)


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    user, password = sys.argv[2], sys.argv[3]
    ctx = None
    if len(sys.argv) > 4:
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=sys.argv[4])
    c = Client((host, int(port)), tls_context=ctx, default_noreply=False,
               connect_timeout=TIMEOUT, timeout=TIMEOUT)
    attempt("get before auth", lambda: c.get("k"))
    attempt("auth wrong password", lambda: c.set("auth", (user + " wrong").encode()))
    attempt("set before auth", lambda: c.set("k", b"v"))
    attempt("auth", lambda: c.set("auth", (user + " " + password).encode()))
    attempt("set", lambda: c.set("k", b"v"))
    attempt("get", lambda: c.get("k"))
    attempt("get_many", lambda: sorted(c.get_many(["k", "missing"]).items()))
    attempt("delete", lambda: c.delete("k"))
    c.close()


if __name__ == "__main__":
    main()
