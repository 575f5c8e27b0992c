package split

import (
	"context"
	"errors"
	"maps"
	"time"

	"github.com/leasecached/leasecached/clientlib"
	"github.com/leasecached/leasecached/clientlib/internal/placement"
	"github.com/leasecached/leasecached/internal/hotlist"
)

// pollHotKeys asks every server for "stats hotkeys" each HotKeysPoll and splits the keys listed at
// HotShare percent or more, until a poll no longer lists them. When no server answers the group and
// one refused it (memcached: ERROR), it stops: Config.Keys alone are then split.
func (s *Client) pollHotKeys() {
	defer close(s.pollDone)
	t := time.NewTicker(s.cfg.HotKeysPoll)
	defer t.Stop()
	for {
		select {
		case <-s.stopPoll:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.HotKeysPoll)
		stats, err := s.c.ServerStats(ctx, "hotkeys")
		cancel()
		keys, answered := hotKeys(stats, s.cfg.HotShare)
		if !answered && refused(err) {
			s.cfg.Logf("split: no server answers stats hotkeys (%v); splitting Config.Keys only", err)
			return
		}
		s.setHot(keys)
	}
}

// setHot installs the keys a poll found hot, rebuilding the table when they changed.
func (s *Client) setHot(keys map[string]struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if maps.Equal(keys, s.hot) {
		return
	}
	s.hot = keys
	s.cur.Store(buildTable(placement.Of(s.c), s.cfg.Copies, s.cfg.Keys, keys))
}

// hotKeys collects the keys listed at share percent or more by any server (a copy's name counts for
// its key, so that a split key stays split although each copy takes a part of its load); answered
// says whether any server answered the group at all. Format: doc/design/hotkeys.md.
func hotKeys(stats map[string]map[string]string, share float64) (map[string]struct{}, bool) {
	keys := make(map[string]struct{})
	answered := false
	for _, st := range stats {
		l, err := hotlist.Parse(st)
		if err != nil {
			continue
		}
		answered = true
		for _, hk := range l.Keys {
			if hk.Share < share {
				continue
			}
			if k, err := hk.Decoded(); err == nil && len(k)+len(Suffix)+4 <= clientlib.MaxKeyLength {
				keys[baseOf(k)] = struct{}{}
			}
		}
	}
	return keys, answered
}

func refused(err error) bool {
	return errors.Is(err, clientlib.ErrServerError) || errors.Is(err, clientlib.ErrClientError) ||
		errors.Is(err, clientlib.ErrProtocol)
}
