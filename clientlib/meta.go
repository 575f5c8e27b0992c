package clientlib

import (
	"context"
	"strconv"
)

// This file holds memcached 1.6's meta commands (mg, ms, md, ma) and MetaFlags, the builder for their
// flags. The flags are passed through as given: the server defines their meaning (memcached's
// doc/protocol.txt); the builder only spells the ones GetOrFill and a read-through cache use. Any
// other goes through Raw: Raw("k") (key), Raw("s") (size), Raw("h") (hit before), Raw("l") (last
// access), Raw("O"+opaque), Raw("u") (no LRU bump), Raw("b") (base64 key).

// MetaFlags is an immutable list of meta-command flags; each method returns an extended copy, so a
// base set can be shared: base := MetaFlags{}.ReturnValue(); a := base.ReturnCAS().
type MetaFlags struct{ toks []string }

// Raw adds one flag token as written on the wire, e.g. "v" or "T30".
func (f MetaFlags) Raw(tok string) MetaFlags {
	f.toks = append(f.toks[:len(f.toks):len(f.toks)], tok)
	return f
}

func (f MetaFlags) num(flag byte, n int64) MetaFlags {
	return f.Raw(string(flag) + strconv.FormatInt(n, 10))
}

func (f MetaFlags) quiet() bool {
	for _, t := range f.toks {
		if t == "q" {
			return true
		}
	}
	return false
}

// ReturnValue asks mg (or ma) for the value (v).
func (f MetaFlags) ReturnValue() MetaFlags { return f.Raw("v") }

// ReturnCAS asks for the item's CAS value (c).
func (f MetaFlags) ReturnCAS() MetaFlags { return f.Raw("c") }

// ReturnFlags asks for the client flags (f).
func (f MetaFlags) ReturnFlags() MetaFlags { return f.Raw("f") }

// ReturnTTL asks for the remaining TTL in seconds, -1 for none (t).
func (f MetaFlags) ReturnTTL() MetaFlags { return f.Raw("t") }

// Quiet suppresses the uninteresting reply (EN for mg, HD for ms/md/ma); the client then ends the
// request with mn so it still knows when the reply is complete (q).
func (f MetaFlags) Quiet() MetaFlags { return f.Raw("q") }

// Vivify creates an empty item on a miss with this TTL and gives this caller the win flag W, so
// only one client recaches (N).
func (f MetaFlags) Vivify(ttlSeconds int64) MetaFlags { return f.num('N', ttlSeconds) }

// Recache wins the item for recache (W) when its remaining TTL is below ttlSeconds (R).
func (f MetaFlags) Recache(ttlSeconds int64) MetaFlags { return f.num('R', ttlSeconds) }

// SetTTL updates (mg: touches) the TTL (T).
func (f MetaFlags) SetTTL(ttlSeconds int64) MetaFlags { return f.num('T', ttlSeconds) }

// SetClientFlags sets the stored client flags on ms (F).
func (f MetaFlags) SetClientFlags(flags uint32) MetaFlags { return f.num('F', int64(flags)) }

// CompareCAS makes the write conditional on the item's CAS value (C).
func (f MetaFlags) CompareCAS(cas uint64) MetaFlags {
	return f.Raw("C" + strconv.FormatUint(cas, 10))
}

// Invalidate: on ms, mark the item invalid if the CAS is older; on md, mark stale instead of deleting (I).
func (f MetaFlags) Invalidate() MetaFlags { return f.Raw("I") }

// Mode sets the ms mode (S set, E add, A append, P prepend, R replace) or ma mode (I incr, D decr) (M).
func (f MetaFlags) Mode(m byte) MetaFlags { return f.Raw("M" + string(m)) }

// Delta sets the ma delta (D).
func (f MetaFlags) Delta(d uint64) MetaFlags { return f.Raw("D" + strconv.FormatUint(d, 10)) }

// Initial sets the value ma creates on a miss when combined with Vivify (J).
func (f MetaFlags) Initial(n uint64) MetaFlags { return f.Raw("J" + strconv.FormatUint(n, 10)) }

// MetaResult is a meta command's reply.
type MetaResult struct {
	// Status is the two-letter code: VA (value follows), HD (success, no value), EN (miss), NF (not
	// found), NS (not stored), EX (CAS mismatch).
	Status string
	// Value is the data block of a VA reply.
	Value []byte
	// Flags are the returned flag tokens, e.g. "c123", "t-1", "W", "X", "Z".
	Flags []string
}

// Flag returns the value of the returned flag f ("" for a bare flag like W) and whether it is present.
func (r *MetaResult) Flag(f byte) (string, bool) {
	for _, t := range r.Flags {
		if len(t) > 0 && t[0] == f {
			return t[1:], true
		}
	}
	return "", false
}

func (r *MetaResult) uintFlag(f byte) uint64 {
	v, _ := r.Flag(f)
	n, _ := strconv.ParseUint(v, 10, 64)
	return n
}

// CAS is the returned CAS value (asked for with ReturnCAS), else 0.
func (r *MetaResult) CAS() uint64 { return r.uintFlag('c') }

// ClientFlags is the returned client flags (asked for with ReturnFlags), else 0.
func (r *MetaResult) ClientFlags() uint32 { return uint32(r.uintFlag('f')) }

