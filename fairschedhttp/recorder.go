package fairschedhttp

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
)

// recorder remembers whether the handler wrote its header, so that a
// panic after it is not answered with a second one. The handler gets it
// through recording, which keeps the optional interfaces of the writer
// underneath.
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
// (deadlines, and whatever the wrapper below does not implement).
func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// FlushError is what http.ResponseController.Flush calls first: a flush
// that reports its error, and writes the header unless the writer
// underneath cannot flush (http.ErrNotSupported), which writes nothing,
// so that a panic after it is still answered 500.
func (w *recorder) FlushError() error {
	err := http.NewResponseController(w.ResponseWriter).Flush()
	if !errors.Is(err, http.ErrNotSupported) {
		w.wrote = true
	}
	return err
}

func (w *recorder) flush() {
	w.wrote = true
	w.ResponseWriter.(http.Flusher).Flush()
}

func (w *recorder) hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := w.ResponseWriter.(http.Hijacker).Hijack()
	if err == nil {
		w.wrote = true // the connection is the handler's: nothing more to write
	}
	return c, rw, err
}

func (w *recorder) readFrom(r io.Reader) (int64, error) {
	w.wrote = true
	return w.ResponseWriter.(io.ReaderFrom).ReadFrom(r)
}

// The optional interfaces, as functions, to embed in the wrappers.
type (
	flushFunc    func()
	hijackFunc   func() (net.Conn, *bufio.ReadWriter, error)
	readFromFunc func(io.Reader) (int64, error)
)

func (f flushFunc) Flush()                                        { f() }
func (f hijackFunc) Hijack() (net.Conn, *bufio.ReadWriter, error) { return f() }
func (f readFromFunc) ReadFrom(r io.Reader) (int64, error)        { return f(r) }

// recording returns w as the handler should see it: a type assertion for
// http.Flusher (server-sent events, streaming), http.Hijacker (WebSocket
// upgrades) or io.ReaderFrom (sendfile) succeeds exactly when it does on
// the writer underneath, as each combination is a type of its own.
func (w *recorder) recording() http.ResponseWriter {
	_, f := w.ResponseWriter.(http.Flusher)
	_, h := w.ResponseWriter.(http.Hijacker)
	_, rf := w.ResponseWriter.(io.ReaderFrom)
	fl, hj, rd := flushFunc(w.flush), hijackFunc(w.hijack), readFromFunc(w.readFrom)
	switch {
	case f && h && rf: // HTTP/1.x's own writer
		return struct {
			*recorder
			http.Flusher
			http.Hijacker
			io.ReaderFrom
		}{w, fl, hj, rd}
	case f && h:
		return struct {
			*recorder
			http.Flusher
			http.Hijacker
		}{w, fl, hj}
	case f && rf:
		return struct {
			*recorder
			http.Flusher
			io.ReaderFrom
		}{w, fl, rd}
	case f: // HTTP/2's writer, httptest.ResponseRecorder
		return struct {
			*recorder
			http.Flusher
		}{w, fl}
	case h && rf:
		return struct {
			*recorder
			http.Hijacker
			io.ReaderFrom
		}{w, hj, rd}
	case h:
		return struct {
			*recorder
			http.Hijacker
		}{w, hj}
	case rf:
		return struct {
			*recorder
			io.ReaderFrom
		}{w, rd}
	}
	return w
}
