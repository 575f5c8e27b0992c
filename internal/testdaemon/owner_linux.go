package testdaemon

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// listenerOwned reports whether the socket listening on TCP port belongs to process pid or one of its
// descendants; known is false when that cannot be told (no listening socket on the port in /proc/net).
// A port FreePort picked can be bound by someone else first, another test's daemon say: that one then
// answers the readiness check while the daemon started on it fails to bind, and a client would talk to the
// wrong server.
func listenerOwned(pid, port int) (owned, known bool) {
	inodes := listeningInodes(port)
	if len(inodes) == 0 {
		return false, false
	}
	for _, p := range processTree(pid) {
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p))
		if err != nil {
			continue
		}
		for _, e := range ents {
			l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", p, e.Name()))
			if err == nil && strings.HasPrefix(l, "socket:[") && inodes[strings.TrimSuffix(l[len("socket:["):], "]")] {
				return true, true
			}
		}
	}
	return false, true
}

// listeningInodes are the socket inodes of the TCP sockets (IPv4 and IPv6) listening on port.
func listeningInodes(port int) map[string]bool {
	const stateListen = "0A"
	out := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // the header
		for sc.Scan() {
			// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
			fs := strings.Fields(sc.Text())
			if len(fs) < 10 || fs[3] != stateListen {
				continue
			}
			_, hexPort, ok := strings.Cut(fs[1], ":")
			if p, err := strconv.ParseUint(hexPort, 16, 16); ok && err == nil && int(p) == port {
				out[fs[9]] = true
			}
		}
		f.Close()
	}
	return out
}

// processTree is pid and its descendants, as far as /proc lists them.
func processTree(pid int) []int {
	tree := []int{pid}
	for i := 0; i < len(tree); i++ {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", tree[i]))
		if err != nil {
			continue
		}
		for _, task := range tasks {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", tree[i], task.Name()))
			if err != nil {
				continue
			}
			for _, c := range strings.Fields(string(b)) {
				if n, err := strconv.Atoi(c); err == nil {
					tree = append(tree, n)
				}
			}
		}
	}
	return tree
}
