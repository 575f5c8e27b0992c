package clientlib

import (
	"bytes"
	"context"
	"sync"
	"time"
)

// This file holds the classic text-protocol commands, one server per key.

// Reply lines of the storage and delete/touch/arith commands.
var (
	replyStored    = []byte("STORED")
	replyNotStored = []byte("NOT_STORED")
	replyExists    = []byte("EXISTS")
	replyNotFound  = []byte("NOT_FOUND")
	replyDeleted   = []byte("DELETED")
	replyTouched   = []byte("TOUCHED")
	replyEnd       = []byte("END")
	replyOK        = []byte("OK")
)

// Get returns the item for key, or ErrCacheMiss. The item's CAS field is set (the command is gets).
func (c *Client) Get(ctx context.Context, key string) (*Item, error) {
	return c.getOne(ctx, "gets ", key, false, 0)
}

// GetInto reads key's value into buf's storage, growing it only when the value does not fit, and returns
// the value and its client flags; ErrCacheMiss if absent. With a buffer large enough it allocates
// nothing: reuse the returned slice as the next call's buf.
func (c *Client) GetInto(ctx context.Context, key string, buf []byte) ([]byte, uint32, error) {
	srv, err := c.pick(key)
	if err != nil {
		return buf[:0], 0, err
	}
	var flags uint32
	hit := false
	buf = buf[:0]
	err = c.do(ctx, srv, "get", 1, func(cn *conn) error {
		cn.w.WriteString("get ")
		cn.w.WriteString(key)
		cn.w.Write(crlf)
		if err := cn.send(1); err != nil {
			return err
		}
		line, err := cn.readLine()
		if err != nil || bytes.Equal(line, replyEnd) {
			return err
		}
		h, err := cn.parseValue(line, c.cfg.MaxValueSize)
		if err != nil {
			return err
		}
		if h.lease {
			return cn.protoErr("LVALUE in a get reply", line)
		}
		if buf, err = cn.readDataInto(buf, h.size); err != nil {
			return err
		}
		flags, hit = h.flags, true
		if line, err = cn.readLine(); err == nil && !bytes.Equal(line, replyEnd) {
			err = cn.protoErr("expected END after a get's value", line)
		}
		return err
	})
	switch {
	case err != nil:
		return buf[:0], 0, err
	case !hit:
		return buf, 0, ErrCacheMiss
	}
	return buf, flags, nil
}

// GetAndTouch returns the item for key and resets its TTL in the same round trip (gats).
func (c *Client) GetAndTouch(ctx context.Context, key string, ttl time.Duration) (*Item, error) {
	return c.getOne(ctx, "gats ", key, true, exptime(ttl, c.now))
}

// getOne sends "<cmd>[<exp> ]<key>" (gets, or gats with its exptime) and reads one VALUE or none.
func (c *Client) getOne(ctx context.Context, cmd, key string, hasExp bool, exp int64) (*Item, error) {
	srv, err := c.pick(key)
	if err != nil {
		return nil, err
	}
	return c.getOn(ctx, srv, cmd, key, hasExp, exp)
}

// getOn is getOne on a given server.
func (c *Client) getOn(ctx context.Context, srv *server, cmd, key string, hasExp bool, exp int64) (*Item, error) {
	var it *Item
	err := c.do(ctx, srv, cmd[:len(cmd)-1], 1, func(cn *conn) error {
		cn.w.WriteString(cmd)
		if hasExp {
			cn.writeInt(exp)
			cn.w.WriteByte(' ')
		}
		cn.w.WriteString(key)
		cn.w.Write(crlf)
		if err := cn.send(1); err != nil {
			return err
		}
		return cn.readValues(c.cfg.MaxValueSize, false, func(_ string, h valueHeader, data []byte) {
			it = &Item{Key: key, Value: data, Flags: h.flags, CAS: h.cas}
		})
	})
	if err != nil {
		return nil, err
	}
	if it == nil {
		return nil, ErrCacheMiss
	}
	return it, nil
}

