package near

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseLine(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		act        action
		key        string
	}{
		{"stored", "ts=1.2 gid=3 type=item_store key=a status=stored cmd=set ttl=0 clsid=1 cfd=9 size=1", actInvalidate, "a"},
		{"not stored still invalidates", "ts=1.2 gid=3 type=item_store key=a status=not_stored cmd=add ttl=0 clsid=1 cfd=9 size=1", actInvalidate, "a"},
		{"too large still invalidates", "ts=1.2 gid=3 type=item_store key=a status=too_large cmd=set ttl=0 clsid=0 cfd=9 size=0", actInvalidate, "a"},
		{"encoded key", "ts=1.2 gid=3 type=item_store key=user%3A42%20x status=stored cmd=set ttl=0 clsid=1 cfd=9 size=1", actInvalidate, "user:42 x"},
		{"plus is a plus", "ts=1.2 gid=3 type=deleted key=a+b cmd=delete clsid=1 size=1", actInvalidate, "a+b"},
		{"deleted", "ts=1.2 gid=3 type=deleted key=k cmd=md clsid=1 size=1", actInvalidate, "k"},
		{"flush_all", "ts=1.2 gid=3 type=flush_all delay=0 cfd=9", actFlush, ""},
		{"skipped", "skipped=12", actFlush, ""},
		{"bad encoding flushes", "ts=1.2 gid=3 type=deleted key=%zz cmd=delete clsid=1 size=1", actFlush, ""},
		{"no key flushes", "ts=1.2 gid=3 type=item_store status=stored", actFlush, ""},
		{"fetch ignored", "ts=1.2 gid=3 type=item_get key=a status=found clsid=1 cfd=9 size=1", actIgnore, ""},
		{"eviction ignored", "ts=1.2 gid=3 type=eviction key=a fetch=no ttl=0 la=1 clsid=1 size=1", actIgnore, ""},
		{"empty", "", actIgnore, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			act, key := parseLine([]byte(tc.line))
			assert.Equal(t, tc.act, act)
			assert.Equal(t, tc.key, key)
		})
	}
}
