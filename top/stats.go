// Package top is `leasecached top`: a live view of a memcached-protocol server, drawn from `stats` and
// `stats hotkeys` once an interval. It is split so that everything but the terminal is a pure function:
// ReadStats and ParseHotKeys turn replies into a Snapshot, Compute turns two snapshots into a Frame (rates
// over the interval between them), Render turns a Frame into text for a given width, and Run is the thin
// loop around them (see doc/design/top.md).
package top

import (
	"bufio"
	"errors"
	"fmt"
	"strconv"
	"strings"
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

// HotKey is one line group of `stats hotkeys` (the format: doc/design/top.md).
type HotKey struct {
	Key    string // as the server sends it: URL-encoded as lru_crawler metadump encodes keys
	Rate   uint64 // estimated requests per second
	Share  float64
	Reads  uint64
	Writes uint64
}

// HotKeys is a `stats hotkeys` reply.
type HotKeys struct {
	SampleRate    uint64 // one request in SampleRate is sampled
	WindowSeconds uint64
	Keys          []HotKey // by rank, hottest first
}

// maxHotKeys bounds the ranks read from a reply.
const maxHotKeys = 1000

// ParseHotKeys reads the hot keys out of a `stats hotkeys` reply. A reply without the header lines is not
// one (a server that ignores the group's name and sends its general stats).
func ParseHotKeys(s Stats) (HotKeys, error) {
	var hk HotKeys
	var ok bool
	if hk.SampleRate, ok = s.Uint("hotkeys_sample_rate"); !ok {
		return hk, errors.New("no hotkeys_sample_rate in the reply")
	}
	if hk.WindowSeconds, ok = s.Uint("hotkeys_window_seconds"); !ok {
		return hk, errors.New("no hotkeys_window_seconds in the reply")
	}
	for rank := 1; rank <= maxHotKeys; rank++ {
		prefix := "hotkey:" + strconv.Itoa(rank) + ":"
		key, ok := s[prefix+"key"]
		if !ok {
			break
		}
		k := HotKey{Key: key}
		var err error
		if k.Rate, err = uintField(s, prefix+"rate"); err != nil {
			return hk, err
		}
		if k.Reads, err = uintField(s, prefix+"reads"); err != nil {
			return hk, err
		}
		if k.Writes, err = uintField(s, prefix+"writes"); err != nil {
			return hk, err
		}
		if text, ok := s[prefix+"share"]; ok {
			if k.Share, err = strconv.ParseFloat(text, 64); err != nil {
				return hk, fmt.Errorf("%sshare: %q is not a number", prefix, text)
			}
		}
		hk.Keys = append(hk.Keys, k)
	}
	return hk, nil
}

// uintField is a number of a hot key's lines; a missing one is 0, so that a server may leave one out.
func uintField(s Stats, name string) (uint64, error) {
	text, ok := s[name]
	if !ok {
		return 0, nil
	}
	v, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a number", name, text)
	}
	return v, nil
}
