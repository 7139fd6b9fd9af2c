package fairschedhttp

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Who may see the admin page and who may use its controls. The page is
// closed by default: it shows tenants' keys, job IDs and the errors of
// dead jobs, which can hold what no visitor should read, so a service
// opens it by saying who may, and nothing opens it by accident.

// AdminAccess is what a request to the admin handler asks for: to read
// (the page, its script and its JSON) or to change the scheduler (a
// control's POST).
type AdminAccess int

const (
	AdminRead   AdminAccess = iota // see the page and its JSON
	AdminChange                    // pause, resume, reweight, retry, cancel, disable or enable
)

// String returns "read" or "change".
func (a AdminAccess) String() string {
	if a == AdminChange {
		return "change"
	}
	return "read"
}

// what says what a request of access asks for, in words.
func (a AdminAccess) what() string {
	if a == AdminChange {
		return "use this admin page's controls"
	}
	return "see this admin page"
}

// LoopbackOnly is an AdminOptions.Authorize that lets in, to read and to
// change, the requests that come from this machine to this machine: those
// whose RemoteAddr is a loopback address (127.0.0.0/8, ::1, or IPv4
// loopback mapped into IPv6) and whose Host, without its port, is
// "localhost" or a loopback address too. It suits a service reached by an
// operator through an SSH tunnel or kubectl port-forward, opened in the
// browser as localhost or 127.0.0.1.
//
// The Host check stops DNS rebinding: a page at evil.example:8080 whose
// name is then pointed at 127.0.0.1 reaches an operator's tunnel from
// loopback, and the browser takes its requests for same-origin ones, but
// they still name evil.example as their Host.
//
// It is unsafe behind a reverse proxy, a load balancer or a sidecar on
// the same host (a service mesh's proxy, nginx on localhost): they
// connect from loopback, so every request they forward, from anyone,
// would be let in. There, use a check of the proxy's own authentication
// instead (see the examples). It is unsafe too behind middleware that
// rewrites RemoteAddr from request headers (chi's RealIP, gorilla's
// ProxyHeaders): any client could then claim to be 127.0.0.1. It reads
// RemoteAddr and Host only, never X-Forwarded-For or the like.
func LoopbackOnly(r *http.Request, _ AdminAccess) bool {
	return isLoopback(r.RemoteAddr, false) && isLoopback(r.Host, true)
}

// isLoopback reports whether hostport, with or without a port, is a
// loopback address, or if byName (a Host header) "localhost" or a
// loopback address with no zone.
func isLoopback(hostport string, byName bool) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
	}
	if byName && strings.EqualFold(host, "localhost") {
		return true
	}
	addr, err := netip.ParseAddr(host)
	return err == nil && addr.Unmap().IsLoopback() && (!byName || addr.Zone() == "")
}

// closedPage is what every request gets while AdminOptions.Authorize is
// nil: a refusal that says how to open the page, and nothing of the
// scheduler's.
const closedPage = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>fairsched: admin page closed</title></head>
<body>
<h1>This admin page is closed</h1>
<p>It shows job IDs, tenants' keys and the errors of failed jobs, so it is
closed until the service says who may see it and who may use its controls.</p>
<p>To open it, set <code>AdminOptions.Authorize</code> where the service mounts
<code>fairschedhttp.Admin</code>: to a check of its own (a token, or the
identity a reverse proxy has authenticated), or to
<code>fairschedhttp.LoopbackOnly</code> to let in only requests from this
machine (an SSH tunnel, a port-forward; never behind a proxy or a sidecar
on the same host, which connect from this machine for everyone).</p>
</body></html>
`

// refusedPage is what a request gets that Authorize does not let in.
const refusedPage = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>fairsched: not authorised</title></head>
<body><h1>Not authorised</h1><p>This request may not %s.</p></body></html>
`
