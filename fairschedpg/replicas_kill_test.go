package fairschedpg

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched/fairschedpg/internal/pgtest"
	"github.com/fairsched/fairsched/internal/cluster"
	"github.com/fairsched/fairsched/internal/engine"
	"github.com/fairsched/fairsched/internal/rt"
)

// Replicas as processes, under faults: each replica is a child process
// (TestReplicaChild, this test binary run again) with a Store of its own
// on one schema, running closures without a pause from many goroutines.
// Every closure appends a line to one log file shared by all the
// processes as it starts and as it ends (O_APPEND, one write per line,
// fsync'ed), before it runs and before it returns: the file's order is
// the order of those writes, one machine's. The parent adds a line for
// each fault it makes (kill -9, SIGSTOP, SIGCONT, connections cut), then
// reads the log alone to check that at no point did more closures run
// than a limit allows: the cluster's, a replica's capacity, a key's, a
// conflict group's. A run whose start line precedes a line and whose end
// line follows it held its slot when that line was written (its grant
// came before its start line, its release after its end line), so the
// runs open at any line ran together, and their count may not exceed a
// limit. After its fault, each scenario waits for a line at which the
// cluster's slots were all held: its load is a test of their limit.
//
// A process killed writes no end line: its runs end at the parent's
// "killed" line, written once the process was reaped (after which it
// can write nothing). A process stopped (SIGSTOP) runs nothing while it
// is stopped: its runs end at the parent's "stopped" line, written once
// wait reported the whole process stopped; the lines its old runs write
// after it wakes (the "cont" line, written before SIGCONT) are measured,
// not counted again. A start line it writes once woken but timed before
// wait reported it stopped is one of those old runs: the process stopped
// between reading the clock and writing the line (a signal is not
// delivered the instant it is sent: the process may read the clock after
// SIGSTOP was sent, never once wait has reported it stopped).
//
// Each scenario runs 3 times, on a schema of its own each, or as many
// times as FAIRSCHED_KILL_ROUNDS says: the faults land at random points
// of the load, and some of what they found showed once in 10 or 20.

const (
	replicaChildEnv = "FAIRSCHED_REPLICA_CHILD" // schema,name,capacity,log
	procSlots       = 5                         // the cluster's MaxConcurrency
	procCapacity    = 3                         // each replica's
	procKeyCap      = 2                         // each key's MaxConcurrency (3 keys)
	procLease       = time.Second
	procGrace       = 200 * time.Millisecond
	procCallers     = 12               // goroutines calling, in each child
	procCallTimeout = 20 * time.Second // a call's context: a hang's bound
)

// durableArgs are the arguments of the durable jobs of the replicas'
// processes: the key and conflicting ID ("-": none) of their runs.
type durableArgs struct {
	Key string `json:"key"`
	Cid string `json:"cid"`
}

// procRetry is the durable types' retry policy: an attempt lost with its
// process is tried again, soon, until one completes.
var procRetry = rt.RetryPolicy{Attempts: 50, Backoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}

// procEngineConfig is every replica's engine's configuration: 5 slots,
// at most 2 per key, and the type "c" whose jobs of one ID conflict.
func procEngineConfig() engine.Config {
	return engine.Config{MaxConcurrency: procSlots, CostAlpha: 0.3, DefaultCost: 1,
		IdleTTL: int64(10 * time.Minute / time.Microsecond), DefaultKey: engine.Key{MaxConcurrency: procKeyCap}}
}

// appName is the application_name of replica name's connections on
// schema: what the parent cuts.
func appName(schema, name string) string {
	return strings.TrimPrefix(schema, "fairsched_test_") + "_" + name
}

// sharedLog is a log file shared by processes: each line is one write,
// appended and fsync'ed before line returns.
type sharedLog struct {
	f    *os.File
	name string // the writer's
}

func openSharedLog(path, name string) (*sharedLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return &sharedLog{f: f, name: name}, nil
}

// line appends "kind name time rest..." (time: µs of the wall clock,
// now), and returns it.
func (l *sharedLog) line(kind string, rest ...any) string {
	return l.lineAt(time.Now(), kind, rest...)
}

// lineAt appends "kind name time rest..." with the time at.
func (l *sharedLog) lineAt(at time.Time, kind string, rest ...any) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %d", kind, l.name, at.UnixMicro())
	for _, r := range rest {
		fmt.Fprintf(&b, " %v", r)
	}
	b.WriteByte('\n')
	if _, err := l.f.WriteString(b.String()); err != nil {
		panic(err)
	}
	if err := l.f.Sync(); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// noteHandler writes the cluster's log records as "note" lines.
type noteHandler struct{ l *sharedLog }

func (h noteHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h noteHandler) Handle(_ context.Context, r slog.Record) error {
	msg := strings.TrimPrefix(r.Message, "fairsched: ")
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "replica" {
			msg += fmt.Sprintf(" %s=%v", a.Key, a.Value)
		}
		return true
	})
	h.l.line("note", strings.ReplaceAll(msg, "\n", " "))
	return nil
}
func (h noteHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h noteHandler) WithGroup(string) slog.Handler      { return h }