// readValues reads VALUE blocks up to END, handing each to fn; the key is copied out of the read
// buffer only when wantKey is set (a single-key get already knows it).
func (cn *conn) readValues(maxSize int, wantKey bool, fn func(key string, h valueHeader, data []byte)) error {
	for {
		line, err := cn.readLine()
		if err != nil {
			return err
		}
		if bytes.Equal(line, replyEnd) {
			return nil
		}
		h, err := cn.parseValue(line, maxSize)
		if err != nil {
			return err
		}
		if h.lease {
			return cn.protoErr("LVALUE in a get reply", line)
		}
		var key string
		if wantKey {
			key = string(h.key) // h.key points into the read buffer, which readData reuses
		}
		h.key = nil
		data, err := cn.readData(h.size)
		if err != nil {
			return err
		}
		fn(key, h, data)
	}
}

// Set stores the item unconditionally.
func (c *Client) Set(ctx context.Context, it *Item) error { return c.store(ctx, "set", it, 0) }

// Add stores the item only if the key is absent; otherwise ErrNotStored.
func (c *Client) Add(ctx context.Context, it *Item) error { return c.store(ctx, "add", it, 0) }

// Replace stores the item only if the key is present; otherwise ErrNotStored.
func (c *Client) Replace(ctx context.Context, it *Item) error { return c.store(ctx, "replace", it, 0) }

// Append adds the item's value after the stored value (flags and TTL are ignored); ErrNotStored if absent.
func (c *Client) Append(ctx context.Context, it *Item) error { return c.store(ctx, "append", it, 0) }

// Prepend adds the item's value before the stored value; ErrNotStored if absent.
func (c *Client) Prepend(ctx context.Context, it *Item) error { return c.store(ctx, "prepend", it, 0) }

// CompareAndSwap stores the item only if it is unchanged since it.CAS was read: ErrCASConflict if it
// changed, ErrCacheMiss if it is gone.
func (c *Client) CompareAndSwap(ctx context.Context, it *Item) error {
	return c.store(ctx, "cas", it, it.CAS)
}

func (c *Client) store(ctx context.Context, cmd string, it *Item, cas uint64) error {
	srv, err := c.pick(it.Key)
	if err != nil {
		return err
	}
	return c.storeOn(ctx, srv, cmd, it, cas)
}

// storeOn is store on a given server.
func (c *Client) storeOn(ctx context.Context, srv *server, cmd string, it *Item, cas uint64) error {
	if len(it.Value) > c.cfg.MaxValueSize {
		return ErrValueTooLarge
	}
	exp := exptime(it.TTL, c.now)
	return c.do(ctx, srv, cmd, 1, func(cn *conn) error {
		cn.writeStorageLine(cmd, it.Key, 0, it.Flags, exp, len(it.Value))
		if cmd == "cas" {
			cn.w.WriteByte(' ')
			cn.writeUint(cas)
		}
		cn.w.Write(crlf)
		cn.writeData(it.Value)
		if err := cn.send(1); err != nil {
			return err
		}
		return cn.readStoreReply()
	})
}

func (cn *conn) readStoreReply() error {
	line, err := cn.readLine()
	if err != nil {
		return err
	}
	switch {
	case bytes.Equal(line, replyStored):
		return nil
	case bytes.Equal(line, replyNotStored):
		return ErrNotStored
	case bytes.Equal(line, replyExists):
		return ErrCASConflict
	case bytes.Equal(line, replyNotFound):
		return ErrCacheMiss
	}
	return cn.unexpected(line)
}

// Delete removes the key; ErrCacheMiss if it was absent.
func (c *Client) Delete(ctx context.Context, key string) error {
	return c.simple(ctx, key, "delete ", false, 0, replyDeleted)
}

// Touch resets the key's TTL without fetching it; ErrCacheMiss if absent.
func (c *Client) Touch(ctx context.Context, key string, ttl time.Duration) error {
	return c.simple(ctx, key, "touch ", true, exptime(ttl, c.now), replyTouched)
}

// simple sends "<cmd><key>[ <arg>]" and expects want or NOT_FOUND.
func (c *Client) simple(ctx context.Context, key, cmd string, hasArg bool, arg int64, want []byte) error {
	srv, err := c.pick(key)
	if err != nil {
		return err
	}
	return c.simpleOn(ctx, srv, key, cmd, hasArg, arg, want)
}

// simpleOn is simple on a given server.
func (c *Client) simpleOn(ctx context.Context, srv *server, key, cmd string, hasArg bool, arg int64, want []byte) error {
	return c.do(ctx, srv, cmd[:len(cmd)-1], 1, func(cn *conn) error {
		cn.w.WriteString(cmd)
		cn.w.WriteString(key)
		if hasArg {
			cn.w.WriteByte(' ')
			cn.writeInt(arg)
		}
		cn.w.Write(crlf)
		if err := cn.send(1); err != nil {
			return err
		}
		line, err := cn.readLine()
		if err != nil {
			return err
		}
		switch {
		case bytes.Equal(line, want):
			return nil
		case bytes.Equal(line, replyNotFound):
			return ErrCacheMiss
		}
		return cn.unexpected(line)
	})
}

