//go:build linux

package slab

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/zeebo/xxh3"
)

// The journal: how a sync with a live copy changes pages' records, and the pages a page move
// rewrote, in the directory without a reboot in the middle losing what the moves kept
// (doc/design/restart-live.md rule 12). A move copies items out of a page and gives the page to another
// class (or back to the arena); the copies may land in a page that a move rewrites too. No order of
// writes in place keeps every item whole on one side or the other, so the records that change and the
// whole pages moved are first written to DIR/journal and synced, then in place, then the journal is
// emptied. A start replays a whole journal before anything reads the files (replayJournal), and so does
// the next commit, before it writes its own; one cut short fails its check and is dropped, the files then
// holding what they held before the sync began. A journal names the directory's seal key, which changes
// whenever the directory starts empty: one left by an earlier life of it (a start that failed to apply
// it and started empty, a build that knows no journal) is never replayed over newer pages.
//
//	header  journalHeader bytes: magic, entries, images, the body's length, the XXH3 of the whole file
//	        but these 8 bytes (journalSum), the seal key, zeros
//	entries one journalEntry each: page id, flags (entryImage: its page follows), its record
//	images  from the first PageSize boundary after the entries, a page each for the entries flagged, in order
const (
	journalFile   = "journal"
	journalMagic  = "LCJRNL\x00\x01"
	journalHeader = 4096
	journalEntry  = 16
	entryImage    = 1
)

// movedPage is a journal entry: page id's record in the directory from now on, and, when image is not nil,
// its contents (PageSize bytes); a page whose record is not in use and has no image is punched.
type movedPage struct {
	id    uint32
	rec   uint64
	image []byte
}

// layoutJournal makes the journal file of pages, for directory seal key key, but for the contents of
// the pages with an image (not nil), which it points at their places in it, for the caller to fill
// (sealJournal then ends it): the images are copied once.
func layoutJournal(pages []movedPage, key uint64) []byte {
	images := 0
	for _, p := range pages {
		if p.image != nil {
			images++
		}
	}
	table := journalHeader + len(pages)*journalEntry
	start := (table + PageSize - 1) / PageSize * PageSize
	if images == 0 {
		start = table
	}
	out := make([]byte, start+images*PageSize)
	le := binary.LittleEndian
	at := start
	for i := range pages {
		p := &pages[i]
		e := out[journalHeader+i*journalEntry:]
		le.PutUint32(e, p.id)
		le.PutUint64(e[8:], p.rec)
		if p.image != nil {
			le.PutUint32(e[4:], entryImage)
			p.image = out[at : at+PageSize : at+PageSize]
			at += PageSize
		}
	}
	copy(out, journalMagic)
	le.PutUint32(out[8:], uint32(len(pages)))
	le.PutUint32(out[12:], uint32(images))
	le.PutUint64(out[16:], uint64(len(out)-journalHeader))
	le.PutUint64(out[32:], key)
	return out
}

// sealJournal ends journal file contents j, its images filled: its check.
func sealJournal(j []byte) { binary.LittleEndian.PutUint64(j[24:], journalSum(j)) }

// journalBytes is the journal file of pages for seal key key, their images copied in.
func journalBytes(pages []movedPage, key uint64) []byte {
	laid := slices.Clone(pages)
	j := layoutJournal(laid, key)
	for i, p := range pages {
		copy(laid[i].image, p.image)
	}
	sealJournal(j)
	return j
}

// journalSum is the check of journal file contents j: every byte but those that hold it.
func journalSum(j []byte) uint64 {
	h := xxh3.New()
	_, _ = h.Write(j[:24])
	_, _ = h.Write(j[32:])
	return h.Sum64()
}

