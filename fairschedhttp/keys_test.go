package fairschedhttp

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fairsched/fairsched"
)

// flood sends n requests at once through handler, the i-th prepared by
// prepare, and waits until each is either queued or running (an
// EventSubmitted) or answered; it returns how many were answered 429.
// The handler holds the admitted ones until h.release is closed.
func flood(t *testing.T, h *harness, handler http.Handler, n int, prepare func(i int, r *http.Request)) (refused int, admitted []<-chan *httptest.ResponseRecorder) {
	t.Helper()
	answered := make(chan *httptest.ResponseRecorder, n)
	for i := range n {
		r := httptest.NewRequest("GET", "/work", nil)
		prepare(i, r)
		go func() {
			rec := httptest.NewRecorder()
			handler.ServeHTTP(rec, r)
			answered <- rec
		}()
	}
	queued := 0
	for queued+refused < n {
		select {
		case <-h.submitted:
			queued++
		case rec := <-answered:
			if rec.Code != http.StatusTooManyRequests {
				t.Fatalf("a request was answered %d before any was released", rec.Code)
			}
			refused++
		}
	}
	for range queued {
		admitted = append(admitted, answered)
	}
	return refused, admitted
}

// Per-key limits hold whatever address or key a client sends: 50 requests
// at once with MaxPending 2 and one slot, so that one key gets 3 in (one
// running, two queued) and 47 refused. An IPv6 client is one key per /64,
// and an IPv4-mapped IPv6 address is its IPv4 client, kept apart from the
// others; a Key that returns "" falls back to the client's address, not to
// the empty key, which DefaultKey does not bound. Through a trusted proxy,
// one client is one key however the proxy writes its address: with a port
// (a new one per connection), or an IPv6 address in brackets.
func TestMiddlewareKeysCannotBeFlooded(t *testing.T) {
	const proxy = "10.0.0.1:443"
	for _, tc := range []struct {
		name    string
		addr    func(i int) string
		xff     func(i int) string // nil: no header
		key     func(*http.Request) string
		refused int
	}{
		{"one IPv4 address", func(int) string { return "198.51.100.7:4000" }, nil, nil, 47},
		{"50 IPv4 addresses", func(i int) string { return "198.51.100." + strconv.Itoa(i+1) + ":4000" }, nil, nil, 0},
		{"50 IPv6 addresses of one /64", func(i int) string { return "[2001:db8:1:2::" + strconv.FormatInt(int64(i+1), 16) + "]:4000" }, nil, nil, 47},
		{"50 IPv6 /64s", func(i int) string { return "[2001:db8:1:" + strconv.FormatInt(int64(i+1), 16) + "::1]:4000" }, nil, nil, 0},
		{"50 IPv4-mapped addresses", func(i int) string { return "[::ffff:198.51.100." + strconv.Itoa(i+1) + "]:4000" }, nil, nil, 0},
		{"a Key that returns empty", func(int) string { return "198.51.100.7:4000" }, nil, func(*http.Request) string { return "" }, 47},
		{"no address, no key", func(int) string { return "" }, nil, func(*http.Request) string { return "" }, 47},
		{"one client through a proxy, a port per request", func(int) string { return proxy },
			func(i int) string { return "203.0.113.9:" + strconv.Itoa(40000+i) }, nil, 47},
		{"one IPv6 client through a proxy, in brackets", func(int) string { return proxy },
			func(i int) string { return "[2001:db8:1:2::" + strconv.FormatInt(int64(i+1), 16) + "]" }, nil, 47},
		{"one IPv6 client through a proxy, with ports and zones", func(int) string { return proxy },
			func(i int) string { return "[2001:db8:1:2::1%eth" + strconv.Itoa(i) + "]:" + strconv.Itoa(40000+i) }, nil, 47},
		{"50 clients through a proxy", func(int) string { return proxy },
			func(i int) string { return "203.0.113." + strconv.Itoa(i+1) + ":4000" }, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, fairsched.Config{MaxConcurrency: 1, DefaultKey: fairsched.KeyConfig{MaxPending: 2}})
			handler := Middleware(h.s, h.holding(), Options{Key: tc.key, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
			refused, admitted := flood(t, h, handler, 50, func(i int, r *http.Request) {
				r.RemoteAddr = tc.addr(i)
				if tc.xff != nil {
					r.Header.Set("X-Forwarded-For", tc.xff(i))
				}
			})
			if refused != tc.refused {
				t.Errorf("%d of 50 refused with 429, want %d", refused, tc.refused)
			}
			close(h.release)
			for _, done := range admitted {
				if rec := <-done; rec.Code != 200 {
					t.Errorf("an admitted request ended %d", rec.Code)
				}
			}
			for _, k := range h.s.Stats().Keys {
				if k.Key == "" && k.Running+k.Queued > 0 {
					t.Errorf("a request ran under the empty key")
				}
			}
		})
	}
}

