package fairschedhttp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/fairsched/fairsched"
	"github.com/fairsched/fairsched/fairschedtest"
)

// What the harness's scheduler holds that no unauthorised reader may see.
const (
	secretKey = "tenant-alpha"
	secretID  = "card-4111"
	secretErr = "disk full: password=hunter2"
)

// adminHarness is a scheduler with a running job, queued jobs of two
// keys (one paused), a dead job and a disabled pair; it returns the dead
// job's number.
func adminHarness(t *testing.T) (*fairsched.Scheduler, uint64) {
	t.Helper()
	s, err := fairsched.New(fairsched.Config{MaxConcurrency: 1, Types: map[string]fairsched.TypeConfig{
		"sync": {Disable: fairsched.DisablePolicy{Failures: 1, Window: time.Hour}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	failed, err := s.Submit(context.Background(), fairsched.Job{Type: "sync", ID: secretID, Key: secretKey}, func(context.Context) error {
		return errors.New(secretErr)
	})
	if err != nil {
		t.Fatal(err)
	}
	<-failed.Done()
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) }) // before Close, which waits for the jobs
	for _, key := range []string{secretKey, secretKey, "b", "b", "b"} {
		if _, err := s.Submit(context.Background(), fairsched.Job{Key: key}, func(context.Context) error { <-hold; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	s.PauseKey("b")
	return s, failed.Seq()
}

// newAdmin returns Admin(s, o), closed when the test ends.
func newAdmin(t *testing.T, s *fairsched.Scheduler, o AdminOptions) *AdminHandler {
	t.Helper()
	a := Admin(s, o)
	t.Cleanup(func() { a.Close() })
	return a
}

func allowAll(*http.Request, AdminAccess) bool { return true }

// byHeader authorises reads with X-Admin "read" or "change", changes
// with "change" only.
func byHeader(r *http.Request, access AdminAccess) bool {
	v := r.Header.Get("X-Admin")
	return v == "change" || (v == "read" && access == AdminRead)
}

func get(handler http.Handler, path string, header map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("GET", path, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, req)
	return rec
}

func getState(t *testing.T, handler http.Handler, query string, header map[string]string) (State, *httptest.ResponseRecorder) {
	t.Helper()
	rec := get(handler, "/state.json"+query, header)
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("state.json: %d %s", rec.Code, rec.Body.String())
	}
	var st State
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		t.Fatalf("state.json: %v", err)
	}
	return st, rec
}

// post sends a change as the page does, from its own origin.
func post(handler http.Handler, path string, form url.Values, header map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Origin", "http://"+req.Host)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, req)
	return rec
}

// controlForms is a request to every control, with fields that would
// change the harness's scheduler if it were let through.
func controlForms(dead uint64) map[string]url.Values {
	return map[string]url.Values{
		"/pause-key": {"name": {secretKey}}, "/resume-key": {"name": {"b"}},
		"/pause-type": {"name": {""}}, "/resume-type": {"name": {""}},
		"/weight":     {"key": {secretKey}, "weight": {"3"}},
		"/retry-dead": {"seq": {itoa(dead)}}, "/cancel": {"seq": {"3"}},
		"/disable": {"type": {"sync"}, "id": {"other"}, "for": {""}}, "/enable": {"type": {"sync"}, "id": {secretID}},
	}
}

// unchanged fails the test if the harness's scheduler was changed.
func unchanged(t *testing.T, s *fairsched.Scheduler) {
	t.Helper()
	st := s.Stats()
	if !slices.Equal(st.PausedKeys, []string{"b"}) || len(st.Types[0].Name) != 0 || st.Types[0].Paused ||
		st.Dead != 1 || st.Disabled != 1 || st.Cancelled != 0 || st.Queued != 4 {
		t.Errorf("a refused change changed something: paused %v, dead %d, disabled %d, cancelled %d, queued %d",
			st.PausedKeys, st.Dead, st.Disabled, st.Cancelled, st.Queued)
	}
	for _, k := range st.Keys {
		if k.Key == secretKey && k.Weight != 1 {
			t.Errorf("a refused change set the weight to %v", k.Weight)
		}
	}
}

// noData fails the test if body holds any of the harness's data.
func noData(t *testing.T, what, body string) {
	t.Helper()
	for _, secret := range []string{secretKey, secretID, "hunter2", `"Seq"`, `"Queue"`} {
		if strings.Contains(body, secret) {
			t.Errorf("%s: the refusal carries %q", what, secret)
		}
	}
}

// With no Authorize, the page is closed: every request, read or change,
// gets 403 with a page that says how to open it, and nothing of the
// scheduler's.
func TestAdminClosedByDefault(t *testing.T) {
	s, dead := adminHarness(t)
	handler := newAdmin(t, s, AdminOptions{})
	for _, path := range []string{"/", "/state.json", "/state.json?page=1", "/admin.js", "/admin.css", "/nowhere"} {
		rec := get(handler, path, nil)
		if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "AdminOptions.Authorize") ||
			!strings.Contains(rec.Body.String(), "LoopbackOnly") {
			t.Errorf("GET %s: %d %q, want 403 saying how to open the page", path, rec.Code, rec.Body.String())
		}
		noData(t, "GET "+path, rec.Body.String())
	}
	for path, form := range controlForms(dead) {
		rec := post(handler, path, form, nil)
		if rec.Code != http.StatusForbidden {
			t.Errorf("POST %s: %d, want 403", path, rec.Code)
		}
		noData(t, "POST "+path, rec.Body.String())
	}
	unchanged(t, s)
}

// The attack: with Authorize refusing, a read of the JSON and every
// change are refused, and no refusal carries the scheduler's data; a
// reader without the right to change is refused every change.
func TestAdminUnauthorised(t *testing.T) {
	s, dead := adminHarness(t)
	handler := newAdmin(t, s, AdminOptions{Authorize: byHeader})
	for _, who := range []map[string]string{nil, {"X-Admin": "nobody"}} {
		for _, path := range []string{"/", "/state.json", "/state.json?page=0", "/admin.js"} {
			rec := get(handler, path, who)
			if rec.Code != http.StatusForbidden {
				t.Errorf("GET %s as %v: %d, want 403", path, who, rec.Code)
			}
			noData(t, "GET "+path, rec.Body.String())
		}
	}
	for _, who := range []map[string]string{nil, {"X-Admin": "nobody"}, {"X-Admin": "read"}} {
		for path, form := range controlForms(dead) {
			rec := post(handler, path, form, who)
			if rec.Code != http.StatusForbidden {
				t.Errorf("POST %s as %v: %d, want 403", path, who, rec.Code)
			}
			noData(t, "POST "+path, rec.Body.String())
		}
	}
	unchanged(t, s)
	if st, _ := getState(t, handler, "", map[string]string{"X-Admin": "read"}); st.Controls || st.Jobs != 5 {
		t.Errorf("a reader: controls %v, %d jobs", st.Controls, st.Jobs)
	}
}

// The page is a document, a script and a style sheet, all served by the
// handler, with a policy that allows no inline script or style; its
// JSON says what the scheduler holds, the queue one page at a time.
func TestAdminPageAndState(t *testing.T) {
	s, dead := adminHarness(t)
	handler := newAdmin(t, s, AdminOptions{PageSize: 2, Authorize: allowAll})

	rec := get(handler, "/", nil)
	body := rec.Body.String()
	if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") ||
		!strings.Contains(body, `<script src="admin.js"`) || !strings.Contains(body, `href="admin.css"`) {
		t.Fatalf("page: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	if strings.Contains(body, "<script>") || strings.Contains(body, "<style") || strings.Contains(body, "style=") ||
		strings.Contains(body, "http://") || strings.Contains(body, "https://") {
		t.Error("the page has inline script or style, or fetches something from elsewhere")
	}
	csp := rec.Header().Get("Content-Security-Policy")
	if strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("CSP %q", csp)
	}
	for path, ctype := range map[string]string{"/admin.js": "text/javascript", "/admin.css": "text/css"} {
		rec := get(handler, path, nil)
		if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), ctype) || rec.Body.Len() < 100 {
			t.Errorf("%s: %d %q", path, rec.Code, rec.Header().Get("Content-Type"))
		}
	}
	if js := get(handler, "/admin.js", nil).Body.String(); strings.Contains(js, "innerHTML") || strings.Contains(js, "http://") && !strings.Contains(js, "http://www.w3.org/2000/svg") {
		t.Error("the script writes HTML from data, or fetches from elsewhere")
	}

	st, rec := getState(t, handler, "", nil)
	if rec.Header().Get("X-Content-Type-Options") != "nosniff" || rec.Header().Get("Cache-Control") != "no-store" {
		t.Errorf("state.json headers: %v", rec.Header())
	}
	raw := rec.Body.String()
	if !st.Controls {
		t.Error("controls off for an authorised request")
	}
	if st.Jobs != 5 || st.Pages != 3 || len(st.Queue) != 2 || !st.Queue[0].Running {
		t.Errorf("queue: %d jobs, %d pages, %d listed, first running %v", st.Jobs, st.Pages, len(st.Queue), st.Queue[0].Running)
	}
	if !strings.Contains(raw, `"Waiting":"turn"`) || !strings.Contains(raw, `"paused":3`) {
		t.Error("reasons are not given by name")
	}
	if len(st.Dead) != 1 || st.Dead[0].Seq != dead || st.Dead[0].Err != secretErr {
		t.Errorf("dead: %+v", st.Dead)
	}
	if len(st.Disabled) != 1 || st.Disabled[0].ID != secretID {
		t.Errorf("disabled: %+v", st.Disabled)
	}
	if st.Stats.MaxConcurrency != 1 || st.OldestWait[secretKey] <= 0 || len(st.OldestWait) != 1 { // the page's jobs
		t.Errorf("limits %d, longest waits %v", st.Stats.MaxConcurrency, st.OldestWait)
	}
	if i := slices.IndexFunc(st.Stats.Keys, func(k fairsched.KeyStats) bool { return k.Key == "b" }); i < 0 || !st.Stats.Keys[i].Paused {
		t.Error("key b is not shown paused")
	}
	if st.TierNames[fairsched.Background] != "background" {
		t.Errorf("tier names %v", st.TierNames)
	}
	if len(st.History.Times) == 0 || len(st.History.Charts) != 6 {
		t.Errorf("history: %d samples, %d charts", len(st.History.Times), len(st.History.Charts))
	}
	last, _ := getState(t, handler, "?page=9", nil)
	if last.Page != 2 || len(last.Queue) != 1 || last.OldestWait["b"] <= 0 {
		t.Errorf("page 9: page %d with %d jobs, longest waits %v, want the last, 1, b's", last.Page, len(last.Queue), last.OldestWait)
	}
}

