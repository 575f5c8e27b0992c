//go:build !linux

package slab

import (
	"errors"
	"sync/atomic"
)

// Backing is a data directory's files; only Linux has them (backing_linux.go).
type Backing struct {
	itemsSize int64
	live      *live
}

type live struct{ owed atomic.Bool }

func (*live) mark(int, int) {}
func (*live) moved(uint32)  {}

// OnTmpfs is false: data directories need Linux.
func OnTmpfs(string) bool { return false }

// UnkeptReservations is "": data directories need Linux.
func UnkeptReservations(string, string) string { return "" }

// DefaultLiveRoot is where a data directory's live copy is kept on Linux.
const DefaultLiveRoot = "/dev/shm"

// LiveRoomPages knows no room: data directories need Linux.
func LiveRoomPages(string, string) (int, bool) { return 0, false }

// LiveRoom refuses: data directories need Linux.
func LiveRoom(string, string, int64) error { return errors.New("--data-dir needs Linux") }

// OpenBacking fails: data directories need Linux's shared file mappings and hole punching.
func OpenBacking(dir string, id Identity, opt BackingOptions) (*Backing, string, error) {
	return nil, "", errors.New("--data-dir needs Linux")
}

func (b *Backing) page(uint32, bool) (mem []byte, err error) {
	return nil, errors.New("no data directory")
}
func (b *Backing) stored(uint32) []byte         { return nil }
func (b *Backing) storedOnce(uint32) []byte     { return nil }
func (b *Backing) discard(uint32)               {}
func (b *Backing) emptyingStored()              {}
func (b *Backing) punch(uint32)                 {}
func (b *Backing) collapsible() (ok, huge bool) { return false, false }
func (b *Backing) setRecord(uint32, uint64)     {}
func (b *Backing) Records() []PageRecord        { return nil }
func (b *Backing) CasHigh() uint64              { return 0 }
func (b *Backing) SealKey() uint64              { return 0 }
func (b *Backing) CaughtUp() string             { return "" }
func (b *Backing) Shards() int                  { return 0 }
func (b *Backing) RoomPages() int               { return -1 }
func (b *Backing) SetCasHigh(uint64)            {}
func (b *Backing) SyncHeader() error            { return nil }
func (b *Backing) SyncNames()                   {}
func (b *Backing) loadPage(uint32) error        { return nil }
func (b *Backing) reservePage(uint32) error     { return nil }
func (b *Backing) LiveLoaded() error            { return nil }
func (b *Backing) ShardLoaded(int) error        { return nil }
func (b *Backing) SetQuiesce(func())            {}
func (b *Backing) Flushed() (int64, uint64)     { return 0, 0 }
func (b *Backing) SetFlushed(int64, uint64)     {}
func (b *Backing) Sync() error                  { return nil }
func (b *Backing) Close() error                 { return nil }
func (b *Backing) Stopping()                    {}
func (b *Backing) drainBegins(uint32)           {}
func (b *Backing) drainEnds()                   {}
func (b *Backing) SetSyncSteps(func(string))    {}
func (b *Backing) holdSyncs() bool              { return true }
func (b *Backing) letSyncs()                    {}
func (b *Backing) Pending() bool                { return false }
func (b *Backing) Parks() bool                  { return false }
func (b *Backing) Parked() int                  { return 0 }
func (b *Backing) ParkedRecords() []PageRecord  { return nil }
func (b *Backing) Adopted()                     {}
func (b *Backing) parkedBy(int64)               {}
func (b *Backing) SyncsDone() uint64            { return 0 }
func (b *Backing) SyncsBegun() uint64           { return 0 }
func (b *Backing) Keeps() bool                  { return false }
func (b *Backing) Rebooted() bool               { return false }
func (b *Backing) SyncedAfter(uint32) bool      { return true }
func (b *Backing) FinishOpen() (string, error)  { return "", nil }
