package slab

import "testing"

func TestDefaultClassTable(t *testing.T) {
	c := DefaultClasses()
	if c.Size(0) != MinChunk {
		t.Fatalf("first class %d, want %d", c.Size(0), MinChunk)
	}
	if c.Size(c.Largest()) != ChunkMax {
		t.Fatalf("last class %d, want %d", c.Size(c.Largest()), ChunkMax)
	}
	for i := 0; i < c.Count(); i++ {
		if c.Size(i)%ChunkAlign != 0 {
			t.Errorf("class %d size %d not aligned", i, c.Size(i))
		}
		if i > 0 && c.Size(i) <= c.Size(i-1) {
			t.Errorf("class %d size %d not above %d", i, c.Size(i), c.Size(i-1))
		}
		if i > 0 && i < c.Largest() && float64(c.Size(i)) > float64(c.Size(i-1))*GrowthFactor+ChunkAlign {
			t.Errorf("class %d grows too fast: %d after %d", i, c.Size(i), c.Size(i-1))
		}
		if c.PerPage(i) != PageSize/c.Size(i) {
			t.Errorf("class %d per page %d", i, c.PerPage(i))
		}
	}
	for i := 1; i < c.Count() && c.Size(i) <= FineUpTo; i++ {
		if c.Size(i)-c.Size(i-1) != ChunkAlign {
			t.Errorf("class %d size %d: not one step above %d below FineUpTo", i, c.Size(i), c.Size(i-1))
		}
	}
	// memcached's class ids stop at 63 (MAX_NUMBER_OF_SLAB_CLASSES - 1): stats cachedump refuses more.
	if c.Count() > 63 || c.Count() < 30 {
		t.Fatalf("unexpected class count %d", c.Count())
	}
}

func TestClassFor(t *testing.T) {
	c := DefaultClasses()
	for _, tc := range []struct {
		n    int
		want int // chunk size, 0 = no class
	}{
		{1, MinChunk},
		{MinChunk, MinChunk},
		{MinChunk + 1, c.Size(1)},
		{c.Size(5), c.Size(5)},
		{c.Size(5) + 1, c.Size(6)},
		{ChunkMax, ChunkMax},
		{ChunkMax + 1, 0},
	} {
		id, ok := c.For(tc.n)
		if tc.want == 0 {
			if ok {
				t.Errorf("For(%d) = class %d, want none", tc.n, id)
			}
			continue
		}
		if !ok || c.Size(id) != tc.want {
			t.Errorf("For(%d) = %d (ok=%v), want size %d", tc.n, c.Size(id), ok, tc.want)
		}
	}
	// Exhaustive agreement with a linear scan, on tables whose fine-spaced start (where For divides instead
	// of searching) is long, short or absent.
	for _, cfg := range []struct {
		min, max int
		factor   float64
	}{
		{MinChunk, ChunkMax, GrowthFactor},
		{16, 4096, 2},
		{248, 8192, 1.1},
		{256, 1 << 16, GrowthFactor},
		{48, 200, GrowthFactor},
		{48, 48, GrowthFactor},
	} {
		c, err := NewClasses(cfg.min, cfg.max, cfg.factor)
		if err != nil {
			t.Fatal(err)
		}
		for n := 0; n <= cfg.max+1; n += 1 + n/4096*7 {
			id, ok := c.For(n)
			lin := 0
			for lin < c.Count() && c.Size(lin) < n {
				lin++
			}
			if ok != (lin < c.Count()) || ok && id != lin {
				t.Fatalf("table %v: For(%d) = %d, %v; linear scan %d of %d", cfg, n, id, ok, lin, c.Count())
			}
		}
	}
}

func TestNewClassesErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		min, max int
		factor   float64
	}{
		{"unaligned min", 50, ChunkMax, 1.25},
		{"tiny min", 8, ChunkMax, 1.25},
		{"max below min", 64, 48, 1.25},
		{"max above page", 48, 2 * PageSize, 1.25},
		{"factor 1", 48, ChunkMax, 1},
		{"too many classes", 48, ChunkMax, 1.001},
	} {
		if _, err := NewClasses(tc.min, tc.max, tc.factor); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	if _, err := NewClasses(48, ChunkMax, 1.08); err != nil {
		t.Errorf("finer factor refused: %v", err)
	}
}
