//go:build linux

package slab

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

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

// movedPage is a journal entry: page id's record in the directory from now on, and, when image is set,
// its contents, PageSize bytes at at in the journal file; a page whose record is not in use and has no
// image is punched.
type movedPage struct {
	id    uint32
	rec   uint64
	image bool
	at    int64
}

// journalTable is the journal file of pages for directory seal key key up to the end of its entries: the
// header, its check not yet known (journalWriter.seal), and the entries; zeros follow up to the images'
// PageSize boundary, start. It sets where each image goes (at); they follow in the order of pages.
func journalTable(pages []movedPage, key uint64) (table []byte, start int) {
	images := 0
	for _, p := range pages {
		if p.image {
			images++
		}
	}
	start = imagesStart(len(pages), images)
	out := make([]byte, journalHeader+len(pages)*journalEntry)
	le := binary.LittleEndian
	at := start
	for i := range pages {
		p := &pages[i]
		e := out[journalHeader+i*journalEntry:]
		le.PutUint32(e, p.id)
		le.PutUint64(e[8:], p.rec)
		if p.image {
			le.PutUint32(e[4:], entryImage)
			p.at = int64(at)
			at += PageSize
		}
	}
	copy(out, journalMagic)
	le.PutUint32(out[8:], uint32(len(pages)))
	le.PutUint32(out[12:], uint32(images))
	le.PutUint64(out[16:], uint64(at-journalHeader))
	le.PutUint64(out[32:], key)
	return out, start
}

// imagesStart is where the images of a journal of n entries, images of them with an image, begin.
func imagesStart(n, images int) int {
	table := journalHeader + n*journalEntry
	if images == 0 {
		return table
	}
	return (table + PageSize - 1) / PageSize * PageSize
}

// journalWriter writes a journal file in order, its images a page at a time, so that a commit holds none
// of them in memory, however many pages moved; the check covers every byte but its own (journalSum).
type journalWriter struct {
	path string
	f    *os.File
	h    *xxh3.Hasher
	err  error  // the first error: what follows it is not written
	page []byte // writePage's copy of a page
}

// openJournal starts the journal of pages in data directory dir (seal key key, files meta and items), up
// to its images, which the caller then writes in order (write, zeros) before it commits it
// (commitJournal). A journal left by a commit whose writes in place failed is applied first: written
// over, it would be lost half applied.
func openJournal(dir string, key uint64, meta, items *os.File, pages []movedPage) *journalWriter {
	table, start := journalTable(pages, key)
	w := &journalWriter{path: filepath.Join(dir, journalFile), h: xxh3.New()}
	_, _ = w.h.Write(table[:24])
	_, _ = w.h.Write(table[32:])
	if w.err = replayJournal(dir, key, meta, items); w.err != nil {
		return w
	}
	if w.f, w.err = os.OpenFile(w.path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600); w.err == nil {
		_, w.err = w.f.Write(table)
	}
	w.zeros(int64(start - len(table)))
	return w
}

// write appends p to the journal; p is not kept.
func (w *journalWriter) write(p []byte) {
	if w.err == nil {
		_, w.err = w.f.Write(p)
		_, _ = w.h.Write(p)
	}
}

// writePage appends page id of live file src, copied first: the check must be of the bytes written, which
// stores into the page may change meanwhile.
func (w *journalWriter) writePage(src *liveFile, id uint32) {
	if w.err != nil {
		return
	}
	if w.page == nil {
		w.page = make([]byte, PageSize)
	}
	if w.err = readRange(src, w.page, int64(id)*PageSize); w.err == nil {
		w.write(w.page)
	}
}

// zeros appends n zero bytes (a hole of an image).
func (w *journalWriter) zeros(n int64) {
	for ; n > 0 && w.err == nil; n -= int64(len(zeroBlock)) {
		w.write(zeroBlock[:min(n, int64(len(zeroBlock)))])
	}
}

// seal writes the journal's check and syncs it: from then on a start replays it.
func (w *journalWriter) seal() error {
	if w.err == nil {
		_, w.err = w.f.WriteAt(binary.LittleEndian.AppendUint64(nil, w.h.Sum64()), 24)
	}
	if w.err == nil {
		w.err = w.f.Sync()
	}
	return w.err
}

// journalSum is the check of the journal whose header is hdr, read from r up to size: every byte but
// those that hold it.
func journalSum(hdr []byte, r io.ReaderAt, size int64) (uint64, error) {
	h := xxh3.New()
	_, _ = h.Write(hdr[:24])
	_, _ = h.Write(hdr[32:])
	buf := make([]byte, min(size-journalHeader, PageSize))
	for off := int64(journalHeader); off < size; {
		n := min(int64(len(buf)), size-off)
		if _, err := r.ReadAt(buf[:n], off); err != nil {
			return 0, err
		}
		_, _ = h.Write(buf[:n])
		off += n
	}
	return h.Sum64(), nil
}

