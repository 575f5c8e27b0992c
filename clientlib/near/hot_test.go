package near

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestHotness(t *testing.T) {
	t0 := time.Now()
	h := newHotness(3, time.Second, 2)
	var got []bool
	for i := 0; i < 4; i++ {
		got = append(got, h.read("a", t0))
	}
	assert.Equal(t, []bool{false, false, true, true}, got, "hot from the third read")
	assert.False(t, h.read("b", t0))
	assert.False(t, h.read("c", t0), "table full: c is not counted")
	assert.False(t, h.read("c", t0))
	assert.False(t, h.read("c", t0))
	assert.False(t, h.read("a", t0.Add(time.Second)), "a new window starts the counts over")
	h.setListed(map[string]struct{}{"d": {}})
	assert.True(t, h.read("d", t0.Add(time.Second)), "listed by a server: hot at once")
}
