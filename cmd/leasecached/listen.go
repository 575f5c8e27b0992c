package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/leasecached/leasecached/server"
)

// The -l grammar, as memcached 1.6.18's server_sockets reads it (doc/design/listeners.md, "The -l
// grammar"): entries separated by "," or ";", each [notls:]ADDR with ADDR one of host, host:port, [ipv6],
// [ipv6]:port, an IPv6 address without brackets (and then without port), or * for every interface.
const (
	listenSeparators = ",;"
	notlsPrefix      = "notls:"
	allInterfaces    = "*"
)

// memcached's other -l prefixes, which choose a protocol or tag a listener for its proxy: leasecached
// speaks only the text protocol and has no proxy, so an entry with one is refused with this reason.
var unsupportedListenPrefixes = map[string]string{
	"proto[": "per-listener protocols (proto[...]:) are not supported: leasecached speaks the text protocol only",
	"tag[":   "listener tags (tag[...]:) are not supported: they serve memcached's proxy, which leasecached lacks",
}

// Unix socket limits. The path must fit sockaddr_un's sun_path with its terminating NUL.
var maxUnixPath = len(syscall.RawSockaddrUnix{}.Path) - 1

// maxUnixMask is the largest -a: permission bits only (no setuid, setgid or sticky bit).
const maxUnixMask os.FileMode = 0o777

// listenEntry is one parsed -l entry.
type listenEntry struct {
	host  string // "" : every interface (*); an IP literal (no brackets) or a host name
	port  int
	notls bool
}

// addr is the entry as a listener address (host:port; ":port" for every interface).
func (e listenEntry) addr() string { return net.JoinHostPort(e.host, strconv.Itoa(e.port)) }

// display is the entry's address for log lines: "*:port" for every interface.
func (e listenEntry) display() string {
	if e.host == "" {
		return allInterfaces + ":" + strconv.Itoa(e.port)
	}
	return e.addr()
}

// ip is the entry's address when its host is an IP literal.
func (e listenEntry) ip() (netip.Addr, bool) {
	a, err := netip.ParseAddr(e.host)
	return a, err == nil
}

// parseListenEntry reads one -l entry; port is -p, for an entry that names none.
func parseListenEntry(s string, port int) (listenEntry, error) {
	e := listenEntry{port: port}
	rest := s
	if strings.HasPrefix(rest, notlsPrefix) {
		e.notls = true
		rest = rest[len(notlsPrefix):]
	}
	for p, why := range unsupportedListenPrefixes {
		if strings.HasPrefix(rest, p) {
			return e, fmt.Errorf("%q: %s", s, why)
		}
	}
	host, portText := rest, ""
	switch {
	case strings.HasPrefix(rest, "["):
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return e, fmt.Errorf("%q: invalid IPv6 address (no closing ])", s)
		}
		host = rest[1:end]
		switch after := rest[end+1:]; {
		case after == "":
		case after[0] == ':':
			portText = after[1:]
			if portText == "" {
				return e, fmt.Errorf("%q: empty port", s)
			}
		default:
			return e, fmt.Errorf("%q: unexpected %q after the IPv6 address", s, after)
		}
		if _, ok := parseIPv6(host); !ok {
			return e, fmt.Errorf("%q: %q is not an IPv6 address", s, host)
		}
	case strings.Count(rest, ":") == 1:
		i := strings.IndexByte(rest, ':')
		host, portText = rest[:i], rest[i+1:]
		if portText == "" {
			return e, fmt.Errorf("%q: empty port", s)
		}
	case strings.Count(rest, ":") > 1:
		// memcached's rule: several colons without brackets are an IPv6 address and no port.
		if _, ok := parseIPv6(rest); !ok {
			return e, fmt.Errorf("%q: not an IPv6 address (write [ipv6]:port to give a port)", s)
		}
	}
	if portText != "" {
		n, err := strconv.Atoi(portText)
		if err != nil || n < minPort || n > maxPort {
			return e, fmt.Errorf("%q: invalid port number %q (must be between %d and %d)", s, portText, minPort, maxPort)
		}
		e.port = n
	}
	switch {
	case host == allInterfaces:
		host = ""
	case host == "":
		return e, fmt.Errorf("%q: empty address (use * for every interface)", s)
	default:
		if _, err := netip.ParseAddr(host); err != nil && !validHostname(host) {
			return e, fmt.Errorf("%q: %q is neither an IP address nor a host name", s, host)
		}
	}
	e.host = host
	return e, nil
}

// parseIPv6 reads an IPv6 address, with a zone only if it can be an interface name or index (netip takes
// any bytes after %, "]" and ":" included, which no address could then be written with).
func parseIPv6(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() {
		return netip.Addr{}, false
	}
	for _, c := range []byte(a.Zone()) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return netip.Addr{}, false
		}
	}
	return a, true
}