// readJournal reads the entries of journal file r, size bytes long, and the seal key it names; ok is false
// when r is not a whole journal (cut short by a reboot, damaged, or empty), err says r could not be read
// (and so whether it is whole is not known). The images stay in r, each at its page's at; what is read
// at a time is a page at most.
func readJournal(r io.ReaderAt, size int64) (pages []movedPage, key uint64, ok bool, err error) {
	le := binary.LittleEndian
	hdr := make([]byte, journalHeader)
	if size < journalHeader {
		return nil, 0, false, nil
	}
	if _, err := r.ReadAt(hdr, 0); err != nil {
		return nil, 0, false, err
	}
	n, images, body := int(le.Uint32(hdr[8:])), int(le.Uint32(hdr[12:])), le.Uint64(hdr[16:])
	if string(hdr[:len(journalMagic)]) != journalMagic || body != uint64(size-journalHeader) || n > MaxPages || images > n {
		return nil, 0, false, nil
	}
	at := int64(imagesStart(n, images)) // the next image's place
	if at+int64(images)*PageSize != size {
		return nil, 0, false, nil
	}
	sum, err := journalSum(hdr, r, size)
	if err != nil || sum != le.Uint64(hdr[24:]) {
		return nil, 0, false, err
	}
	entries := make([]byte, n*journalEntry)
	if _, err := r.ReadAt(entries, journalHeader); err != nil {
		return nil, 0, false, err
	}
	for i := range n {
		e := entries[i*journalEntry:]
		p := movedPage{id: le.Uint32(e), rec: le.Uint64(e[8:])}
		if p.id >= MaxPages {
			return nil, 0, false, nil
		}
		if le.Uint32(e[4:])&entryImage != 0 {
			if at+PageSize > size {
				return nil, 0, false, nil
			}
			p.image, p.at = true, at
			at += PageSize
		}
		pages = append(pages, p)
	}
	return pages, le.Uint64(hdr[32:]), at == size, nil
}

// commitJournal makes pages the directory's (dir, its files meta and items): w, their journal, its images
// written (openJournal), is sealed and synced, then the pages are written in place from it and synced, then
// the journal is emptied. step, when not nil, is called after each sync. written counts the bytes of pages
// written in place.
func commitJournal(dir string, w *journalWriter, meta, items *os.File, pages []movedPage, step func(string)) (written int64, err error) {
	if w.f == nil {
		return 0, w.err // a leftover journal that could not be applied stays
	}
	defer w.f.Close()
	if err := w.seal(); err != nil {
		_ = os.Truncate(w.path, 0) // the last one was applied: nothing is lost with it
		return 0, err
	}
	syncDir(dir) // its name, the first time: kept from then on, emptied rather than removed
	if step != nil {
		step("journal")
	}
	for _, p := range pages {
		if p.image {
			written += PageSize
		}
	}
	if err := applyMoves(meta, items, w.f, pages); err != nil {
		return written, err // the journal stays, for the next start or sync to apply again
	}
	if step != nil {
		step("applied")
	}
	return written, endJournal(w.path)
}

// recInUseOf says whether page record rec is whole and names a page in use.
func recInUseOf(rec uint64) bool {
	_, _, ok := decodeRecord(rec)
	return ok
}

// applyMoves writes pages in place in meta and items, their images read from journal j, and syncs both.
func applyMoves(meta, items *os.File, j io.ReaderAt, pages []movedPage) error {
	var errs []error
	rec := make([]byte, recordBytes)
	var image []byte
	for _, p := range pages {
		binary.LittleEndian.PutUint64(rec, p.rec)
		if _, err := meta.WriteAt(rec, int64(recordOffset(p.id))); err != nil {
			errs = append(errs, err)
		}
		off := int64(p.id) * PageSize
		switch {
		case p.image:
			if image == nil {
				image = make([]byte, PageSize)
			}
			if _, err := j.ReadAt(image, p.at); err != nil {
				errs = append(errs, err)
			} else if _, err := items.WriteAt(image, off); err != nil {
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
	j, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer j.Close()
	st, err := j.Stat()
	if err != nil || st.Size() == 0 {
		return nil
	}
	pages, named, ok, err := readJournal(j, st.Size())
	if err != nil { // kept: whole, it is still to be applied
		return fmt.Errorf("slab: reading %s: %w", path, err)
	}
	if ok && named == key { // a page written past the file's end grows it
		if err := applyMoves(meta, items, j, pages); err != nil {
			return fmt.Errorf("slab: replaying %s: %w", path, err)
		}
	}
	return endJournal(path)
}

// dropJournal removes data directory dir's journal, for a directory that starts empty. The removal is
// made durable with the other names, before any shard is unlocked (SyncNames, restart.md rule 5), not
// here before the listener opens: a journal a reboot brings back is replayed only onto the header it
// was written with (its seal key, replayJournal), so only with the old data it belongs to.
func dropJournal(dir string) {
	_ = os.Remove(filepath.Join(dir, journalFile))
}

// syncDir makes the names in directory dir durable, where its file system can.
func syncDir(dir string) {
	if f, err := os.Open(dir); err == nil {
		_ = f.Sync()
		_ = f.Close()
	}
}
