package fairschedhttp

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/fairsched/fairsched"
)

//go:embed admin.html admin.js admin.css
var adminFiles embed.FS

// maxFormBytes bounds a control's request body: its fields are a few
// names and numbers.
const maxFormBytes = 64 << 10

// AdminOptions configures Admin. With the zero AdminOptions the page is
// closed: set Authorize to open it.
type AdminOptions struct {
	// Authorize decides who may do what: it is called with each request
	// and what it asks for, AdminRead (the page, its script and its
	// JSON) or AdminChange (a control), and reports whether to allow it.
	// A request it refuses gets 403 and no data. nil: the page is closed,
	// and every request gets 403 with a page that says how to open it.
	// A GET of state.json calls it twice: with AdminRead, then, once let
	// in, with AdminChange, to tell the page whether to show its controls
	// (a refusal then is no error); a check that logs or rate-limits sees
	// both.
	//
	// LoopbackOnly is a ready-made one, for a service reached through a
	// tunnel; behind a proxy, check what the proxy authenticated (see the
	// examples).
	Authorize func(r *http.Request, access AdminAccess) bool
	// TrustedOrigins are origins, such as "https://ops.example.com",
	// whose cross-origin POSTs the controls accept. A control refuses a
	// POST that a browser says comes from another origin (see
	// http.CrossOriginProtection), so that another site cannot make an
	// operator's browser use it; behind a proxy that rewrites the Host
	// header, the page's own origin differs from the Host the handler
	// sees, and must be listed here. Admin panics on a malformed origin.
	TrustedOrigins []string
	// PageSize is how many queued jobs one page of the queue lists.
	// 0: 100. At most 1,000.
	PageSize int
	// HistoryEvery is the interval between the samples of the charts'
	// history, which keeps the last 150 of them. 0: 2 s (five minutes).
	// At least 1 s (each sample takes the scheduler's lock for a Stats):
	// a shorter one, or a negative one, is taken as 1 s.
	HistoryEvery time.Duration
}

// AdminHandler is the admin page of a Scheduler (see Admin).
type AdminHandler struct {
	s         *fairsched.Scheduler
	authorize func(*http.Request, AdminAccess) bool
	origins   *http.CrossOriginProtection
	size      int
	mux       *http.ServeMux
	history   *history
	states    *stateCache
}

