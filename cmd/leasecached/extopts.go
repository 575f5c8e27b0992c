package main

import (
	"fmt"
	"strings"
)

// Long flags that an -o key is another spelling of. The key's name is memcached's (-o ssl_key=...), the
// flag's is the key's with dashes (--ssl-key).
const (
	flagSSLChainCert    = "ssl-chain-cert"
	flagSSLKey          = "ssl-key"
	flagSSLCACert       = "ssl-ca-cert"
	flagSSLVerifyMode   = "ssl-verify-mode"
	flagSSLMinVersion   = "ssl-min-version"
	flagSSLCiphers      = "ssl-ciphers"
	flagSSLWbufSize     = "ssl-wbuf-size"
	flagSSLSessionCache = "ssl-session-cache"
	flagIdleTimeout     = "idle-timeout"
)

// The -o grammar is getsubopt(3)'s, as memcached 1.6.18 reads it: the value is a comma-separated list of
// key or key=value (the value runs to the next comma, so it cannot hold one), and -o may repeat. A key
// given twice takes its later value, as in memcached. See doc/design/listeners.md, "The -o grammar".
const (
	extSeparator   = ","
	extValueMarker = "="
)

// extOption is what leasecached does with one key memcached 1.6.18's -o knows (memcached.c's
// subopts_tokens, and extstore's in storage.c). A key with a flag sets that flag. A key without one is a
// memcached option leasecached has no setting for: it is accepted and ignored when it asks for what
// leasecached always does (accept; with acceptValue, only given that value), and refused otherwise. why
// says which, and is the reason printed when the key is refused.
type extOption struct {
	flag        string
	noValue     bool // the key takes no value (it is a switch)
	accept      bool
	acceptValue string
	why         string
}

// extOptions is every -o key memcached 1.6.18 (built with TLS and extstore, as Debian's) accepts, and
// what leasecached does with it. A key not here is refused as unknown.
var extOptions = map[string]extOption{
	// Settings leasecached has.
	"ssl_chain_cert":    {flag: flagSSLChainCert},
	"ssl_key":           {flag: flagSSLKey},
	"ssl_ca_cert":       {flag: flagSSLCACert},
	"ssl_verify_mode":   {flag: flagSSLVerifyMode},
	"ssl_min_version":   {flag: flagSSLMinVersion},
	"ssl_ciphers":       {flag: flagSSLCiphers},
	"ssl_wbuf_size":     {flag: flagSSLWbufSize},
	"ssl_session_cache": {flag: flagSSLSessionCache, noValue: true},
	"idle_timeout":      {flag: flagIdleTimeout},

	// What leasecached always does: accepted, ignored.
	"maxconns_fast":        {noValue: true, accept: true, why: "a connection beyond -c is always answered ERROR and closed at once"},
	"modern":               {noValue: true, accept: true, why: "memcached 1.6.18's modern changes nothing"},
	"inline_ascii_resp":    {noValue: true, accept: true, why: "memcached 1.6.18 ignores it too"},
	"no_inline_ascii_resp": {noValue: true, accept: true, why: "memcached 1.6.18 ignores it too"},
	"resp_obj_mem_limit":   {accept: true, why: "deprecated; memcached 1.6.18 ignores it too"},
	"slab_reassign":        {noValue: true, accept: true, why: "pages always move between slab classes"},
	"no_slab_automove":     {noValue: true, accept: true, why: "there is no background slab automover"},
	"slab_automove":        {accept: true, acceptValue: "0", why: "there is no background slab automover"},
	"lru_crawler":          {noValue: true, accept: true, why: "the background reclaimer always runs"},
	"no_lru_maintainer":    {noValue: true, accept: true, why: "there is no LRU maintainer thread or segmented LRU"},
	"no_drop_privileges":   {noValue: true, accept: true, why: "leasecached installs no system call filter"},
	"read_buf_mem_limit":   {accept: true, acceptValue: "0", why: "read buffers have no memory limit of their own"},
	"ssl_keyformat":        {accept: true, acceptValue: "1", why: "keys are read as PEM (1) only"},

	// What leasecached does not have: refused.
	"no_maxconns_fast":        {why: "a connection beyond -c is always refused at once"},
	"no_modern":               {why: "memcached 1.4's defaults (jenkins hash, fixed slab pages) are not available"},
	"hashpower":               {why: "the hash index is sized by -m and grows by itself"},
	"no_hashexpand":           {why: "the hash index always grows"},
	"no_slab_reassign":        {why: "pages always move between slab classes"},
	"slab_automove_ratio":     {why: "there is no background slab automover"},
	"slab_automove_window":    {why: "there is no background slab automover"},
	"tail_repair_time":        {why: "there is no tail repair"},
	"hash_algorithm":          {why: "the hash is xxhash, not configurable"},
	"no_lru_crawler":          {why: "the background reclaimer cannot be turned off"},
	"lru_crawler_sleep":       {why: "the background reclaimer is not tunable"},
	"lru_crawler_tocrawl":     {why: "the background reclaimer is not tunable"},
	"lru_maintainer":          {why: "eviction is CLOCK: there is no segmented LRU"},
	"hot_lru_pct":             {why: "eviction is CLOCK: there is no segmented LRU"},
	"warm_lru_pct":            {why: "eviction is CLOCK: there is no segmented LRU"},
	"hot_max_factor":          {why: "eviction is CLOCK: there is no segmented LRU"},
	"warm_max_factor":         {why: "eviction is CLOCK: there is no segmented LRU"},
	"temporary_ttl":           {why: "eviction is CLOCK: there is no temporary LRU"},
	"watcher_logbuf_size":     {why: "log watchers have memcached's default buffers, 256 KB"},
	"worker_logbuf_size":      {why: "event loops have memcached's default log buffers, 64 KB"},
	"slab_sizes":              {why: "the slab classes are fixed"},
	"slab_chunk_max":          {why: "the slab classes are fixed"},
	"no_chunked_items":        {why: "the slab classes are fixed"},
	"track_sizes":             {why: "there is no stats sizes"},
	"drop_privileges":         {why: "leasecached installs no system call filter"},
	"ssl_kernel_tls":          {why: "Go's crypto/tls has no kernel TLS offload"},
	"proxy_config":            {why: "there is no proxy mode"},
	"proxy_uring":             {why: "there is no proxy mode"},
	"sock_cookie_id":          {why: "listeners set no socket cookie"},
	"ext_path":                {why: "there is no external storage (extstore)"},
	"ext_page_size":           {why: "there is no external storage (extstore)"},
	"ext_wbuf_size":           {why: "there is no external storage (extstore)"},
	"ext_threads":             {why: "there is no external storage (extstore)"},
	"ext_io_depth":            {why: "there is no external storage (extstore)"},
	"ext_item_size":           {why: "there is no external storage (extstore)"},
	"ext_item_age":            {why: "there is no external storage (extstore)"},
	"ext_low_ttl":             {why: "there is no external storage (extstore)"},
	"ext_recache_rate":        {why: "there is no external storage (extstore)"},
	"ext_compact_under":       {why: "there is no external storage (extstore)"},
	"ext_drop_under":          {why: "there is no external storage (extstore)"},
	"ext_max_sleep":           {why: "there is no external storage (extstore)"},
	"ext_max_frag":            {why: "there is no external storage (extstore)"},
	"ext_drop_unread":         {why: "there is no external storage (extstore)"},
	"slab_automove_freeratio": {why: "there is no external storage (extstore)"},
}

