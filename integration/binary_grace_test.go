package integration

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// --grace for binary clients: the first GET of an expired key misses and refills, the others get the grace
// copy as a hit (README, "Protocol").
func TestGraceBinary(t *testing.T) {
	d := startLeasecached(t, "--grace", "30s", "--lease-window", "5s")
	text := dialRaw(t, d)
	require.Equal(t, "STORED\r\nSTORED\r\n", ask(t, text, "set k 7 1 2\r\nv1\r\nset probe 0 1 1\r\np\r\n"))
	waitExpired(t, text, "probe")

	get := func(c net.Conn) (status uint16, value string) {
		req := make([]byte, 24, 25)
		req[0], req[1], req[3] = 0x80, 0x00, 1 // GET, key length 1
		binary.BigEndian.PutUint32(req[8:], 1)
		req = append(req, 'k')
		require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
		_, err := c.Write(req)
		require.NoError(t, err)
		hdr := make([]byte, 24)
		_, err = io.ReadFull(c, hdr)
		require.NoError(t, err)
		body := make([]byte, binary.BigEndian.Uint32(hdr[8:]))
		_, err = io.ReadFull(c, body)
		require.NoError(t, err)
		return binary.BigEndian.Uint16(hdr[6:]), string(body[hdr[4]:])
	}
	a, err := net.Dial("tcp", d.addr)
	require.NoError(t, err)
	defer a.Close()
	b, err := net.Dial("tcp", d.addr)
	require.NoError(t, err)
	defer b.Close()
	status, _ := get(a)
	assert.Equal(t, uint16(1), status, "the first reader misses and refills")
	status, value := get(b)
	assert.Equal(t, uint16(0), status, "the others get the grace copy")
	assert.Equal(t, "v1", value)
	assert.Equal(t, "1", statsOf(t, text)["get_grace_hits"])
}