// Increment adds delta to the key's decimal value and returns the new value (wrapping at 2^64, as
// memcached does); ErrCacheMiss if absent, an ErrClientError *ServerError if the value is not a number.
func (c *Client) Increment(ctx context.Context, key string, delta uint64) (uint64, error) {
	return c.arith(ctx, "incr ", key, delta)
}

// Decrement subtracts delta, stopping at 0 (memcached never goes negative).
func (c *Client) Decrement(ctx context.Context, key string, delta uint64) (uint64, error) {
	return c.arith(ctx, "decr ", key, delta)
}

func (c *Client) arith(ctx context.Context, cmd, key string, delta uint64) (uint64, error) {
	srv, err := c.pick(key)
	if err != nil {
		return 0, err
	}
	var n uint64
	err = c.do(ctx, srv, cmd[:len(cmd)-1], 1, func(cn *conn) error {
		cn.w.WriteString(cmd)
		cn.w.WriteString(key)
		cn.w.WriteByte(' ')
		cn.writeUint(delta)
		cn.w.Write(crlf)
		if err := cn.send(1); err != nil {
			return err
		}
		line, err := cn.readLine()
		if err != nil {
			return err
		}
		if bytes.Equal(line, replyNotFound) {
			return ErrCacheMiss
		}
		v, ok := parseUint(line, 64)
		if !ok {
			return cn.unexpected(line)
		}
		n = v
		return nil
	})
	return n, err
}

// FlushAll invalidates every item on every live server.
func (c *Client) FlushAll(ctx context.Context) error {
	return c.eachServer(ctx, func(srv *server) error {
		return c.do(ctx, srv, "flush_all", 0, func(cn *conn) error {
			cn.w.WriteString("flush_all\r\n")
			if err := cn.send(1); err != nil {
				return err
			}
			line, err := cn.readLine()
			if err != nil {
				return err
			}
			if !bytes.Equal(line, replyOK) {
				return cn.unexpected(line)
			}
			return nil
		})
	})
}

// Version returns each live server's version string, by address.
func (c *Client) Version(ctx context.Context) (map[string]string, error) {
	out := make(map[string]string)
	var mu sync.Mutex
	err := c.eachServer(ctx, func(srv *server) error {
		v, err := c.versionOf(ctx, srv)
		if err == nil {
			mu.Lock()
			out[srv.addr] = v
			mu.Unlock()
		}
		return err
	})
	return out, err
}

// versionOf sends "version" to srv.
func (c *Client) versionOf(ctx context.Context, srv *server) (string, error) {
	var v string
	err := c.do(ctx, srv, "version", 0, func(cn *conn) error {
		cn.w.WriteString("version\r\n")
		if err := cn.send(1); err != nil {
			return err
		}
		line, err := cn.readLine()
		if err != nil {
			return err
		}
		b, ok := bytes.CutPrefix(line, []byte("VERSION "))
		if !ok {
			return cn.unexpected(line)
		}
		v = string(b)
		return nil
	})
	return v, err
}

// ServerStats returns each live server's "stats" (or "stats <group>" when group is not empty), by address.
func (c *Client) ServerStats(ctx context.Context, group string) (map[string]map[string]string, error) {
	out := make(map[string]map[string]string)
	var mu = make(chan struct{}, 1)
	err := c.eachServer(ctx, func(srv *server) error {
		stats := make(map[string]string)
		err := c.do(ctx, srv, "stats", 0, func(cn *conn) error {
			cn.w.WriteString("stats")
			if group != "" {
				cn.w.WriteByte(' ')
				cn.w.WriteString(group)
			}
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
					return nil
				}
				rest, ok := bytes.CutPrefix(line, []byte("STAT "))
				if !ok {
					return cn.unexpected(line)
				}
				name, value, _ := bytes.Cut(rest, []byte(" "))
				stats[string(name)] = string(value)
			}
		})
		mu <- struct{}{}
		out[srv.addr] = stats
		<-mu
		return err
	})
	return out, err
}