// A client cannot name its key after one the middleware names itself,
// and so load another client's key unseen: with one slot and MaxPending
// 2, a victim has a request running under its key, an attacker sends 2
// requests whose Key is the victim's key's name, and the victim's next 2
// must still queue. The victim is keyed by its address (a Key that returns
// ""), as the client with no address, or by the digest of a long key.
func TestMiddlewareKeysReserved(t *testing.T) {
	for _, tc := range []struct {
		name   string
		victim func(r *http.Request)
	}{
		{"an address", func(r *http.Request) { r.RemoteAddr = "198.51.100.7:4000" }},
		{"an IPv6 prefix", func(r *http.Request) { r.RemoteAddr = "[2001:db8:1:2::1]:4000" }},
		{"no address", func(r *http.Request) { r.RemoteAddr = "" }},
		{"a long key", func(r *http.Request) { r.Header.Set("X-Tenant", strings.Repeat("v", 2*MaxKeyLen)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, fairsched.Config{MaxConcurrency: 1, DefaultKey: fairsched.KeyConfig{MaxPending: 2}})
			handler := Middleware(h.s, h.holding(), Options{Key: func(r *http.Request) string { return r.Header.Get("X-Tenant") }})
			victim := func(_ int, r *http.Request) { tc.victim(r) }
			_, admitted := flood(t, h, handler, 1, victim)
			<-h.entered
			var name string
			for _, k := range h.s.Stats().Keys {
				if k.Running == 1 {
					name = k.Key
				}
			}
			if !strings.HasPrefix(name, ReservedKeyPrefix) {
				t.Fatalf("the victim ran under %q", name)
			}
			refused, more := flood(t, h, handler, 2, func(_ int, r *http.Request) {
				r.RemoteAddr = "203.0.113.66:4000"
				r.Header.Set("X-Tenant", name)
			})
			admitted = append(admitted, more...)
			if refused != 0 {
				t.Errorf("%d of the attacker's 2 refused", refused)
			}
			refused, more = flood(t, h, handler, 2, victim)
			admitted = append(admitted, more...)
			if refused != 0 {
				t.Errorf("%d of the victim's next 2 refused under %q, want 0: the attacker loaded its key", refused, name)
			}
			close(h.release)
			for _, done := range admitted {
				if rec := <-done; rec.Code != 200 {
					t.Errorf("an admitted request ended %d", rec.Code)
				}
			}
		})
	}
}

// The keys a client sends cost bounded memory: 2,000 requests, each with
// a new 64 KiB tenant header as its key, leave at most MaxKeys keys by
// name (each a 71-byte digest) and SharedKeys shared ones, besides the
// empty key, and a heap at most 2 MiB larger (unbounded, it was 2,001
// keys and 142 MiB).
func TestMiddlewareKeysBoundedInMemory(t *testing.T) {
	h := newHarness(t, fairsched.Config{})
	const maxKeys, sharedKeys = 500, 64
	handler := Middleware(h.s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}),
		Options{Key: func(r *http.Request) string { return r.Header.Get("X-Tenant") }, MaxKeys: maxKeys, SharedKeys: sharedKeys})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range 2000 {
		r := httptest.NewRequest("GET", "/work", nil)
		r.Header.Set("X-Tenant", strconv.Itoa(i)+strings.Repeat("x", 64<<10))
		handler.ServeHTTP(httptest.NewRecorder(), r)
		<-h.submitted
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	st := h.s.Stats()
	t.Logf("keys tracked %d, heap %+d bytes", st.KeysTracked, grew)
	if st.Completed != 2000 {
		t.Fatalf("%d requests completed, want 2000", st.Completed)
	}
	if st.KeysTracked > maxKeys+sharedKeys+1 { // and the empty key, the service's own
		t.Errorf("%d keys tracked, want at most %d", st.KeysTracked, maxKeys+sharedKeys+1)
	}
	if grew > 2<<20 {
		t.Errorf("the heap grew by %d bytes, want at most 2 MiB", grew)
	}
	for _, k := range st.Keys {
		if len(k.Key) > MaxKeyLen {
			t.Errorf("a key of %d bytes was submitted", len(k.Key))
		}
	}
	runtime.KeepAlive(handler)
}

