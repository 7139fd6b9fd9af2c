package fairschedhttp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fairsched/fairsched"
)

// Server-sent events work behind the middleware: the handler flushes
// one event, the client reads it while the handler waits, and only then
// is the second written. The writer keeps the server's Hijacker and
// ReaderFrom, and http.ResponseController reaches its deadlines.
func TestMiddlewareStreams(t *testing.T) {
	h := newHarness(t, fairsched.Config{MaxConcurrency: 1})
	firstRead := make(chan struct{})
	problems := make(chan string, 4)
	srv := httptest.NewServer(Middleware(h.s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := w.(http.Hijacker); !ok {
			problems <- "the writer is no http.Hijacker"
		}
		if _, ok := w.(io.ReaderFrom); !ok {
			problems <- "the writer is no io.ReaderFrom"
		}
		if err := http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			problems <- "SetWriteDeadline: " + err.Error()
		}
		f, ok := w.(http.Flusher)
		if !ok {
			problems <- "the writer is no http.Flusher"
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: one\n\n")
		f.Flush()
		select {
		case <-firstRead:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "data: two\n\n")
		f.Flush()
	}), Options{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := bufio.NewReader(resp.Body)
	readEvent := func() string {
		line, err := events.ReadString('\n')
		if err != nil {
			t.Fatalf("reading an event: %v", err)
		}
		if blank, err := events.ReadString('\n'); err != nil || blank != "\n" {
			t.Fatalf("an event did not end: %q %v", blank, err)
		}
		return line
	}
	if first := readEvent(); first != "data: one\n" {
		t.Fatalf("first event %q", first)
	}
	close(firstRead)
	if second := readEvent(); second != "data: two\n" {
		t.Errorf("second event %q", second)
	}
	close(problems)
	for p := range problems {
		t.Error(p)
	}
}

// The handler's writer has an optional interface exactly when the
// server's writer has it, in each of the 8 combinations.
func TestRecorderKeepsInterfaces(t *testing.T) {
	type (
		none struct{ http.ResponseWriter }
		f    struct {
			http.ResponseWriter
			http.Flusher
		}
		h struct {
			http.ResponseWriter
			http.Hijacker
		}
		r struct {
			http.ResponseWriter
			io.ReaderFrom
		}
		fh struct {
			http.ResponseWriter
			http.Flusher
			http.Hijacker
		}
		fr struct {
			http.ResponseWriter
			http.Flusher
			io.ReaderFrom
		}
		hr struct {
			http.ResponseWriter
			http.Hijacker
			io.ReaderFrom
		}
		fhr struct {
			http.ResponseWriter
			http.Flusher
			http.Hijacker
			io.ReaderFrom
		}
	)
	rec := httptest.NewRecorder()
	for _, tc := range []struct {
		w                 http.ResponseWriter
		flush, hijack, rf bool
	}{
		{none{rec}, false, false, false},
		{f{rec, rec}, true, false, false},
		{h{rec, nil}, false, true, false},
		{r{rec, nil}, false, false, true},
		{fh{rec, rec, nil}, true, true, false},
		{fr{rec, rec, nil}, true, false, true},
		{hr{rec, nil, nil}, false, true, true},
		{fhr{rec, rec, nil, nil}, true, true, true},
	} {
		w := (&recorder{ResponseWriter: tc.w}).recording()
		_, f := w.(http.Flusher)
		_, h := w.(http.Hijacker)
		_, rf := w.(io.ReaderFrom)
		if f != tc.flush || h != tc.hijack || rf != tc.rf {
			t.Errorf("%T: Flusher %v, Hijacker %v, ReaderFrom %v; want %v, %v, %v", tc.w, f, h, rf, tc.flush, tc.hijack, tc.rf)
		}
	}
}

// A handler that flushed has written its header: a panic after it is
// not answered with a second one.
func TestRecorderFlushWrites(t *testing.T) {
	rw := &recorder{ResponseWriter: httptest.NewRecorder()}
	rw.recording().(http.Flusher).Flush()
	if !rw.wrote {
		t.Error("a flush was not recorded as a write")
	}
	rw = &recorder{ResponseWriter: httptest.NewRecorder()}
	if err := http.NewResponseController(rw.recording()).Flush(); err != nil || !rw.wrote {
		t.Errorf("ResponseController.Flush: %v, recorded as a write: %v", err, rw.wrote)
	}
}

// failingHijacker is a writer that cannot flush and whose Hijack fails.
type failingHijacker struct{ http.ResponseWriter }

func (failingHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return nil, nil, errors.New("no connection to hand over")
}

// A flush the writer cannot do, or a hijack that fails, writes nothing:
// a handler that panics after either is still answered 500.
func TestRecorderFailuresWriteNothing(t *testing.T) {
	h := newHarness(t, fairsched.Config{})
	handler := Middleware(h.s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/flush":
			if err := http.NewResponseController(w).Flush(); !errors.Is(err, http.ErrNotSupported) {
				panic("flush: " + fmt.Sprint(err))
			}
		case "/hijack":
			if _, _, err := w.(http.Hijacker).Hijack(); err == nil {
				panic("the hijack did not fail")
			}
		}
		panic("boom")
	}), Options{OnPanic: func(*http.Request, *fairsched.PanicError) {}})
	for _, path := range []string{"/flush", "/hijack"} {
		rec := httptest.NewRecorder()
		handler.ServeHTTP(failingHijacker{rec}, httptest.NewRequest("GET", path, nil))
		if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), "Internal Server Error") {
			t.Errorf("%s then a panic: %d %q, want 500", path, rec.Code, rec.Body.String())
		}
	}
}
