package slab

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"hash/fnv"
)

// A data directory (--data-dir) keeps item memory in files, so that what was stored survives the process:
// see doc/design/restart.md. The files (items mapped shared, meta read at start and written with pwrite):
//
//	meta   headerBytes of header, then one 8-byte record per page id (recordAt)
//	items  page id p at byte p*PageSize: the pages themselves, byte for byte (each item with its seal)
//
// The header's identity (format, page size, shard count, class table) must match for the pages to be
// used again; its counters (the CAS high-water mark and flush_all's two marks) are rewritten in place. The
// mark is stored twice and read as the larger copy: a damaged copy can only make CAS uniques jump ahead.
// The flush marks carry a check word: a damaged mark could hide every item or bring flushed ones back.
const (
	backingMagic = "LCDATA\x00\x01"
	// backingVersion changes whenever what a page holds is read another way (shard's item layout or seal).
	backingVersion = 7
	// backingVersionOld is the format before a live copy kept its own meta (restart-live.md rule 12):
	// pages are read the same way, and a start upgrades the header (upgradeIdentity).
	backingVersionOld = 6
	headerBytes       = 4096
	recordBytes       = 8
	// oldSums is the file where format 4 and earlier kept the seals, removed when found.
	oldSums = "sums"

	// Header offsets. The identity is hdrMagic..hdrIdentityEnd, checked by hdrIdentitySum.
	hdrMagic       = 0
	hdrVersion     = 8
	hdrPageSize    = 12
	hdrShards      = 16
	hdrMinChunk    = 20
	hdrClassHash   = 24
	hdrIdentityEnd = 32
	hdrIdentitySum = 32
	hdrCasHigh     = 64
	hdrOldestLive  = 72
	hdrOldestCas   = 80
	hdrCasHigh2    = 88
	hdrFlushCheck  = 96
	// With a live copy (live_linux.go): the instance its files were copied from, and the same value while
	// the directory's files hold everything the live copy does (a clean stop), 0 while the server runs.
	hdrInstance = 104
	hdrClean    = 112
	// hdrSealKey is a random key drawn when the header is written, mixed into every seal (SealKey).
	hdrSealKey = 120
	// hdrBoot is the machine's boot the server that last opened the directory ran in (bootID), and
	// hdrSyncs the number of the last Sync of a mapped directory that finished: they decide whether a
	// parked page is read at a start (Records; doc/design/restart.md rule 9).
	hdrBoot  = 128
	hdrSyncs = 136

	// A page record: recInUse in its first byte, then the class, the owner, and a check byte. A parked
	// page (Allocator.ParkDrained) has recParked instead, and the number of the last Sync begun before it
	// was parked in the upper half.
	recInUse  = 0xA5
	recParked = 0x5B
)

// BackingOptions are OpenBacking's choices.
type BackingOptions struct {
	// Huge advises the items mapping onto transparent huge pages (-L).
	Huge bool
	// Live is the directory (on tmpfs) under which the items file the server maps is kept, the data
	// directory's own being written from it at each Sync (live_linux.go); "": the server maps the
	// directory's files.
	Live string
	// Syncs says that the directory is synced periodically (--data-sync above 0): without a live copy, a
	// page move then parks the page it rescued items from until the next Sync (Backing.Parks).
	Syncs bool
	// Emptying, when set, is told why stored data cannot be used before any of it is discarded (not for
	// a directory that holds none: NoStoredData).
	Emptying func(reason string)
	// Waiting, when set, is told that the directory's lock is held by a server that is leaving (killed,
	// exiting or stopping), which the start waits for (lockDir).
	Waiting func(owner string)
	// Defer leaves the writing of a newer live copy into the directory's files, at a start that needs it,
	// to FinishOpen (OpenBacking).
	Defer bool
}

// NoStoredData is OpenBacking's reason for a directory that holds no data of ours (a fresh one).
const NoStoredData = "no stored data"

// Identity is what must match for stored pages to be used again.
type Identity struct {
	Shards int
	// OtherShards, when set, accepts a stored shard count other than Shards: the pages are then used
	// with it (Backing.Shards), for a caller that can run with either.
	OtherShards func(stored int) bool
	Classes     *Classes
}

// classHash sums a class table's chunk sizes: another -n or -f, or another table, makes every page's
// geometry another.
func classHash(c *Classes) uint64 {
	h := fnv.New64a()
	var b [4]byte
	for _, s := range c.size {
		binary.LittleEndian.PutUint32(b[:], s)
		h.Write(b[:])
	}
	return h.Sum64()
}

// writeIdentity fills a fresh header.
func writeIdentity(hdr []byte, id Identity) {
	clear(hdr[:headerBytes])
	copy(hdr[hdrMagic:], backingMagic)
	le := binary.LittleEndian
	le.PutUint32(hdr[hdrVersion:], backingVersion)
	le.PutUint32(hdr[hdrPageSize:], PageSize)
	le.PutUint32(hdr[hdrShards:], uint32(id.Shards))
	le.PutUint32(hdr[hdrMinChunk:], MinChunk)
	le.PutUint64(hdr[hdrClassHash:], classHash(id.Classes))
	le.PutUint64(hdr[hdrIdentitySum:], identitySum(hdr))
	le.PutUint64(hdr[hdrFlushCheck:], flushCheck(0, 0))
	var key [8]byte
	_, _ = rand.Read(key[:]) // never fails on Linux (crypto/rand)
	copy(hdr[hdrSealKey:], key[:])
}