// Admin returns a handler for an admin page of s, to mount under a path
// of its own ending in a slash (with http.StripPrefix), outside
// Middleware, so that it answers however full the queue is:
//
//   - GET / serves the page: plain HTML, CSS and JavaScript, embedded,
//     with no build step and nothing fetched from elsewhere, which
//     refreshes itself every two seconds;
//   - GET /state.json?page=N serves what it shows (State): the
//     scheduler's Stats, one page of the queue (Scheduler.Queue) with
//     base and effective priority and what each waiting job waits for,
//     the longest wait of each key on it, the dead jobs, the disabled
//     pairs, and the history its charts draw (running and queued by key
//     and by tier, waits to start, starts and refusals per second);
//   - POST /pause-key, /resume-key, /pause-type, /resume-type (form field
//     name), /weight (key, weight), /retry-dead (seq), /cancel (seq), and
//     /disable (type, id, and for: a duration, empty for until enabled)
//     and /enable (type, id) change the scheduler. The body is a form
//     (application/x-www-form-urlencoded; else 415) with every field
//     named (else 400): the empty name, a key, type or ID of its own, is
//     meant only when sent empty. An empty id disables the type's jobs
//     that have no ID.
//
// The page is closed by default: o.Authorize says who may read it and
// who may change the scheduler with it. Every change is a POST, refused
// with 403 if a browser sent it from another origin (net/http's
// CrossOriginProtection, with o.TrustedOrigins), and its body is bounded
// to 64 KiB. Errors are plain text with a status that says what went
// wrong: 415 for a body that is not a form, 400 for a field missing or
// malformed, 409 for a change the scheduler refused.
//
// The handler samples s's Stats every o.HistoryEvery for its charts, on
// a timer of its own (no goroutine waits between samples); Close stops
// it, and so does s's Shutdown or Close, at the next sample (the timer
// holds s only weakly: a handler never closed does not keep s alive).
//
// Viewers share one state per page for the page's refresh interval, two
// seconds (a change made through the page starts a new one): however
// many poll, the scheduler's lock is taken a few times per interval, for
// the page of the queue shown (O(page), not O(jobs): Scheduler.Queue),
// its Stats and its dead jobs.
func Admin(s *fairsched.Scheduler, o AdminOptions) *AdminHandler {
	size := o.PageSize
	if size <= 0 {
		size = 100
	}
	a := &AdminHandler{s: s, authorize: o.Authorize, size: min(size, 1000),
		origins: http.NewCrossOriginProtection(), mux: http.NewServeMux(), states: newStateCache(refreshEvery, adminNow)}
	for _, origin := range o.TrustedOrigins {
		if err := a.origins.AddTrustedOrigin(origin); err != nil {
			panic("fairschedhttp: AdminOptions.TrustedOrigins: " + err.Error())
		}
	}
	a.mux.HandleFunc("GET /{$}", a.file("admin.html", "text/html; charset=utf-8"))
	a.mux.HandleFunc("GET /admin.js", a.file("admin.js", "text/javascript; charset=utf-8"))
	a.mux.HandleFunc("GET /admin.css", a.file("admin.css", "text/css; charset=utf-8"))
	a.mux.HandleFunc("GET /state.json", a.state)
	for path, c := range map[string]struct {
		fields []string // each must be sent, "" only if sent so
		do     func(url.Values) error
	}{
		"/pause-key":   {[]string{"name"}, func(f url.Values) error { s.PauseKey(f.Get("name")); return nil }},
		"/resume-key":  {[]string{"name"}, func(f url.Values) error { s.ResumeKey(f.Get("name")); return nil }},
		"/pause-type":  {[]string{"name"}, func(f url.Values) error { return s.PauseType(f.Get("name")) }},
		"/resume-type": {[]string{"name"}, func(f url.Values) error { return s.ResumeType(f.Get("name")) }},
		"/weight": {[]string{"key", "weight"}, func(f url.Values) error {
			w, err := strconv.ParseFloat(f.Get("weight"), 64)
			if err != nil {
				return badRequest{fmt.Errorf("weight %.40q is not a number", f.Get("weight"))}
			}
			return s.SetKeyWeight(f.Get("key"), w)
		}},
		"/retry-dead": {[]string{"seq"}, func(f url.Values) error {
			seq, err := seqOf(f)
			if err == nil {
				_, err = s.RetryDead(seq)
			}
			return err
		}},
		"/cancel": {[]string{"seq"}, func(f url.Values) error {
			seq, err := seqOf(f)
			if err == nil && !s.Cancel(seq) {
				err = fmt.Errorf("job %d is neither queued nor running", seq)
			}
			return err
		}},
		"/disable": {[]string{"type", "id", "for"}, func(f url.Values) error {
			var d time.Duration
			if v := f.Get("for"); v != "" {
				var err error
				if d, err = time.ParseDuration(v); err != nil || d <= 0 {
					return badRequest{fmt.Errorf("for %.40q is not a positive duration such as 30m", v)}
				}
			}
			return s.Disable(f.Get("type"), f.Get("id"), d)
		}},
		"/enable": {[]string{"type", "id"}, func(f url.Values) error { s.Enable(f.Get("type"), f.Get("id")); return nil }},
	} {
		a.mux.HandleFunc("POST "+path, a.change(c.fields, c.do))
	}
	a.history = newHistory(s, o.HistoryEvery)
	return a
}

// Close stops the sampling of the charts' history. The page still
// answers, its charts frozen. It returns nil.
func (a *AdminHandler) Close() error {
	a.history.close()
	return nil
}