// A key longer than MaxKeyLen, not UTF-8, or starting with
// ReservedKeyPrefix is its digest; two such keys stay apart, and no key
// is submitted under a name of the middleware's own.
func TestBoundKey(t *testing.T) {
	short := strings.Repeat("k", MaxKeyLen)
	if boundKey(short) != short {
		t.Errorf("a key of MaxKeyLen bytes was changed")
	}
	digest := ReservedKeyPrefix + "sha256:"
	a, b := boundKey(short+"a"), boundKey(short+"b")
	if a == b || len(a) != len(digest)+64 || !strings.HasPrefix(a, digest) {
		t.Errorf("long keys: %q and %q", a, b)
	}
	if k := boundKey("bad\xff"); !strings.HasPrefix(k, digest) {
		t.Errorf("a key that is not UTF-8 was submitted as %q", k)
	}
	for _, own := range []string{unknownClient, ReservedKeyPrefix + "shared-7", ReservedKeyPrefix + "198.51.100.7",
		ReservedKeyPrefix + "2001:db8:1:2::/64", a, ReservedKeyPrefix} {
		if k := boundKey(own); k == own || !strings.HasPrefix(k, digest) {
			t.Errorf("a key named %q was submitted as %q", own, k)
		}
	}
}

// The key table never forgets a busy key, so that rotating keys cannot
// shed a key's cost; past its bound, new keys share keys; an idle key is
// forgotten after the TTL, making room for a new one by name, whatever
// requests have been running for longer (a stream).
func TestKeyTable(t *testing.T) {
	now := time.Unix(1000, 0)
	kt := newKeyTable(2, 4, time.Minute)
	kt.now = func() time.Time { return now }
	named := func(key string) bool {
		k, release := kt.acquire(key)
		defer release()
		if k != key && !strings.HasPrefix(k, ReservedKeyPrefix+"shared-") {
			t.Fatalf("%q was submitted as %q", key, k)
		}
		return k == key
	}
	busy, releaseBusy := kt.acquire("stream")
	if busy != "stream" || !named("idle") {
		t.Fatal("keys under the bound were not submitted by name")
	}
	now = now.Add(30 * time.Second)
	if named("new") {
		t.Error("a new key was named while the others were busy or idle for less than the TTL")
	}
	now = now.Add(time.Hour)
	if !named("newer") {
		t.Error("a new key was not named after an idle key's TTL, behind a long request")
	}
	if _, ok := kt.named["idle"]; ok || len(kt.named) != 2 {
		t.Errorf("named keys %v: want stream and newer", kt.named)
	}
	releaseBusy()
	now = now.Add(30 * time.Second)
	// newer and stream have been idle for 30 s.
	if named("a") {
		t.Error("a key idle for less than the TTL was forgotten")
	}
	now = now.Add(time.Minute)
	if !named("b") || !named("c") {
		t.Error("keys idle for the TTL were not forgotten")
	}
}

// A shared key is the less busy of its key's hand of two: one key's
// requests in flight spread over those two, and no more.
func TestKeyTableSharesByHand(t *testing.T) {
	kt := newKeyTable(1, 1024, time.Minute)
	kt.acquire("named")
	used := map[string]bool{}
	for range 10 {
		k, _ := kt.acquire("flood")
		used[k] = true
	}
	if len(used) != 2 {
		t.Errorf("one key's 10 requests in flight used %d shared keys, want its hand of 2", len(used))
	}
}

