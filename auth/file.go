// Package auth is the text protocol's password file (memcached's -Y): its format, the table of users it
// holds, and the check of a user and password against it. doc/design/auth.md describes the format, what
// differs from memcached, and why.
package auth

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

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
	line   int // the file's line, for Parse's errors
}

// Table is a loaded password file. It is never modified once built: a reload builds a new one.
type Table struct {
	users   map[string][]entry // a user may have several entries: any of their passwords authenticates
	entries int
	// bcryptCost is the cost of every one of the file's bcrypt hashes (Parse refuses a file whose hashes
	// differ in cost), 0 when it has none; costLine is the line of its first hash. When it has any, every
	// check makes exactly one bcrypt comparison at that cost: with the user's hash (a user has one at most),
	// or with dummyHash. So no answer's time tells apart a user with a hash, a user with plain passwords
	// only, and no user (doc/design/auth.md, "Constant time").
	bcryptCost int
	costLine   int
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
// MaxBcryptCost; a bcrypt hash of another cost than the file's first one, or a user's second bcrypt hash
// (each would make that user's checks take another time than the others': Table.bcryptCost); a file over
// MaxFileSize.
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
		if err := t.add(line, lineNo); err != nil {
			return nil, fmt.Errorf("line %d: %w", lineNo, err)
		}
	}
	if t.bcryptCost > 0 {
		// A hash of a password nobody knows, at the file's cost: what a check compares with when the user has
		// no hash (doc/design/auth.md, "Constant time"). Its comparison's result is never used.
		var random [16]byte
		_, _ = rand.Read(random[:])
		h, err := bcrypt.GenerateFromPassword(random[:], t.bcryptCost)
		if err != nil {
			return nil, fmt.Errorf("making the comparison hash: %w", err)
		}
		t.dummyHash = h
	}
	return t, nil
}

// add parses line lineNo (without its "\n") into t.
func (t *Table) add(line []byte, lineNo int) error {
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
	e := entry{line: lineNo}
	if isBcrypt(pass) {
		cost, err := bcrypt.Cost(pass)
		if err == nil && !validSalt(pass) {
			err = errors.New("its salt is not in bcrypt's base64")
		}
		if err != nil {
			return fmt.Errorf("user %q: malformed bcrypt hash: %w", user, err)
		}
		if cost > MaxBcryptCost {
			return fmt.Errorf("user %q: bcrypt cost %d, more than %d", user, cost, MaxBcryptCost)
		}
		if t.bcryptCost != 0 && cost != t.bcryptCost {
			return fmt.Errorf("user %q: bcrypt cost %d, but line %d's hash has cost %d: all of a file's hashes must have one cost",
				user, cost, t.costLine, t.bcryptCost)
		}
		for _, other := range t.users[user] {
			if other.isHash {
				return fmt.Errorf("user %q: a second bcrypt hash (line %d has one): a user may have one at most",
					user, other.line)
			}
		}
		e.hash, e.isHash = bytes.Clone(pass), true
		if t.bcryptCost == 0 {
			t.bcryptCost, t.costLine = cost, lineNo
		}
	} else {
		e.plain = sha256.Sum256(pass)
	}
	t.users[user] = append(t.users[user], e)
	t.entries++
	return nil
}

// saltAlphabet is bcrypt's base64 alphabet.
const saltAlphabet = "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// validSalt reports whether a hash that bcrypt.Cost accepts ("$2x$NN$" and at least 52 more bytes) has a
// salt bcrypt can decode: bcrypt.CompareHashAndPassword answers at once, without its expensive part, for
// one it cannot, and that user's checks would be the fast ones.
func validSalt(hash []byte) bool {
	const saltStart, saltLen = len("$2a$10$"), 22
	if len(hash) < saltStart+saltLen {
		return false
	}
	for _, c := range hash[saltStart : saltStart+saltLen] {
		if !strings.ContainsRune(saltAlphabet, rune(c)) {
			return false
		}
	}
	return true
}

func isBcrypt(pass []byte) bool {
	for _, p := range bcryptPrefixes {
		if bytes.HasPrefix(pass, []byte(p)) {
			return true
		}
	}
	return false
}