// TestReplicaChild is a replica's process, started by the tests below.
// It calls until SIGTERM, then waits for its calls to return, logs
// "done" with their outcomes, and closes its Runtime.
func TestReplicaChild(t *testing.T) {
	env := os.Getenv(replicaChildEnv)
	if env == "" {
		t.Skip("a replica's process, started by the tests of replicas under faults")
	}
	parts := strings.Split(env, ",")
	require.Len(t, parts, 4, replicaChildEnv)
	schema, name, logPath := parts[0], parts[1], parts[3]
	capacity, err := strconv.Atoi(parts[2])
	require.NoError(t, err)
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	defer signal.Stop(term)
	lg, err := openSharedLog(logPath, name)
	require.NoError(t, err)
	defer lg.f.Close()

	ctx := context.Background()
	cfg := pgtest.Config(t, schema)
	cfg.ConnConfig.RuntimeParams["application_name"] = appName(schema, name)
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()
	st, err := openPool(ctx, pool, options(nil), true)
	require.NoError(t, err)
	defer st.Close()
	// runFrom is one run, begun at begun: it logs its start and end, and
	// honours its context. begun is read first thing when the run's
	// function is called, before a durable attempt decodes its arguments:
	// a process stopped while it decodes them had begun the run before the
	// stop, and the start line it writes once woken says so.
	runFrom := func(ctx context.Context, begun time.Time, id, key, cid string) error {
		lg.lineAt(begun, "start", id, key, cid)
		select {
		case <-time.After(time.Duration(1000+rand.IntN(9000)) * time.Microsecond): // the work
			lg.line("end", id, key, cid, "ok")
			return nil
		case <-ctx.Done():
			how := "cancel"
			if errors.Is(context.Cause(ctx), rt.ErrLost) {
				how = "lost"
			}
			lg.line("end", id, key, cid, how)
			return ctx.Err()
		}
	}
	// run is a closure's run.
	run := func(id, key, cid string) func(context.Context) error {
		return func(ctx context.Context) error { return runFrom(ctx, time.Now(), id, key, cid) }
	}
	// A durable job's attempt is a run as a closure's is, named by the
	// job's ID and the attempt's number ("d7.2"): its arguments are its
	// key and conflicting ID.
	handler := &rt.Handler{Name: "d", ArgType: reflect.TypeFor[durableArgs](), Run: func(ctx context.Context, b []byte) error {
		begun := time.Now()
		var a durableArgs
		if err := json.Unmarshal(b, &a); err != nil {
			return err
		}
		return runFrom(ctx, begun, fmt.Sprintf("d%d.%d", rt.JobID(ctx), rt.Attempt(ctx)), a.Key, a.Cid)
	}}
	r, err := rt.New(rt.Config{
		Engine: procEngineConfig(),
		Types: map[string]rt.TypeConfig{
			"c":  {Engine: engine.Type{ConflictGroup: "g"}},
			"d":  {Retry: procRetry},
			"dc": {Engine: engine.Type{ConflictGroup: "g"}, Retry: procRetry},
		},
		Errors:   replicaErrors,
		Store:    st,
		Handlers: map[string]*rt.Handler{"d": handler, "dc": {Name: "dc", ArgType: handler.ArgType, Run: handler.Run}},
		Cluster: &cluster.Config{Name: name, Capacity: capacity, Lease: procLease, Grace: procGrace, Store: st,
			Logger: slog.New(noteHandler{lg}),
			OnLead: func(term uint64) { lg.line("lead", term) }},
	})
	require.NoError(t, err)
	lg.line("up")
	var calls, returned, ok, lost, deadline, other atomic.Int64
	var otherErrs sync.Map
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var seq atomic.Int64
	for range procCallers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("%s-%d", name, seq.Add(1))
				job := &rt.Job{Key: fmt.Sprint("k", rand.IntN(3))}
				cid := "-"
				if rand.IntN(4) == 0 {
					job.Type, job.ID = "c", fmt.Sprint("x", rand.IntN(2))
					cid = job.ID
				}
				cctx, cancel := context.WithTimeout(ctx, procCallTimeout)
				if rand.IntN(5) == 0 { // a durable job: the leader keeps it, any replica runs it
					job.Type = "d" + job.Type
					h, err := r.Enqueue(cctx, job, durableArgs{Key: job.Key, Cid: cid})
					cancel()
					if err == nil {
						lg.line("enq", h.ID())
					} else {
						lg.line("note", "enqueue: "+strings.ReplaceAll(err.Error(), "\n", " "))
					}
					continue
				}
				calls.Add(1)
				var err error
				if rand.IntN(4) == 0 {
					var h rt.Handle
					if h, err = r.Submit(cctx, job, run(id, job.Key, cid)); err == nil {
						err = h.Wait(cctx)
					}
				} else {
					err = r.RunSync(cctx, job, run(id, job.Key, cid))
				}
				cancel()
				returned.Add(1)
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, rt.ErrLost):
					lost.Add(1)
				case errors.Is(err, context.DeadlineExceeded):
					deadline.Add(1)
				default:
					other.Add(1)
					otherErrs.Store(err.Error(), true)
				}
			}
		}()
	}
	<-term
	close(stop)
	waited := make(chan struct{})
	go func() {
		wg.Wait()
		close(waited)
	}()
	select {
	case <-waited:
	case <-time.After(2 * procCallTimeout): // the calls' own bound, and some
	}
	otherErrs.Range(func(k, _ any) bool {
		lg.line("note", "error: "+strings.ReplaceAll(k.(string), "\n", " "))
		return true
	})
	lg.line("done", calls.Load(), ok.Load(), lost.Load(), deadline.Load(), other.Load(), calls.Load()-returned.Load())
	require.NoError(t, r.Close())
	<-waited
}

// logLine is one line of the shared log: its kind, writer, time (µs of
// the wall clock) and the rest of its fields.
type logLine struct {
	kind, who string
	at        int64
	f         []string
	raw       string
}

// procLog is the parent's view of the shared log, read as it grows.
type procLog struct {
	path  string
	w     *sharedLog // the parent's lines
	r     *os.File
	part  []byte
	lines []logLine
}

func newProcLog(t *testing.T) *procLog {
	path := filepath.Join(t.TempDir(), "runs.log")
	w, err := openSharedLog(path, "parent")
	require.NoError(t, err)
	t.Cleanup(func() { w.f.Close() })
	r, err := os.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	return &procLog{path: path, w: w, r: r}
}

