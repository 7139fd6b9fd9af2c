package fairschedhttp

import (
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/maphash"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// MaxKeyLen is the longest fairness key, in bytes, that the middleware
// submits as Options.Key returned it. A longer key, one that is not valid
// UTF-8, or one that starts with ReservedKeyPrefix is submitted as its
// SHA-256 digest: ReservedKeyPrefix, "sha256:" and 64 hexadecimal digits.
// A client that sends a huge key (a 64 KiB header) costs the scheduler no
// more than one that sends a short one, and two keys still differ.
const MaxKeyLen = 128

// ReservedKeyPrefix starts every fairness key the middleware names itself:
// a client's address ("~198.51.100.7", an IPv6 client's prefix
// "~2001:db8:1:2::/64"), the key of a request with neither a key nor an
// address ("~unknown-client"), the keys shared past Options.MaxKeys
// ("~shared-N") and the digests of keys that cannot be submitted as they
// are ("~sha256:..."). A key from Options.Key never passes through with
// it unchanged (it is submitted as its digest), so that a client cannot
// name its key after another client's address, or after a shared key, and
// load it unseen.
const ReservedKeyPrefix = "~"

// Defaults of the key bounds; see Options.
const (
	defaultIPv6Prefix = 64
	defaultMaxKeys    = 10_000
	defaultSharedKeys = 1024
	defaultKeyTTL     = 10 * time.Minute // fairsched.Config.IdleTTL's default
)

// unknownClient is the key of a request with no key and no client
// address (a Key that returned "" on a listener that gives none, such as
// a Unix socket's): one key for all of them, never the empty key.
const unknownClient = ReservedKeyPrefix + "unknown-client"

// ClientAddr returns the address of the client that sent r: the address
// of r.RemoteAddr, or, if that is one of the trusted proxies, the nearest
// address in r's X-Forwarded-For header that is not, read from the right
// (each proxy appends the address it got the request from, and only the
// entries the trusted proxies added can be believed). It returns "" if
// r.RemoteAddr is no IP address (a Unix socket's).
//
// Each entry is read as an address, with or without a port or brackets
// ("203.0.113.9", "203.0.113.9:4000", "[2001:db8::1]:4000",
// "[2001:db8::1]"), without its zone, an IPv4-mapped IPv6 address as its
// IPv4 address; the result is in netip.Addr's form, so that one client is
// one string whatever its proxy writes. An entry that is no address (a
// proxy that writes "unknown", or an obfuscated name) ends the walk: the
// client is then the trusted proxy that wrote it, one key for all the
// requests it could not name, where a key per string would let whoever
// chooses the string choose its key.
//
// It reads the header from the right without copying it, whatever its
// length. The trusted prefixes are matched as Middleware matches them: an
// IPv4-mapped prefix as its IPv4 prefix.
func ClientAddr(r *http.Request, trusted []netip.Prefix) string {
	a, ok := clientAddr(r, trusted)
	if !ok {
		return ""
	}
	return a.String()
}

// clientAddr is ClientAddr's address, and false if r.RemoteAddr is none.
func clientAddr(r *http.Request, trusted []netip.Prefix) (netip.Addr, bool) {
	client, ok := parseHop(r.RemoteAddr)
	if !ok || len(trusted) == 0 || !isTrusted(client, trusted) {
		return client, ok
	}
	// Header.Values returns the header's own slice: reading it from the
	// right, entry by entry, copies nothing.
	values := r.Header.Values("X-Forwarded-For")
	for i := len(values) - 1; i >= 0; i-- {
		for rest := values[i]; rest != ""; {
			j := strings.LastIndexByte(rest, ',')
			hop := strings.TrimSpace(rest[j+1:])
			rest = rest[:max(j, 0)]
			if hop == "" {
				continue
			}
			a, ok := parseHop(hop)
			if !ok {
				return client, true // written by client, a trusted proxy
			}
			if !isTrusted(a, trusted) {
				return a, true
			}
			client = a
		}
	}
	return client, true // every hop is a trusted proxy: the farthest one
}

// parseHop reads an address as a client or a proxy writes it: with or
// without a port, in brackets or not, with a zone or not. The address
// comes without its zone, and an IPv4-mapped one as its IPv4 address.
// It picks the one parse that fits s's shape: a parse that fails
// allocates its error, and a walk of the header must not, hop by hop.
func parseHop(s string) (netip.Addr, bool) {
	var a netip.Addr
	var err error
	switch {
	case strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]"):
		a, err = netip.ParseAddr(s[1 : len(s)-1])
	case strings.HasPrefix(s, "["), strings.Count(s, ":") == 1: // and a port
		var ap netip.AddrPort
		ap, err = netip.ParseAddrPort(s)
		a = ap.Addr()
	default:
		a, err = netip.ParseAddr(s)
	}
	if err != nil {
		return netip.Addr{}, false
	}
	return a.WithZone("").Unmap(), true
}

// isTrusted reports whether a (as parseHop returns it) is in one of the
// trusted prefixes.
func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p, ok := trustedPrefix(p); ok && p.Contains(a) {
			return true
		}
	}
	return false
}

// trustedPrefix returns p as addresses are matched against it: masked,
// an IPv4-mapped prefix as its IPv4 prefix (addresses are unmapped
// first). It reports false for a prefix that matches no address as
// written: invalid, or IPv4-mapped with fewer than 96 bits (a prefix of
// IPv6 addresses that are not all IPv4-mapped).
func trustedPrefix(p netip.Prefix) (netip.Prefix, bool) {
	if !p.IsValid() {
		return p, false
	}
	if p.Addr().Is4In6() {
		if p.Bits() < 96 {
			return p, false
		}
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p.Masked(), true
}

// trustedPrefixes returns the trusted prefixes as Middleware matches
// them, and panics if one matches nothing as written.
func trustedPrefixes(trusted []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(trusted))
	for _, p := range trusted {
		q, ok := trustedPrefix(p)
		if !ok {
			panic(fmt.Sprintf("fairschedhttp: Options.TrustedProxies has %v: want a valid prefix; an IPv4-mapped one of at least 96 bits", p))
		}
		out = append(out, q)
	}
	return out
}