// What the hand of two buys: a heavy key, one name with many requests in
// flight, loads only the two shared keys of its hand, and a light key
// with one of them first in its hand takes its other, where one choice
// would queue it behind the heavy key.
func TestKeyTableHandOfTwoSparesLightKeys(t *testing.T) {
	kt := newKeyTable(0, 8, time.Minute) // every key shared
	heavy := map[string]bool{}
	for range 10 {
		k, _ := kt.acquire("heavy")
		heavy[k] = true
	}
	a, b := kt.hand("heavy")
	if len(heavy) != 2 || !heavy[ReservedKeyPrefix+"shared-"+strconv.Itoa(a)] || !heavy[ReservedKeyPrefix+"shared-"+strconv.Itoa(b)] {
		t.Errorf("the heavy key's requests went to %v, want its hand %d and %d", heavy, a, b)
	}
	lights := 0
	for i := 0; lights < 20; i++ {
		name := "light-" + strconv.Itoa(i)
		first, second := kt.hand(name)
		if first != a && first != b || second == a || second == b {
			continue // a hand that spares it anyway, or none at all
		}
		lights++
		k, release := kt.acquire(name)
		if heavy[k] {
			t.Errorf("%s, dealt %d and %d, queued behind the heavy key on %s", name, first, second, k)
		}
		release()
	}
}

// Hands are dealt by a hash seeded per table: which keys share a hand
// cannot be worked out ahead, from the names alone.
func TestKeyTableHandsSeeded(t *testing.T) {
	a, b := newKeyTable(0, 1024, time.Minute), newKeyTable(0, 1024, time.Minute)
	for i := range 64 {
		key := "k" + strconv.Itoa(i)
		a1, a2 := a.hand(key)
		b1, b2 := b.hand(key)
		if a1 != b1 || a2 != b2 {
			return
		}
	}
	t.Error("two tables dealt 64 keys the same hands")
}

// A flood of new keys past MaxKeys queues no more than the shared keys'
// MaxPending allows, and does not touch a client already known: with
// MaxKeys 1 and 4 shared keys of MaxPending 2, 50 requests under 50 new
// keys get at most 8 in, while the known client still has its own two
// places.
func TestMiddlewareKeyRotationFlood(t *testing.T) {
	h := newHarness(t, fairsched.Config{MaxConcurrency: 1, DefaultKey: fairsched.KeyConfig{MaxPending: 2}})
	handler := Middleware(h.s, h.holding(), Options{Key: func(r *http.Request) string { return r.Header.Get("X-Tenant") },
		MaxKeys: 1, SharedKeys: 4})
	known, admitted := flood(t, h, handler, 1, func(_ int, r *http.Request) { r.Header.Set("X-Tenant", "alice") })
	<-h.entered
	if known != 0 {
		t.Fatal("the known client's first request was refused")
	}
	refused, more := flood(t, h, handler, 50, func(i int, r *http.Request) { r.Header.Set("X-Tenant", "rotating-"+strconv.Itoa(i)) })
	admitted = append(admitted, more...)
	if refused < 42 || refused == 50 {
		t.Errorf("%d of 50 rotating keys refused, want 42 to 49 (4 shared keys of 2 each let at most 8 in)", refused)
	}
	refused, more = flood(t, h, handler, 3, func(_ int, r *http.Request) { r.Header.Set("X-Tenant", "alice") })
	admitted = append(admitted, more...)
	if refused != 1 {
		t.Errorf("%d of the known client's 3 refused, want 1 (its own MaxPending of 2)", refused)
	}
	close(h.release)
	for _, done := range admitted {
		if rec := <-done; rec.Code != 200 {
			t.Errorf("an admitted request ended %d", rec.Code)
		}
	}
	if st := h.s.Stats(); st.KeysTracked > 1+4+1 {
		t.Errorf("%d keys tracked, want at most 6", st.KeysTracked)
	}
}
