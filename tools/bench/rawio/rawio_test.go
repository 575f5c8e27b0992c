package rawio

import "testing"

func TestResolveSockaddr(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:11211", "localhost:11211", ":11211", "[::1]:11211", "0.0.0.0:1"} {
		if _, _, err := ResolveSockaddr(addr); err != nil {
			t.Errorf("%s: %v", addr, err)
		}
	}
	if _, _, err := ResolveSockaddr("no-port"); err == nil {
		t.Error("an address without a port was accepted")
	}
	if _, _, err := ResolveSockaddr("[fe80::1%no-such-interface]:1"); err == nil {
		t.Error("an unknown zone was accepted")
	}
}
