package near

import (
	"bytes"
	"net/url"
)

// action is what one watch line asks of the near-cache.
type action int

const (
	actIgnore     action = iota
	actInvalidate        // drop the line's key
	actFlush             // drop everything from this server
)

// parseLine reads one line of "watch mutations deletions" (doc/design/watch.md). Every item_store line
// invalidates whatever its status (a refused set still drops the old value on the server), and so
// does every deleted line; flush_all and a skipped= notice (lines were lost) flush. A key that does
// not decode flushes too: there is no telling which copy it meant.
func parseLine(line []byte) (action, string) {
	if bytes.HasPrefix(line, []byte("skipped=")) {
		return actFlush, ""
	}
	var typ, key []byte
	for _, f := range bytes.Fields(line) {
		switch {
		case bytes.HasPrefix(f, []byte("type=")):
			typ = f[len("type="):]
		case bytes.HasPrefix(f, []byte("key=")):
			key = f[len("key="):]
		}
	}
	switch string(typ) {
	case "flush_all":
		return actFlush, ""
	case "item_store", "deleted":
		k, err := url.PathUnescape(string(key))
		if err != nil || k == "" {
			return actFlush, ""
		}
		return actInvalidate, k
	}
	return actIgnore, ""
}
