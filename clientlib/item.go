package clientlib

import (
	"time"
)

// Protocol limits, as memcached defines them.
const (
	// MaxKeyLength is memcached's KEY_MAX_LENGTH.
	MaxKeyLength = 250
	// relativeExpiryLimit: an exptime above 30 days is an absolute Unix time, not a relative one.
	relativeExpiryLimit = 30 * 24 * time.Hour
)

// Item is one cache entry.
type Item struct {
	Key   string
	Value []byte
	// Flags are the opaque 32-bit client flags stored with the value.
	Flags uint32
	// TTL is the time to live on writes; 0 means never expire. It is sent in whole seconds, rounded up,
	// and a TTL over 30 days is sent as an absolute time, as memcached requires.
	TTL time.Duration
	// CAS is the compare-and-swap unique, filled by Get/GetMulti/GetAndTouch and used by CompareAndSwap.
	CAS uint64
}

// validKey reports whether key can be sent on the text protocol: 1..250 bytes, no space or control byte.
func validKey(key string) bool {
	if len(key) == 0 || len(key) > MaxKeyLength {
		return false
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

// exptime converts a TTL to memcached's exptime field: 0 never expires, a negative TTL expires the
// item at once (-1), sub-second TTLs round up to a second rather than to "never".
func exptime(ttl time.Duration, now func() time.Time) int64 {
	if ttl == 0 {
		return 0
	}
	if ttl < 0 {
		return -1
	}
	secs := int64((ttl + time.Second - 1) / time.Second)
	if ttl > relativeExpiryLimit {
		return now().Unix() + secs
	}
	return secs
}
