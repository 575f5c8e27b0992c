// Package ketama is a consistent-hash ring whose key placement matches libmemcached's weighted ketama
// and twemproxy's `distribution: ketama` with `hash: md5`.
//
// The contract: for the same ordered list of nodes (name and weight), Ring.Get returns the node that
// twemproxy would route the key to. That compatibility is why the details are as they are:
//
//   - each node owns floor(weight/total * 160/4 * n + 1e-10) * 4 points, computed in float32 as the C
//     code does (160 points per node when all weights are equal);
//   - its points come from md5("<name>-<i>") for i = 0, 1, ...: each 16-byte digest yields 4 points,
//     read as little-endian uint32s;
//   - a key hashes to the first 4 bytes of md5(key), little-endian, and belongs to the first point at
//     or after that value, wrapping around to the first point of the ring;
//   - a node's name is what the operator called it or, without one, "host:port", or just "host" when
//     the port is 11211 (libmemcached's rule, which twemproxy keeps): see NodeName.
//
// A Ring is immutable and safe for concurrent use; Get allocates nothing.
package ketama

import (
	"crypto/md5"
	"net"
	"sort"
	"strconv"
	"strings"
)

// Ring layout constants, named as in libmemcached/twemproxy.
const (
	// PointsPerServer is the number of points a node of average weight owns.
	PointsPerServer = 160
	// pointsPerHash: one md5 digest (16 bytes) yields four 32-bit points.
	pointsPerHash = 4
	// weightEpsilon keeps floorf from losing a point to float rounding, as the C code does.
	weightEpsilon = 0.0000000001
	// defaultPort is the port libmemcached leaves out of a node's name.
	defaultPort = 11211
	// maxKeyBytes bounds the stack buffer a key is hashed from (memcached keys are at most 250 bytes).
	maxKeyBytes = 256
)

// Node is one server on the ring.
type Node struct {
	// Name is hashed to place the node's points. Use NodeName to derive it like twemproxy does.
	Name string
	// Weight scales the node's share of points; values below 1 count as 1.
	Weight int
}

type point struct {
	value uint32
	node  int32
}

// Ring maps keys to node indexes.
type Ring struct {
	points []point
	n      int
}

// NodeName returns the name twemproxy gives a server configured as "addr" with no explicit name:
// "host:port", or "host" when the port is 11211; for a Unix socket's path (an address containing "/"),
// the path followed by ":". twemproxy names a socket server as it does a host, name, ':' and port, and a
// socket has an empty port (checked against nutcracker 0.5.0 in TestKetamaMatchesTwemproxy).
func NodeName(addr string) string {
	if strings.Contains(addr, "/") {
		return addr + ":"
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if p, err := strconv.Atoi(port); err == nil && p == defaultPort {
		return host
	}
	return addr
}

// New builds a ring over nodes. Get returns indexes into nodes.
func New(nodes []Node) *Ring {
	r := &Ring{n: len(nodes)}
	if len(nodes) == 0 {
		return r
	}
	var total uint32
	for _, nd := range nodes {
		total += uint32(weightOf(nd))
	}
	live := float32(len(nodes))
	for idx, nd := range nodes {
		pct := float32(weightOf(nd)) / float32(total)
		count := uint32(floor32(pct*PointsPerServer/pointsPerHash*live+weightEpsilon)) * pointsPerHash
		for i := uint32(0); i < count/pointsPerHash; i++ {
			digest := md5.Sum([]byte(nd.Name + "-" + strconv.FormatUint(uint64(i), 10)))
			for a := 0; a < pointsPerHash; a++ {
				r.points = append(r.points, point{value: le32(digest[a*4:]), node: int32(idx)})
			}
		}
	}
	// Stable sort keeps ties in node order; twemproxy's qsort leaves ties unspecified, and a tie
	// between two nodes' md5 points has never been observed in practice.
	sort.SliceStable(r.points, func(i, j int) bool { return r.points[i].value < r.points[j].value })
	return r
}

// Len is the number of nodes the ring was built over.
func (r *Ring) Len() int { return r.n }

// Points is the number of points on the ring (160 per node when weights are equal).
func (r *Ring) Points() int { return len(r.points) }

// Get returns the index of the node that owns key, or -1 if the ring is empty.
func (r *Ring) Get(key string) int {
	if len(r.points) == 0 {
		return -1
	}
	return r.lookup(Hash(key))
}

func (r *Ring) lookup(h uint32) int {
	pts := r.points
	i := sort.Search(len(pts), func(i int) bool { return pts[i].value >= h })
	if i == len(pts) {
		i = 0
	}
	return int(pts[i].node)
}

// Hash is twemproxy's md5 key hash: the first four bytes of md5(key), little-endian.
func Hash(key string) uint32 {
	var buf [maxKeyBytes]byte
	var digest [md5.Size]byte
	if len(key) <= len(buf) {
		n := copy(buf[:], key)
		digest = md5.Sum(buf[:n])
	} else {
		digest = md5.Sum([]byte(key))
	}
	return le32(digest[:])
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func weightOf(n Node) int {
	if n.Weight < 1 {
		return 1
	}
	return n.Weight
}

// floor32 is C's floorf for the non-negative values used here.
func floor32(f float32) float32 { return float32(int64(f)) }
