// Package fairschedhttp puts a fairsched.Scheduler in front of HTTP
// handlers: Middleware runs each request as a job of the scheduler, so
// that requests are admitted by its order and limits and a full queue is
// answered with 429 and an honest Retry-After.
//
// It depends on the standard library and fairsched only.
package fairschedhttp

import (
	"context"
	"errors"
	"log"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/fairsched/fairsched"
)

// Options configures Middleware. The zero Options keys requests by the
// client's address, runs them as jobs of the default type, and answers
// refusals in plain text.
type Options struct {
	// Key returns a request's fairness key. nil: ClientAddr, believing a
	// forwarded-for header only from TrustedProxies.
	Key func(*http.Request) string
	// TrustedProxies are the proxies whose X-Forwarded-For header is
	// believed, by address prefix: a client can set the header itself, so
	// it is read only when the request comes from one of them. Used by
	// the default Key only.
	TrustedProxies []netip.Prefix
	// Job returns the job a request runs as: its type, ID and priority
	// (its Key is set by Key). nil: the zero Job, of the default type.
	Job func(*http.Request) fairsched.Job
	// Exempt reports the requests that bypass the scheduler, such as
	// health and readiness probes: never queued, never refused. nil: none.
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

// Middleware returns a handler that runs each request of next inside
// s.RunSync, as the job o.Job describes, keyed by o.Key:
//
//   - admitted, next serves it with a context that ends when the request's
//     does or when s.Close cancels running work;
//   - refused because the queue or the client's share of it is full, it
//     is answered 429 with Retry-After, in whole seconds, the wait the
//     request would have had (QueueFullError.Wait: the work ahead of it
//     at the rate it would have been served), at least 1;
//   - refused because s is shutting down or closed, 503;
//   - a client that goes away while its request waits leaves the queue at
//     once, and nothing is written;
//   - a handler that panics gets its slot released and its client a 500
//     without the stack (unless it had written its header already); a
//     panic with http.ErrAbortHandler is passed on, as net/http expects.
//
// With http.Server.Shutdown, requests already running finish; call
// s.Shutdown after the server's, so that they are not refused meanwhile.
func Middleware(s *fairsched.Scheduler, next http.Handler, o Options) http.Handler {
	key := o.Key
	if key == nil {
		trusted := o.TrustedProxies
		key = func(r *http.Request) string { return ClientAddr(r, trusted) }
	}
	refused := o.Refused
	if refused == nil {
		refused = plainRefusal
	}
	onPanic := o.OnPanic
	if onPanic == nil {
		onPanic = func(r *http.Request, p *fairsched.PanicError) {
			log.Printf("fairschedhttp: %s %s: handler panicked: %v", r.Method, r.URL.Path, p.Value)
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o.Exempt != nil && o.Exempt(r) {
			next.ServeHTTP(w, r)
			return
		}
		var job fairsched.Job
		if o.Job != nil {
			job = o.Job(r)
		}
		job.Key = key(r)
		rw := &recorder{ResponseWriter: w}
		err := s.RunSync(r.Context(), job, func(ctx context.Context) error {
			next.ServeHTTP(rw, r.WithContext(ctx))
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
			wait := time.Duration(math.Ceil(full.Wait.Seconds())) * time.Second
			wait = max(wait, time.Second)
			w.Header().Set("Retry-After", strconv.Itoa(int(wait/time.Second)))
			refused(w, r, http.StatusTooManyRequests, wait)
		default:
			// Closing, or a job that could not run (a deadline, a disabled
			// or unknown type): the service cannot serve it now.
			refused(w, r, http.StatusServiceUnavailable, 0)
		}
	})
}

// plainRefusal answers a refused request with a line of plain text.
func plainRefusal(w http.ResponseWriter, _ *http.Request, status int, _ time.Duration) {
	msg := "the server is shutting down or cannot serve this request now"
	if status == http.StatusTooManyRequests {
		msg = "too many requests waiting; retry later"
	}
	http.Error(w, msg, status)
}

// recorder remembers whether the handler wrote its header.
type recorder struct {
	http.ResponseWriter
	wrote bool
}

func (w *recorder) WriteHeader(code int) {
	w.wrote = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *recorder) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the writer underneath
// (Flush, deadlines, Hijack).
func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ClientAddr returns the address of the client that sent r: the host of
// r.RemoteAddr, or, if that is one of the trusted proxies, the nearest
// address in r's X-Forwarded-For header that is not, read from the right
// (each proxy appends the address it got the request from, and only the
// entries the trusted proxies added can be believed).
func ClientAddr(r *http.Request, trusted []netip.Prefix) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if len(trusted) == 0 || !isTrusted(host, trusted) {
		return host
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		hop := strings.TrimSpace(hops[i])
		if hop == "" {
			continue
		}
		if !isTrusted(hop, trusted) {
			return hop
		}
		host = hop
	}
	return host // every hop is a trusted proxy: the farthest one
}

// isTrusted reports whether addr is in one of the trusted prefixes.
func isTrusted(addr string, trusted []netip.Prefix) bool {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return false
	}
	a = a.Unmap()
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
