// Package fairschedhttp puts a fairsched.Scheduler in front of HTTP
// handlers, safe to expose with its zero options: Middleware runs each
// request as a job of the scheduler, so that requests are admitted by its
// order and limits and a full queue is answered with 429 and an honest
// Retry-After; Admin serves a page of the scheduler's state and controls.
//
// What the zero Options do, and why:
//
//   - Requests run as jobs of type RequestType, in the Foreground tier,
//     with a default cost of 50 ms (RequestTypeConfig): a request is
//     foreground work, and the default type "" is Background with a
//     one-second cost, which suits batch jobs.
//   - Health, readiness and metrics probes bypass the scheduler
//     (DefaultExempt): they must answer during the very overload they
//     report.
//   - A request is keyed by its client's address, an IPv6 client by its
//     /64 (one host is given a whole /64, and could otherwise pose as 2^64
//     clients); a key is never empty, never longer than MaxKeyLen, never
//     one of the names the middleware gives its own keys
//     (ReservedKeyPrefix), and at most Options.MaxKeys keys are tracked,
//     past which new keys share a fixed set of keys: what any client
//     sends costs bounded memory, and names no other client's key.
//
// The admin handler belongs beside the middleware, not behind it, so
// that it answers whatever the queue holds:
//
//	api := http.NewServeMux() // the service's routes
//	root := http.NewServeMux()
//	root.Handle("/admin/", http.StripPrefix("/admin", fairschedhttp.Admin(s, adminOptions)))
//	root.Handle("/", fairschedhttp.Middleware(s, api, fairschedhttp.Options{}))
//	srv := &http.Server{Handler: root}
//
// It depends on the standard library and fairsched only.
package fairschedhttp

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/fairsched/fairsched"
)

// RequestType is the job type of requests whose Options.Job names none.
// Middleware registers it with RequestTypeConfig, unless the scheduler has
// a type of that name already (from Config.Types, or RegisterType), whose
// configuration then stands: a service that configures a type of this
// name keeps its own configuration, tier included. The name is the
// package's own, so that it does not take a type of the service's by
// accident.
const RequestType = "fairschedhttp.request"

// RequestTypeConfig returns the configuration Middleware registers
// RequestType with: the Foreground tier, no cap, and a default cost of
// 50 ms, near what a request takes, until the scheduler has learned what
// requests cost. To change it (a cap on requests, another cost), put
// your own in Config.Types[RequestType], starting from this one.
func RequestTypeConfig() fairsched.TypeConfig {
	return fairsched.TypeConfig{Tier: fairsched.Foreground, DefaultCost: 50 * time.Millisecond}
}

// Options configures Middleware. The zero Options keys requests by the
// client's address (an IPv6 client by its /64), runs them as jobs of
// RequestType, exempts probes (DefaultExempt), and answers refusals in
// plain text.
type Options struct {
	// Key returns a request's fairness key. nil, or "" for a request:
	// the client's address (ClientAddr, believing a forwarded-for header
	// only from TrustedProxies), an IPv6 address by its prefix of
	// IPv6Prefix bits, submitted as ReservedKeyPrefix and the address
	// ("~198.51.100.7", "~2001:db8:1:2::/64"); a request is never
	// submitted under the empty key, the service's own. Whatever it
	// returns is bounded: a key longer than MaxKeyLen bytes, not valid
	// UTF-8, or starting with ReservedKeyPrefix (one of the middleware's
	// own names, which a client could otherwise choose to load another's
	// key) is submitted as its digest. Other keys are submitted as they
	// are, so that Config.Keys configures them.
	Key func(*http.Request) string
	// TrustedProxies are the proxies whose X-Forwarded-For header is
	// believed, by address prefix: a client can set the header itself, so
	// it is read only when the request comes from one of them, and only
	// as far as they wrote it (ClientAddr). Each of them must append the
	// address it got the request from to the header the client sent (as
	// nginx's $proxy_add_x_forwarded_for does); one that passes the
	// client's header on unchanged, as some CDNs do, lets every client
	// choose its address, and so its key. An IPv4-mapped prefix
	// (::ffff:10.0.0.0/104) matches as its IPv4 prefix; Middleware panics
	// on an invalid prefix, or an IPv4-mapped one of fewer than 96 bits.
	TrustedProxies []netip.Prefix
	// IPv6Prefix is how many leading bits of an IPv6 client's address
	// make its key: all clients of a prefix are one key. 0: 64, the
	// prefix of one host's network. 1 to 128; 128 keys each address on
	// its own, which a client with a /64 can use to pose as many.
	IPv6Prefix int
	// MaxKeys bounds the fairness keys the middleware submits requests
	// under by name. A key is remembered until it has had no request in
	// flight for KeyTTL, never forgotten while busy, so that a client
	// rotating keys cannot push out a busy key and its recent cost. A new
	// key while MaxKeys are remembered shares one of SharedKeys keys,
	// named "~shared-N": at each request, the less busy of the two its hash
	// picks (shuffle sharding, as in the Kubernetes API server's fair
	// queuing). What that costs: such a client shares those two keys' fair
	// share and KeyConfig.MaxPending with whatever other keys hash there,
	// so under a flood of new keys new clients share with the flood, while
	// the clients already known keep their own. 0: 10,000.
	MaxKeys int
	// SharedKeys is how many keys the keys past MaxKeys share. 0: 1,024.
	SharedKeys int
	// KeyTTL is how long a key with no request in flight is remembered
	// by name: set it to the scheduler's Config.IdleTTL, after which the
	// scheduler forgets an idle key, so that it tracks at most about
	// MaxKeys + SharedKeys keys from requests. 0: ten minutes, IdleTTL's
	// default.
	KeyTTL time.Duration
	// Job returns the job a request runs as: its type, ID and priority
	// (its Key is set by Key). A job that names no type runs as
	// RequestType. nil: a job of RequestType. It runs for every request:
	// a type the scheduler does not know (or resources it does not have)
	// is answered 500 and logged once per type.
	Job func(*http.Request) fairsched.Job
	// Exempt reports the requests that bypass the scheduler, such as
	// health and readiness probes: never queued, never refused, and not
	// bounded by the scheduler, so keep them cheap. It replaces the
	// default; to extend it, call DefaultExempt from yours:
	//
	//	Exempt: func(r *http.Request) bool {
	//		return fairschedhttp.DefaultExempt(r) || r.URL.Path == "/status"
	//	},
	//
	// nil: DefaultExempt. To exempt nothing, return false.
	Exempt func(*http.Request) bool
	// Refused writes the answer to a request the scheduler refused:
	// status is 429 (the queue, or the client's share of it, is full) or
	// 503 (the scheduler is closing, or the request could not be run),
	// retryAfter the time after which to try again (0: none). The
	// Retry-After header is set already. nil: a line of plain text.
	Refused func(w http.ResponseWriter, r *http.Request, status int, retryAfter time.Duration)
	// OnPanic is called with the recovered panic of a handler, whose
	// client got a 500 without the stack. nil: log.Printf.
	OnPanic func(r *http.Request, p *fairsched.PanicError)
}