// TTL is the returned remaining TTL in seconds (-1: never expires), asked for with ReturnTTL.
func (r *MetaResult) TTL() int64 {
	v, _ := r.Flag('t')
	n, _ := strconv.ParseInt(v, 10, 64)
	return n
}

// Won reports W: this caller won the right to recache the item.
func (r *MetaResult) Won() bool { _, ok := r.Flag('W'); return ok }

// Stale reports X: the item is marked stale.
func (r *MetaResult) Stale() bool { _, ok := r.Flag('X'); return ok }

// AlreadyWon reports Z: another client already won the recache.
func (r *MetaResult) AlreadyWon() bool { _, ok := r.Flag('Z'); return ok }

// MetaGet is mg. A miss returns ErrCacheMiss (with Status "EN").
func (c *Client) MetaGet(ctx context.Context, key string, flags MetaFlags) (*MetaResult, error) {
	return c.meta(ctx, "mg", key, nil, false, flags, "EN")
}

// MetaSet is ms with value as the data block. NS gives ErrNotStored, EX ErrCASConflict, NF ErrCacheMiss.
func (c *Client) MetaSet(ctx context.Context, key string, value []byte, flags MetaFlags) (*MetaResult, error) {
	if len(value) > c.cfg.MaxValueSize {
		return nil, ErrValueTooLarge
	}
	return c.meta(ctx, "ms", key, value, true, flags, "HD")
}

// MetaDelete is md. NF gives ErrCacheMiss, EX ErrCASConflict.
func (c *Client) MetaDelete(ctx context.Context, key string, flags MetaFlags) (*MetaResult, error) {
	return c.meta(ctx, "md", key, nil, false, flags, "HD")
}

// MetaArithmetic is ma. With ReturnValue the new number is in Value. NF gives ErrCacheMiss.
func (c *Client) MetaArithmetic(ctx context.Context, key string, flags MetaFlags) (*MetaResult, error) {
	return c.meta(ctx, "ma", key, nil, false, flags, "HD")
}

// meta sends one meta command. quietStatus is the reply a quiet (q) request leaves out.
func (c *Client) meta(ctx context.Context, cmd, key string, value []byte, hasData bool, flags MetaFlags, quietStatus string) (*MetaResult, error) {
	srv, err := c.pick(key)
	if err != nil {
		return nil, err
	}
	return c.metaOn(ctx, srv, cmd, key, value, hasData, flags, quietStatus)
}

// metaOn is meta on a given server.
func (c *Client) metaOn(ctx context.Context, srv *server, cmd, key string, value []byte, hasData bool, flags MetaFlags, quietStatus string) (*MetaResult, error) {
	quiet := flags.quiet()
	res := &MetaResult{}
	err := c.do(ctx, srv, cmd, 1, func(cn *conn) error {
		cn.w.WriteString(cmd)
		cn.w.WriteByte(' ')
		cn.w.WriteString(key)
		if hasData {
			cn.w.WriteByte(' ')
			cn.writeUint(uint64(len(value)))
		}
		for _, t := range flags.toks {
			cn.w.WriteByte(' ')
			cn.w.WriteString(t)
		}
		cn.w.Write(crlf)
		if hasData {
			cn.writeData(value)
		}
		replies := 1
		if quiet {
			cn.w.WriteString("mn\r\n")
			replies = untilMN
		}
		if err := cn.send(replies); err != nil {
			return err
		}
		return cn.readMeta(res, quiet, quietStatus, c.cfg.MaxValueSize)
	})
	if err != nil {
		return nil, err
	}
	return res, metaStatusError(res.Status)
}

func (cn *conn) readMeta(res *MetaResult, quiet bool, quietStatus string, maxSize int) error {
	line, err := cn.readLine()
	if err != nil {
		return err
	}
	if quiet && string(line) == "MN" {
		res.Status = quietStatus
		return nil
	}
	var scratch [16][]byte
	f := fields(scratch[:0], line)
	if len(f) == 0 || len(f[0]) != 2 {
		return cn.unexpected(line)
	}
	res.Status = string(f[0])
	rest := f[1:]
	switch res.Status {
	case "VA":
		if len(rest) == 0 {
			return cn.unexpected(line)
		}
		size, ok := parseUint(rest[0], 31)
		if !ok || int(size) > maxSize+(1<<10) {
			return cn.unexpected(line)
		}
		rest = rest[1:]
		res.Flags = tokens(rest)
		if res.Value, err = cn.readData(int(size)); err != nil {
			return err
		}
	case "HD", "EN", "NF", "NS", "EX":
		res.Flags = tokens(rest)
	default:
		return cn.unexpected(line)
	}
	if quiet { // the quiet reply was not suppressed: the mn's MN still follows
		line, err := cn.readLine()
		if err != nil {
			return err
		}
		if string(line) != "MN" {
			return cn.protoErr("expected MN after quiet meta reply", line)
		}
	}
	return nil
}

func tokens(b [][]byte) []string {
	if len(b) == 0 {
		return nil
	}
	out := make([]string, len(b))
	for i, t := range b {
		out[i] = string(t)
	}
	return out
}

func metaStatusError(status string) error {
	switch status {
	case "EN", "NF":
		return ErrCacheMiss
	case "NS":
		return ErrNotStored
	case "EX":
		return ErrCASConflict
	}
	return nil
}
