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

	"github.com/fairsched/fairsched"
)

// adminHarness is a scheduler with a running job, queued jobs of two
// keys (one paused), a dead job and a disabled pair.
func adminHarness(t *testing.T) (*harness, uint64) {
	t.Helper()
	h := newHarness(t, fairsched.Config{MaxConcurrency: 1, Types: map[string]fairsched.TypeConfig{
		"sync": {Disable: fairsched.DisablePolicy{Failures: 1, Window: time.Hour}},
	}})
	failed, err := h.s.Submit(context.Background(), fairsched.Job{Type: "sync", ID: "repo"}, func(context.Context) error {
		return errors.New("disk full")
	})
	if err != nil {
		t.Fatal(err)
	}
	<-failed.Done()
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	for _, key := range []string{"a", "a", "b", "b", "b"} {
		if _, err := h.s.Submit(context.Background(), fairsched.Job{Key: key}, func(context.Context) error { <-hold; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	h.s.PauseKey("b")
	return h, failed.Seq()
}

func getState(t *testing.T, handler http.Handler, query string) (State, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("GET", "/state.json"+query, nil))
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("state.json: %d %s", rec.Code, rec.Body.String())
	}
	var st State
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		t.Fatalf("state.json: %v", err)
	}
	return st, rec.Body.String()
}

// The page is one self-contained document; its JSON says what the
// scheduler holds, the queue one page at a time.
func TestAdminPageAndState(t *testing.T) {
	h, dead := adminHarness(t)
	handler := Admin(h.s, AdminOptions{PageSize: 2})

	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	body := rec.Body.String()
	if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") || !strings.Contains(body, "<script>") {
		t.Fatalf("page: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	if strings.Contains(body, "http://") || strings.Contains(body, "https://") || strings.Contains(body, "src=") {
		t.Error("the page fetches something from elsewhere")
	}

	st, raw := getState(t, handler, "")
	if st.Controls {
		t.Error("controls on without Authorize")
	}
	if st.Jobs != 5 || st.Pages != 3 || len(st.Queue) != 2 || !st.Queue[0].Running {
		t.Errorf("queue: %d jobs, %d pages, %d listed, first running %v", st.Jobs, st.Pages, len(st.Queue), st.Queue[0].Running)
	}
	if !strings.Contains(raw, `"Waiting":"turn"`) || !strings.Contains(raw, `"paused":3`) {
		t.Error("reasons are not given by name")
	}
	if len(st.Dead) != 1 || st.Dead[0].Seq != dead || st.Dead[0].Err != "disk full" {
		t.Errorf("dead: %+v", st.Dead)
	}
	if len(st.Disabled) != 1 || st.Disabled[0].ID != "repo" {
		t.Errorf("disabled: %+v", st.Disabled)
	}
	if st.Stats.MaxConcurrency != 1 || st.OldestWait["b"] <= 0 || st.OldestWait["a"] <= 0 {
		t.Errorf("limits %d, longest waits %v", st.Stats.MaxConcurrency, st.OldestWait)
	}
	if i := slices.IndexFunc(st.Stats.Keys, func(k fairsched.KeyStats) bool { return k.Key == "b" }); i < 0 || !st.Stats.Keys[i].Paused {
		t.Error("key b is not shown paused")
	}
	last, _ := getState(t, handler, "?page=9")
	if last.Page != 2 || len(last.Queue) != 1 {
		t.Errorf("page 9: page %d with %d jobs, want the last, 1", last.Page, len(last.Queue))
	}
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

// Without an authorisation function the page is read-only: every change
// is refused.
func TestAdminReadOnly(t *testing.T) {
	h, dead := adminHarness(t)
	handler := Admin(h.s, AdminOptions{})
	for path, form := range map[string]url.Values{
		"/pause-key": {"name": {"a"}}, "/resume-key": {"name": {"b"}}, "/pause-type": {"name": {""}},
		"/weight": {"key": {"a"}, "weight": {"3"}}, "/retry-dead": {"seq": {itoa(dead)}}, "/enable": {"type": {"sync"}, "id": {"repo"}},
	} {
		if rec := post(handler, path, form, nil); rec.Code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", path, rec.Code)
		}
	}
	if st := h.s.Stats(); len(st.PausedKeys) != 1 || st.Dead != 1 || st.Disabled != 1 {
		t.Error("a refused change changed something")
	}
}

