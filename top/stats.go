// Package top is `leasecached top`: a live view of a memcached-protocol server, drawn from `stats` and
// `stats hotkeys` once an interval. It is split so that everything but the terminal is a pure function:
// ReadStats and ParseHotKeys turn replies into a Snapshot, Compute turns two snapshots into a Frame (rates
// over the interval between them), Render turns a Frame into text for a given width, and Run is the thin
// loop around them (see doc/design/top.md).
package top

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"

	"github.com/leasecached/leasecached/internal/hotlist"
)

// maxStatLines bounds one stats reply: memcached's largest groups (items, slabs) have a few thousand lines;
// a peer that never sends END must not grow the map without end.
const maxStatLines = 100_000

// Stats is one stats reply: the value of each STAT line by name.
type Stats map[string]string

// ServerError is an error line a server answered a stats request with (memcached answers `ERROR` to a stats
// group it does not have, such as `stats hotkeys`). The connection stays usable.
type ServerError struct{ Line string }

func (e *ServerError) Error() string { return "server answered " + e.Line }

// ReadStats reads one stats reply, STAT lines up to END, from r.
func ReadStats(r *bufio.Reader) (Stats, error) {
	st := Stats{}
	for n := 0; ; n++ {
		if n > maxStatLines {
			return nil, fmt.Errorf("stats reply longer than %d lines", maxStatLines)
		}
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		switch {
		case line == "END":
			return st, nil
		case strings.HasPrefix(line, "STAT "):
			name, value, _ := strings.Cut(line[len("STAT "):], " ")
			if name == "" {
				return nil, fmt.Errorf("malformed stats line %q", line)
			}
			st[name] = value
		case line == "ERROR" || strings.HasPrefix(line, "CLIENT_ERROR") || strings.HasPrefix(line, "SERVER_ERROR"):
			return nil, &ServerError{Line: line}
		default:
			return nil, fmt.Errorf("unexpected line in stats reply: %q", line)
		}
	}
}

// Uint is a counter or gauge by name; ok is false when the server does not send it or it is not a number.
func (s Stats) Uint(name string) (v uint64, ok bool) {
	text, ok := s[name]
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(text, 10, 64)
	return v, err == nil
}

// Has reports whether the server sent the stat.
func (s Stats) Has(name string) bool { _, ok := s[name]; return ok }

// HotKey is one rank of a `stats hotkeys` reply (internal/hotlist defines the format).
type HotKey = hotlist.Key

// HotKeys is a `stats hotkeys` reply.
type HotKeys = hotlist.Listing

// ParseHotKeys reads the hot keys out of a `stats hotkeys` reply (hotlist.Parse).
func ParseHotKeys(s Stats) (HotKeys, error) { return hotlist.Parse(s) }
