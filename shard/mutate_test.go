package shard

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/leasecached/leasecached/slab"
)

// liveItem is the chunk of key's live item (NilRef when there is none) and its state byte.
func liveItem(s *Store, key []byte) (slab.Ref, byte) {
	h := Hash(key)
	sh := s.shardOf(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	ref, b := sh.find(h, key, s.now())
	if b == nil {
		return slab.NilRef, 0
	}
	return ref, b[offState]
}

// refOf is the chunk of key's live item, or NilRef.
func refOf(s *Store, key []byte) slab.Ref {
	ref, _ := liveItem(s, key)
	return ref
}

// TestStoreOverwritesInPlace checks which stores over a live item rewrite its chunk (set, replace and cas,
// when the new item needs the chunk's own size class) and which take a new one (append and prepend, a
// different class, a chained value), and that either way the result is a fresh item: the new value, flags,
// exptime and CAS, not fetched, and statistics as if the old item had been replaced. With a data directory
// the same, with the item's seal counted in its size (undo.go).
func TestStoreOverwritesInPlace(t *testing.T) {
	const big = slab.ChunkMax + 100 // chained
	for _, dataDir := range []bool{false, true} {
		t.Run(map[bool]string{false: "memory", true: "data dir"}[dataDir], func(t *testing.T) {
			testStoreOverwrites(t, dataDir, big)
		})
	}
}

func testStoreOverwrites(t *testing.T, dataDir bool, big int) {
	for _, tc := range []struct {
		name            string
		oldLen, newLen  int
		oldFlags, flags uint32
		exp             int64
		mode            Mode
		inPlace         bool
		// dataInPlace: in place with a data directory too, where the seal's 4 bytes decide the class.
		dataInPlace bool
	}{
		{name: "set, same length", oldLen: 100, newLen: 100, mode: ModeSet, inPlace: true, dataInPlace: true},
		{name: "set, longer in the same class", oldLen: 100, newLen: 106, mode: ModeSet, inPlace: true},
		{name: "set, shorter in the same class", oldLen: 106, newLen: 100, mode: ModeSet, inPlace: true},
		{name: "set, flags added in the same class", oldLen: 100, newLen: 102, flags: 7, mode: ModeSet, inPlace: true},
		{name: "set, flags dropped in the same class", oldLen: 102, newLen: 100, oldFlags: 7, mode: ModeSet, inPlace: true},
		{name: "set, same length, new flags and exptime on both", oldLen: 100, newLen: 100, oldFlags: 1,
			flags: 0xdeadbeef, exp: 60, mode: ModeSet, inPlace: false, dataInPlace: true},
		{name: "set, empty value over empty value", oldLen: 0, newLen: 0, mode: ModeSet, inPlace: true, dataInPlace: true},
		{name: "replace, same length", oldLen: 100, newLen: 100, mode: ModeReplace, inPlace: true, dataInPlace: true},
		{name: "cas, same length", oldLen: 100, newLen: 100, mode: ModeCas, inPlace: true, dataInPlace: true},
		{name: "set, a larger class", oldLen: 100, newLen: 1000, mode: ModeSet},
		{name: "set, a smaller class", oldLen: 1000, newLen: 100, mode: ModeSet},
		{name: "append", oldLen: 100, newLen: 0, mode: ModeAppend},
		{name: "prepend", oldLen: 100, newLen: 0, mode: ModePrepend},
		{name: "set, chained, same length", oldLen: big, newLen: big, mode: ModeSet},
		{name: "set, chained to one chunk", oldLen: big, newLen: 100, mode: ModeSet},
		{name: "set, chained to one chunk of the head's class", oldLen: slab.ChunkMax - 10,
			newLen: slab.ChunkMax - 200, mode: ModeSet},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s *Store
			if dataDir {
				s = persistStore(t, t.TempDir(), nil, Config{})
				tc.inPlace = tc.dataInPlace
			} else {
				s, _ = newStore(t, Config{})
			}
			key := []byte("overwrite:key")
			other := []byte("overwrite:other") // a neighbour that must not change
			if r := s.Store(ModeSet, other, 5, 0, pattern(100, 9), 0); r != Stored {
				t.Fatalf("set neighbour: %v", r)
			}
			old := pattern(tc.oldLen, 1)
			if r := s.Store(ModeSet, key, tc.oldFlags, 0, old, 0); r != Stored {
				t.Fatalf("first set: %v", r)
			}
			_, info, _ := s.Get(nil, key)
			s.Get(nil, key) // fetched twice: memcached's active item
			ref := refOf(s, key)
			before := s.Stats()

			value := pattern(tc.newLen, 2)
			cas := uint64(0)
			if tc.mode == ModeCas {
				cas = info.Cas
			}
			if r := s.Store(tc.mode, key, tc.flags, tc.exp, value, cas); r != Stored {
				t.Fatalf("store: %v", r)
			}

			want, wantFlags, wantExp := value, tc.flags, tc.exp
			switch tc.mode {
			case ModeAppend:
				want, wantFlags, wantExp = append(old, value...), tc.oldFlags, 0
			case ModePrepend:
				want, wantFlags, wantExp = append(append([]byte(nil), value...), old...), tc.oldFlags, 0
			}
			if got := refOf(s, key) == ref; got != tc.inPlace {
				t.Errorf("stored in the old chunk: %v, want %v", got, tc.inPlace)
			}
			if ref, st := liveItem(s, key); ref == slab.NilRef || st&(flagFetched|flagActive|flagVisited|flagPinned) != 0 {
				t.Errorf("state %#x: the new item is not fresh", st)
			}
			got, info2, ok := s.Get(nil, key)
			if !ok || !bytes.Equal(got, want) || info2.Flags != wantFlags {
				t.Fatalf("get: %d bytes, flags %d, hit %v; want %d bytes, flags %d", len(got), info2.Flags, ok,
					len(want), wantFlags)
			}
			if wantExp != 0 && info2.Exptime != s.now()+wantExp || wantExp == 0 && info2.Exptime != 0 {
				t.Errorf("exptime %d, want %d from now", info2.Exptime, wantExp)
			}
			if info2.Cas <= info.Cas {
				t.Errorf("cas %d after %d: not a new CAS", info2.Cas, info.Cas)
			}
			after := s.Stats()
			if after.CurrItems != before.CurrItems || after.TotalItems != before.TotalItems+1 {
				t.Errorf("curr_items %d -> %d, total_items %d -> %d; want the same, one more",
					before.CurrItems, after.CurrItems, before.TotalItems, after.TotalItems)
			}
			checkByteStats(t, s, after)
			if v, info, ok := s.Get(nil, other); !ok || !bytes.Equal(v, pattern(100, 9)) || info.Flags != 5 {
				t.Errorf("the neighbour changed: %d bytes, flags %d, hit %v", len(v), info.Flags, ok)
			}
			for i := range s.shards {
				checkIndexInvariants(t, &s.shards[i])
			}
		})
	}
}

