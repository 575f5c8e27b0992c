//go:build linux

package slab

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// journalDir makes a data directory's meta and items files holding four pages (0xA0+id each) and their
// records, and returns them open.
func journalDir(t *testing.T) (dir string, meta, items *os.File) {
	t.Helper()
	dir = t.TempDir()
	var err error
	meta, err = os.OpenFile(filepath.Join(dir, "meta"), os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(t, err)
	items, err = os.OpenFile(filepath.Join(dir, "items"), os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(t, err)
	t.Cleanup(func() { _ = meta.Close(); _ = items.Close() })
	for id := range uint32(4) {
		_, err = items.WriteAt(bytes.Repeat([]byte{0xA0 + byte(id)}, PageSize), int64(id)*PageSize)
		require.NoError(t, err)
		_, err = meta.WriteAt(binary.LittleEndian.AppendUint64(nil, encodeRecord(3, 0)), int64(recordOffset(id)))
		require.NoError(t, err)
	}
	return dir, meta, items
}

// journalState is what meta and items hold: each page's record and first byte (0 for a hole).
func journalState(t *testing.T, meta, items *os.File, pages int) (recs []uint64, first []byte) {
	t.Helper()
	for id := range uint32(pages) {
		b := make([]byte, recordBytes)
		_, _ = meta.ReadAt(b, int64(recordOffset(id)))
		recs = append(recs, binary.LittleEndian.Uint64(b))
		p := make([]byte, PageSize)
		_, _ = items.ReadAt(p, int64(id)*PageSize)
		require.True(t, bytes.Count(p, p[:1]) == PageSize, "page %d is one byte throughout", id)
		first = append(first, p[0])
	}
	return recs, first
}

// testMove is a journal entry with its image (nil: none).
type testMove struct {
	id  uint32
	rec uint64
	img []byte
}

// journalBytes is the journal file of moves for seal key key, as commits write it (journalWriter).
func journalBytes(moves []testMove, key uint64) []byte {
	dir, err := os.MkdirTemp("", "journal-test-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	w, _ := writeTestJournal(dir, nil, nil, moves, key)
	if err := w.seal(); err != nil {
		panic(err)
	}
	_ = w.f.Close()
	j, err := os.ReadFile(w.path)
	if err != nil {
		panic(err)
	}
	return j
}

// writeTestJournal starts the journal of moves in data directory dir (openJournal) and writes their images.
func writeTestJournal(dir string, meta, items *os.File, moves []testMove, key uint64) (*journalWriter, []movedPage) {
	pages := make([]movedPage, len(moves))
	for i, m := range moves {
		pages[i] = movedPage{id: m.id, rec: m.rec, image: m.img != nil}
	}
	w := openJournal(dir, key, meta, items, pages)
	for _, m := range moves {
		if m.img != nil {
			w.write(m.img)
		}
	}
	return w, pages
}

// The journal (rule 12): a whole one is applied by the next start, once; one cut short or damaged
// anywhere is dropped, and the files keep what they held.
func TestJournalReplay(t *testing.T) {
	moves := []testMove{
		{id: 1, rec: encodeRecord(7, 0), img: bytes.Repeat([]byte{0xB1}, PageSize)}, // moved to class 7
		{id: 2},                          // released: punched
		{id: 4, rec: encodeRecord(3, 0)}, // taken since: its record only
		{id: 0, rec: encodeRecord(5, 0), img: bytes.Repeat([]byte{0xB0}, PageSize)},
	}
	whole := journalBytes(moves, 77)
	unsealed := func() []byte { // written whole, killed before its check
		dir := t.TempDir()
		w, _ := writeTestJournal(dir, nil, nil, moves, 77)
		require.NoError(t, w.err)
		require.NoError(t, w.f.Close())
		j, err := os.ReadFile(w.path)
		require.NoError(t, err)
		require.Len(t, j, len(whole))
		return j
	}()
	_, meta0, items0 := journalDir(t)
	_, before := journalState(t, meta0, items0, 4)
	applied := func() ([]uint64, []byte) {
		return []uint64{encodeRecord(5, 0), encodeRecord(7, 0), 0, encodeRecord(3, 0), encodeRecord(3, 0)},
			[]byte{0xB0, 0xB1, 0, 0xA3, 0}
	}
	for _, tc := range []struct {
		name    string
		journal []byte
		applied bool
	}{
		{"whole", whole, true},
		{"empty", nil, false},
		{"header only", whole[:journalHeader], false},
		{"written but not sealed", unsealed, false},
		{"cut in the entries", whole[:journalHeader+journalEntry], false},
		{"cut in an image", whole[:len(whole)-PageSize/2], false},
		{"cut at an image", whole[:len(whole)-PageSize], false},
		{"a byte of an image flipped", flip(whole, len(whole)-1), false},
		{"a byte of an entry flipped", flip(whole, journalHeader+3), false},
		{"the count flipped", flip(whole, 8), false},
		{"longer", append(append([]byte(nil), whole...), make([]byte, 4096)...), false},
		{"another directory's", journalBytes(moves, 78), false}, // its seal key: emptied since
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, meta, items := journalDir(t)
			require.NoError(t, os.WriteFile(filepath.Join(dir, journalFile), tc.journal, 0o600))
			wantRecs, wantFirst := []uint64{encodeRecord(3, 0), encodeRecord(3, 0), encodeRecord(3, 0), encodeRecord(3, 0), 0}, append(before, 0)
			if tc.applied {
				wantRecs, wantFirst = applied()
			}
			for range 2 { // a second start finds the journal emptied
				require.NoError(t, replayJournal(dir, 77, meta, items))
				recs, first := journalState(t, meta, items, 5)
				require.Equal(t, wantRecs, recs)
				require.Equal(t, wantFirst, first)
				fi, err := os.Stat(filepath.Join(dir, journalFile))
				require.NoError(t, err)
				require.Zero(t, fi.Size(), "the journal, after the start")
			}
		})
	}
}

// A journal that cannot be read is neither applied nor dropped: whole, it is still owed to the files.
func TestJournalReadError(t *testing.T) {
	j := journalBytes([]testMove{{id: 1, rec: encodeRecord(7, 0), img: bytes.Repeat([]byte{0xB1}, PageSize)}}, 9)
	for _, failFrom := range []int64{0, journalHeader, int64(len(j)) - PageSize} {
		r := &failingReader{r: bytes.NewReader(j), from: failFrom}
		_, _, ok, err := readJournal(r, int64(len(j)))
		require.Error(t, err, "reads failing from byte %d", failFrom)
		require.False(t, ok)
	}
	_, _, ok, err := readJournal(bytes.NewReader(j), int64(len(j)))
	require.NoError(t, err)
	require.True(t, ok)
}

// failingReader fails every read that reaches byte from.
type failingReader struct {
	r    *bytes.Reader
	from int64
}

func (f *failingReader) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.from {
		return 0, errors.New("input/output error")
	}
	return f.r.ReadAt(p, off)
}