// With authorisation, each control changes the scheduler; bad fields
// are 400; a change from another site is refused whatever the
// authorisation says.
func TestAdminControls(t *testing.T) {
	h, dead := adminHarness(t)
	handler := Admin(h.s, AdminOptions{Authorize: func(r *http.Request) bool { return r.Header.Get("X-Admin") == "yes" }})
	admin := map[string]string{"X-Admin": "yes"}
	if st, _ := getState(t, handler, ""); st.Controls {
		t.Error("controls on for a request the function does not authorise")
	}
	for _, c := range []struct {
		path string
		form url.Values
		want int
	}{
		{"/pause-key", url.Values{"name": {"a"}}, 204},
		{"/resume-key", url.Values{"name": {"b"}}, 204},
		{"/pause-type", url.Values{"name": {"nope"}}, 400},
		{"/pause-type", url.Values{"name": {"sync"}}, 204},
		{"/resume-type", url.Values{"name": {"sync"}}, 204},
		{"/weight", url.Values{"key": {"a"}, "weight": {"many"}}, 400},
		{"/weight", url.Values{"key": {"a"}, "weight": {"-1"}}, 409},
		{"/weight", url.Values{"key": {"a"}, "weight": {"3"}}, 204},
		{"/retry-dead", url.Values{"seq": {"999"}}, 400},
		{"/enable", url.Values{"type": {"sync"}, "id": {"repo"}}, 204},
		{"/retry-dead", url.Values{"seq": {itoa(dead)}}, 204},
	} {
		if rec := post(handler, c.path, c.form, admin); rec.Code != c.want {
			t.Errorf("%s %v: %d %q, want %d", c.path, c.form, rec.Code, rec.Body.String(), c.want)
		}
	}
	st := h.s.Stats()
	if !slices.Equal(st.PausedKeys, []string{"a"}) || st.Dead != 0 || st.Disabled != 0 {
		t.Errorf("paused %v, dead %d, disabled %d", st.PausedKeys, st.Dead, st.Disabled)
	}
	if i := slices.IndexFunc(st.Keys, func(k fairsched.KeyStats) bool { return k.Key == "a" }); i < 0 || st.Keys[i].Weight != 3 {
		t.Error("the weight did not change")
	}

	for name, header := range map[string]map[string]string{
		"Sec-Fetch-Site cross-site": {"X-Admin": "yes", "Sec-Fetch-Site": "cross-site"},
		"Sec-Fetch-Site same-site":  {"X-Admin": "yes", "Sec-Fetch-Site": "same-site"},
		"another Origin":            {"X-Admin": "yes", "Origin": "https://evil.example"},
	} {
		for _, path := range []string{"/pause-key", "/resume-key", "/pause-type", "/resume-type", "/weight", "/retry-dead", "/enable"} {
			form := url.Values{"name": {"a"}, "key": {"a"}, "weight": {"5"}, "seq": {"1"}, "type": {"sync"}, "id": {"repo"}}
			if rec := post(handler, path, form, header); rec.Code != http.StatusForbidden {
				t.Errorf("%s %s: %d, want 403", name, path, rec.Code)
			}
		}
	}
	if st := h.s.Stats(); !slices.Equal(st.PausedKeys, []string{"a"}) {
		t.Errorf("a refused change changed something: paused %v", st.PausedKeys)
	}
	if rec := post(handler, "/resume-key", url.Values{"name": {"a"}}, map[string]string{"X-Admin": "no"}); rec.Code != http.StatusForbidden {
		t.Errorf("not authorised: %d, want 403", rec.Code)
	}
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("GET", "/pause-key?name=a", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET of a change: %d, want 405", rec.Code)
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