// checkByteStats checks st's bytes, and each class's mem_requested and number, against the items the
// shards index.
func checkByteStats(t *testing.T, s *Store, st Stats) {
	t.Helper()
	var total int64
	bytes := make([]int64, len(st.Classes))
	items := make([]int64, len(st.Classes))
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for _, e := range sh.idx.slots {
			if e != 0 {
				n, id := itemBytes(sh.chunk(entryRef(e))), sh.al.ClassOf(entryRef(e))
				total += n
				bytes[id] += n
				items[id]++
			}
		}
		sh.mu.Unlock()
	}
	if st.Bytes != total {
		t.Errorf("bytes %d, the items indexed hold %d", st.Bytes, total)
	}
	for id, c := range st.Classes {
		if c.MemRequested != bytes[id] || c.Number != items[id] {
			t.Errorf("class %d: mem_requested %d, number %d; its items hold %d bytes, number %d", c.ID,
				c.MemRequested, c.Number, bytes[id], items[id])
		}
	}
}

// TestOverwriteAfterStaleValue deletes a key (its value is kept as a stale value for lease-get), sets it
// again (a new chunk) and then overwrites it in place. overwrite does not look for a stale value to drop,
// because the set that linked the item dropped it: no stale value may be left afterwards.
func TestOverwriteAfterStaleValue(t *testing.T) {
	s, _ := newStore(t, Config{})
	key := []byte("k")
	var refs [3]slab.Ref
	for i := range refs {
		if r := s.Store(ModeSet, key, 0, 0, []byte(fmt.Sprintf("value-%d", i)), 0); r != Stored {
			t.Fatalf("set %d: %v", i, r)
		}
		refs[i] = refOf(s, key)
		if i == 0 {
			if r := s.Delete(key); r != Deleted {
				t.Fatalf("delete: %v", r)
			}
			if st := s.Stats(); st.StaleItems != 1 {
				t.Fatalf("stale items after the delete: %d, want 1", st.StaleItems)
			}
		}
	}
	if refs[2] != refs[1] {
		t.Fatal("the last set was not an overwrite in place")
	}
	if v, _ := mustGet(t, s, "k"); v != "value-2" {
		t.Fatalf("get: %q", v)
	}
	if st := s.Stats(); st.CurrItems != 1 || st.StaleItems != 0 {
		t.Fatalf("curr_items %d, stale items %d; want 1, 0", st.CurrItems, st.StaleItems)
	}
}
