package clientlib_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/leasecached/leasecached/clientlib"
)

// loadUser stands in for a database query.
func loadUser(ctx context.Context, id string) ([]byte, error) {
	return []byte(`{"id":"` + id + `"}`), nil
}

func ExampleNew() {
	c, err := clientlib.New(clientlib.Config{
		Servers: []clientlib.Server{
			{Addr: "10.0.0.1:11211"},
			{Addr: "10.0.0.2:11211", Weight: 2}, // twice the keys of the others
			{Addr: "10.0.0.3:11211"},
		},
		Distribution:   clientlib.Ketama, // placement compatible with twemproxy and libmemcached
		MaxOpenPerAddr: 32,               // callers beyond this wait, within their context
		Fill:           clientlib.FillOptions{TTL: 10 * time.Minute, TTLJitter: time.Minute},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
}

// GetOrFill is the cache-aside read with herd protection: one fill per key per expiry across every
// process sharing the cache.
func ExampleClient_GetOrFill() {
	c, _ := clientlib.NewFromAddrs("127.0.0.1:11211")
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()

	v, err := c.GetOrFill(ctx, "user:42", loadUser, &clientlib.FillOptions{
		TTL:         5 * time.Minute,
		TTLJitter:   30 * time.Second, // keys filled together do not expire together
		FillTimeout: 2 * time.Second,
		AcceptStale: true, // while another process refills, a slightly old profile is fine
	})
	if err != nil {
		log.Printf("user 42: %v", err) // the fill's error, a timeout, or ErrLeaseWaitExhausted
		return
	}
	fmt.Printf("%s (from %v)\n", v.Data, v.Source)
}

// StaleWhileRefresh answers at once with the last value while one process, fleet-wide, refreshes it.
func ExampleClient_GetOrFill_staleWhileRefresh() {
	c, _ := clientlib.NewFromAddrs("127.0.0.1:11211")
	defer c.Close()
	v, err := c.GetOrFill(context.Background(), "homepage", func(ctx context.Context, key string) ([]byte, error) {
		return []byte("<html>...</html>"), nil // slow render
	}, &clientlib.FillOptions{TTL: time.Minute, StaleWhileRefresh: true})
	if err == nil && v.Source == clientlib.SourceStale {
		log.Print("served the previous homepage; a refresh is running")
	}
}

func ExampleClient_Get() {
	c, _ := clientlib.NewFromAddrs("127.0.0.1:11211")
	defer c.Close()
	it, err := c.Get(context.Background(), "session:abc")
	switch {
	case errors.Is(err, clientlib.ErrCacheMiss):
		fmt.Println("not cached")
	case err != nil:
		log.Print(err) // network, timeout, or *ServerError
	default:
		fmt.Printf("%s flags=%d\n", it.Value, it.Flags)
	}
}

func ExampleClient_Set() {
	c, _ := clientlib.NewFromAddrs("127.0.0.1:11211")
	defer c.Close()
	err := c.Set(context.Background(), &clientlib.Item{Key: "greeting", Value: []byte("hello"), TTL: time.Hour})
	if err != nil {
		log.Print(err)
	}
}

// GetMulti costs one round trip per server, and the servers are asked in parallel.
func ExampleClient_GetMulti() {
	c, _ := clientlib.NewFromAddrs("10.0.0.1:11211", "10.0.0.2:11211")
	defer c.Close()
	items, err := c.GetMulti(context.Background(), []string{"user:1", "user:2", "user:3"})
	if err != nil {
		log.Print(err) // items still holds what the healthy servers returned
	}
	for key, it := range items {
		fmt.Println(key, len(it.Value))
	}
}

// CompareAndSwap retries a read-modify-write until no other writer interferes.
func ExampleClient_CompareAndSwap() {
	c, _ := clientlib.NewFromAddrs("127.0.0.1:11211")
	defer c.Close()
	ctx := context.Background()
	for attempt := 0; attempt < 5; attempt++ {
		it, err := c.Get(ctx, "tags")
		if err != nil {
			log.Print(err)
			return
		}
		it.Value = append(it.Value, ",new"...)
		err = c.CompareAndSwap(ctx, it)
		if !errors.Is(err, clientlib.ErrCASConflict) {
			return // stored, or a real error
		}
	}
}

func ExampleClient_Increment() {
	c, _ := clientlib.NewFromAddrs("127.0.0.1:11211")
	defer c.Close()
	ctx := context.Background()
	_ = c.Add(ctx, &clientlib.Item{Key: "hits", Value: []byte("0")}) // ErrNotStored if it exists: fine
	n, err := c.Increment(ctx, "hits", 1)
	if err == nil {
		fmt.Println("hits:", n)
	}
}

// LeaseGet and LeaseSet are the raw lease commands GetOrFill is built on.
func ExampleClient_LeaseGet() {
	c, _ := clientlib.NewFromAddrs("127.0.0.1:11211")
	defer c.Close()
	ctx := context.Background()
	r, err := c.LeaseGet(ctx, "report:today")
	if err != nil {
		log.Print(err)
		return
	}
	switch r.Status {
	case clientlib.LeaseHit:
		fmt.Printf("%s\n", r.Item.Value)
	case clientlib.LeaseGranted: // we refill; a delete meanwhile makes LeaseSet return ErrNotStored
		data, _ := loadUser(ctx, "today")
		err := c.LeaseSet(ctx, &clientlib.Item{Key: "report:today", Value: data, TTL: time.Minute}, r.Token)
		if errors.Is(err, clientlib.ErrNotStored) {
			log.Print("value changed while we read it: not cached")
		}
	case clientlib.LeaseHotMiss: // someone else refills: use r.Item (stale, may be nil) or retry soon
	}
}

// The meta commands take a MetaFlags builder; mg with Vivify is memcached's own herd protection.
func ExampleClient_MetaGet() {
	c, _ := clientlib.NewFromAddrs("127.0.0.1:11211")
	defer c.Close()
	r, err := c.MetaGet(context.Background(), "feed:7",
		clientlib.MetaFlags{}.ReturnValue().ReturnTTL().Vivify(30))
	if err != nil {
		log.Print(err)
		return
	}
	if r.Won() {
		fmt.Println("we recache feed:7; others see Z and wait or use the stale value")
	}
}

// MetaFlags values are immutable: a base set can be shared and extended. Flags without a method go
// through Raw.
func ExampleMetaFlags() {
	c, _ := clientlib.NewFromAddrs("127.0.0.1:11211")
	defer c.Close()
	base := clientlib.MetaFlags{}.ReturnValue().ReturnCAS()
	withTTL := base.ReturnTTL().Raw("u") // "mg <key> v c t u"; base is still "v c"
	r, err := c.MetaGet(context.Background(), "feed:7", withTTL)
	if err != nil {
		log.Print(err)
		return
	}
	fmt.Printf("%d bytes, CAS %d, %d s left\n", len(r.Value), r.CAS(), r.TTL())
}

// Stats counters are plain numbers to export to any metrics system.
func ExampleClient_Stats() {
	c, _ := clientlib.NewFromAddrs("127.0.0.1:11211")
	defer c.Close()
	s := c.Stats()
	fmt.Printf("fills=%d coalesced=%d stale=%d fallbacks=%d\n", s.FillsStarted, s.CallersCoalesced, s.StaleServed, s.Fallbacks)
	for _, srv := range s.Servers {
		fmt.Printf("%s errors=%d ejected=%v\n", srv.Addr, srv.Errors, srv.Ejected)
	}
	// Output:
	// fills=0 coalesced=0 stale=0 fallbacks=0
	// 127.0.0.1:11211 errors=0 ejected=false
}

// ServerFor tells which server a key lives on: handy when debugging a hot key.
func ExampleClient_ServerFor() {
	c, _ := clientlib.New(clientlib.Config{Servers: []clientlib.Server{
		{Addr: "127.0.0.1:21201"}, {Addr: "127.0.0.1:21202"}, {Addr: "127.0.0.1:21203"},
	}})
	defer c.Close()
	addr, _ := c.ServerFor("fx:3") // the server twemproxy would also pick
	fmt.Println(addr)
	// Output: 127.0.0.1:21203
}
