package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"sync"
	"sync/atomic"

	"golang.org/x/crypto/bcrypt"
)

// dummyPlain is a digest no password has: what a check compares with when the user has no entry, so that
// an unknown user costs what a wrong password costs.
var dummyPlain = func() (d [sha256.Size]byte) {
	_, _ = rand.Read(d[:])
	return d
}()

// compareHash is bcrypt's comparison; tests count its calls through it.
var compareHash = bcrypt.CompareHashAndPassword

// Check reports whether user and pass match one of the table's entries. Its time does not depend on
// whether user exists, on whether they have a hash, nor on how much of a password matches: the password's
// SHA-256 is compared in constant time with each of the user's plain entries (with dummyPlain for an
// unknown user), and a table that has any hash makes exactly one bcrypt comparison, at the file's one cost,
// with the user's hash or else with dummyHash (Parse refuses hashes of different costs and a user's second
// hash: doc/design/auth.md, "Constant time"). With a hash involved it takes tens of milliseconds: Verifier
// keeps that off the event loops.
func (t *Table) Check(user, pass []byte) bool {
	entries, found := t.users[string(user)]
	digest := sha256.Sum256(pass)
	match := 0
	if !found {
		subtle.ConstantTimeCompare(digest[:], dummyPlain[:])
	}
	hash, own := t.dummyHash, false
	for i := range entries {
		e := &entries[i]
		if e.isHash {
			hash, own = e.hash, true
			continue
		}
		match |= subtle.ConstantTimeCompare(digest[:], e.plain[:])
	}
	if hash != nil && compareHash(hash, pass) == nil && own {
		match = 1
	}
	return found && match == 1
}

// Checkers is how many bcrypt checks run at once, each on a goroutine of its own: at most this many CPUs
// go to checking passwords, whatever the number of clients trying; the others wait their turn, MaxQueued
// of them at most.
const Checkers = 2

// maxQueuedCap bounds MaxQueued for the cheapest hashes: a waiting check holds a goroutine and a copy of
// the attempt's user and password (under 16 KB), so 1024 of them hold 25 MB at most.
const maxQueuedCap = 1024

// MaxQueued is how many checks may wait for a checker, beyond the Checkers running, for a file whose hashes
// have the given cost: as many as a checker runs in the time of one check at MaxBcryptCost (about a
// second), per checker, up to maxQueuedCap. A check that finds the queue full is answered at once as a
// failure; one that is queued has its answer within about a second more than its own check takes (cost 10:
// 32 waiting, each about 60 ms on two checkers). Checks whose connection has closed leave the queue at once
// (Pending.Cancel).
func MaxQueued(cost int) int {
	return min(Checkers<<max(MaxBcryptCost-cost, 0), maxQueuedCap)
}

// CacheSize bounds how many verified (user, password) pairs a table remembers. A full cache is emptied.
const CacheSize = 1024

// Verifier checks users and passwords against the file loaded last, without holding the caller for a
// bcrypt comparison: a pair already verified against the table in use is answered at once from a cache
// (its keyed SHA-256, never the password); any other check of a table with hashes runs on a checker
// goroutine (Checkers at once) and tells the caller when it is done. A table of plain passwords only is
// checked at once (a few hundred nanoseconds).
type Verifier struct {
	path     string
	cur      atomic.Pointer[loaded]
	sem      chan struct{}
	checking atomic.Int64 // checks running or waiting for a sem slot, not canceled: Checkers + MaxQueued at most
	key      [32]byte     // the cache's HMAC key, so its map's keys say nothing to someone who cannot read memory
}

// loaded is a table and the pairs verified against it. A reload replaces both: a pair verified against
// the old file is checked again.
type loaded struct {
	t  *Table
	mu sync.Mutex
	ok map[[sha256.Size]byte]struct{}
}

// NewVerifier loads the file at path.
func NewVerifier(path string) (*Verifier, error) {
	v := &Verifier{path: path, sem: make(chan struct{}, Checkers)}
	_, _ = rand.Read(v.key[:])
	if err := v.Reload(); err != nil {
		return nil, err
	}
	return v, nil
}

// Reload loads the file again. A file that does not load leaves the table in use unchanged.
func (v *Verifier) Reload() error {
	t, err := Load(v.path)
	if err != nil {
		return err
	}
	v.cur.Store(&loaded{t: t, ok: make(map[[sha256.Size]byte]struct{})})
	return nil
}