// With authorisation to change, each control changes the scheduler; bad
// fields are 400, a change the scheduler refuses 409.
func TestAdminControls(t *testing.T) {
	s, dead := adminHarness(t)
	handler := newAdmin(t, s, AdminOptions{Authorize: byHeader})
	admin := map[string]string{"X-Admin": "change"}
	queued := s.Snapshot()[3].Seq // key b's first, paused
	for _, c := range []struct {
		path string
		form url.Values
		want int
	}{
		{"/pause-key", url.Values{"name": {secretKey}}, 204},
		{"/resume-key", url.Values{"name": {"b"}}, 204},
		{"/pause-type", url.Values{"name": {"nope"}}, 400},
		{"/pause-type", url.Values{"name": {"sync"}}, 204},
		{"/resume-type", url.Values{"name": {"sync"}}, 204},
		{"/weight", url.Values{"key": {secretKey}, "weight": {"many"}}, 400},
		{"/weight", url.Values{"key": {secretKey}, "weight": {"-1"}}, 409},
		{"/weight", url.Values{"key": {secretKey}, "weight": {"3"}}, 204},
		{"/retry-dead", url.Values{"seq": {"999"}}, 400},
		{"/enable", url.Values{"type": {"sync"}, "id": {secretID}}, 204},
		{"/retry-dead", url.Values{"seq": {itoa(dead)}}, 204},
		{"/cancel", url.Values{"seq": {itoa(queued)}}, 204},
		{"/cancel", url.Values{"seq": {itoa(queued)}}, 409},
		{"/disable", url.Values{"type": {"sync"}, "id": {"repo"}, "for": {"30m"}}, 204},
		{"/disable", url.Values{"type": {"nope"}, "id": {"repo"}, "for": {""}}, 400},
		{"/disable", url.Values{"type": {""}, "id": {"x"}, "for": {""}}, 204},
	} {
		if rec := post(handler, c.path, c.form, admin); rec.Code != c.want {
			t.Errorf("%s %v: %d %q, want %d", c.path, c.form, rec.Code, rec.Body.String(), c.want)
		}
	}
	st := s.Stats()
	if !slices.Equal(st.PausedKeys, []string{secretKey}) || st.Dead != 0 || st.Cancelled != 1 {
		t.Errorf("paused %v, dead %d, cancelled %d", st.PausedKeys, st.Dead, st.Cancelled)
	}
	if i := slices.IndexFunc(st.Keys, func(k fairsched.KeyStats) bool { return k.Key == secretKey }); i < 0 || st.Keys[i].Weight != 3 {
		t.Error("the weight did not change")
	}
	if slices.ContainsFunc(s.Snapshot(), func(j fairsched.JobInfo) bool { return j.Seq == queued }) {
		t.Error("the cancelled job is still queued")
	}
	disabled := s.Disabled()
	if len(disabled) != 2 || disabled[0].ID != "x" || !disabled[0].Until.IsZero() || disabled[1].ID != "repo" || disabled[1].Until.IsZero() {
		t.Errorf("disabled: %+v", disabled)
	}
	rec := get(handler, "/pause-key?name=a", admin)
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET of a change: %d, want 405", rec.Code)
	}
}

