package clientlib

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPoolRetire: a removed server's pool (SetServers) closes its idle connections at once and a busy one
// when its request ends, and still serves a request that picked the server before it was removed.
func TestPoolRetire(t *testing.T) {
	srv := newFakeServer(t)
	cfg := Config{}.withDefaults()
	s := &server{addr: srv.addr()}
	p := newPool(srv.addr(), &cfg)
	s.pool = p
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	idle, err := p.get(ctx, s)
	require.NoError(t, err)
	busy, err := p.get(ctx, s)
	require.NoError(t, err)
	p.put(idle)
	require.Equal(t, 1, p.idleCount())

	p.retire()
	require.Zero(t, p.idleCount(), "idle connections closed at once")
	_, err = idle.nc.Write([]byte("version\r\n"))
	require.Error(t, err, "the idle connection is closed")

	late, err := p.get(ctx, s) // picked before the removal
	require.NoError(t, err)
	p.put(late)
	p.put(busy)
	require.Zero(t, p.idleCount(), "connections put back after the removal are not kept")
	for _, cn := range []*conn{late, busy} {
		_, err = cn.nc.Write([]byte("version\r\n"))
		require.Error(t, err, "closed when its request ended")
	}
}