// parseJournal reads the pages of journal file contents j and the seal key it names; ok is false when j
// is not a whole journal (cut short by a reboot, damaged, or empty). The images are slices of j.
func parseJournal(j []byte) (pages []movedPage, key uint64, ok bool) {
	le := binary.LittleEndian
	if len(j) < journalHeader || string(j[:len(journalMagic)]) != journalMagic || le.Uint64(j[24:]) != journalSum(j) {
		return nil, 0, false
	}
	n, images, body := int(le.Uint32(j[8:])), int(le.Uint32(j[12:])), le.Uint64(j[16:])
	if body != uint64(len(j)-journalHeader) {
		return nil, 0, false
	}
	table := journalHeader + n*journalEntry
	start := table
	if images > 0 {
		start = (table + PageSize - 1) / PageSize * PageSize
	}
	if n > MaxPages || start+images*PageSize != len(j) {
		return nil, 0, false
	}
	at := start
	for i := range n {
		e := j[journalHeader+i*journalEntry:]
		p := movedPage{id: le.Uint32(e), rec: le.Uint64(e[8:])}
		if p.id >= MaxPages {
			return nil, 0, false
		}
		if le.Uint32(e[4:])&entryImage != 0 {
			if at+PageSize > len(j) {
				return nil, 0, false
			}
			p.image = j[at : at+PageSize : at+PageSize]
			at += PageSize
		}
		pages = append(pages, p)
	}
	return pages, le.Uint64(j[32:]), at == len(j)
}

// commitMoves makes pages the directory's (dir, with seal key key, its files meta and items): j, their
// journal (layoutJournal, sealJournal), written and synced, then the pages in place, synced, then the
// journal emptied. A journal left by a commit whose writes in place failed is applied first. step, when
// not nil, is called after each sync. written counts the bytes of pages written in place.
func commitMoves(dir string, key uint64, meta, items *os.File, pages []movedPage, j []byte, step func(string)) (written int64, err error) {
	if len(pages) == 0 {
		return 0, nil
	}
	if err := replayJournal(dir, key, meta, items); err != nil {
		return 0, err
	}
	path := filepath.Join(dir, journalFile)
	if err := writeSynced(path, j); err != nil {
		_ = os.Truncate(path, 0) // the last one was applied: nothing is lost with it
		return 0, err
	}
	syncDir(dir) // its name, the first time: kept from then on, emptied rather than removed
	if step != nil {
		step("journal")
	}
	for _, p := range pages {
		if p.image != nil {
			written += PageSize
		}
	}
	if err := applyMoves(meta, items, pages); err != nil {
		return written, err // the journal stays, for the next start or sync to apply again
	}
	if step != nil {
		step("applied")
	}
	return written, endJournal(path)
}

// recInUseOf says whether page record rec is whole and names a page in use.
func recInUseOf(rec uint64) bool {
	_, _, ok := decodeRecord(rec)
	return ok
}

// applyMoves writes pages in place in meta and items and syncs both.
func applyMoves(meta, items *os.File, pages []movedPage) error {
	var errs []error
	rec := make([]byte, recordBytes)
	for _, p := range pages {
		binary.LittleEndian.PutUint64(rec, p.rec)
		if _, err := meta.WriteAt(rec, int64(recordOffset(p.id))); err != nil {
			errs = append(errs, err)
		}
		off := int64(p.id) * PageSize
		switch {
		case p.image != nil:
			if _, err := items.WriteAt(p.image, off); err != nil {
				errs = append(errs, err)
			}
		case !recInUseOf(p.rec):
			if st, err := items.Stat(); err == nil && st.Size() > off {
				errs = append(errs, punchFile(items, off, PageSize))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return errors.Join(items.Sync(), meta.Sync())
}

// endJournal empties the journal at path, durably: a later sync changes pages in place only after this,
// so that no start replays an older journal over them.
func endJournal(path string) error {
	if err := os.Truncate(path, 0); err != nil && !os.IsNotExist(err) {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	return f.Sync()
}

// replayJournal applies data directory dir's journal to its files meta and items, when it is whole and
// names seal key key, and empties it: the files are then as the sync that wrote it left them. Another
// journal is dropped.
func replayJournal(dir string, key uint64, meta, items *os.File) error {
	path := filepath.Join(dir, journalFile)
	j, err := os.ReadFile(path)
	if err != nil || len(j) == 0 {
		return nil
	}
	pages, named, ok := parseJournal(j)
	if ok && named == key { // a page written past the file's end grows it
		if err := applyMoves(meta, items, pages); err != nil {
			return fmt.Errorf("slab: replaying %s: %w", path, err)
		}
	}
	return endJournal(path)
}

// dropJournal removes data directory dir's journal, for a directory that starts empty.
func dropJournal(dir string) {
	if os.Remove(filepath.Join(dir, journalFile)) == nil {
		syncDir(dir)
	}
}

// writeSynced writes path whole and syncs it.
func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncDir makes the names in directory dir durable, where its file system can.
func syncDir(dir string) {
	if f, err := os.Open(dir); err == nil {
		_ = f.Sync()
		_ = f.Close()
	}
}
