package clientlib

import (
	"bytes"
	"context"
	"errors"
)

// LeaseStatus is what a lease-get found.
type LeaseStatus int

const (
	// LeaseHit: the key holds a fresh value.
	LeaseHit LeaseStatus = iota + 1
	// LeaseGranted: a miss, and this caller now holds the key's lease: it should refill the key and
	// LeaseSet the value with the token.
	LeaseGranted
	// LeaseHotMiss: a miss while another client holds the lease: wait and retry, or use the stale value.
	LeaseHotMiss
)

func (s LeaseStatus) String() string {
	switch s {
	case LeaseHit:
		return "hit"
	case LeaseGranted:
		return "granted"
	case LeaseHotMiss:
		return "hot-miss"
	}
	return "unknown"
}

// hotMissToken is the LVALUE token that means "someone else holds the lease"; real tokens are >= 2.
const hotMissToken = 1

// LeaseResult is one key's lease-get outcome.
type LeaseResult struct {
	Status LeaseStatus
	// Item is the value on a hit. On a miss it is the key's stale value (the last value before it
	// expired or was deleted) when the server still holds one, else nil.
	Item *Item
	// Token is the lease to pass to LeaseSet when Status is LeaseGranted.
	Token uint64
}

// ErrLeasesUnsupported: the server answered lease-get with ERROR (plain memcached, for instance).
var ErrLeasesUnsupported = errors.New("clientlib: server does not support lease-get")

// LeaseGet fetches key under leasecached's lease contract: a hit, a granted lease (with the stale value
// if any), or a hot miss (with the stale value if any). A server found not to speak leases gives
// ErrLeasesUnsupported without being sent lease-get (a proxy such as twemproxy closes the connection on
// it); what a server speaks is learned once, on first use.
func (c *Client) LeaseGet(ctx context.Context, key string) (LeaseResult, error) {
	srv, err := c.pick(key)
	if err != nil {
		return LeaseResult{}, err
	}
	switch p, err := c.capabilities(ctx, srv); {
	case err != nil:
		return LeaseResult{}, err
	case p != protoLeases:
		return LeaseResult{}, ErrLeasesUnsupported
	}
	return c.leaseGet(ctx, srv, key)
}

// leaseGet is LeaseGet on a given server, without the capability check.
func (c *Client) leaseGet(ctx context.Context, srv *server, key string) (LeaseResult, error) {
	var res LeaseResult
	err := c.do(ctx, srv, "lease-get", 1, func(cn *conn) error {
		cn.w.WriteString("lease-get ")
		cn.w.WriteString(key)
		cn.w.Write(crlf)
		if err := cn.send(1); err != nil {
			return err
		}
		for {
			line, err := cn.readLine()
			if err != nil {
				return err
			}
			if bytes.Equal(line, replyEnd) {
				if res.Status == 0 {
					return cn.protoErr("lease-get reply without a block for the key", line)
				}
				return nil
			}
			if bytes.Equal(line, lineError) {
				return ErrLeasesUnsupported
			}
			h, err := cn.parseValue(line, c.cfg.MaxValueSize)
			if err != nil {
				return err
			}
			if res.Status != 0 || string(h.key) != key {
				return cn.protoErr("lease-get reply for another key", line)
			}
			h.key = nil
			data, err := cn.readData(h.size)
			if err != nil {
				return err
			}
			switch {
			case !h.lease:
				res = LeaseResult{Status: LeaseHit, Item: &Item{Key: key, Value: data, Flags: h.flags, CAS: h.cas}}
				continue
			case h.cas == hotMissToken:
				res.Status = LeaseHotMiss
			case h.cas > hotMissToken:
				res.Status, res.Token = LeaseGranted, h.cas
			default:
				return cn.protoErr("lease-get token 0", line)
			}
			if h.size > 0 {
				res.Item = &Item{Key: key, Value: data, Flags: h.flags}
			}
		}
	})
	return res, err
}

// LeaseSet stores it if token is the key's current lease, consuming the lease. ErrNotStored means the
// token was not valid any more (lapsed, already used, or invalidated by a write or delete since the
// grant): the cache was left unchanged, which is what protects it from a stale set.
func (c *Client) LeaseSet(ctx context.Context, it *Item, token uint64) error {
	srv, err := c.pick(it.Key)
	if err != nil {
		return err
	}
	return c.leaseSet(ctx, srv, it, token)
}

// leaseSet is LeaseSet on a given server.
func (c *Client) leaseSet(ctx context.Context, srv *server, it *Item, token uint64) error {
	if len(it.Value) > c.cfg.MaxValueSize {
		return ErrValueTooLarge
	}
	exp := exptime(it.TTL, c.now)
	return c.do(ctx, srv, "lease-set", 1, func(cn *conn) error {
		cn.writeStorageLine("lease-set", it.Key, token, it.Flags, exp, len(it.Value))
		cn.w.Write(crlf)
		cn.writeData(it.Value)
		if err := cn.send(1); err != nil {
			return err
		}
		return cn.readStoreReply()
	})
}
