// Package auth is the text protocol's password file (memcached's -Y): its format, the table of users it
// holds, and the check of a user and password against it. doc/design/auth.md describes the format, what
// differs from memcached, and why.
package auth

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/crypto/bcrypt"
)

// Limits of the file. memcached reads at most 8 entries (silently ignoring the rest) and at most 255 bytes
// of a line (silently cutting a longer one and ignoring the rest of the file); leasecached reads every
// entry, and refuses a file it could only read differently from memcached.
const (
	// MaxFileSize bounds the file: about 4000 entries of the longest lines, 14000 of bcrypt hashes.
	MaxFileSize = 1 << 20
	// MaxLineLength is the longest line, without its "\n" ("\r" included): the most memcached reads whole.
	MaxLineLength = 254
	// MaxBcryptCost is the highest bcrypt cost accepted: a check at cost 14 takes about a second, and a
	// hash of cost 31 (bcrypt's maximum) would hold a checker for days.
	MaxBcryptCost = 14
)

// bcryptPrefixes mark a password that is a bcrypt hash. The variants differ only in how old
// implementations hashed; Go's bcrypt checks all three.
var bcryptPrefixes = [...]string{"$2a$", "$2b$", "$2y$"}

// entry is one line of the file: a user and either a password's SHA-256 or a bcrypt hash.
type entry struct {
	plain  [sha256.Size]byte // SHA-256 of the password, when hash is nil
	hash   []byte            // the bcrypt hash, or nil
	isHash bool
}

// Table is a loaded password file. It is never modified once built: a reload builds a new one.
type Table struct {
	users   map[string][]entry // a user may have several entries: any of their passwords authenticates
	entries int
	// bcryptCost is the highest cost of the file's bcrypt hashes, 0 when it has none. When it has any,
	// every check costs one bcrypt comparison at least (against dummyHash when nothing else is compared),
	// so that no answer's time tells a user with a plain password or no user apart from one with a hash.
	bcryptCost int
	dummyHash  []byte
}

// Entries is how many entries the file has.
func (t *Table) Entries() int { return t.entries }

// Slow reports whether a check may take a bcrypt comparison (tens of milliseconds): the file has a hash.
func (t *Table) Slow() bool { return t.bcryptCost > 0 }

// Load reads and parses the file at path.
func Load(path string) (*Table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > MaxFileSize {
		return nil, fmt.Errorf("%s: %d bytes, more than the %d a password file may have", path, st.Size(), MaxFileSize)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1)) // a file that grew since Stat is refused by Parse
	if err != nil {
		return nil, err
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Parse parses a password file: one "user:password" per line.
//   - Lines end in "\n" or "\r\n"; the last one may have neither. An empty file has no users.
//   - The user is everything before the line's first ':', the password everything after it.
//   - A password that starts with "$2a$", "$2b$" or "$2y$" is a bcrypt hash of the password.
//
// It refuses, saying which line: a line without ':' (an empty line or a comment included, as memcached
// does); a line over MaxLineLength bytes, a NUL byte or a "\r" that does not end its line (memcached reads
// each of those silently otherwise than it looks); a malformed bcrypt hash, or one of a cost over
// MaxBcryptCost; a file over MaxFileSize.
func Parse(data []byte) (*Table, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%d bytes, more than the %d a password file may have", len(data), MaxFileSize)
	}
	t := &Table{users: make(map[string][]entry)}
	for lineNo := 1; len(data) > 0; lineNo++ {
		line := data
		if nl := bytes.IndexByte(data, '\n'); nl >= 0 {
			line, data = data[:nl], data[nl+1:]
		} else {
			data = nil
		}
		if err := t.add(line); err != nil {
			return nil, fmt.Errorf("line %d: %w", lineNo, err)
		}
	}
	if t.bcryptCost > 0 {
		// A hash of a password nobody knows, at the file's highest cost: what a check compares against when
		// it has no hash of its own to compare (doc/design/auth.md, "Constant time").
		var random [16]byte
		copy(random[:], "leasecached-none")
		h, err := bcrypt.GenerateFromPassword(random[:], t.bcryptCost)
		if err != nil {
			return nil, fmt.Errorf("making the comparison hash: %w", err)
		}
		t.dummyHash = h
	}
	return t, nil
}

// add parses one line (without its "\n") into t.
func (t *Table) add(line []byte) error {
	if len(line) > MaxLineLength {
		return fmt.Errorf("%d bytes, more than %d (memcached would cut it short)", len(line), MaxLineLength)
	}
	if bytes.IndexByte(line, 0) >= 0 {
		return errors.New("a NUL byte (memcached would end the line there)")
	}
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if bytes.IndexByte(line, '\r') >= 0 {
		return errors.New(`a "\r" inside the line (memcached would end the password there)`)
	}
	colon := bytes.IndexByte(line, ':')
	if colon < 0 {
		return errors.New("malformed entry: should be 'user:password'")
	}
	user, pass := string(line[:colon]), line[colon+1:]
	var e entry
	if isBcrypt(pass) {
		cost, err := bcrypt.Cost(pass)
		if err != nil {
			return fmt.Errorf("user %q: malformed bcrypt hash: %w", user, err)
		}
		if cost > MaxBcryptCost {
			return fmt.Errorf("user %q: bcrypt cost %d, more than %d", user, cost, MaxBcryptCost)
		}
		e.hash, e.isHash = bytes.Clone(pass), true
		t.bcryptCost = max(t.bcryptCost, cost)
	} else {
		e.plain = sha256.Sum256(pass)
	}
	t.users[user] = append(t.users[user], e)
	t.entries++
	return nil
}

func isBcrypt(pass []byte) bool {
	for _, p := range bcryptPrefixes {
		if bytes.HasPrefix(pass, []byte(p)) {
			return true
		}
	}
	return false
}
