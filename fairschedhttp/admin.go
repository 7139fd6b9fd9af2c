package fairschedhttp

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/fairsched/fairsched"
)

//go:embed admin.html
var adminFiles embed.FS

// AdminOptions configures Admin. The zero AdminOptions serves a
// read-only page.
type AdminOptions struct {
	// Authorize, if set, turns the page's controls on: it reports whether
	// a request may change the scheduler (pause or resume a key or type,
	// change a key's weight, retry a dead job, re-enable a disabled pair).
	// nil: read-only; every change is refused with 403.
	Authorize func(*http.Request) bool
	// PageSize is how many queued jobs one page of the queue lists.
	// 0: 100. At most 1,000.
	PageSize int
}

// Admin returns a handler for an admin page of s, to mount under a path
// of its own (with http.StripPrefix):
//
//   - GET / serves the page: plain HTML, CSS and a little JavaScript,
//     embedded, with no build step and nothing fetched from elsewhere,
//     which refreshes itself every two seconds;
//   - GET /state.json?page=N serves what it shows: the scheduler's Stats
//     (its limits; tiers, types, keys and resources with theirs, and
//     what they run and hold), each key's longest wait, one page of the
//     queue (Snapshot: base and effective priority, wait, and what each
//     waiting job waits for), the dead jobs and the disabled pairs;
//   - POST /pause-key, /resume-key, /pause-type, /resume-type (form field
//     name), /weight (key, weight), /retry-dead (seq) and /enable (type,
//     id) change the scheduler, if Authorize allows the request.
//
// A change must be a POST from the page's own origin: one whose
// Sec-Fetch-Site says cross-site, or whose Origin is not the request's
// host, is refused with 403, so that another site cannot make a browser
// send it. Errors are plain text with a status that says what went wrong.
//
// Each refresh takes a Snapshot, O(n log n) in the jobs, under the
// scheduler's lock; only the page asked for is sent.
func Admin(s *fairsched.Scheduler, o AdminOptions) http.Handler {
	size := o.PageSize
	if size <= 0 {
		size = 100
	}
	size = min(size, 1000)
	a := &admin{s: s, authorize: o.Authorize, size: size}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", a.page)
	mux.HandleFunc("GET /state.json", a.state)
	for _, c := range []struct {
		path string
		do   func(url.Values) error
	}{
		{"/pause-key", func(f url.Values) error { s.PauseKey(f.Get("name")); return nil }},
		{"/resume-key", func(f url.Values) error { s.ResumeKey(f.Get("name")); return nil }},
		{"/pause-type", func(f url.Values) error { return s.PauseType(f.Get("name")) }},
		{"/resume-type", func(f url.Values) error { return s.ResumeType(f.Get("name")) }},
		{"/weight", func(f url.Values) error {
			w, err := strconv.ParseFloat(f.Get("weight"), 64)
			if err != nil {
				return badRequest{fmt.Errorf("weight %q is not a number", f.Get("weight"))}
			}
			return s.SetKeyWeight(f.Get("key"), w)
		}},
		{"/retry-dead", func(f url.Values) error {
			seq, err := strconv.ParseUint(f.Get("seq"), 10, 64)
			if err != nil {
				return badRequest{fmt.Errorf("seq %q is not a job number", f.Get("seq"))}
			}
			_, err = s.RetryDead(seq)
			return err
		}},
		{"/enable", func(f url.Values) error { s.Enable(f.Get("type"), f.Get("id")); return nil }},
	} {
		mux.HandleFunc("POST "+c.path, a.change(c.do))
	}
	return mux
}

type admin struct {
	s         *fairsched.Scheduler
	authorize func(*http.Request) bool
	size      int
}

// badRequest marks an error in the request's own fields.
type badRequest struct{ error }

func (a *admin) page(w http.ResponseWriter, r *http.Request) {
	page, _ := adminFiles.ReadFile("admin.html")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; frame-ancestors 'none'")
	w.Write(page)
}

// State is the JSON the page shows.
type State struct {
	Time     time.Time
	Controls bool // changes are allowed for this request
	Stats    fairsched.Stats
	// Queue is one page of the jobs running and waiting, running first,
	// then in submission order; Page is its number (from 0), Pages how
	// many there are, Jobs how many jobs in all.
	Queue             []fairsched.JobInfo
	Page, Pages, Jobs int
	Dead              []DeadJob
	Disabled          []fairsched.DisabledPair
	// OldestWait is, for each key with jobs waiting, how long the one
	// that has waited longest has waited, over the whole queue.
	OldestWait map[string]time.Duration
}

// DeadJob is a dead job as the page shows it: its error as text.
type DeadJob struct {
	Seq           uint64
	Type, ID, Key string
	Err           string
	Attempts      int
	Died          time.Time
}

func (a *admin) state(w http.ResponseWriter, r *http.Request) {
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	snap := a.s.Snapshot()
	st := State{
		Time: time.Now(), Controls: a.authorize != nil && a.authorize(r),
		Stats: a.s.Stats(), Jobs: len(snap), Disabled: a.s.Disabled(),
	}
	st.OldestWait = map[string]time.Duration{}
	for _, j := range snap {
		if !j.Running && j.Wait > st.OldestWait[j.Key] {
			st.OldestWait[j.Key] = j.Wait
		}
	}
	st.Pages = max(1, (len(snap)+a.size-1)/a.size)
	st.Page = min(max(page, 0), st.Pages-1)
	from := st.Page * a.size
	st.Queue = snap[from:min(from+a.size, len(snap))]
	for _, d := range a.s.DeadJobs() {
		st.Dead = append(st.Dead, DeadJob{Seq: d.Seq, Type: d.Job.Type, ID: d.Job.ID, Key: d.Job.Key,
			Err: d.Err.Error(), Attempts: len(d.Attempts), Died: d.Died})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if err := json.NewEncoder(w).Encode(st); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// change returns the handler of one change: it checks the request's
// origin and authorisation, then does it.
func (a *admin) change(do func(url.Values) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := sameOrigin(r); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		if a.authorize == nil || !a.authorize(r) {
			http.Error(w, "fairschedhttp: this admin page is read-only for you: no change is authorised", http.StatusForbidden)
			return
		}
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var bad badRequest
		switch err := do(r.PostForm); {
		case err == nil:
			w.WriteHeader(http.StatusNoContent)
		case errors.As(err, &bad), errors.Is(err, fairsched.ErrUnknownType), errors.Is(err, fairsched.ErrNotDead):
			http.Error(w, err.Error(), http.StatusBadRequest)
		default:
			http.Error(w, err.Error(), http.StatusConflict)
		}
	}
}

// sameOrigin refuses a request a browser sent from another site: by its
// Sec-Fetch-Site header where the browser sends one, else by its Origin.
func sameOrigin(r *http.Request) error {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return errors.New("fairschedhttp: a change must come from the admin page itself, not another site")
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || u.Host != r.Host {
			return errors.New("fairschedhttp: a change must come from the admin page's own origin")
		}
	}
	return nil
}