// upgradeIdentity makes a header of backingVersionOld this build's: the same identity, the new version,
// so that a build before it, which would take the directory's own page records for the newest, starts
// empty on it instead.
func upgradeIdentity(hdr []byte) {
	binary.LittleEndian.PutUint32(hdr[hdrVersion:], backingVersion)
	binary.LittleEndian.PutUint64(hdr[hdrIdentitySum:], identitySum(hdr))
}

// flushCheck is the check word of flush_all's marks: any change to one of them changes it.
func flushCheck(oldestLive, oldestCas uint64) uint64 {
	return oldestLive*0x9E3779B97F4A7C15 ^ oldestCas*0xBF58476D1CE4E5B9 ^ 0x6C65617365636864
}

func identitySum(hdr []byte) uint64 {
	h := fnv.New64a()
	h.Write(hdr[:hdrIdentityEnd])
	return h.Sum64()
}

// identityMismatch says why a stored header cannot be used with id ("" when it can).
func identityMismatch(hdr []byte, id Identity) string {
	le := binary.LittleEndian
	switch {
	case len(hdr) == 0:
		return NoStoredData
	case len(hdr) < headerBytes || string(hdr[hdrMagic:hdrMagic+len(backingMagic)]) != backingMagic:
		return "the stored header is damaged or not leasecached's"
	case le.Uint64(hdr[hdrIdentitySum:]) != identitySum(hdr):
		return "the stored header is damaged"
	case le.Uint32(hdr[hdrVersion:]) != backingVersion && le.Uint32(hdr[hdrVersion:]) != backingVersionOld:
		return fmt.Sprintf("stored format version %d, this build reads %d", le.Uint32(hdr[hdrVersion:]), backingVersion)
	case le.Uint32(hdr[hdrPageSize:]) != PageSize || le.Uint32(hdr[hdrMinChunk:]) != MinChunk ||
		le.Uint64(hdr[hdrClassHash:]) != classHash(id.Classes):
		return "the stored pages were cut with another slab class table"
	case storedShards(hdr) != id.Shards && (id.OtherShards == nil || !id.OtherShards(storedShards(hdr))):
		return fmt.Sprintf("the data was stored with %d shards, this start has %d", storedShards(hdr), id.Shards)
	case !flushMarksWhole(hdr):
		return "damaged flush_all marks in the header"
	}
	return ""
}

// storedShards is a stored header's shard count.
func storedShards(hdr []byte) int { return int(binary.LittleEndian.Uint32(hdr[hdrShards:])) }

// flushMarksWhole reports whether flush_all's stored marks can be trusted: they match their check word,
// and the oldest CAS, a counter value, is not above the CAS mark, which is renewed above the counter before
// the marks are stored (shard's renewCasMark). A damaged mark could hide every item, new ones included, or
// bring flushed ones back.
func flushMarksWhole(hdr []byte) bool {
	le := binary.LittleEndian
	live, cas := le.Uint64(hdr[hdrOldestLive:]), le.Uint64(hdr[hdrOldestCas:])
	mark := max(le.Uint64(hdr[hdrCasHigh:]), le.Uint64(hdr[hdrCasHigh2:]))
	return le.Uint64(hdr[hdrFlushCheck:]) == flushCheck(live, cas) && cas <= mark
}

// PageRecord is a stored page: its id, size class and owner (a shard's index).
type PageRecord struct {
	ID    uint32
	Class int
	Owner int
}

func encodeRecord(class, owner uint8) uint64 {
	return uint64(recInUse) | uint64(class)<<8 | uint64(owner)<<16 | uint64(recInUse^class^owner)<<24
}

// encodeParked is the record of a page parked when the last Sync begun was number syncs.
func encodeParked(class, owner uint8, syncs uint64) uint64 {
	at := uint32(syncs)
	chk := recParked ^ class ^ owner ^ uint8(at) ^ uint8(at>>8) ^ uint8(at>>16) ^ uint8(at>>24)
	return uint64(recParked) | uint64(class)<<8 | uint64(owner)<<16 | uint64(chk)<<24 | uint64(at)<<32
}

func decodeRecord(v uint64) (class, owner uint8, ok bool) {
	b0, class, owner, chk := uint8(v), uint8(v>>8), uint8(v>>16), uint8(v>>24)
	return class, owner, b0 == recInUse && chk == recInUse^class^owner && v>>32 == 0
}

// decodeParked reads the record of a parked page: its class, owner, and the low 32 bits of the number of
// the last Sync begun before it was parked.
func decodeParked(v uint64) (class, owner uint8, at uint32, ok bool) {
	class, owner, at = uint8(v>>8), uint8(v>>16), uint32(v>>32)
	return class, owner, at, v == encodeParked(class, owner, uint64(at))
}
