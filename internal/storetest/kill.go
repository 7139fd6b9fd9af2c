package storetest

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched"
)

// The kill -9 test of a durable store. The test runs itself as a child
// process that enqueues (one goroutine of five in transactions of its
// own, EnqueueTx) and runs durable jobs from many goroutines, and logs,
// with an fsync each, every Enqueue that returned and every run's
// beginning and end. The parent kills the child with SIGKILL at random
// moments (after a random number of its log lines), at least Rounds times
// (FAIRSCHED_KILL_ROUNDS for a longer run), starts it again each time,
// and lets a last child run everything to the end. Then it checks the log
// and the store: every job whose Enqueue returned ran to completion; no
// two runs of one job overlapped; a job that kills its own process every
// time ends dead after its attempts.

const (
	killRounds   = 24
	jobsPerRound = 40 // enqueued by each child but the last
	poisonTries  = 3
	childEnv     = "FAIRSCHED_KILL_CHILD" // the child's target, log and round
)

// Kill is the kill -9 test of one store. A store's tests call Run from
// their kill test and Child from a test named ChildTest.
type Kill struct {
	// ChildTest is the name of the test that calls Child.
	ChildTest string
	// Target is where the store keeps its jobs (a file, a schema), as
	// Open and Counts take it; the parent makes it.
	Target func(t *testing.T) string
	// Open opens the store at target, and returns it and what closes it.
	Open func(t *testing.T, target string) (fairsched.Store, func() error)
	// EnqueueInTx enqueues job, with arg, through s in a transaction of
	// its own on st's database, commits it, and returns the job's ID.
	EnqueueInTx func(ctx context.Context, s *fairsched.Scheduler, st fairsched.Store, job fairsched.Job, arg int) int64
	// Counts reads, at target: the jobs of type "work" not completed, the
	// state and attempt of the job of type "poison", and the attempts
	// recorded lost.
	Counts func(t *testing.T, target string) (notCompleted, poisonState, poisonAttempts, lost int)
}

// Run is the parent: it kills its children and checks what they did.
func (k Kill) Run(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("the child runs " + k.ChildTest)
	}
	if testing.Short() {
		t.Skip("starts many processes")
	}
	rounds := killRounds
	if v := os.Getenv("FAIRSCHED_KILL_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "FAIRSCHED_KILL_ROUNDS")
		rounds = n
	}
	target := k.Target(t)
	logPath := filepath.Join(t.TempDir(), "runs.log")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 9))
	kills, selfKills, start := 0, 0, time.Now()
	seen := make(map[int64]bool) // jobs whose "enq" line a child printed before it ended
	for round := 0; kills < rounds; round++ {
		killAfter := 5 + rng.IntN(2*jobsPerRound) // log lines: within what a round logs
		switch k.runChild(t, target, logPath, round, killAfter, seen) {
		case killed:
			kills++
		case died:
			selfKills++ // the poison job killed it
		}
		require.Less(t, round, 3*rounds, "the child finishes before it can be killed")
	}
	require.Equal(t, finished, k.runChild(t, target, logPath, -1, 0, seen), "the last child runs to the end")

	runs := readRunLog(t, logPath)
	notCompleted, poisonState, poisonAttempts, lost := k.Counts(t, target)
	// A child prints a line only once it is in the log, so every Enqueue
	// the parent saw return is there; and the kills must have come while
	// jobs were being enqueued, one for each kill at least, or the test
	// proved little.
	require.GreaterOrEqual(t, len(seen), rounds, "Enqueues seen to return before the kills")
	var notLogged []int64
	for id := range seen {
		if !runs.enqueued[id] {
			notLogged = append(notLogged, id)
		}
	}
	require.Empty(t, notLogged, "Enqueues seen to return and missing from the log")
	var neverCompleted []int64
	for id := range runs.enqueued {
		if runs.completed[id] == 0 {
			neverCompleted = append(neverCompleted, id)
		}
	}
	assert.Empty(t, neverCompleted, "jobs whose Enqueue returned and that never completed")
	assert.Zero(t, notCompleted, "work jobs not completed in the store")
	assert.Zero(t, runs.overlaps, "runs of one job that overlapped")
	assert.Equal(t, 5, poisonState, "the job that kills its process is dead")
	assert.Equal(t, poisonTries, poisonAttempts, "after its attempts")
	repeated := 0
	for _, n := range runs.completed {
		repeated += n - 1
	}
	t.Logf("jobs %d (%d seen to return before a kill or the end), kills %d (and %d by the poison job), lost attempts recovered %d, runs repeated after a kill %d, overlapping runs %d, in %v",
		len(runs.enqueued), len(seen), kills, selfKills, lost, repeated, runs.overlaps, time.Since(start).Round(time.Millisecond))
}

// childEnd is how a child ended.
type childEnd int

const (
	finished childEnd = iota // it ran all it had
	killed                   // the parent killed it
	died                     // it killed itself: the poison job ran
)

