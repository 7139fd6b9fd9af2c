package fairschedhttp_test

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"

	"github.com/fairsched/fairsched"
	"github.com/fairsched/fairsched/fairschedhttp"
)

// Behind a reverse proxy that authenticates operators (oauth2-proxy, an
// identity-aware proxy) and passes on who they are in a header, the
// service lets the team read the page and the on-call engineers use its
// controls. The proxy must be the only way in, and must overwrite the
// header a client sends.
func ExampleAdmin() {
	s, err := fairsched.New(fairsched.Config{MaxConcurrency: 8})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	team := []string{"ann@example.com", "bob@example.com"}
	onCall := []string{"ann@example.com"}
	admin := fairschedhttp.Admin(s, fairschedhttp.AdminOptions{
		Authorize: func(r *http.Request, access fairschedhttp.AdminAccess) bool {
			who := r.Header.Get("X-Forwarded-Email")
			if access == fairschedhttp.AdminChange {
				return slices.Contains(onCall, who)
			}
			return slices.Contains(team, who)
		},
		// The proxy serves the page at its own origin, and rewrites Host.
		TrustedOrigins: []string{"https://ops.example.com"},
	})
	defer admin.Close()

	mux := http.NewServeMux()
	mux.Handle("/admin/", http.StripPrefix("/admin", admin)) // outside the Middleware

	for _, who := range []string{"bob@example.com", "eve@example.com"} {
		req := httptest.NewRequest("GET", "/admin/state.json", nil)
		req.Header.Set("X-Forwarded-Email", who)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		fmt.Println(who, rec.Code)
	}
	// Output:
	// bob@example.com 200
	// eve@example.com 403
}

// A bearer token, for scripts that read state.json, compared in constant
// time so that the time an answer takes tells nothing of the token.
// (Hashing both sides first makes the comparison's time independent of
// the length too.)
func ExampleAdmin_bearerToken() {
	s, err := fairsched.New(fairsched.Config{})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	token := "s3cret" // in a real service: from a secret store or the environment, never the source
	want := sha256.Sum256([]byte("Bearer " + token))
	admin := fairschedhttp.Admin(s, fairschedhttp.AdminOptions{
		Authorize: func(r *http.Request, _ fairschedhttp.AdminAccess) bool {
			got := sha256.Sum256([]byte(r.Header.Get("Authorization")))
			return subtle.ConstantTimeCompare(got[:], want[:]) == 1
		},
	})
	defer admin.Close()

	for _, token := range []string{"s3cret", "guess"} {
		req := httptest.NewRequest("GET", "/state.json", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		admin.ServeHTTP(rec, req)
		fmt.Println(rec.Code)
	}
	// Output:
	// 200
	// 403
}

// For a service an operator reaches through an SSH tunnel or a
// port-forward, opened as localhost, and never through a proxy or a
// sidecar on its host. A page of another site whose name was re-pointed
// at 127.0.0.1 (DNS rebinding) comes from loopback too, but under its
// own name.
func ExampleLoopbackOnly() {
	s, err := fairsched.New(fairsched.Config{})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	admin := fairschedhttp.Admin(s, fairschedhttp.AdminOptions{Authorize: fairschedhttp.LoopbackOnly})
	defer admin.Close()

	for _, r := range []struct{ from, host string }{
		{"127.0.0.1:50000", "localhost:8080"},    // the operator, through the tunnel
		{"203.0.113.7:50000", "localhost:8080"},  // another machine
		{"127.0.0.1:50000", "evil.example:8080"}, // a rebound page, through the tunnel
	} {
		req := httptest.NewRequest("GET", "/state.json", nil)
		req.RemoteAddr, req.Host = r.from, r.host
		rec := httptest.NewRecorder()
		admin.ServeHTTP(rec, req)
		fmt.Println(r.from, r.host, rec.Code)
	}
	// Output:
	// 127.0.0.1:50000 localhost:8080 200
	// 203.0.113.7:50000 localhost:8080 403
	// 127.0.0.1:50000 evil.example:8080 403
}