func flip(b []byte, at int) []byte {
	out := append([]byte(nil), b...)
	out[at] ^= 0x10
	return out
}

// FuzzParseJournal: a journal file's bytes, whatever they are, parse to pages within range or to nothing,
// without a panic.
func FuzzParseJournal(f *testing.F) {
	f.Add(journalBytes([]testMove{{id: 3, rec: encodeRecord(2, 1)}}, 5))
	f.Add(journalBytes([]testMove{{id: 1, rec: encodeRecord(2, 0), img: make([]byte, PageSize)}, {id: 9}}, 6))
	f.Add([]byte(journalMagic))
	f.Fuzz(func(t *testing.T, j []byte) {
		pages, key, ok, err := readJournal(bytes.NewReader(j), int64(len(j)))
		require.NoError(t, err)
		if !ok {
			return
		}
		moves := make([]testMove, len(pages))
		for i, p := range pages {
			require.Less(t, p.id, uint32(MaxPages))
			moves[i] = testMove{id: p.id, rec: p.rec}
			if p.image {
				require.LessOrEqual(t, p.at+PageSize, int64(len(j)))
				moves[i].img = j[p.at : p.at+PageSize]
			}
		}
		require.Equal(t, j, journalBytes(moves, key), "a journal that reads is what its pages lay out")
	})
}

// A journal left by a commit whose writes in place failed is applied by the next commit before it writes
// its own (which would otherwise replace it, half applied); and a directory that starts empty drops its
// journal, which would otherwise be replayed over what is stored after it.
func TestJournalLeftOver(t *testing.T) {
	t.Run("the next commit applies it first", func(t *testing.T) {
		dir, meta, items := journalDir(t)
		left := []testMove{{id: 1, rec: encodeRecord(7, 0), img: bytes.Repeat([]byte{0xB1}, PageSize)}}
		require.NoError(t, os.WriteFile(filepath.Join(dir, journalFile), journalBytes(left, 9), 0o600))
		w, next := writeTestJournal(dir, meta, items, []testMove{{id: 2}}, 9)
		_, err := commitJournal(dir, w, meta, items, next, nil)
		require.NoError(t, err)
		recs, first := journalState(t, meta, items, 4)
		require.Equal(t, []uint64{encodeRecord(3, 0), encodeRecord(7, 0), 0, encodeRecord(3, 0)}, recs)
		require.Equal(t, []byte{0xA0, 0xB1, 0, 0xA3}, first)
	})
	t.Run("a directory that starts empty drops it", func(t *testing.T) {
		dir := t.TempDir()
		c := DefaultClasses()
		b, _, err := OpenBacking(dir, Identity{Shards: 1, Classes: c}, BackingOptions{})
		require.NoError(t, err)
		key := b.SealKey()
		require.NoError(t, b.Close())
		moves := []testMove{{id: 0, rec: encodeRecord(3, 0), img: bytes.Repeat([]byte{0xB0}, PageSize)}}
		require.NoError(t, os.WriteFile(filepath.Join(dir, journalFile), journalBytes(moves, key), 0o600))
		b, reason, err := OpenBacking(dir, Identity{Shards: 2, Classes: c}, BackingOptions{})
		require.NoError(t, err)
		require.NotEmpty(t, reason)
		require.NoFileExists(t, filepath.Join(dir, journalFile))
		require.Empty(t, b.Records(), "the journal's page")
		require.NoError(t, b.Close())
	})
}