// extSetting is one key of an -o list.
type extSetting struct {
	key, value string
	hasValue   bool
}

// splitExtended reads the -o values into their keys, in order. It knows the grammar, not the keys.
func splitExtended(values []string) ([]extSetting, error) {
	var out []extSetting
	for _, v := range values {
		for _, item := range strings.Split(v, extSeparator) {
			key, value, hasValue := strings.Cut(item, extValueMarker)
			if key == "" {
				// memcached: Illegal suboption "".
				return nil, fmt.Errorf("%q: empty option name (want key or key=value, separated by commas)", v)
			}
			out = append(out, extSetting{key: key, value: value, hasValue: hasValue})
		}
	}
	return out, nil
}

// extendedFlags checks the -o values against extOptions and returns the value each sets, by long flag
// (a switch's value is "true"); a key given twice keeps its later value. The values themselves are
// checked with the flag's.
func extendedFlags(values []string) (map[string]string, error) {
	settings, err := splitExtended(values)
	if err != nil {
		return nil, err
	}
	flags := map[string]string{}
	for _, s := range settings {
		opt, known := extOptions[s.key]
		switch {
		case !known:
			return nil, fmt.Errorf("unknown option %q", s.key)
		case opt.noValue && s.hasValue:
			return nil, fmt.Errorf("%s takes no value (given %q)", s.key, s.key+extValueMarker+s.value)
		case opt.flag != "" && !opt.noValue && s.value == "":
			return nil, fmt.Errorf("missing %s argument (want %s=VALUE)", s.key, s.key)
		}
		switch {
		case opt.flag != "" && opt.noValue:
			flags[opt.flag] = "true"
		case opt.flag != "":
			flags[opt.flag] = s.value
		case opt.accept && (opt.acceptValue == "" || s.hasValue && s.value == opt.acceptValue):
			// leasecached already does what the key asks for.
		case opt.accept:
			return nil, fmt.Errorf("%s other than %s is not supported: %s", s.key, opt.acceptValue, opt.why)
		default:
			return nil, fmt.Errorf("%s is not supported: %s", s.key, opt.why)
		}
	}
	return flags, nil
}

// errBothSpellings is the error when one setting is given as an -o key and as its long flag: neither
// takes precedence, as the command line's order between two different flags is not kept.
func errBothSpellings(flag string) error {
	return fmt.Errorf("%s: given both as -o %s and as --%s: give it once", extKey(flag), extKey(flag), flag)
}
