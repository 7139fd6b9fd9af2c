package fairsched

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/fairsched/fairsched/internal/clock"
	"github.com/fairsched/fairsched/internal/engine"
)

// sim drives a Scheduler through a workload in virtual time. Every job is
// a Submit job whose function blocks until the sim releases it at its
// virtual finish time; the sim advances the fake clock from event to event
// (arrivals, then finishes, at each instant) and waits for the scheduler to
// take each one in before the next, so a run is fully deterministic. After
// every step it checks the scheduler's invariants.
type sim struct {
	t     testing.TB
	clk   *clock.Fake
	s     *Scheduler
	t0    time.Time
	now   time.Duration
	jobs  []*simJob
	bySeq map[uint64]*simJob
	queue []*simJob // arrivals not yet submitted, by At then order added
	order []*simJob // in start order
	// onFinish, if set, is called after a job finishes (at its end time);
	// it may add arrivals at m.now or later.
	onFinish func(*simJob)
	// maxRunning is the most jobs seen running at once.
	maxRunning int
}

type simJob struct {
	Name    string
	Job     Job
	At, Dur time.Duration
	Start   time.Duration // -1 until started
	End     time.Duration // -1 until ended
	Err     error

	h       Handle
	release chan struct{}
	added   int
}

func (j *simJob) started() bool { return j.Start >= 0 }
func (j *simJob) ended() bool   { return j.End >= 0 }

// Wait returns how long the job waited for a slot.
func (j *simJob) Wait() time.Duration { return j.Start - j.At }

func newSim(t testing.TB, cfg Config) *sim {
	t.Helper()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	cfg.Clock = clk
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	m := &sim{t: t, clk: clk, s: s, t0: t0, bySeq: map[uint64]*simJob{}}
	t.Cleanup(m.close)
	return m
}

// add schedules a job to arrive at virtual time at and run for dur.
func (m *sim) add(name string, at time.Duration, j Job, dur time.Duration) *simJob {
	if at < m.now {
		m.t.Fatalf("sim: job %s arrives at %v, before now %v", name, at, m.now)
	}
	sj := &simJob{Name: name, Job: j, At: at, Dur: dur, Start: -1, End: -1, release: make(chan struct{}), added: len(m.jobs)}
	m.jobs = append(m.jobs, sj)
	i := sort.Search(len(m.queue), func(i int) bool { return m.queue[i].At > at })
	m.queue = append(m.queue, nil)
	copy(m.queue[i+1:], m.queue[i:])
	m.queue[i] = sj
	return sj
}

// job returns the job added under name.
func (m *sim) job(name string) *simJob {
	for _, j := range m.jobs {
		if j.Name == name {
			return j
		}
	}
	m.t.Fatalf("sim: no job %q", name)
	return nil
}

// run processes every event up to and including virtual time end.
func (m *sim) run(end time.Duration) {
	m.t.Helper()
	for {
		next, ok := m.nextEvent()
		if !ok || next > end {
			break
		}
		m.advance(next)
		for len(m.queue) > 0 && m.queue[0].At == next {
			sj := m.queue[0]
			m.queue = m.queue[1:]
			m.submit(sj)
		}
		for _, sj := range m.finishingAt(next) {
			close(sj.release)
			<-sj.h.Done()
			sj.End = next
			sj.Err = sj.h.Err()
			m.collect()
			if m.onFinish != nil {
				m.onFinish(sj)
			}
		}
	}
	if end > m.now {
		m.advance(end)
	}
}

func (m *sim) advance(to time.Duration) {
	m.clk.Set(m.t0.Add(to))
	m.now = to
}

func (m *sim) nextEvent() (time.Duration, bool) {
	next, ok := time.Duration(0), false
	if len(m.queue) > 0 {
		next, ok = m.queue[0].At, true
	}
	for _, sj := range m.order {
		if !sj.ended() && sj.Dur >= 0 {
			if f := sj.Start + sj.Dur; !ok || f < next {
				next, ok = f, true
			}
		}
	}
	return next, ok
}

// finishingAt returns the running jobs due to end at t, in start order.
func (m *sim) finishingAt(t time.Duration) []*simJob {
	var out []*simJob
	for _, sj := range m.order {
		if !sj.ended() && sj.Dur >= 0 && sj.Start+sj.Dur == t {
			out = append(out, sj)
		}
	}
	return out
}

// untilReleased returns a job function that returns nil once release is
// closed, or its context's error if that ends first.
func untilReleased(release <-chan struct{}) func(context.Context) error {
	return func(ctx context.Context) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (m *sim) submit(sj *simJob) {
	m.t.Helper()
	h, err := m.s.Submit(context.Background(), sj.Job, untilReleased(sj.release))
	if err != nil {
		sj.Err = err
		sj.End = m.now
		return
	}
	sj.h = h
	m.bySeq[seqOf(h)] = sj
	m.collect()
}

// collect records the jobs the scheduler started since the last call and
// checks its invariants.
func (m *sim) collect() {
	m.t.Helper()
	var running []uint64 // the running jobs' Seqs, read under the lock: a record may be reused
	var err error
	m.s.rt.Locked(func(e *engine.Engine, now int64) {
		for _, j := range e.RunningJobs() {
			running = append(running, j.Seq())
		}
		err = e.Verify(now)
	})
	if err != nil {
		m.t.Fatalf("sim at %v: invariant broken: %v", m.now, err)
	}
	started := make([]*simJob, 0)
	for _, seq := range running {
		sj := m.bySeq[seq]
		if sj != nil && !sj.started() {
			started = append(started, sj)
		}
	}
	// Jobs started in one step are ordered by the scheduler's start time,
	// then by the order the dispatcher chose (its running list order).
	for _, sj := range started {
		sj.Start = m.now
		m.order = append(m.order, sj)
	}
	if n := len(running); n > m.maxRunning {
		m.maxRunning = n
	}
}

// running returns the number of jobs of key running at virtual time t.
func (m *sim) runningAt(key string, t time.Duration) int {
	n := 0
	for _, sj := range m.jobs {
		if sj.Job.Key == key && sj.started() && sj.Start <= t && (!sj.ended() || sj.End > t) {
			n++
		}
	}
	return n
}

// slotTime returns the slot time key's jobs held within [from, to).
func (m *sim) slotTime(key string, from, to time.Duration) time.Duration {
	var total time.Duration
	for _, sj := range m.jobs {
		if sj.Job.Key != key || !sj.started() {
			continue
		}
		s, e := sj.Start, to
		if sj.ended() && sj.End < e {
			e = sj.End
		}
		if s < from {
			s = from
		}
		if e > s {
			total += e - s
		}
	}
	return total
}

// startOrder returns the names of the started jobs in start order.
func (m *sim) startOrder() []string {
	out := make([]string, len(m.order))
	for i, sj := range m.order {
		out[i] = sj.Name
	}
	return out
}

func (m *sim) close() {
	for _, sj := range m.jobs {
		if sj.h != (Handle{}) && !sj.ended() {
			select {
			case <-sj.release:
			default:
				close(sj.release)
			}
		}
	}
	if err := m.s.Close(); err != nil {
		m.t.Errorf("Close: %v", err)
	}
}

func (m *sim) String() string {
	var b []byte
	for _, sj := range m.order {
		b = fmt.Appendf(b, "%6v start %-14s key=%-8s end=%v\n", sj.Start, sj.Name, sj.Job.Key, sj.End)
	}
	return string(b)
}