// ServeHTTP checks the request's access, then serves it.
func (a *AdminHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "+
		"img-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	if a.authorize == nil {
		refuse(w, closedPage)
		return
	}
	access := AdminRead
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		access = AdminChange
		if err := a.origins.Check(r); err != nil {
			http.Error(w, "fairschedhttp: a change must come from the admin page's own origin, not another site", http.StatusForbidden)
			return
		}
	}
	if !a.authorize(r, access) {
		refuse(w, fmt.Sprintf(refusedPage, access.what()))
		return
	}
	a.mux.ServeHTTP(w, r)
}

// refuse answers 403 with page.
func refuse(w http.ResponseWriter, page string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusForbidden)
	fmt.Fprint(w, page)
}

// file returns the handler of one embedded file.
func (a *AdminHandler) file(name, contentType string) http.HandlerFunc {
	body, err := adminFiles.ReadFile(name)
	if err != nil {
		panic(err) // embedded above
	}
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.Write(body)
	}
}

// badRequest marks an error in the request's own fields.
type badRequest struct{ error }

// seqOf reads a control's field seq, a job's number.
func seqOf(f url.Values) (uint64, error) {
	seq, err := strconv.ParseUint(f.Get("seq"), 10, 64)
	if err != nil {
		return 0, badRequest{fmt.Errorf("seq %.40q is not a job number", f.Get("seq"))}
	}
	return seq, nil
}

// State is the JSON the page shows.
type State struct {
	Time     time.Time
	Controls bool // changes are allowed for this request
	Stats    fairsched.Stats
	// TierNames names the tiers of Stats.Tiers and Stats.Types.
	TierNames map[fairsched.Tier]string
	// Queue is one page of the jobs running and waiting (Scheduler.Queue):
	// running first, then in the order they would be considered to start,
	// then the paused ones; Page is its number (from 0), Pages how many
	// there are, Jobs how many jobs they list in all. Aside counts the jobs
	// not started that are in no order, so not listed: delayed, or waiting
	// for jobs they run after (Stats.Waiting tells them apart).
	Queue                    []fairsched.JobInfo
	Page, Pages, Jobs, Aside int
	Dead                     []DeadJob
	// Disabled is at most 100 of the pairs disabled now, those whose
	// time is up soonest first (Scheduler.DisabledSoonest); DisabledTotal
	// counts them all.
	Disabled      []fairsched.DisabledPair
	DisabledTotal int
	// OldestWait is, for each key Stats.Keys lists with jobs waiting on
	// this page, how long the one of them that has waited longest has
	// waited.
	OldestWait map[string]time.Duration
	// History is the recent past, for the charts.
	History History
	// Scope says, on one of several replicas (Config.Replica), whose
	// jobs the page shows: the replica's own (Stats, the queue, the dead
	// jobs are its own, not the cluster's), and where the cluster's are.
	// Empty for a scheduler that is not a replica.
	Scope string
}

// scopeOf returns State.Scope for a scheduler whose Stats.Replica is r.
func scopeOf(r *fairsched.ReplicaStats) string {
	if r == nil {
		return ""
	}
	if r.Leader {
		return fmt.Sprintf("Replica %s, which leads the cluster (term %d): the figures and the queue below are this replica's own jobs; "+
			"the cluster's figures are in state.json, under Stats.Cluster.", r.Name, r.Term)
	}
	return fmt.Sprintf("Replica %s: the figures and the queue below are this replica's own jobs, not the cluster's; "+
		"the page of the replica that leads has the cluster's figures.", r.Name)
}

// maxDisabledListed bounds the disabled pairs a state lists.
const maxDisabledListed = 100

// maxErrBytes bounds a dead job's error as a state shows it.
const maxErrBytes = 1 << 10

// DeadJob is a dead job as the page shows it: its error as text, cut to
// its first KiB.
type DeadJob struct {
	Seq           uint64
	Type, ID, Key string
	Err           string
	Attempts      int
	Died          time.Time
}