// Table is the table in use.
func (v *Verifier) Table() *Table { return v.cur.Load().t }

// Checking is how many checks are running or waiting for a checker, canceled ones excepted.
func (v *Verifier) Checking() int { return int(v.checking.Load()) }

// Pending is a check running on a checker goroutine, or waiting for one.
type Pending struct {
	v        *Verifier
	ok       bool
	done     atomic.Bool
	state    atomic.Int32 // waiting, running or left
	canceled atomic.Bool
	cancel   chan struct{} // closed by Cancel
}

// A Pending's states: it waits for a checker, then runs, unless it is canceled first (left). Whichever of
// the checker goroutine and Cancel moves it out of waiting decides who gives its place in
// Verifier.checking back: Cancel at once, or the goroutine once the check is made.
const (
	waiting = iota
	running
	left
)

// Result is the check's answer, once done.
func (p *Pending) Result() (ok, done bool) {
	if !p.done.Load() {
		return false, false
	}
	return p.ok, true
}

// Cancel says nobody wants the answer any more (the connection has closed): a check still waiting for a
// checker leaves the queue at once (Checking counts it no more) and is not made, and the caller is not
// woken. A check already running ends as usual, without waking the caller. Cancel may be called more than
// once.
func (p *Pending) Cancel() {
	if !p.canceled.CompareAndSwap(false, true) {
		return
	}
	close(p.cancel)
	if p.state.CompareAndSwap(waiting, left) {
		p.v.checking.Add(-1)
	}
}

// Check checks user and pass. It answers at once (a nil Pending) when no bcrypt comparison is needed, when
// Checkers + MaxQueued checks are already running or waiting (a failure: the attempt is not checked), or
// when wake is nil (the caller may block: the stream transport's goroutine per connection, which then waits
// for a Checkers slot like any other check, so TLS clients cannot take more CPUs either). Otherwise the check
// runs on a checker goroutine, which calls wake once the Pending is done, unless it was canceled. user and
// pass are copied.
func (v *Verifier) Check(user, pass []byte, wake func()) (bool, *Pending) {
	l := v.cur.Load()
	if !l.t.Slow() {
		return l.t.Check(user, pass), nil
	}
	id := v.pairID(user, pass)
	if l.known(id) {
		return true, nil
	}
	if v.checking.Add(1) > int64(Checkers+MaxQueued(l.t.bcryptCost)) {
		v.checking.Add(-1)
		return false, nil
	}
	if wake == nil {
		defer v.checking.Add(-1)
		v.sem <- struct{}{}
		defer func() { <-v.sem }()
		return l.verify(user, pass, id), nil
	}
	p := &Pending{v: v, cancel: make(chan struct{})}
	user, pass = append([]byte(nil), user...), append([]byte(nil), pass...)
	go p.run(l, user, pass, id, wake)
	return false, p
}

// run is the checker goroutine: it waits for one of the Checkers slots, unless canceled first, then checks.
func (p *Pending) run(l *loaded, user, pass []byte, id [sha256.Size]byte, wake func()) {
	v := p.v
	select {
	case v.sem <- struct{}{}:
	case <-p.cancel:
		return // Cancel has given the place back
	}
	defer func() { <-v.sem }()
	if !p.state.CompareAndSwap(waiting, running) {
		return // canceled as the slot came free: Cancel has given the place back
	}
	defer v.checking.Add(-1)
	p.ok = l.verify(user, pass, id)
	p.done.Store(true)
	if !p.canceled.Load() {
		wake()
	}
}

// pairID is the cache's key for a pair: its HMAC-SHA256 under the verifier's key.
func (v *Verifier) pairID(user, pass []byte) (id [sha256.Size]byte) {
	m := hmac.New(sha256.New, v.key[:])
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(user)))
	m.Write(n[:])
	m.Write(user)
	m.Write(pass)
	m.Sum(id[:0])
	return id
}

func (l *loaded) known(id [sha256.Size]byte) bool {
	l.mu.Lock()
	_, ok := l.ok[id]
	l.mu.Unlock()
	return ok
}

// verify checks the pair against the table and remembers it when it matches.
func (l *loaded) verify(user, pass []byte, id [sha256.Size]byte) bool {
	if !l.t.Check(user, pass) {
		return false
	}
	l.mu.Lock()
	if len(l.ok) >= CacheSize {
		clear(l.ok)
	}
	l.ok[id] = struct{}{}
	l.mu.Unlock()
	return true
}