// runChild runs one child, round (-1: the last, which enqueues nothing
// and runs until all is done), and kills it after killAfter lines of its
// log, unless it ends first. It adds to seen the jobs whose Enqueue the
// child printed.
func (k Kill) runChild(t *testing.T, target, logPath string, round, killAfter int, seen map[int64]bool) childEnd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+k.ChildTest+"$", "-test.v")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%s,%d", childEnv, target, logPath, round))
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	lines := bufio.NewScanner(out)
	n, end, poisoned := 0, finished, false
	var tail []string
	for lines.Scan() {
		n++
		tail = append(tail[max(0, len(tail)-20):], lines.Text())
		poisoned = poisoned || strings.HasPrefix(lines.Text(), "poison ")
		var pid, id int64
		if _, err := fmt.Sscanf(lines.Text(), "enq %d %d", &pid, &id); err == nil {
			seen[id] = true
		}
		if round >= 0 && n == killAfter {
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			end = killed
		}
	}
	err = cmd.Wait()
	if end == killed {
		return killed
	}
	if err != nil && strings.Contains(err.Error(), "killed") && poisoned {
		return died
	}
	require.NoError(t, err, "child %d: %s", round, strings.Join(tail, "\n"))
	return finished
}

// runLog is what the child processes logged.
type runLog struct {
	enqueued  map[int64]bool
	completed map[int64]int // runs that ended
	overlaps  int
}

func readRunLog(t *testing.T, path string) runLog {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	l := runLog{enqueued: make(map[int64]bool), completed: make(map[int64]int)}
	openOf := make(map[int64]map[string]bool) // by job: "pid id" of its runs begun and not ended
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var what string
		var pid, id int64
		if _, err := fmt.Sscan(sc.Text(), &what, &pid, &id); err != nil {
			continue // a line cut short by the kill
		}
		run := fmt.Sprint(pid, " ", id)
		switch what {
		case "enq":
			l.enqueued[id] = true
		case "begin":
			for other := range openOf[id] {
				if strings.HasPrefix(other, fmt.Sprint(pid, " ")) {
					l.overlaps++ // another run of the job, in this process, has not ended
				}
			}
			if openOf[id] == nil {
				openOf[id] = make(map[string]bool)
			}
			openOf[id][run] = true
		case "end":
			delete(openOf[id], run)
			l.completed[id]++
		}
	}
	require.NoError(t, sc.Err())
	return l
}

// Child is the child process: it runs only when Run started it.
func (k Kill) Child(t *testing.T) {
	env := os.Getenv(childEnv)
	if env == "" {
		t.Skip("run by the kill test")
	}
	parts := strings.Split(env, ",")
	target, logPath := parts[0], parts[1]
	round, _ := strconv.Atoi(parts[2])
	lg := openRunLog(t, logPath)
	defer lg.f.Close()

	st, closeStore := k.Open(t, target)
	var hs fairsched.Handlers
	fairsched.AddHandler(&hs, "work", func(ctx context.Context, n int) error {
		id := fairsched.JobID(ctx)
		lg.line("begin", id)
		time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond) // the work
		lg.line("end", id)
		return nil
	})
	fairsched.AddHandler(&hs, "poison", func(ctx context.Context, _ struct{}) error {
		lg.line("poison", fairsched.JobID(ctx))
		return syscall.Kill(os.Getpid(), syscall.SIGKILL)
	})
	s, err := fairsched.New(fairsched.Config{MaxConcurrency: 8, Store: st, Handlers: &hs,
		Types: map[string]fairsched.TypeConfig{
			"work":   {Retry: fairsched.RetryPolicy{Attempts: 100, Backoff: time.Millisecond}},
			"poison": {Retry: fairsched.RetryPolicy{Attempts: poisonTries, Backoff: time.Millisecond}},
		}})
	require.NoError(t, err)
	ctx := context.Background()
	if round == 0 {
		h, err := s.Enqueue(ctx, fairsched.Job{Type: "poison"}, struct{}{})
		require.NoError(t, err)
		lg.line("enq-poison", h.ID())
	}
	if round >= 0 {
		var wg sync.WaitGroup
		for g := range 5 { // producers
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range jobsPerRound / 5 {
					job := fairsched.Job{Type: "work", Key: fmt.Sprint("k", g)}
					if g == 0 { // in a transaction of the caller's
						lg.line("enq", k.EnqueueInTx(ctx, s, st, job, i))
						continue
					}
					h, err := s.Enqueue(ctx, job, i)
					if err != nil {
						panic(err)
					}
					lg.line("enq", h.ID())
				}
			}()
		}
		wg.Wait()
	}
	require.NoError(t, s.WaitIdle(ctx))
	require.NoError(t, s.Shutdown(ctx))
	require.NoError(t, closeStore())
}

// childLog is a child's log: each line written and fsync'ed before the
// caller goes on, and copied to stdout for the parent to count.
type childLog struct {
	mu sync.Mutex
	f  *os.File
}

func openRunLog(t *testing.T, path string) *childLog {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	require.NoError(t, err)
	return &childLog{f: f}
}

func (l *childLog) line(what string, id int64) {
	s := fmt.Sprintf("%s %d %d\n", what, os.Getpid(), id)
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.f.WriteString(s); err != nil {
		panic(err)
	}
	if err := l.f.Sync(); err != nil {
		panic(err)
	}
	os.Stdout.WriteString(s)
}
