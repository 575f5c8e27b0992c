package shard

import "testing"

func TestBump(t *testing.T) {
	const t0, now = 1000, 1005
	cases := []struct {
		name      string
		state     byte
		wantState byte
		wantTime  uint32
	}{
		{"first read marks fetched", kindHead, kindHead | flagFetched | flagVisited, t0},
		{"second read moves the time, marks active", kindHead | flagFetched,
			kindHead | flagFetched | flagVisited | flagActive, now},
		{"the CLOCK hand's clear is undone", kindHead | flagFetched | flagActive,
			kindHead | flagFetched | flagVisited | flagActive, now},
		{"a read of an active, visited item writes nothing, not even the time", kindHead | flagFetched |
			flagVisited | flagActive, kindHead | flagFetched | flagVisited | flagActive, t0},
		{"other bits are kept", kindHead | flagPinned | flagChained,
			kindHead | flagPinned | flagChained | flagFetched | flagVisited, t0},
	}
	for _, tc := range cases {
		b := make([]byte, headerMax)
		b[offState] = tc.state
		le.PutUint32(b[offTime:], t0)
		bump(b, now)
		if b[offState] != tc.wantState || itemTime(b) != tc.wantTime {
			t.Errorf("%s: state %#x time %d, want %#x and %d", tc.name, b[offState], itemTime(b), tc.wantState,
				tc.wantTime)
		}
	}
}
