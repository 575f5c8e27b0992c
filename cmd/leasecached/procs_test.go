package main

import "testing"

func TestProcsFor(t *testing.T) {
	cases := []struct {
		name                  string
		threads, current, out int
		envSet                bool
	}{
		{name: "loops equal CPUs get one spare P", threads: 2, current: 2, out: 3},
		{name: "more loops than CPUs", threads: 8, current: 2, out: 9},
		{name: "a spare P already exists", threads: 2, current: 16, out: 16},
		{name: "exactly one spare", threads: 3, current: 4, out: 4},
		{name: "GOMAXPROCS from the environment wins", threads: 2, current: 2, envSet: true, out: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := procsFor(tc.threads, tc.envSet, tc.current); got != tc.out {
				t.Fatalf("procsFor(%d, %v, %d) = %d, want %d", tc.threads, tc.envSet, tc.current, got, tc.out)
			}
		})
	}
}