// clientKey is the default key of r: its client's address (ClientAddr),
// an IPv4 address as it is and an IPv6 one as its prefix of bits, since
// one client is given a whole /64 (or more) and could otherwise pose as
// 2^64 clients; an IPv4-mapped IPv6 address is an IPv4 client.
func clientKey(r *http.Request, trusted []netip.Prefix, bits int) string {
	a, ok := clientAddr(r, trusted)
	switch {
	case !ok:
		return unknownClient
	case a.Is4():
		return ReservedKeyPrefix + a.String()
	}
	p, _ := a.Prefix(bits) // bits is 1..128, checked by Middleware
	return ReservedKeyPrefix + p.String()
}

// boundKey returns key, from Options.Key, as it is submitted: itself if
// it is valid UTF-8, at most MaxKeyLen bytes, and does not start with
// ReservedKeyPrefix, else its digest, which does.
func boundKey(key string) string {
	if len(key) <= MaxKeyLen && utf8.ValidString(key) && !strings.HasPrefix(key, ReservedKeyPrefix) {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return ReservedKeyPrefix + "sha256:" + hex.EncodeToString(sum[:])
}

// keyTable bounds the fairness keys the middleware submits. Up to max
// keys are submitted by name; a key is forgotten once it has had no
// request in flight for ttl (as the scheduler forgets an idle key after
// its IdleTTL), and only then, never while busy: a client that rotates
// keys cannot push out a busy key, and with it that key's recent cost.
//
// A new key while max are remembered shares one of a fixed set of shared
// keys: the less busy of a hand of two dealt by its hash, as the
// Kubernetes API server's fair queuing shuffle-shards flows into a fixed
// set of queues. A flood of rotating keys, each dealt its own hand, is
// spread over all the shared keys, and is held to their limits
// (KeyConfig.MaxPending each) while the keys known by name keep their
// own. What the hand of two buys is against a heavy key, one name with
// many requests in flight: it loads only the two keys of its hand, and a
// light key with one of them in its hand takes its other, where with one
// choice it would queue behind the heavy key. The hash is seeded per
// table, at random, so that a client cannot work out which keys share a
// hand.
//
// Each request costs it O(1) under one lock, global to the table (every
// request of the middleware takes it at its start and at its end), and a
// hash of its key taken before locking; it holds at most max keys of at
// most MaxKeyLen bytes each.
type keyTable struct {
	max  int
	ttl  time.Duration
	now  func() time.Time
	seed maphash.Seed

	mu     sync.Mutex
	named  map[string]*namedKey
	idle   list.List // of *namedKey with nothing in flight, longest idle first
	shared []int     // requests in flight per shared key
	names  []string  // the shared keys' names, made once
}

type namedKey struct {
	name     string
	inFlight int
	idle     *list.Element // its place in keyTable.idle; nil while busy
	since    time.Time     // when its last request ended
}

func newKeyTable(max, shared int, ttl time.Duration) *keyTable {
	t := &keyTable{max: max, ttl: ttl, now: time.Now, seed: maphash.MakeSeed(), named: make(map[string]*namedKey),
		shared: make([]int, shared), names: make([]string, shared)}
	for i := range t.names {
		t.names[i] = ReservedKeyPrefix + "shared-" + strconv.Itoa(i)
	}
	return t
}

// acquire returns the fairness key to submit a request of key under, and
// the function to call when the request is done.
func (t *keyTable) acquire(key string) (string, func()) {
	first, second := t.hand(key)
	t.mu.Lock()
	defer t.mu.Unlock()
	k := t.named[key]
	if k == nil && len(t.named) >= t.max {
		// Only the longest idle key can have been idle for ttl; busy keys
		// are not in the list, however long their requests run.
		if e := t.idle.Front(); e != nil && t.now().Sub(e.Value.(*namedKey).since) >= t.ttl {
			delete(t.named, e.Value.(*namedKey).name)
			t.idle.Remove(e)
		}
	}
	if k == nil && len(t.named) < t.max {
		k = &namedKey{name: key}
		t.named[key] = k
	}
	if k != nil {
		if k.idle != nil {
			t.idle.Remove(k.idle)
			k.idle = nil
		}
		k.inFlight++
		return key, func() { t.releaseNamed(k) }
	}
	i := first
	if t.shared[second] < t.shared[first] {
		i = second
	}
	t.shared[i]++
	return t.names[i], func() { t.releaseShared(i) }
}

func (t *keyTable) releaseNamed(k *namedKey) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k.inFlight--
	if k.inFlight == 0 {
		k.since = t.now()
		k.idle = t.idle.PushBack(k)
	}
}

func (t *keyTable) releaseShared(i int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.shared[i]--
}

// hand returns key's hand of two distinct shared keys (one if there is
// only one), dealt by its seeded hash: the first is taken on a tie.
func (t *keyTable) hand(key string) (first, second int) {
	n := uint64(len(t.shared))
	h := maphash.String(t.seed, key)
	first = int((h & (1<<32 - 1)) % n)
	if n == 1 {
		return first, first
	}
	return first, (first + 1 + int((h>>32)%(n-1))) % int(n)
}