// DefaultExempt reports whether r is a GET or HEAD of a conventional
// probe or metrics path: /healthz, /livez, /readyz (Kubernetes),
// /health, /ready, /ping, /metrics (Prometheus), and /-/healthy,
// /-/ready (Prometheus' own). The path must match exactly. It is the
// default of Options.Exempt.
//
// It exempts these paths whatever serves them: behind a catch-all
// handler mounted at "/" (a single-page application's, a proxy's), a
// GET of /health, /ping or /metrics runs that handler with no scheduler
// bound. If the service does not serve its probes at these paths, or its
// catch-all is costly, give an Exempt of its own.
func DefaultExempt(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	switch r.URL.Path {
	case "/healthz", "/livez", "/readyz", "/health", "/ready", "/ping", "/metrics", "/-/healthy", "/-/ready":
		return true
	}
	return false
}

// Middleware returns a handler that runs each request of next inside
// s.RunSync, as the job o.Job describes, keyed by o.Key:
//
//   - exempt (o.Exempt, by default DefaultExempt), next serves it at
//     once, outside the scheduler;
//   - admitted, next serves it with a context that ends when the request's
//     does or when s.Close cancels running work;
//   - refused because the queue or the client's share of it is full, it
//     is answered 429 with Retry-After (QueueFullError.RetryAfter: the
//     wait the request would have had, the work ahead of it at the rate
//     it would have been served, rounded up to whole seconds, at least 1);
//   - refused because s is shutting down or closed, or because the job
//     cannot run now (its start deadline, a disabled pair), 503;
//   - refused because o.Job named a type or resources s does not have, a
//     mistake of the service's, 500, logged once per type;
//   - a client that goes away while its request waits leaves the queue at
//     once, and nothing is written;
//   - a handler that panics gets its slot released and its client a 500
//     without the stack (unless it had written its header already); a
//     panic with http.ErrAbortHandler is passed on, as net/http expects.
//
// The writer next gets has the optional interfaces of the server's:
// http.Flusher (server-sent events), http.Hijacker, io.ReaderFrom, and
// Unwrap for http.ResponseController.
//
// Middleware registers RequestType with s if s has no type of that name.
// It panics if o.IPv6Prefix, o.MaxKeys, o.SharedKeys, o.KeyTTL or
// o.TrustedProxies is out of range.
//
// Each Middleware keeps its own table of keys (Options.MaxKeys): use one
// Middleware per Scheduler, in front of the service's router, not one per
// route. Two on one Scheduler would each remember MaxKeys keys by name,
// and each pick a shared key blind to the other's requests in flight.
//
// With http.Server.Shutdown, requests already running finish; call
// s.Shutdown after the server's, so that they are not refused meanwhile.
func Middleware(s *fairsched.Scheduler, next http.Handler, o Options) http.Handler {
	bits := o.IPv6Prefix
	if bits == 0 {
		bits = defaultIPv6Prefix
	}
	if bits < 1 || bits > 128 {
		panic(fmt.Sprintf("fairschedhttp: Options.IPv6Prefix is %d; it must be 0 (64) or 1 to 128", o.IPv6Prefix))
	}
	maxKeys, shared, ttl := o.MaxKeys, o.SharedKeys, o.KeyTTL
	if maxKeys < 0 || shared < 0 || ttl < 0 {
		panic(fmt.Sprintf("fairschedhttp: Options.MaxKeys (%d), SharedKeys (%d) and KeyTTL (%v) must not be negative", maxKeys, shared, ttl))
	}
	if maxKeys == 0 {
		maxKeys = defaultMaxKeys
	}
	if shared == 0 {
		shared = defaultSharedKeys
	}
	if ttl == 0 {
		ttl = defaultKeyTTL
	}
	keys := newKeyTable(maxKeys, shared, ttl)
	trusted := trustedPrefixes(o.TrustedProxies)
	keyOf := func(r *http.Request) string { return clientKey(r, trusted, bits) }
	if o.Key != nil {
		keyOf = func(r *http.Request) string {
			if k := o.Key(r); k != "" {
				return boundKey(k)
			}
			return clientKey(r, trusted, bits)
		}
	}
	exempt := o.Exempt
	if exempt == nil {
		exempt = DefaultExempt
	}
	refused := o.Refused
	if refused == nil {
		refused = plainRefusal
	}
	onPanic := o.OnPanic
	if onPanic == nil {
		onPanic = func(r *http.Request, p *fairsched.PanicError) {
			log.Printf("fairschedhttp: %s %q: handler panicked: %v", r.Method, r.URL.Path, p.Value)
		}
	}
	// An error means the type is there already, configured by the
	// service, or that s is closed and every request will be refused.
	_ = s.RegisterType(RequestType, RequestTypeConfig())
	var misconfigured onceLog
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if exempt(r) {
			next.ServeHTTP(w, r)
			return
		}
		job := fairsched.Job{Type: RequestType}
		if o.Job != nil {
			job = o.Job(r)
			if job.Type == "" {
				job.Type = RequestType
			}
		}
		key, done := keys.acquire(keyOf(r))
		defer done()
		job.Key = key
		rw := &recorder{ResponseWriter: w}
		err := s.RunSync(r.Context(), job, func(ctx context.Context) error {
			next.ServeHTTP(rw.recording(), r.WithContext(ctx))
			return nil
		})
		var full *fairsched.QueueFullError
		var panicked *fairsched.PanicError
		switch {
		case err == nil:
		case errors.As(err, &panicked):
			if panicked.Value == http.ErrAbortHandler {
				panic(http.ErrAbortHandler) // its slot is released already
			}
			onPanic(r, panicked)
			if !rw.wrote {
				http.Error(w, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
			}
		case r.Context().Err() != nil:
			// The client went away: nobody to answer.
		case errors.As(err, &full):
			wait := full.RetryAfter()
			w.Header().Set("Retry-After", strconv.Itoa(int(wait/time.Second)))
			refused(w, r, http.StatusTooManyRequests, wait)
		case errors.Is(err, fairsched.ErrUnknownType), errors.Is(err, fairsched.ErrUnknownResource),
			errors.Is(err, fairsched.ErrTooMuch):
			// Options.Job describes a job s cannot run, whatever the load:
			// the service's mistake, to be fixed, not waited out.
			misconfigured.printf(boundKey(job.Type), "fairschedhttp: %s %q: Options.Job: %v", r.Method, r.URL.Path, err)
			http.Error(w, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
		default:
			// Closing, or a job that cannot run now (a start deadline, a
			// disabled pair): the service cannot serve it now.
			refused(w, r, http.StatusServiceUnavailable, 0)
		}
	})
}

// maxLogged bounds the types onceLog remembers: Options.Job may derive a
// type from what a client sends.
const maxLogged = 64

// onceLog logs a message once per subject, for at most maxLogged
// subjects, then once that it logs no more.
type onceLog struct {
	mu     sync.Mutex
	logged map[string]bool
	full   bool
}

func (l *onceLog) printf(subject, format string, args ...any) {
	l.mu.Lock()
	if l.logged[subject] || l.full {
		l.mu.Unlock()
		return
	}
	if l.logged == nil {
		l.logged = make(map[string]bool)
	}
	last := len(l.logged) == maxLogged-1
	l.logged[subject] = true
	l.full = last
	l.mu.Unlock()
	log.Printf(format, args...)
	if last {
		log.Printf("fairschedhttp: %d job types refused; not logging more", maxLogged)
	}
}

// plainRefusal answers a refused request with a line of plain text.
func plainRefusal(w http.ResponseWriter, _ *http.Request, status int, _ time.Duration) {
	msg := "the server is shutting down or cannot serve this request now"
	if status == http.StatusTooManyRequests {
		msg = "too many requests waiting; retry later"
	}
	http.Error(w, msg, status)
}
