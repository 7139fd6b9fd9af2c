package fairschedhttp

import (
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// MaxKeyLen is the longest fairness key, in bytes, that the middleware
// submits as it is. A longer key, or one that is not valid UTF-8, is
// submitted as its SHA-256 digest: "sha256:" and 64 hexadecimal digits.
// A client that sends a huge key (a 64 KiB header) costs the scheduler no
// more than one that sends a short one, and two keys still differ.
const MaxKeyLen = 128

// Defaults of the key bounds; see Options.
const (
	defaultIPv6Prefix = 64
	defaultMaxKeys    = 10_000
	defaultSharedKeys = 1024
	defaultKeyTTL     = 10 * time.Minute // fairsched.Config.IdleTTL's default
)

// unknownClient is the key of a request with no key and no client
// address (a Key that returned "" on a listener that gives none): one
// key for all of them, never the empty key.
const unknownClient = "unknown-client"

// clientKey is the default key of r: its client's address (ClientAddr),
// an IPv4 address as it is and an IPv6 one as its prefix of bits, since
// one client is given a whole /64 (or more) and could otherwise pose as
// 2^64 clients. An IPv4-mapped IPv6 address is an IPv4 client.
func clientKey(r *http.Request, trusted []netip.Prefix, bits int) string {
	host := ClientAddr(r, trusted)
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	a = a.Unmap().WithZone("")
	if a.Is4() {
		return a.String()
	}
	p, _ := a.Prefix(bits) // bits is 1..128, checked by Middleware
	return p.String()
}

// boundKey returns key as it is submitted: itself if it is valid UTF-8
// and at most MaxKeyLen bytes, else its digest.
func boundKey(key string) string {
	if len(key) <= MaxKeyLen && utf8.ValidString(key) {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// keyTable bounds the fairness keys the middleware submits. Up to max
// keys are submitted by name; a key is forgotten once it has had no
// request in flight for ttl (as the scheduler forgets an idle key after
// its IdleTTL), and only then, never while busy: a client that rotates
// keys cannot push out a busy key, and with it that key's recent cost.
// A new key while max are remembered shares one of a fixed set of
// shared keys: the less busy of a hand of two dealt by its hash,
// as the Kubernetes API server's fair queuing shuffle-shards flows into
// a fixed set of queues, so that a flood's keys crowd a few of them and
// a light key is unlikely to have only crowded ones in its hand.
//
// Each request costs it O(1) under its own lock (and the hash of its
// key); it holds at most max keys of at most MaxKeyLen bytes each.
type keyTable struct {
	max int
	ttl time.Duration
	now func() time.Time

	mu     sync.Mutex
	named  map[string]*namedKey
	idle   list.List // of *namedKey with nothing in flight, longest idle first
	shared []int     // requests in flight per shared key
}

type namedKey struct {
	name     string
	inFlight int
	idle     *list.Element // its place in keyTable.idle; nil while busy
	since    time.Time     // when its last request ended
}

func newKeyTable(max, shared int, ttl time.Duration) *keyTable {
	return &keyTable{max: max, ttl: ttl, now: time.Now, named: make(map[string]*namedKey), shared: make([]int, shared)}
}

// acquire returns the fairness key to submit a request of key under, and
// the function to call when the request is done.
func (t *keyTable) acquire(key string) (string, func()) {
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
	i := t.pickShared(key)
	t.shared[i]++
	return "shared-" + strconv.Itoa(i), func() { t.releaseShared(i) }
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

// pickShared returns the less busy of key's hand of two distinct shared
// keys (the first on a tie), dealt by its hash.
func (t *keyTable) pickShared(key string) int {
	sum := sha256.Sum256([]byte(key))
	n := uint64(len(t.shared))
	first := int(binary.BigEndian.Uint64(sum[:8]) % n)
	if n == 1 {
		return first
	}
	second := (first + 1 + int(binary.BigEndian.Uint64(sum[8:16])%(n-1))) % int(n)
	if t.shared[second] < t.shared[first] {
		return second
	}
	return first
}
