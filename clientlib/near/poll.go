package near

import (
	"context"
	"errors"
	"time"

	"github.com/leasecached/leasecached/clientlib"
	"github.com/leasecached/leasecached/internal/hotlist"
)

// pollHotKeys asks every server for "stats hotkeys" each HotKeysPoll and marks the keys listed as hot
// until the next poll. When no server answers the group and one refused it (memcached: ERROR), it
// stops: local counting alone then finds hot keys.
func (nc *Cache) pollHotKeys() {
	defer close(nc.pollDone)
	t := time.NewTicker(nc.cfg.HotKeysPoll)
	defer t.Stop()
	for {
		select {
		case <-nc.stopPoll:
			return
		case <-t.C:
		}
		nc.follow() // a server dropped from the list loses its watcher even when no Get comes
		ctx, cancel := context.WithTimeout(context.Background(), nc.cfg.HotKeysPoll)
		stats, err := nc.c.ServerStats(ctx, "hotkeys")
		cancel()
		keys, answered := listedKeys(stats)
		nc.hot.setListed(keys)
		if !answered && refused(err) {
			nc.cfg.Logf("near: no server answers stats hotkeys (%v); local counting only", err)
			return
		}
	}
}

// listedKeys collects the decoded keys of every server's listing; answered says whether any server
// answered the group at all.
func listedKeys(stats map[string]map[string]string) (map[string]struct{}, bool) {
	keys := make(map[string]struct{})
	answered := false
	for _, s := range stats {
		l, err := hotlist.Parse(s)
		if err != nil {
			continue
		}
		answered = true
		for _, k := range l.Keys {
			if key, err := k.Decoded(); err == nil {
				keys[key] = struct{}{}
			}
		}
	}
	return keys, answered
}

func refused(err error) bool {
	return errors.Is(err, clientlib.ErrServerError) || errors.Is(err, clientlib.ErrClientError) ||
		errors.Is(err, clientlib.ErrProtocol)
}