func (a *AdminHandler) state(w http.ResponseWriter, r *http.Request) {
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	st := a.states.get(page, a.build)
	st.Controls = a.authorize(r, AdminChange)
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(st); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// build returns the state with page page of the queue (the last if there
// are fewer), Controls aside. Each part takes the scheduler's lock once,
// the queue's for the page's jobs, not all of them (Scheduler.Queue).
func (a *AdminHandler) build(page int) State {
	page = max(page, 0)
	q := a.s.Queue(page*a.size, a.size)
	st := State{
		Time: adminNow(), Stats: a.s.Stats(),
		TierNames: map[fairsched.Tier]string{}, History: a.history.snapshot(),
	}
	st.Scope = scopeOf(st.Stats.Replica)
	st.Disabled, st.DisabledTotal = a.s.DisabledSoonest(maxDisabledListed)
	for _, t := range st.Stats.Tiers {
		st.TierNames[t.Tier] = t.Tier.String()
	}
	for _, t := range st.Stats.Types {
		st.TierNames[t.Tier] = t.Tier.String()
	}
	st.Jobs, st.Aside = q.Running+q.Waiting+q.Paused, q.Aside
	st.Pages = max(1, (st.Jobs+a.size-1)/a.size)
	if st.Page = min(page, st.Pages-1); st.Page != page { // past the end: the last page
		q = a.s.Queue(st.Page*a.size, a.size)
	}
	st.Queue = q.Jobs
	st.OldestWait = map[string]time.Duration{}
	listed := make(map[string]bool, len(st.Stats.Keys))
	for _, k := range st.Stats.Keys {
		listed[k.Key] = true
	}
	for _, j := range st.Queue {
		if !j.Running && listed[j.Key] && j.Wait > st.OldestWait[j.Key] {
			st.OldestWait[j.Key] = j.Wait
		}
	}
	for _, d := range a.s.DeadJobs() {
		st.Dead = append(st.Dead, DeadJob{Seq: d.Seq, Type: d.Job.Type, ID: d.Job.ID, Key: d.Job.Key,
			Err: truncate(d.Err.Error(), maxErrBytes), Attempts: len(d.Attempts), Died: d.Died})
	}
	return st
}

// truncate returns s cut to at most n bytes, on a rune's boundary, with
// an ellipsis if it was cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const more = "…"
	cut := n - len(more)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + more
}

// change returns the handler of one change, authorised already: it reads
// the form, bounded, checks that it has every one of fields, and does it.
//
// Only a form (application/x-www-form-urlencoded, what the page sends) is
// read: any other body, JSON or text, would parse to no fields at all,
// and a field missing must not be taken for the empty name, which is a
// key, a type and an ID of its own (the keyless work, the default type).
func (a *AdminHandler) change(fields []string, do func(url.Values) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/x-www-form-urlencoded" {
			http.Error(w, "fairschedhttp: a change is a form, application/x-www-form-urlencoded", http.StatusUnsupportedMediaType)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if err := r.ParseForm(); err != nil {
			status := http.StatusBadRequest
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				status = http.StatusRequestEntityTooLarge
			}
			http.Error(w, "fairschedhttp: the form cannot be read: "+err.Error(), status)
			return
		}
		for _, f := range fields {
			if !r.PostForm.Has(f) {
				http.Error(w, fmt.Sprintf("fairschedhttp: the form has no field %s (send it empty for the empty name)", f), http.StatusBadRequest)
				return
			}
		}
		var bad badRequest
		switch err := do(r.PostForm); {
		case err == nil:
			a.states.reset() // the page's next refresh shows the change
			w.WriteHeader(http.StatusNoContent)
		case errors.As(err, &bad), errors.Is(err, fairsched.ErrUnknownType), errors.Is(err, fairsched.ErrNotDead):
			http.Error(w, err.Error(), http.StatusBadRequest)
		default:
			http.Error(w, err.Error(), http.StatusConflict)
		}
	}
}