// The attack from another site: a browser's cross-site POST is refused
// whatever the authorisation says; an origin listed in TrustedOrigins
// (the page behind a proxy that rewrites Host) is accepted.
func TestAdminCrossSite(t *testing.T) {
	s, dead := adminHarness(t)
	handler := newAdmin(t, s, AdminOptions{Authorize: allowAll, TrustedOrigins: []string{"https://ops.example.com"}})
	for name, header := range map[string]map[string]string{
		"Sec-Fetch-Site cross-site": {"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
		"Sec-Fetch-Site same-site":  {"Sec-Fetch-Site": "same-site", "Origin": "https://sub.ops.example.com"},
		"another Origin":            {"Sec-Fetch-Site": "", "Origin": "https://evil.example"},
	} {
		for path, form := range controlForms(dead) {
			if rec := post(handler, path, form, header); rec.Code != http.StatusForbidden {
				t.Errorf("%s %s: %d, want 403", name, path, rec.Code)
			}
		}
	}
	unchanged(t, s)

	proxied := map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://ops.example.com"}
	if rec := post(handler, "/pause-key", url.Values{"name": {"c"}}, proxied); rec.Code != 204 {
		t.Errorf("from a trusted origin: %d %q, want 204", rec.Code, rec.Body.String())
	}
	untrusted := newAdmin(t, s, AdminOptions{Authorize: allowAll})
	if rec := post(untrusted, "/pause-key", url.Values{"name": {"d"}}, proxied); rec.Code != http.StatusForbidden {
		t.Errorf("the same origin, not trusted: %d, want 403", rec.Code)
	}
	if !slices.Equal(s.Stats().PausedKeys, []string{"b", "c"}) {
		t.Errorf("paused %v", s.Stats().PausedKeys)
	}

	defer func() {
		if recover() == nil {
			t.Error("a malformed trusted origin was accepted")
		}
	}()
	Admin(s, AdminOptions{TrustedOrigins: []string{"ops.example.com/path"}})
}

// The attack with hostile input: a form too large is refused unread, and
// malformed values are 400 without echoing them whole; none changes
// anything.
func TestAdminHostileInput(t *testing.T) {
	s, _ := adminHarness(t)
	handler := newAdmin(t, s, AdminOptions{Authorize: allowAll})
	huge := strings.Repeat("x", 1<<20)
	if rec := post(handler, "/pause-key", url.Values{"name": {huge}}, nil); rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("a 1 MiB form: %d, want 413", rec.Code)
	}
	for _, c := range []struct {
		path string
		body string
	}{
		{"/retry-dead", "seq=-1"},
		{"/cancel", "seq=18446744073709551616"},
		{"/cancel", "seq=" + strings.Repeat("9", 60000)},
		{"/weight", "key=b&weight=NaN"},
		{"/weight", "key=b&weight=%2BInf"},
		{"/weight", "key=b&weight=1e400"},
		{"/disable", "type=sync&id=x&for=-5m"},
		{"/disable", "type=sync&id=x&for=forever"},
		{"/pause-key", "name=%zz"},
	} {
		req := httptest.NewRequest("POST", c.path, strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest && rec.Code != http.StatusConflict {
			t.Errorf("%s %.40s: %d %q, want 400 or 409", c.path, c.body, rec.Code, rec.Body.String())
		}
		if rec.Body.Len() > 400 {
			t.Errorf("%s: the error echoes the input: %d bytes", c.path, rec.Body.Len())
		}
	}
	unchanged(t, s)
}

// What a state lists does not grow with what the scheduler keeps: at
// most 100 disabled pairs, those whose time is up soonest, with a count of
// all; a dead job's error cut to a KiB, on a rune's boundary.
func TestAdminStateBounded(t *testing.T) {
	s, err := fairsched.New(fairsched.Config{Types: map[string]fairsched.TypeConfig{
		"sync": {Disable: fairsched.DisablePolicy{Failures: 1, Window: time.Hour}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	long := strings.Repeat("é", 10<<10) // two bytes each
	failed, err := s.Submit(context.Background(), fairsched.Job{Type: "sync", ID: "x"}, func(context.Context) error {
		return errors.New(long)
	})
	if err != nil {
		t.Fatal(err)
	}
	<-failed.Done()
	for i := range 250 {
		if err := s.Disable("sync", "id-"+strconv.Itoa(i), time.Duration(250-i)*time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := getState(t, newAdmin(t, s, AdminOptions{Authorize: allowAll}), "", nil)
	if len(st.Disabled) != 100 || st.DisabledTotal != 251 {
		t.Errorf("%d disabled pairs listed of %d, want 100 of 251", len(st.Disabled), st.DisabledTotal)
	}
	if len(st.Disabled) > 0 && (st.Disabled[0].ID != "id-249" || st.Disabled[len(st.Disabled)-1].ID != "id-150") {
		t.Errorf("listed from %s to %s, want the soonest up, id-249 to id-150", st.Disabled[0].ID, st.Disabled[len(st.Disabled)-1].ID)
	}
	if len(st.Dead) != 1 {
		t.Fatalf("%d dead jobs", len(st.Dead))
	}
	e := st.Dead[0].Err
	if len(e) > 1024 || !utf8.ValidString(e) || !strings.HasSuffix(e, "…") || !strings.HasPrefix(long, strings.TrimSuffix(e, "…")) {
		t.Errorf("the error shown is %d bytes, valid UTF-8 %v: %.40q…", len(e), utf8.ValidString(e), e)
	}
}

// The longest waits are sent for the keys the page lists, not for every
// key with a job waiting on the page.
func TestAdminOldestWaitOfListedKeys(t *testing.T) {
	clk := fairschedtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := fairsched.New(fairsched.Config{MaxConcurrency: 1, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hold := make(chan struct{})
	defer close(hold) // before Close, which waits for the jobs
	for i := range 200 {
		if _, err := s.Submit(context.Background(), fairsched.Job{Key: "k" + strconv.Itoa(i)}, func(context.Context) error { <-hold; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(time.Second)
	st, _ := getState(t, newAdmin(t, s, AdminOptions{Authorize: allowAll, PageSize: 1000}), "", nil)
	if len(st.Queue) != 200 {
		t.Fatalf("the page lists %d jobs, want 200", len(st.Queue))
	}
	listed := map[string]bool{}
	for _, k := range st.Stats.Keys {
		listed[k.Key] = true
	}
	for k, w := range st.OldestWait {
		if !listed[k] || w != time.Second {
			t.Errorf("key %q waited %v: listed %v", k, w, listed[k])
		}
	}
	if len(st.OldestWait) != fairsched.MaxListedKeys-1 { // the busiest listed, less the one running
		t.Errorf("%d longest waits sent, want %d", len(st.OldestWait), fairsched.MaxListedKeys-1)
	}
}

// The attack with a body that is not a form: JSON or text parses to no
// fields, which must not be read as the empty name (the keyless work, the
// default type); and a form that leaves a field out is refused. Every one
// is refused and changes nothing; the empty name sent explicitly is
// accepted.
func TestAdminFormFieldsRequired(t *testing.T) {
	s, dead := adminHarness(t)
	handler := newAdmin(t, s, AdminOptions{Authorize: allowAll})
	for path, form := range controlForms(dead) {
		for _, ct := range []string{"application/json", "text/plain", "multipart/form-data; boundary=x", ""} {
			body := `{"name":"x"}`
			req := httptest.NewRequest("POST", path, strings.NewReader(body))
			if ct != "" {
				req.Header.Set("Content-Type", ct)
			}
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			rec := httptest.NewRecorder()
			handler.ServeHTTP(rec, req)
			if rec.Code != http.StatusUnsupportedMediaType {
				t.Errorf("%s as %q: %d %q, want 415", path, ct, rec.Code, rec.Body.String())
			}
		}
		for field := range form {
			partial := url.Values{}
			for k, v := range form {
				if k != field {
					partial[k] = v
				}
			}
			if rec := post(handler, path, partial, nil); rec.Code != http.StatusBadRequest {
				t.Errorf("%s without %s: %d %q, want 400", path, field, rec.Code, rec.Body.String())
			}
		}
	}
	// A field only in the URL's query is not the form's.
	if rec := post(handler, "/pause-type?name=", url.Values{}, nil); rec.Code != http.StatusBadRequest {
		t.Errorf("/pause-type with its field in the query: %d, want 400", rec.Code)
	}
	unchanged(t, s)

	if rec := post(handler, "/pause-key", url.Values{"name": {""}}, nil); rec.Code != 204 {
		t.Errorf("the empty key, sent: %d %q, want 204", rec.Code, rec.Body.String())
	}
	if !slices.Contains(s.Stats().PausedKeys, "") {
		t.Errorf("the empty key was not paused: %v", s.Stats().PausedKeys)
	}
}

// LoopbackOnly lets in this machine's requests only.
func TestLoopbackOnly(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:4000": true, "127.9.9.9:1": true, "[::1]:4000": true, "[::ffff:127.0.0.1]:4000": true,
		"10.0.0.1:4000": false, "[2001:db8::1]:4000": false, "[::ffff:10.0.0.1]:1": false, "": false, "localhost:80": false,
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = addr
		r.Host = "localhost:8080"
		for _, access := range []AdminAccess{AdminRead, AdminChange} {
			if got := LoopbackOnly(r, access); got != want {
				t.Errorf("%q %v: %v, want %v", addr, access, got, want)
			}
		}
	}
}

// The attack by DNS rebinding: a page at evil.example re-points its name
// to 127.0.0.1 and reaches an operator's tunnel from loopback; its
// requests still carry its own Host, and are refused. A client that
// claims loopback in a forwarding header is not believed.
func TestLoopbackOnlyRebindingAndForwarded(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "localhost:8080": true, "LOCALHOST:1": true, "127.0.0.1:8080": true, "127.0.0.2": true,
		"[::1]:8080": true, "[::1]": true, "::1": true,
		"evil.example:8080": false, "evil.example": false, "localhost.evil.example:8080": false,
		"10.0.0.1:8080": false, "": false, "127.0.0.1.nip.io": false, "[fe80::1%lo]:80": false,
	} {
		r := httptest.NewRequest("GET", "/state.json", nil)
		r.RemoteAddr, r.Host = "127.0.0.1:50000", host
		if got := LoopbackOnly(r, AdminRead); got != want {
			t.Errorf("Host %q from loopback: %v, want %v", host, got, want)
		}
	}

	s, _ := adminHarness(t)
	handler := newAdmin(t, s, AdminOptions{Authorize: LoopbackOnly})
	rebound := httptest.NewRequest("GET", "/state.json", nil)
	rebound.RemoteAddr, rebound.Host = "127.0.0.1:50000", "evil.example:8080"
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, rebound)
	if rec.Code != http.StatusForbidden {
		t.Errorf("a rebound page's read: %d, want 403", rec.Code)
	}
	noData(t, "a rebound page's read", rec.Body.String())

	for _, header := range []string{"X-Forwarded-For", "X-Real-Ip", "Forwarded"} {
		r := httptest.NewRequest("GET", "/state.json", nil)
		r.RemoteAddr, r.Host = "203.0.113.7:50000", "localhost:8080"
		v := "127.0.0.1"
		if header == "Forwarded" {
			v = "for=127.0.0.1"
		}
		r.Header.Set(header, v)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, r)
		if rec.Code != http.StatusForbidden {
			t.Errorf("a remote client with %s: 127.0.0.1: %d, want 403", header, rec.Code)
		}
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// On one of several replicas the page says whose jobs it shows: the
// replica's own, with where the cluster's are; on a scheduler that is no
// replica it says nothing.
func TestAdminScope(t *testing.T) {
	if got := scopeOf(nil); got != "" {
		t.Errorf("no replica: %q", got)
	}
	for _, c := range []struct {
		r    fairsched.ReplicaStats
		want []string
	}{
		{fairsched.ReplicaStats{Name: "web-2"},
			[]string{"Replica web-2:", "this replica's own jobs, not the cluster's", "the page of the replica that leads"}},
		{fairsched.ReplicaStats{Name: "web-1", Leader: true, Term: 7},
			[]string{"Replica web-1, which leads the cluster (term 7)", "this replica's own jobs", "Stats.Cluster"}},
	} {
		got := scopeOf(&c.r)
		for _, want := range c.want {
			if !strings.Contains(got, want) {
				t.Errorf("%+v: %q lacks %q", c.r, got, want)
			}
		}
	}
	s, _ := adminHarness(t)
	if st, _ := getState(t, newAdmin(t, s, AdminOptions{Authorize: allowAll}), "", nil); st.Scope != "" {
		t.Errorf("a scheduler that is no replica: %q", st.Scope)
	}
}