// validHostname says whether s can be a DNS name (RFC 1123 labels): what getaddrinfo would be asked to
// resolve. It is resolved when the listener binds.
func validHostname(s string) bool {
	if len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(s, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// parseListen reads the -l values (each a list; the flag may repeat) into TCP listeners on -p's port
// unless an entry names one; with tls (-Z) every listener is TLS unless its entry says notls:. inter is
// what `stats settings` shows: the values joined with ",", as memcached joins repeated -l, leaving out a
// value given before (memcached leaves out any value contained in those before, so
// "-l 127.0.0.1:1 -l 127.0.0.1" loses the second; the listeners are compared by address instead).
// Entries naming the same address twice are one listener; a conflict between them is refused.
func parseListen(values []string, port int, tls bool) (inter string, entries []listenEntry, err error) {
	var given []string
	seen := map[string]int{} // addr -> index in entries
	for _, v := range values {
		if !contains(given, v) {
			given = append(given, v)
		}
		for _, s := range strings.FieldsFunc(v, func(r rune) bool { return strings.ContainsRune(listenSeparators, r) }) {
			e, err := parseListenEntry(s, port)
			if err != nil {
				return "", nil, err
			}
			if e.notls && !tls {
				// memcached: "'notls' option is valid only when SSL is enabled".
				return "", nil, fmt.Errorf("%q: 'notls' option is valid only when SSL is enabled (-Z)", s)
			}
			key := canonicalAddr(e)
			if i, dup := seen[key]; dup {
				if entries[i].notls != e.notls {
					return "", nil, fmt.Errorf("%s is given both with and without notls:", e.display())
				}
				continue
			}
			seen[key] = len(entries)
			entries = append(entries, e)
		}
	}
	if len(entries) == 0 {
		return "", nil, errors.New("no address given")
	}
	if err := checkOverlap(entries); err != nil {
		return "", nil, err
	}
	return strings.Join(given, ","), entries, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// canonicalAddr is the entry's address with IP literals in one spelling ("::1" and "0::1" are one
// address) and host names in lower case.
func canonicalAddr(e listenEntry) string {
	if a, ok := e.ip(); ok {
		return netip.AddrPortFrom(a, uint16(e.port)).String()
	}
	return net.JoinHostPort(strings.ToLower(e.host), strconv.Itoa(e.port))
}

// checkOverlap refuses two entries on one port where one takes every address of the other's: the second
// bind would fail with "address already in use" (as memcached's does). * covers every address, 0.0.0.0
// every IPv4 address and :: every IPv6 address. Host names are resolved only when bound, so they are
// checked only against *.
func checkOverlap(entries []listenEntry) error {
	covers := func(wide, other listenEntry) bool {
		if wide.port != other.port {
			return false
		}
		if wide.host == "" {
			return true
		}
		w, ok := wide.ip()
		if !ok || !w.IsUnspecified() {
			return false
		}
		o, ok := other.ip()
		return ok && o.Is4() == w.Is4()
	}
	for i, a := range entries {
		for j, b := range entries {
			if i != j && covers(a, b) {
				return fmt.Errorf("%s and %s overlap: the first takes every address of the second, whose bind would fail",
					a.display(), b.display())
			}
		}
	}
	return nil
}

// tcpListeners turns parsed entries into the server's listeners.
func tcpListeners(entries []listenEntry, tls bool) []server.Listener {
	ls := make([]server.Listener, 0, len(entries))
	for _, e := range entries {
		ls = append(ls, server.Listener{Network: "tcp", Addr: e.addr(), TLS: tls && !e.notls})
	}
	return ls
}

// parseUnixMask reads -a: octal permissions of the socket file, as memcached's strtol(optarg, NULL, 8)
// but strict (memcached turns "abc" into 0, a socket nobody but root can use). 0 is refused for the same
// reason.
func parseUnixMask(s string) (os.FileMode, error) {
	n, err := strconv.ParseUint(s, 8, 32)
	if err != nil || os.FileMode(n) > maxUnixMask {
		return 0, fmt.Errorf("%q: want octal permissions between 1 and %o (like chmod)", s, maxUnixMask)
	}
	if n == 0 {
		return 0, fmt.Errorf("%q: no one could connect to the socket", s)
	}
	return os.FileMode(n), nil
}

// checkUnixSocketPath checks -s before anything binds: the transport removes a stale socket file at path
// before binding (as memcached does), and must never remove anything else, so a path that exists and is
// not a socket is refused here. A symbolic link is not followed (memcached uses lstat too).
func checkUnixSocketPath(path string) error {
	switch {
	case path == "":
		return errors.New("empty path")
	case len(path) > maxUnixPath:
		return fmt.Errorf("%q: longer than the %d bytes a unix socket path may have", path, maxUnixPath)
	case strings.HasPrefix(path, "@"):
		// Go would bind Linux's abstract namespace, not a file named @...: refuse rather than surprise.
		return fmt.Errorf("%q: a path starting with @ names an abstract socket, not a file; write ./%s", path, path)
	}
	if st, err := os.Stat(filepath.Dir(path)); err != nil {
		return fmt.Errorf("%q: directory: %w", path, errors.Unwrap(err))
	} else if !st.IsDir() {
		return fmt.Errorf("%q: %s is not a directory", path, filepath.Dir(path))
	}
	st, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("%q: %w", path, errors.Unwrap(err))
	case st.Mode()&fs.ModeSocket == 0:
		return fmt.Errorf("%q exists and is not a socket (only a stale socket file is replaced)", path)
	}
	return nil
}

// exposedWarning is the one line logged at start when a TCP listener takes connections from beyond this
// host with neither TLS on it nor -Y: anyone who reaches the port can read and change every item. ""
// when there is none. A host name other than localhost counts as exposed: it is resolved only at bind.
func exposedWarning(entries []listenEntry, tls bool, auth bool) string {
	if auth {
		return ""
	}
	var exposed []string
	for _, e := range entries {
		if tls && !e.notls {
			continue
		}
		if a, ok := e.ip(); ok && a.IsLoopback() || strings.EqualFold(e.host, "localhost") {
			continue
		}
		exposed = append(exposed, e.display())
	}
	if len(exposed) == 0 {
		return ""
	}
	return fmt.Sprintf("listening on %s without TLS or authentication: anyone who can reach it can "+
		"read and change the cache; use -Z (TLS) or -Y (passwords), or allow only trusted hosts with a firewall",
		strings.Join(exposed, ", "))
}
