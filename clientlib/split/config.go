package split

import (
	"errors"
	"time"
)

// Config tunes a Client. The zero value of every field means its default.
type Config struct {
	// Keys are split in every process that lists them: list the same keys everywhere, so that every
	// writer reaches the copies every reader reads.
	Keys []string
	// Copies is how many copies a split key has, the key itself included (default 3). A server list
	// shorter than Copies gives one copy per server.
	Copies int
	// ReplicaTTL, when positive, caps the TTL of every replica (copy 1..N-1); a write's own TTL applies
	// when it is shorter. When it is 0, replicas of hot-listed keys are capped at DefaultReplicaTTL and
	// those of Keys are not. A replica that Get copies from the key lives ReplicaTTL, or
	// DefaultReplicaTTL when it is 0 (Get does not know how long the value has left).
	ReplicaTTL time.Duration
	// HotKeysPoll, when positive, asks every server for "stats hotkeys" this often and splits the keys
	// listed at HotShare percent or more of a server's keyed requests (a replica listed counts for its
	// key). 0: only Keys are split.
	HotKeysPoll time.Duration
	// HotShare is the share (percent) of a server's keyed requests that makes a listed key split
	// (default 10).
	HotShare float64
	// Logf receives rare notices (a server that does not answer stats hotkeys). nil: nothing.
	Logf func(format string, args ...any)
}

// Defaults of Config's zero fields.
const (
	DefaultCopies     = 3
	DefaultReplicaTTL = 2 * time.Second
	DefaultHotShare   = 10
)

// maxCandidates bounds the names tried for one key's copies: past it, the key has fewer copies. With
// S equal servers a name lands on a new one with probability at least 1/S, so the bound is reached
// only with very uneven ketama weights.
const maxCandidates = 1000

// Suffix joins a key and a copy's number in the copy's name: "user:42#split3".
const Suffix = "#split"

// ErrSplitKey is returned for a request that cannot be made to N copies at once (CompareAndSwap,
// Increment, Decrement of a split key).
var ErrSplitKey = errors.New("split: not supported for a split key")

func (cfg Config) withDefaults() Config {
	if cfg.Copies <= 0 {
		cfg.Copies = DefaultCopies
	}
	if cfg.HotShare <= 0 {
		cfg.HotShare = DefaultHotShare
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	return cfg
}
