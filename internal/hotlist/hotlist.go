// Package hotlist is the `stats hotkeys` reply (doc/design/hotkeys.md): one definition of its line names
// for the server that writes it and for leasecached top and the Go client's near-cache and key splitting,
// which read it.
package hotlist

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
)

// Header lines: every reply has them, an idle server's only them.
const (
	SampleRate    = "hotkeys_sample_rate"
	WindowSeconds = "hotkeys_window_seconds"
)

// MaxRanks bounds the ranks Parse reads.
const MaxRanks = 1000

// Prefix is the start of the names of rank's lines: "hotkey:<rank>:", then key, rate, share, reads, writes.
func Prefix(rank int) string { return "hotkey:" + strconv.Itoa(rank) + ":" }

// Key is one rank of a reply.
type Key struct {
	Key    string // as the server sends it: URL-encoded as lru_crawler metadump encodes keys
	Rate   uint64 // estimated requests per second
	Share  float64
	Reads  uint64
	Writes uint64
}

// Decoded is the key itself.
func (k Key) Decoded() (string, error) { return url.PathUnescape(k.Key) }

// Listing is a reply: its header and its keys by rank, hottest first.
type Listing struct {
	SampleRate    uint64 // one request in SampleRate is sampled
	WindowSeconds uint64
	Keys          []Key
}

// Parse reads a reply given as its stats by name. A reply without the header lines is not one (a server
// that ignores the group's name and sends its general stats); a rank's missing number is 0.
func Parse(s map[string]string) (Listing, error) {
	var l Listing
	var err error
	if l.SampleRate, err = header(s, SampleRate); err != nil {
		return l, err
	}
	if l.WindowSeconds, err = header(s, WindowSeconds); err != nil {
		return l, err
	}
	for rank := 1; rank <= MaxRanks; rank++ {
		prefix := Prefix(rank)
		key, ok := s[prefix+"key"]
		if !ok {
			break
		}
		k := Key{Key: key}
		if k.Rate, err = number(s, prefix+"rate"); err != nil {
			return l, err
		}
		if k.Reads, err = number(s, prefix+"reads"); err != nil {
			return l, err
		}
		if k.Writes, err = number(s, prefix+"writes"); err != nil {
			return l, err
		}
		if text, ok := s[prefix+"share"]; ok {
			if k.Share, err = strconv.ParseFloat(text, 64); err != nil {
				return l, fmt.Errorf("%sshare: %q is not a number", prefix, text)
			}
		}
		l.Keys = append(l.Keys, k)
	}
	return l, nil
}

func header(s map[string]string, name string) (uint64, error) {
	text, ok := s[name]
	if !ok {
		return 0, errors.New("no " + name + " in the reply")
	}
	v, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a number", name, text)
	}
	return v, nil
}

func number(s map[string]string, name string) (uint64, error) {
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