// read takes in what was appended since the last read.
func (l *procLog) read(t *testing.T) {
	b, err := io.ReadAll(l.r)
	require.NoError(t, err)
	l.part = append(l.part, b...)
	for {
		i := bytes.IndexByte(l.part, '\n')
		if i < 0 {
			return
		}
		raw := string(l.part[:i])
		l.part = l.part[i+1:]
		f := strings.Fields(raw)
		ln := logLine{raw: raw}
		if len(f) >= 3 {
			ln.kind, ln.who = f[0], f[1]
			ln.at, _ = strconv.ParseInt(f[2], 10, 64)
			ln.f = f[3:]
		}
		l.lines = append(l.lines, ln)
	}
}

// await returns the index of the first line from from on that match
// accepts, reading the log as it grows, and fails t if none comes within
// timeout. The file the children write is the one channel from them, so
// it is polled (every 5 ms), with a deadline: a bound, not a
// synchronisation.
func (l *procLog) await(t *testing.T, what string, from int, timeout time.Duration, match func(ln logLine) bool) int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for i := from; ; {
		l.read(t)
		for ; i < len(l.lines); i++ {
			if match(l.lines[i]) {
				return i
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not in the log within %v; its end:\n%s", what, timeout, l.tail(len(l.lines), 30))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// awaitStarts waits for n start lines from from on, by any replica but
// those of not, and returns the index of the nth.
func (l *procLog) awaitStarts(t *testing.T, what string, from, n int, timeout time.Duration, not ...string) int {
	t.Helper()
	seen := 0
	return l.await(t, what, from, timeout, func(ln logLine) bool {
		if ln.kind == "start" && !slices.Contains(not, ln.who) {
			seen++
		}
		return seen >= n
	})
}

// tail returns the lines before end, up to n of them.
func (l *procLog) tail(end, n int) string {
	var b strings.Builder
	for _, ln := range l.lines[max(0, end-n):end] {
		b.WriteString(ln.raw)
		b.WriteByte('\n')
	}
	return b.String()
}

// proc is a replica's process.
type proc struct {
	name   string
	cmd    *exec.Cmd
	out    string // its stdout and stderr
	exited chan struct{}
	err    error // Wait's, once exited is closed
	gone   bool  // killed or stopped by the test
}

// procCluster is the parent's side: the children, their schema and
// the log.
type procCluster struct {
	t      *testing.T
	schema string
	log    *procLog
	procs  map[string]*proc
	order  []string
}

func newProcCluster(t *testing.T) *procCluster {
	if os.Getenv(replicaChildEnv) != "" {
		t.Skip("the child runs TestReplicaChild")
	}
	if testing.Short() {
		t.Skip("starts many processes")
	}
	c := &procCluster{t: t, schema: clusterSchema(t), log: newProcLog(t), procs: map[string]*proc{}}
	t.Cleanup(c.cleanup)
	return c
}

// start starts replica name's process.
func (c *procCluster) start(name string) *proc {
	t := c.t
	out, err := os.Create(filepath.Join(t.TempDir(), name+".out"))
	require.NoError(t, err)
	defer out.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestReplicaChild$", "-test.v")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%s,%d,%s", replicaChildEnv, c.schema, name, procCapacity, c.log.path))
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	p := &proc{name: name, cmd: cmd, out: out.Name(), exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	c.procs[name] = p
	c.order = append(c.order, name)
	return p
}

// startAll starts replicas r1 to rn, waits for a leader and for each to
// have run closures, and returns the leader's name and the log's index
// of its lead line, the last one logged.
func (c *procCluster) startAll(n int) (string, int) {
	for i := range n {
		c.start(fmt.Sprint("r", i+1))
	}
	lead := c.log.await(c.t, "a leader", 0, time.Minute, func(ln logLine) bool { return ln.kind == "lead" })
	starts := map[string]int{}
	c.log.await(c.t, "runs on every replica", 0, time.Minute, func(ln logLine) bool {
		if ln.kind == "start" {
			starts[ln.who]++
		}
		return len(starts) == n && minOf(starts) >= 5
	})
	// The leader is the last to have said so: on a loaded machine a lease
	// can lapse while the replicas start, and another take over.
	for i := len(c.log.lines) - 1; i > lead; i-- {
		if c.log.lines[i].kind == "lead" {
			lead = i
			break
		}
	}
	return c.log.lines[lead].who, lead
}

func minOf(m map[string]int) int {
	least := -1
	for _, v := range m {
		if least < 0 || v < least {
			least = v
		}
	}
	return least
}

// waitExit waits for p to exit, failing t after timeout.
func (c *procCluster) waitExit(p *proc, timeout time.Duration) {
	select {
	case <-p.exited:
	case <-time.After(timeout):
		c.t.Errorf("replica %s did not exit within %v; its output:\n%s", p.name, timeout, c.outTail(p))
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

func (c *procCluster) outTail(p *proc) string {
	b, _ := os.ReadFile(p.out)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// kill kills p with SIGKILL and, once it is reaped, logs "killed" with
// the time the signal was sent; it returns the line's index.
func (c *procCluster) kill(name string) int {
	p := c.procs[name]
	sent := time.Now().UnixMicro()
	require.NoError(c.t, p.cmd.Process.Signal(syscall.SIGKILL))
	c.waitExit(p, 10*time.Second)
	p.gone = true
	return c.note("killed", name, sent)
}

// note appends the parent's line and returns its index.
func (c *procCluster) note(kind string, rest ...any) int {
	s := c.log.w.line(kind, rest...)
	return c.log.await(c.t, kind, 0, 10*time.Second, func(ln logLine) bool { return ln.raw == s })
}

// stopAll sends SIGTERM to the replicas not killed, waits for them to
// exit, and checks each returned all its calls.
func (c *procCluster) stopAll() map[string][]int64 {
	t := c.t
	for _, name := range c.order {
		if p := c.procs[name]; !p.gone {
			require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		}
	}
	for _, name := range c.order {
		if p := c.procs[name]; !p.gone {
			c.waitExit(p, 2*procCallTimeout+30*time.Second)
			assert.NoError(t, p.err, "replica %s's process; its output:\n%s", name, c.outTail(p))
			p.gone = true
		}
	}
	c.log.read(t)
	done := map[string][]int64{}
	for _, ln := range c.log.lines {
		if ln.kind == "done" {
			var v []int64
			for _, f := range ln.f {
				n, _ := strconv.ParseInt(f, 10, 64)
				v = append(v, n)
			}
			done[ln.who] = v
		}
	}
	return done
}

// cleanup ends what is left, at the end of a test that failed early:
// with SIGQUIT, so that each writes its goroutines' stacks, which the
// test's log shows. FAIRSCHED_REPLICAS_LOG, if set, names a directory
// where the shared log and the children's outputs are copied.
func (c *procCluster) cleanup() {
	t := c.t
	for _, name := range c.order {
		p := c.procs[name]
		if p.gone {
			continue
		}
		_ = p.cmd.Process.Signal(syscall.SIGQUIT)
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("replica %s's output:\n%s", name, c.outTail(p))
		}
	}
	if dir := os.Getenv("FAIRSCHED_REPLICAS_LOG"); dir != "" {
		b, _ := os.ReadFile(c.log.path)
		_ = os.WriteFile(filepath.Join(dir, t.Name()+"-"+c.schema+".log"), b, 0o644)
		for name, p := range c.procs {
			b, _ := os.ReadFile(p.out)
			_ = os.WriteFile(filepath.Join(dir, t.Name()+"-"+c.schema+"-"+name+".out"), b, 0o644)
		}
	}
}

// verdict is what the log says of the runs.
type verdict struct {
	runs, maxAll, maxReplica, maxKey, maxConflict int
	overLimit                                     []string // the first lines that exceeded a limit, with their context
	startedTwice                                  int      // a run started again while it ran, or again at all
	durableRuns, durableTwice                     int      // durable attempts; a durable job's attempt started while another ran
	endedUnknown                                  int      // an end line of no run open
	frozenEnds                                    int      // end lines of runs ended by a kill or a stop
	lostEnds, cancelEnds                          int
	// durableRedone counts durable jobs run again after an attempt
	// whose handler returned nil: its end was not heard (its Done lost
	// with a replica declared dead, or with a leader before it was
	// written).
	durableRedone int
}

// check reads the whole log and counts the runs open at each line.
func (c *procCluster) check() verdict {
	tl := c.newTally()
	for _, ln := range c.log.lines {
		tl.add(ln)
	}
	return tl.v
}

// awaitFull waits for a line from from on at which the cluster's slots
// were all held: every scenario waits for one after its fault, so that
// its load is a test of the cluster's limit (how long it takes depends
// on the machine: a fixed load may not fill them in a busy one's time).
func (c *procCluster) awaitFull(what string, from int) {
	tl := c.newTally()
	for _, ln := range c.log.lines[:from] {
		tl.add(ln)
	}
	c.log.await(c.t, what, from, 30*time.Second, func(ln logLine) bool {
		tl.add(ln)
		return len(tl.open) == procSlots
	})
}

// tally counts the runs open at each line of the log, read in order.
type tally struct {
	c          *procCluster
	v          verdict
	i          int // the next line's index
	open       map[string]openRun
	frozen     map[string]bool // runs ended by a kill or a stop
	seen       map[string]bool
	stoppedAt  map[string]int64 // when wait reported each stopped process stopped
	perReplica map[string]int
	perKey     map[string]int
	perCid     map[string]int
	// durableOpen are the durable jobs running, by ID ("d7" of the run
	// "d7.2"); durableOK those an attempt of which returned nil.
	durableOpen, durableOK map[string]bool
}

// openRun is a run the log shows open: its replica, key and
// conflicting ID.
type openRun struct{ who, key, cid string }

func (c *procCluster) newTally() *tally {
	return &tally{c: c, open: map[string]openRun{}, frozen: map[string]bool{}, seen: map[string]bool{},
		stoppedAt: map[string]int64{}, perReplica: map[string]int{}, perKey: map[string]int{}, perCid: map[string]int{},
		durableOpen: map[string]bool{}, durableOK: map[string]bool{}}
}

func (tl *tally) over(i int, what string) {
	if len(tl.v.overLimit) < 5 {
		tl.v.overLimit = append(tl.v.overLimit, fmt.Sprintf("line %d: %s; the log before:\n%s", i, what, tl.c.log.tail(i+1, 25)))
	}
}

// jobOf is the durable job of run id.
func jobOf(id string) string { j, _, _ := strings.Cut(id, "."); return j }

func (tl *tally) closeRun(id string) {
	r := tl.open[id]
	delete(tl.open, id)
	if strings.HasPrefix(id, "d") {
		delete(tl.durableOpen, jobOf(id))
	}
	tl.perReplica[r.who]--
	tl.perKey[r.key]--
	if r.cid != "-" {
		tl.perCid[r.cid]--
	}
}

// add counts the next line.
func (tl *tally) add(ln logLine) {
	i := tl.i
	tl.i++
	switch ln.kind {
	case "start":
		if len(ln.f) < 3 {
			return
		}
		id, key, cid := ln.f[0], ln.f[1], ln.f[2]
		if at, ok := tl.stoppedAt[ln.who]; ok && ln.at <= at && !tl.seen[id] {
			// It began before its process was stopped, which wrote
			// the line only once woken: an old run, as if its line
			// came before the stop.
			tl.seen[id] = true
			tl.v.runs++
			tl.frozen[id] = true
			return
		}
		if tl.seen[id] {
			tl.v.startedTwice++
			tl.over(i, "run "+id+" started again")
		}
		tl.seen[id] = true
		tl.v.runs++
		if strings.HasPrefix(id, "d") {
			tl.v.durableRuns++
			if tl.durableOpen[jobOf(id)] {
				tl.v.durableTwice++
				tl.over(i, "durable job "+jobOf(id)+" started while another attempt of it ran")
			}
			if tl.durableOK[jobOf(id)] {
				tl.v.durableRedone++
			}
			tl.durableOpen[jobOf(id)] = true
		}
		tl.open[id] = openRun{ln.who, key, cid}
		tl.perReplica[ln.who]++
		tl.perKey[key]++
		if cid != "-" {
			tl.perCid[cid]++
		}
		tl.v.maxAll = max(tl.v.maxAll, len(tl.open))
		tl.v.maxReplica = max(tl.v.maxReplica, tl.perReplica[ln.who])
		tl.v.maxKey = max(tl.v.maxKey, tl.perKey[key])
		if cid != "-" {
			tl.v.maxConflict = max(tl.v.maxConflict, tl.perCid[cid])
		}
		switch {
		case len(tl.open) > procSlots:
			tl.over(i, fmt.Sprintf("%d runs at once, over the cluster's %d", len(tl.open), procSlots))
		case tl.perReplica[ln.who] > procCapacity:
			tl.over(i, fmt.Sprintf("%d runs on %s, over its capacity %d", tl.perReplica[ln.who], ln.who, procCapacity))
		case tl.perKey[key] > procKeyCap:
			tl.over(i, fmt.Sprintf("%d runs of key %s, over its %d", tl.perKey[key], key, procKeyCap))
		case cid != "-" && tl.perCid[cid] > 1:
			tl.over(i, fmt.Sprintf("%d runs of conflicting ID %s", tl.perCid[cid], cid))
		}
	case "end":
		if len(ln.f) < 4 {
			return
		}
		id := ln.f[0]
		switch ln.f[3] {
		case "ok":
			if strings.HasPrefix(id, "d") {
				tl.durableOK[jobOf(id)] = true
			}
		case "lost":
			tl.v.lostEnds++
		case "cancel":
			tl.v.cancelEnds++
		}
		switch {
		case tl.frozen[id]:
			tl.v.frozenEnds++
		case tl.open[id].who == "":
			tl.v.endedUnknown++
		default:
			tl.closeRun(id)
		}
	case "killed", "stopped":
		if ln.who != "parent" || len(ln.f) == 0 {
			return
		}
		for id, r := range tl.open {
			if r.who == ln.f[0] {
				tl.closeRun(id)
				tl.frozen[id] = true
			}
		}
		if ln.kind == "stopped" && len(ln.f) > 2 {
			tl.stoppedAt[ln.f[0]], _ = strconv.ParseInt(ln.f[2], 10, 64)
		}
	}
}

// assertVerdict asserts the limits held and every run ran once. (That
// the load filled the cluster's slots, so that it tests their limit, is
// what each scenario waits for after its fault: awaitFull.)
func (c *procCluster) assertVerdict(v verdict) {
	t := c.t
	assert.Empty(t, v.overLimit, "limits exceeded")
	assert.Zero(t, v.startedTwice, "runs started twice")
	assert.Zero(t, v.endedUnknown, "end lines of runs not started")
	assert.LessOrEqual(t, v.maxAll, procSlots)
	assert.LessOrEqual(t, v.maxReplica, procCapacity)
	assert.LessOrEqual(t, v.maxKey, procKeyCap)
	assert.LessOrEqual(t, v.maxConflict, 1)
	assert.Zero(t, v.durableTwice, "durable jobs run twice at once")
	assert.Positive(t, v.durableRuns, "durable attempts ran")
}

// durableVerdict is what the database says of the durable jobs the
// replicas enqueued (an "enq" line each): none may be lost, that is
// missing, or ended otherwise than completed; those still queued or
// running at the end stay for the next start.
type durableVerdict struct {
	enqueued, completed, waiting, lost int
	attempts                           int // in all, of the completed: more than one per job where an attempt was lost
}

// checkDurable reads the durable jobs' states once every replica has
// stopped.
func (c *procCluster) checkDurable() durableVerdict {
	t := c.t
	var d durableVerdict
	var ids []int64
	for _, ln := range c.log.lines {
		if ln.kind == "enq" && len(ln.f) == 1 {
			id, err := strconv.ParseInt(ln.f[0], 10, 64)
			require.NoError(t, err)
			ids = append(ids, id)
		}
	}
	d.enqueued = len(ids)
	pool, err := pgxpool.NewWithConfig(context.Background(), pgtest.Config(t, c.schema))
	require.NoError(t, err)
	defer pool.Close()
	states := map[int64][2]int{}
	rows, err := pool.Query(context.Background(), `SELECT id, state, attempt FROM fairsched_jobs WHERE id = ANY($1)`, ids)
	require.NoError(t, err)
	for rows.Next() {
		var id int64
		var state, attempt int
		require.NoError(t, rows.Scan(&id, &state, &attempt))
		states[id] = [2]int{state, attempt}
	}
	require.NoError(t, rows.Err())
	for _, id := range ids {
		st, ok := states[id]
		switch {
		case !ok || st[0] >= 4: // missing, ended or dead
			d.lost++
			if d.lost <= 5 {
				t.Errorf("durable job %d lost: state %v (found %v)", id, st[0], ok)
			}
		case st[0] == 3:
			d.completed++
			d.attempts += st[1]
		default:
			d.waiting++
		}
	}
	return d
}

// assertDurable asserts no durable job was lost, and that they ran.
func (c *procCluster) assertDurable(d durableVerdict) {
	assert.Zero(c.t, d.lost, "durable jobs lost")
	assert.Positive(c.t, d.completed, "durable jobs completed")
}

// assertDone asserts every replica stopped by SIGTERM returned all its
// calls, with no error but ErrLost or a deadline; it returns the sums.
func (c *procCluster) assertDone(done map[string][]int64, stopped int) (calls, ok, lost, deadline int64) {
	t := c.t
	assert.Len(t, done, stopped, "replicas that reported their calls")
	for name, d := range done {
		if !assert.Len(t, d, 6, "replica %s's done line", name) {
			continue
		}
		assert.Zero(t, d[4], "replica %s: calls that failed otherwise than lost or past their deadline", name)
		assert.Zero(t, d[5], "replica %s: calls that never returned", name)
		calls, ok, lost, deadline = calls+d[0], ok+d[1], lost+d[2], deadline+d[3]
	}
	return
}

// rounds is how many times each scenario runs: FAIRSCHED_KILL_ROUNDS, or
// 3.
func rounds(t *testing.T) int {
	if v := os.Getenv("FAIRSCHED_KILL_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "FAIRSCHED_KILL_ROUNDS")
		return max(n, 1)
	}
	return 3
}

// firstStart returns the first start line after from, by a replica not
// in not.
func (c *procCluster) firstStart(from int, not ...string) (logLine, bool) {
	for _, ln := range c.log.lines[from+1:] {
		if ln.kind == "start" && !slices.Contains(not, ln.who) {
			return ln, true
		}
	}
	return logLine{}, false
}

func ms(us int64) string {
	return time.Duration(us * int64(time.Microsecond)).Round(100 * time.Microsecond).String()
}

// A replica that is not the leader is killed under load: the others go
// on, and no limit is exceeded, while its runs count until it is
// declared dead, or after.
func TestReplicasKillReplica(t *testing.T) {
	for round := range rounds(t) {
		c := newProcCluster(t)
		leader, _ := c.startAll(3)
		victim := "r1"
		if victim == leader {
			victim = "r2"
		}
		k := c.kill(victim)
		c.log.awaitStarts(t, "grants after the kill", k, 40, 30*time.Second)
		// Past the time it is declared dead: its slots are granted again.
		c.log.await(t, "a lease's time after the kill", k, 30*time.Second, func(ln logLine) bool {
			return ln.at > c.log.lines[k].at+int64(2*procLease/time.Microsecond)
		})
		c.log.awaitStarts(t, "grants after it was declared dead", len(c.log.lines)-1, 20, 30*time.Second)
		c.awaitFull("the cluster's slots all held after the kill", k)
		done := c.stopAll()
		v := c.check()
		c.assertVerdict(v)
		dv := c.checkDurable()
		c.assertDurable(dv)
		t.Logf("round %d: durable jobs enqueued %d: completed %d in %d attempts, waiting %d, lost %d; durable attempts run %d",
			round, dv.enqueued, dv.completed, dv.attempts, dv.waiting, dv.lost, v.durableRuns)
		calls, ok, lost, deadline := c.assertDone(done, 2)
		first, found := c.firstStart(k)
		require.True(t, found)
		t.Logf("round %d: killed %s (leader %s); first grant %s after the kill; runs %d, most at once %d (replica %d, key %d); calls on live replicas %d: ok %d, lost %d, past deadline %d",
			round, victim, leader, ms(first.at-c.log.lines[k].at), v.runs, v.maxAll, v.maxReplica, v.maxKey, calls, ok, lost, deadline)
	}
}

// The leader is killed under load: another leads within the lease's
// time and a second, grants again, and no limit is exceeded during the
// failover or after (the live replicas' runs count from their Hello).
func TestReplicasKillLeader(t *testing.T) {
	for round := range rounds(t) {
		c := newProcCluster(t)
		leader, _ := c.startAll(3)
		k := c.kill(leader)
		sent, _ := strconv.ParseInt(c.log.lines[k].f[1], 10, 64)
		next := c.log.await(t, "a new leader", k, 30*time.Second, func(ln logLine) bool { return ln.kind == "lead" })
		granted := c.log.awaitStarts(t, "grants by the new leader", next, 1, 30*time.Second)
		c.log.awaitStarts(t, "grants after the failover", granted, 40, 30*time.Second)
		c.awaitFull("the cluster's slots all held after the failover", next)
		done := c.stopAll()
		v := c.check()
		c.assertVerdict(v)
		dv := c.checkDurable()
		c.assertDurable(dv)
		t.Logf("round %d: durable jobs enqueued %d: completed %d in %d attempts, waiting %d, lost %d; durable attempts run %d",
			round, dv.enqueued, dv.completed, dv.attempts, dv.waiting, dv.lost, v.durableRuns)
		calls, ok, lost, deadline := c.assertDone(done, 2)
		leadAfter := c.log.lines[next].at - sent
		grantAfter := c.log.lines[granted].at - sent
		assert.LessOrEqual(t, leadAfter, int64((procLease+time.Second)/time.Microsecond), "a new leader within the lease's time and a second")
		assert.LessOrEqual(t, grantAfter, int64((procLease+time.Second)/time.Microsecond), "its first grant within the lease's time and a second")
		first, _ := c.firstStart(k)
		t.Logf("round %d: killed the leader %s; %s leads %s after, first grant in its term %s after (first start of any %s after); runs %d, most at once %d (replica %d, key %d); calls on live replicas %d: ok %d, lost %d, past deadline %d",
			round, leader, c.log.lines[next].who, ms(leadAfter), ms(grantAfter), ms(first.at-sent), v.runs, v.maxAll, v.maxReplica, v.maxKey, calls, ok, lost, deadline)
	}
}

// stop stops p with SIGSTOP and, once wait reports it stopped, logs
// "stopped" with the time the signal was sent and the time wait reported
// it stopped, by which the process read the clock for the last time; it
// returns the line's index.
func (c *procCluster) stop(name string) int {
	p := c.procs[name]
	sent := time.Now().UnixMicro()
	require.NoError(c.t, p.cmd.Process.Signal(syscall.SIGSTOP))
	var ws syscall.WaitStatus
	_, err := syscall.Wait4(p.cmd.Process.Pid, &ws, syscall.WUNTRACED, nil)
	require.NoError(c.t, err)
	require.True(c.t, ws.Stopped(), "replica %s's wait status %v", name, ws)
	return c.note("stopped", name, sent, time.Now().UnixMicro())
}

// cont logs "cont", then wakes p with SIGCONT: what it writes after
// waking follows the line. It returns the line's index.
func (c *procCluster) cont(name string) int {
	i := c.note("cont", name)
	require.NoError(c.t, c.procs[name].cmd.Process.Signal(syscall.SIGCONT))
	return i
}

// The leader is stopped (SIGSTOP) past its lease: another leads and
// grants, the stopped one's slots included once it is declared dead.
// Woken (SIGCONT), the old leader finds itself fenced: it grants nothing
// in its old term, stops its old runs at once, and, registered again,
// runs closures the new leader grants it. No limit is exceeded, counting
// the stopped process's runs as ended when it stopped.
func TestReplicasStopLeader(t *testing.T) {
	for round := range rounds(t) {
		c := newProcCluster(t)
		leader, _ := c.startAll(3)
		s := c.stop(leader)
		sent, _ := strconv.ParseInt(c.log.lines[s].f[1], 10, 64)
		stopped, _ := strconv.ParseInt(c.log.lines[s].f[2], 10, 64)
		next := c.log.await(t, "a new leader", s, 30*time.Second, func(ln logLine) bool { return ln.kind == "lead" })
		c.log.awaitStarts(t, "grants by the new leader", next, 40, 30*time.Second)
		c.log.await(t, "twice the lease's time since the stop", s, 30*time.Second, func(ln logLine) bool {
			return ln.at > sent+int64(2*procLease/time.Microsecond)
		})
		w := c.cont(leader)
		fenced := c.log.await(t, "the old leader stops its runs", w, 30*time.Second, func(ln logLine) bool {
			return ln.who == leader && ln.kind == "note" && strings.Contains(ln.raw, "stops its runs")
		})
		starts := 0
		c.log.await(t, "grants to the old leader again", fenced, 30*time.Second, func(ln logLine) bool {
			if ln.kind == "start" && ln.who == leader {
				starts++
			}
			return starts >= 10
		})
		c.awaitFull("the cluster's slots all held once the old leader woke", w)
		done := c.stopAll()
		v := c.check()
		c.assertVerdict(v)
		dv := c.checkDurable()
		c.assertDurable(dv)
		t.Logf("round %d: durable jobs enqueued %d: completed %d in %d attempts, waiting %d, lost %d; durable attempts run %d",
			round, dv.enqueued, dv.completed, dv.attempts, dv.waiting, dv.lost, v.durableRuns)
		calls, ok, lost, deadline := c.assertDone(done, 3)

		// Nothing of the stopped process between its stop and its waking;
		// no start of it after it woke and before it stopped its runs
		// (a grant of its old term); its old runs' ends after it woke.
		var between, stale []string
		var lastOld int64
		frozen := map[string]bool{}
		for i, ln := range c.log.lines {
			switch {
			case i < s && ln.kind == "start" && ln.who == leader,
				i > w && ln.kind == "start" && ln.who == leader && ln.at <= stopped: // begun before the stop, its line written once woken
				frozen[ln.f[0]] = true
			case i < s && ln.kind == "end" && ln.who == leader:
				delete(frozen, ln.f[0])
			case i > s && i < w && ln.who == leader:
				between = append(between, ln.raw)
			case i > w && i < fenced && ln.who == leader && ln.kind == "start":
				stale = append(stale, ln.raw)
			case i > w && ln.kind == "end" && frozen[ln.f[0]]:
				lastOld = max(lastOld, ln.at-c.log.lines[w].at)
				delete(frozen, ln.f[0])
			}
		}
		assert.Empty(t, between, "lines of the stopped process while it was stopped")
		assert.Empty(t, stale, "starts on the old leader after it woke, before it stopped its runs")
		first, _ := c.firstStart(s, leader)
		t.Logf("round %d: stopped the leader %s for %s; %s leads %s after the stop, first grant by another %s after; woken, it stopped its runs %s after, its old runs ended within %s (%d unended); runs %d, most at once %d (replica %d, key %d); calls %d: ok %d, lost %d, past deadline %d",
			round, leader, ms(c.log.lines[w].at-sent), c.log.lines[next].who, ms(c.log.lines[next].at-sent), ms(first.at-sent),
			ms(c.log.lines[fenced].at-c.log.lines[w].at), ms(lastOld), len(frozen), v.runs, v.maxAll, v.maxReplica, v.maxKey, calls, ok, lost, deadline)
	}
}

// cut terminates, from the server's side, every connection of replica
// name, and logs "cut" with the time it began and how many it ended;
// it returns the line's index.
func (c *procCluster) cut(name string) int {
	t := c.t
	ctx := context.Background()
	admin, err := pgxpool.New(ctx, pgtest.DSN(t))
	require.NoError(t, err)
	defer admin.Close()
	sent := time.Now().UnixMicro()
	var n int
	require.NoError(t, admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`,
		appName(c.schema, name)).Scan(&n))
	require.Positive(t, n, "replica %s's connections", name)
	return c.note("cut", name, sent, n)
}

// awaitRuns waits for n starts on replica name from from on.
func (c *procCluster) awaitRuns(what, name string, from, n int) int {
	seen := 0
	return c.log.await(c.t, what, from, 30*time.Second, func(ln logLine) bool {
		if ln.kind == "start" && ln.who == name {
			seen++
		}
		return seen >= n
	})
}

// A replica's connections, then the leader's, are cut from the server's
// side under load: each recovers (its pool and its link connect again,
// and it says its state again), or fences itself first; the cluster
// keeps granting, and no limit is exceeded.
func TestReplicasCutConnections(t *testing.T) {
	for round := range rounds(t) {
		c := newProcCluster(t)
		leader, _ := c.startAll(3)
		other := "r1"
		if other == leader {
			other = "r2"
		}
		var report []string
		lastCut := 0
		for _, name := range []string{other, leader} {
			k := c.cut(name)
			lastCut = k
			c.log.awaitStarts(t, "grants after the cut", k, 40, 30*time.Second)
			c.awaitRuns("runs on the replica cut", name, k, 10)
			first, _ := c.firstStart(k)
			mine, _ := c.firstStart(k, otherThan(name)...)
			sent, _ := strconv.ParseInt(c.log.lines[k].f[1], 10, 64)
			fenced := "it did not fence itself"
			for _, ln := range c.log.lines[k:] {
				if ln.who == name && ln.kind == "note" && strings.Contains(ln.raw, "stops its runs") {
					fenced = "it fenced itself " + ms(ln.at-sent) + " after"
					break
				}
			}
			report = append(report, fmt.Sprintf("cut %s (%s connections; leader %s): first grant %s after, on it %s after; %s",
				name, c.log.lines[k].f[2], leader, ms(first.at-sent), ms(mine.at-sent), fenced))
		}
		c.awaitFull("the cluster's slots all held after the cuts", lastCut)
		done := c.stopAll()
		v := c.check()
		c.assertVerdict(v)
		dv := c.checkDurable()
		c.assertDurable(dv)
		t.Logf("round %d: durable jobs enqueued %d: completed %d in %d attempts, waiting %d, lost %d; durable attempts run %d, run again after one returned nil %d",
			round, dv.enqueued, dv.completed, dv.attempts, dv.waiting, dv.lost, v.durableRuns, v.durableRedone)
		calls, ok, lost, deadline := c.assertDone(done, 3)
		t.Logf("round %d: %s; runs %d, most at once %d (replica %d, key %d); calls %d: ok %d, lost %d, past deadline %d",
			round, strings.Join(report, "; "), v.runs, v.maxAll, v.maxReplica, v.maxKey, calls, ok, lost, deadline)
	}
}

// otherThan returns the replicas r1 to r3 but name.
func otherThan(name string) []string {
	var o []string
	for _, r := range []string{"r1", "r2", "r3"} {
		if r != name {
			o = append(o, r)
		}
	}
	return o
}

// privateServer starts a PostgreSQL server of the test's own with
// scripts/pg.sh, points the test (and its children) at it, and returns
// its directory; it is stopped and removed when the test ends. It skips
// the test if the script cannot start one (no server binaries): the
// test restarts its server, which it may not do to the shared one that
// other packages' tests use at the same time.
func privateServer(t *testing.T) string {
	pgtest.DSN(t) // the suite runs against a server, or not at all
	script, err := filepath.Abs(filepath.Join("..", "scripts", "pg.sh"))
	require.NoError(t, err)
	dir, err := os.MkdirTemp("", "fairsched-pg-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	out, err := exec.Command("bash", script, "start", dir).CombinedOutput()
	if err != nil {
		t.Skipf("restarting the database needs a server of the test's own, and scripts/pg.sh could not start one: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("bash", script, "stop", dir).CombinedOutput(); err != nil {
			t.Errorf("stopping the test's server: %v\n%s", err, out)
		}
	})
	line := strings.TrimSpace(string(out))
	dsn, ok := strings.CutPrefix(line[strings.LastIndexByte(line, '\n')+1:], "export "+pgtest.EnvDSN+"=")
	require.True(t, ok, "scripts/pg.sh printed %q", out)
	t.Setenv(pgtest.EnvDSN, dsn)
	return dir
}

// The database restarts under load (a fast shutdown: every connection
// is cut, and the notifications in flight are lost): the replicas
// connect again, fence themselves if it takes too long, lead and grant
// again; no limit is exceeded.
func TestReplicasRestartDatabase(t *testing.T) {
	if os.Getenv(replicaChildEnv) != "" {
		t.Skip("the child runs TestReplicaChild")
	}
	if testing.Short() {
		t.Skip("starts many processes")
	}
	dir := privateServer(t)
	script, _ := filepath.Abs(filepath.Join("..", "scripts", "pg.sh"))
	for round := range rounds(t) {
		c := newProcCluster(t)
		leader, _ := c.startAll(3)
		r := c.note("restart", "db")
		out, err := exec.Command("bash", script, "restart", dir).CombinedOutput()
		require.NoError(t, err, "%s", out)
		up := c.note("restarted", "db")
		c.log.awaitStarts(t, "grants after the restart", up, 40, 30*time.Second)
		for _, name := range []string{"r1", "r2", "r3"} {
			c.awaitRuns("runs on every replica after the restart", name, up, 5)
		}
		first, _ := c.firstStart(up)
		var notes []string
		for _, ln := range c.log.lines[r:] {
			if ln.kind == "lead" || ln.kind == "note" && strings.Contains(ln.raw, "stops its runs") {
				notes = append(notes, fmt.Sprintf("%s %s %s after", ln.who, map[bool]string{true: "leads", false: "fenced itself"}[ln.kind == "lead"], ms(ln.at-c.log.lines[r].at)))
			}
		}
		c.awaitFull("the cluster's slots all held after the restart", up)
		done := c.stopAll()
		v := c.check()
		c.assertVerdict(v)
		dv := c.checkDurable()
		c.assertDurable(dv)
		t.Logf("round %d: durable jobs enqueued %d: completed %d in %d attempts, waiting %d, lost %d; durable attempts run %d",
			round, dv.enqueued, dv.completed, dv.attempts, dv.waiting, dv.lost, v.durableRuns)
		calls, ok, lost, deadline := c.assertDone(done, 3)
		t.Logf("round %d: the database restarted in %s (leader %s); first grant %s after it was up; %s; runs %d, most at once %d (replica %d, key %d); calls %d: ok %d, lost %d, past deadline %d",
			round, ms(c.log.lines[up].at-c.log.lines[r].at), leader, ms(first.at-c.log.lines[up].at), strings.Join(notes, ", "),
			v.runs, v.maxAll, v.maxReplica, v.maxKey, calls, ok, lost, deadline)
	}
}
