package main

import (
	"slices"
	"testing"
)

func TestGenChoices(t *testing.T) {
	p1 := workload{Pipeline: 1}
	p16 := workload{Pipeline: 16}
	cases := []struct {
		name  string
		fixed int
		w     workload
		want  []int
	}{
		{"p1 automatic", 0, p1, []int{defaultGenThreads(1)}},
		{"p16 automatic tries both", 0, p16, []int{1, 2}},
		{"fixed at p1", 3, p1, []int{3}},
		{"fixed at p16", 1, p16, []int{1}},
	}
	for _, tc := range cases {
		got := compareOptions{genThreads: tc.fixed}.genChoices(tc.w)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := fixedGen(p16); !slices.Equal(got, []int{defaultGenThreads(16)}) {
		t.Errorf("fixedGen(p16) = %v", got)
	}
}

func TestMatrixBestPicksHighestMedianPerServer(t *testing.T) {
	runs := func(ops ...float64) []*loadResult {
		var rs []*loadResult
		for _, o := range ops {
			rs = append(rs, &loadResult{OpsPerSec: o})
		}
		return rs
	}
	m := matrixResults{}
	for g, ops := range map[int][]float64{1: {100, 300, 200}, 2: {500, 150, 160}} { // medians 200 and 160
		for _, r := range runs(ops...) {
			m.add("w", "mc", g, r)
		}
	}
	for g, ops := range map[int][]float64{1: {100, 110, 120}, 2: {90, 400, 130}} { // medians 110 and 130
		for _, r := range runs(ops...) {
			m.add("w", "lc", g, r)
		}
	}
	for _, r := range runs(50, 50) {
		m.add("w", "tie", 2, r)
		m.add("w", "tie", 1, r)
	}
	cases := []struct {
		server     string
		wantG      int
		wantMedian float64
	}{
		{"mc", 1, 200}, // the best median, not the best single run (500 under 2 threads)
		{"lc", 2, 130},
		{"tie", 1, 50}, // a tie goes to fewer threads
		{"absent", 0, 0},
	}
	for _, tc := range cases {
		g, rs := m.best("w", tc.server)
		if g != tc.wantG || median(rs, opsOf) != tc.wantMedian {
			t.Errorf("%s: best %d threads with median %v, want %d and %v", tc.server, g, median(rs, opsOf),
				tc.wantG, tc.wantMedian)
		}
	}
}
