package fairsched

// Job types, tiers, type caps and conflict groups, proven on the fake clock:
// five scenarios of a git mirror with their configuration and arrival
// times, a RunSync variant of the first, the hard limits of docs/design.md
// and work conservation under randomized load, idle capacity flowing
// between tiers, and the absence of head-of-line blocking.
//
// Every assertion is on numbers taken from the sim's start and end records
// or from the scheduler's own view of itself, never on logs.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/fairsched/fairsched/internal/engine"
)

const scenSecond = time.Second

// The git mirror's job types. Their "priority" doubles as the tier's
// cap: sync-clone is Foreground with a tier cap of 8, repack and pull are
// Background with a tier cap of 4.
const (
	scenClone  = "sync-clone"
	scenRepack = "repack"
	scenPull   = "pull"
	scenGit    = "git"
)

// scenSeedConfig is the git mirror's scheduler: 8 slots, foreground tier cap
// 8, background tier cap 4, type caps 8/3/3, every type in conflict group
// "git". The per-job costs become the types' default costs.
func scenSeedConfig() Config {
	return Config{
		MaxConcurrency: 8,
		TierLimits:     map[Tier]int{Foreground: 8, Background: 4},
		Types: map[string]TypeConfig{
			scenClone:  {Tier: Foreground, MaxConcurrency: 8, ConflictGroup: scenGit, DefaultCost: 10 * scenSecond},
			scenRepack: {Tier: Background, MaxConcurrency: 3, ConflictGroup: scenGit, DefaultCost: 20 * scenSecond},
			scenPull:   {Tier: Background, MaxConcurrency: 3, ConflictGroup: scenGit, DefaultCost: 10 * scenSecond},
		},
	}
}

// scenCaps answers questions about a Config's hard limits from the test's
// side, independently of the scheduler's bookkeeping.
type scenCaps struct{ cfg Config }

func (c scenCaps) tier(typ string) Tier    { return c.cfg.Types[typ].Tier }
func (c scenCaps) typeCap(typ string) int  { return c.cfg.Types[typ].MaxConcurrency }
func (c scenCaps) group(typ string) string { return c.cfg.Types[typ].ConflictGroup }
func (c scenCaps) tierCap(t Tier) int      { return c.cfg.TierLimits[t] }
func (c scenCaps) conflictOf(typ, id string) string {
	if g := c.group(typ); g != "" {
		return g + "/" + id
	}
	return ""
}

func (c scenCaps) keyCap(key string) int { return configOfKey(c.cfg, key).MaxConcurrency }

// configOfKey returns the configuration cfg gives key name at New: its
// entry in Keys, else DefaultKey, but the zero KeyConfig for the empty key.
func configOfKey(cfg Config, name string) KeyConfig {
	if kc, ok := cfg.Keys[name]; ok {
		return kc
	}
	return defaultOfKey(cfg, name)
}

// defaultOfKey returns what key name returns to when ResetKey resets it.
func defaultOfKey(cfg Config, name string) KeyConfig {
	if name == "" {
		return KeyConfig{}
	}
	return cfg.DefaultKey
}

// scenLoad counts a set of running jobs along every dimension a hard limit
// is defined on.
type scenLoad struct {
	caps  scenCaps
	total int
	tier  map[Tier]int
	typ   map[string]int
	key   map[string]int
	held  map[string]int // conflict group/ID -> running holders
}

func newScenLoad(caps scenCaps) *scenLoad {
	return &scenLoad{caps: caps, tier: map[Tier]int{}, typ: map[string]int{}, key: map[string]int{}, held: map[string]int{}}
}

func (l *scenLoad) add(typ, id, key string) {
	l.total++
	l.tier[l.caps.tier(typ)]++
	l.typ[typ]++
	l.key[key]++
	if c := l.caps.conflictOf(typ, id); c != "" {
		l.held[c]++
	}
}

// violation describes the first hard limit the load exceeds, or "".
func (l *scenLoad) violation() string {
	if max := l.caps.cfg.MaxConcurrency; max > 0 && l.total > max {
		return fmt.Sprintf("%d running > MaxConcurrency %d", l.total, max)
	}
	for t, n := range l.tier {
		if c := l.caps.tierCap(t); c > 0 && n > c {
			return fmt.Sprintf("tier %d: %d running > cap %d", t, n, c)
		}
	}
	for typ, n := range l.typ {
		if c := l.caps.typeCap(typ); c > 0 && n > c {
			return fmt.Sprintf("type %q: %d running > cap %d", typ, n, c)
		}
	}
	for key, n := range l.key {
		if c := l.caps.keyCap(key); c > 0 && n > c {
			return fmt.Sprintf("key %q: %d running > cap %d", key, n, c)
		}
	}
	for c, n := range l.held {
		if n > 1 {
			return fmt.Sprintf("conflict %s: %d running at once", c, n)
		}
	}
	return ""
}

// blocker names the hard limit that keeps a job from starting on top of
// this load, or returns "" if the job is admissible.
func (l *scenLoad) blocker(typ, id, key string) string {
	switch {
	case l.caps.cfg.MaxConcurrency > 0 && l.total >= l.caps.cfg.MaxConcurrency:
		return "global"
	case l.caps.tierCap(l.caps.tier(typ)) > 0 && l.tier[l.caps.tier(typ)] >= l.caps.tierCap(l.caps.tier(typ)):
		return "tier cap"
	case l.caps.typeCap(typ) > 0 && l.typ[typ] >= l.caps.typeCap(typ):
		return "type cap"
	case l.caps.keyCap(key) > 0 && l.key[key] >= l.caps.keyCap(key):
		return "key cap"
	case l.caps.conflictOf(typ, id) != "" && l.held[l.caps.conflictOf(typ, id)] > 0:
		return "conflict"
	}
	return ""
}

// scenLoadAt returns the load of the sim's jobs that held a slot at
// instant at, by the sim's records: a job holds its slot over [Start, End).
func scenLoadAt(m *sim, caps scenCaps, at time.Duration) *scenLoad {
	l := newScenLoad(caps)
	for _, sj := range m.order {
		if sj.Start <= at && (!sj.ended() || sj.End > at) {
			l.add(sj.Job.Type, sj.Job.ID, sj.Job.Key)
		}
	}
	return l
}

// scenPeak returns the most jobs matching match that held a slot at one
// instant, by the sim's records. Occupancy only rises when a job starts, so
// looking at every start instant finds the peak.
func scenPeak(m *sim, match func(*simJob) bool) int {
	peak := 0
	for _, at := range m.order {
		n := 0
		for _, sj := range m.order {
			if match(sj) && sj.Start <= at.Start && (!sj.ended() || sj.End > at.Start) {
				n++
			}
		}
		peak = max(peak, n)
	}
	return peak
}

// scenRunning counts the jobs matching match that held a slot at instant at.
func scenRunning(m *sim, at time.Duration, match func(*simJob) bool) int {
	n := 0
	for _, sj := range m.order {
		if match(sj) && sj.Start <= at && (!sj.ended() || sj.End > at) {
			n++
		}
	}
	return n
}

func scenOfTier(caps scenCaps, t Tier) func(*simJob) bool {
	return func(sj *simJob) bool { return caps.tier(sj.Job.Type) == t }
}

func scenOfType(typ string) func(*simJob) bool {
	return func(sj *simJob) bool { return sj.Job.Type == typ }
}

// scenOverlap reports whether two jobs held slots at the same time.
func scenOverlap(a, b *simJob) bool {
	aEnd, bEnd := a.End, b.End
	if !a.ended() {
		aEnd = math.MaxInt64
	}
	if !b.ended() {
		bEnd = math.MaxInt64
	}
	return a.started() && b.started() && a.Start < bEnd && b.Start < aEnd
}

// scenCheckRecords fails the test if the sim's records show any hard limit
// exceeded at any instant, or any job that did not end cleanly.
func scenCheckRecords(t *testing.T, m *sim, caps scenCaps) {
	t.Helper()
	for _, sj := range m.order {
		if v := scenLoadAt(m, caps, sj.Start).violation(); v != "" {
			t.Fatalf("at %v (start of %s): %s\n%v", sj.Start, sj.Name, v, m)
		}
	}
	for _, sj := range m.jobs {
		if !sj.ended() || sj.Err != nil {
			t.Fatalf("job %s: started=%v ended=%v err=%v\n%v", sj.Name, sj.started(), sj.ended(), sj.Err, m)
		}
	}
}

func scenExpectStart(t *testing.T, m *sim, name string, want time.Duration) {
	t.Helper()
	if got := m.job(name).Start; got != want {
		t.Errorf("%s started at %v, want %v\n%v", name, got, want, m)
	}
}

// scenRecv waits for a value from ch. The deadline only turns a hang into a
// failure; the test never relies on it for ordering.
func scenRecv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// Git mirror, scenario 1: background saturated, foreground arrives late.
// Six repacks and four pulls arrive at T=0; the background tier cap (4)
// and the type caps (3) hold them to four running. A foreground clone
// arriving at T=3 starts at once: the tier cap kept four slots free.
func TestSeed002Scenario1ForegroundIntoSaturatedBackground(t *testing.T) {
	cfg := scenSeedConfig()
	caps := scenCaps{cfg}
	m := newSim(t, cfg)
	for i := 1; i <= 6; i++ {
		m.add(fmt.Sprintf("r%d", i), 0, Job{Type: scenRepack, ID: fmt.Sprintf("r%d", i)}, 8*scenSecond)
	}
	for i := 7; i <= 10; i++ {
		m.add(fmt.Sprintf("r%d", i), 0, Job{Type: scenPull, ID: fmt.Sprintf("r%d", i)}, 6*scenSecond)
	}
	fg := m.add("r99", 3*scenSecond, Job{Type: scenClone, ID: "r99", Key: "dev1"}, 2*scenSecond)
	m.run(25 * scenSecond)

	if fg.Start != 3*scenSecond || fg.Wait() != 0 || fg.End != 5*scenSecond {
		t.Errorf("foreground clone ran [%v, %v), waited %v; want [3s, 5s), no wait\n%v", fg.Start, fg.End, fg.Wait(), m)
	}
	if got := scenRunning(m, 3*scenSecond, scenOfTier(caps, Background)); got != 4 {
		t.Errorf("background running when the clone arrived: %d, want 4 (saturated at its cap)", got)
	}
	if got := scenPeak(m, scenOfTier(caps, Background)); got != 4 {
		t.Errorf("background peaked at %d running, want its tier cap 4", got)
	}
	if got := scenPeak(m, scenOfType(scenRepack)); got != 3 {
		t.Errorf("repack peaked at %d running, want its type cap 3", got)
	}
	// The background timeline of the seed's simulation: whenever a
	// background slot frees, the oldest job its type cap allows takes it.
	for name, at := range map[string]time.Duration{
		"r1": 0, "r2": 0, "r3": 0, "r7": 0,
		"r8": 6 * scenSecond,
		"r4": 8 * scenSecond, "r5": 8 * scenSecond, "r6": 8 * scenSecond,
		"r9":  12 * scenSecond,
		"r10": 16 * scenSecond,
	} {
		scenExpectStart(t, m, name, at)
	}
	scenCheckRecords(t, m, caps)
}

// The RunSync variant of scenario 1: the foreground clone is a RunSync call
// on a goroutine of the test's. It is admitted on arrival, runs its
// function and returns while every background job still holds its slot.
func TestSeed002Scenario1RunSync(t *testing.T) {
	cfg := scenSeedConfig()
	caps := scenCaps{cfg}
	m := newSim(t, cfg)
	for i := 1; i <= 6; i++ {
		m.add(fmt.Sprintf("r%d", i), 0, Job{Type: scenRepack, ID: fmt.Sprintf("r%d", i)}, 8*scenSecond)
	}
	for i := 7; i <= 10; i++ {
		m.add(fmt.Sprintf("r%d", i), 0, Job{Type: scenPull, ID: fmt.Sprintf("r%d", i)}, 6*scenSecond)
	}
	m.run(3 * scenSecond)

	entered := make(chan time.Time, 1)
	release := make(chan struct{})
	returned := make(chan error, 1)
	go func() {
		returned <- m.s.RunSync(context.Background(), Job{Type: scenClone, ID: "r99", Key: "dev1"},
			func(ctx context.Context) error {
				entered <- m.clk.Now()
				select {
				case <-release:
					return nil
				case <-ctx.Done(): // the sim's Close, if the test failed early
					return ctx.Err()
				}
			})
	}()
	if at := scenRecv(t, entered, "the RunSync function to run").Sub(m.t0); at != 3*scenSecond {
		t.Errorf("RunSync function ran at %v, want 3s (no wait)", at)
	}
	running := map[Tier]int{}
	for _, ji := range m.s.Snapshot() {
		if ji.Running {
			running[ji.Tier]++
		}
	}
	if running[Foreground] != 1 || running[Background] != 4 {
		t.Errorf("while RunSync runs: %d foreground and %d background running, want 1 and 4", running[Foreground], running[Background])
	}

	m.run(5 * scenSecond) // the clone takes 2s; no background job is due yet
	close(release)
	if err := scenRecv(t, returned, "RunSync to return"); err != nil {
		t.Fatalf("RunSync: %v", err)
	}
	// Nothing in the background was released yet, so RunSync cannot have
	// waited for any of it.
	for _, sj := range m.jobs {
		if sj.ended() {
			t.Errorf("background job %s ended at %v before RunSync returned", sj.Name, sj.End)
		}
	}
	if st := m.s.Stats(); st.Running != 4 || st.Completed != 1 {
		t.Errorf("after RunSync: %d active, %d completed; want 4 and 1", st.Running, st.Completed)
	}

	m.run(25 * scenSecond)
	scenExpectStart(t, m, "r8", 6*scenSecond)
	scenExpectStart(t, m, "r10", 16*scenSecond)
	scenCheckRecords(t, m, caps)
}

// Git mirror, scenario 2: two clients burst, with background work running.
// Four repacks arrive at T=0 (three run: the repack cap), client A bursts
// ten clones at T=1 and takes the five free slots, client B asks for two
// clones at T=2. When slots free at T=4, B, which has used nothing, goes
// ahead of A, which has used fifteen slot-seconds: B must not queue behind
// A's whole burst.
func TestSeed002Scenario2TwoClientBursts(t *testing.T) {
	cfg := scenSeedConfig()
	caps := scenCaps{cfg}
	m := newSim(t, cfg)
	for i := 1; i <= 4; i++ {
		m.add(fmt.Sprintf("repo%d", i), 0, Job{Type: scenRepack, ID: fmt.Sprintf("repo%d", i)}, 6*scenSecond)
	}
	for i := 1; i <= 10; i++ {
		m.add(fmt.Sprintf("a%d", i), 1*scenSecond, Job{Type: scenClone, ID: fmt.Sprintf("a%d", i), Key: "clientA"}, 3*scenSecond)
	}
	b1 := m.add("b1", 2*scenSecond, Job{Type: scenClone, ID: "b1", Key: "clientB"}, 3*scenSecond)
	b2 := m.add("b2", 2*scenSecond, Job{Type: scenClone, ID: "b2", Key: "clientB"}, 3*scenSecond)
	m.run(30 * scenSecond)

	for i := 1; i <= 5; i++ {
		scenExpectStart(t, m, fmt.Sprintf("a%d", i), 1*scenSecond)
	}
	// T=4 is the first instant a slot frees after B arrives.
	if b1.Start != 4*scenSecond || b2.Start != 4*scenSecond {
		t.Errorf("client B's clones started at %v and %v, want both at 4s (waits of 2s)\n%v", b1.Start, b2.Start, m)
	}
	// Count A's clones that started ahead of B's second one. The five that
	// took the free slots at T=1, before B existed, are unavoidable; any
	// more means B queued behind A's burst.
	aheadOfB := 0
	for _, name := range m.startOrder() {
		if name == "b2" {
			break
		}
		if strings.HasPrefix(name, "a") {
			aheadOfB++
		}
	}
	if aheadOfB > 5 {
		t.Errorf("%d of client A's 10 clones started before client B's second; want at most 5\nstart order %v\n%v",
			aheadOfB, m.startOrder(), m)
	}
	if got := scenPeak(m, scenOfTier(caps, Background)); got > 4 {
		t.Errorf("background peaked at %d running, over its tier cap 4", got)
	}
	if got := m.maxRunning; got != 8 {
		t.Errorf("peak running %d, want every one of the 8 slots used", got)
	}
	// The seed's IDs never collide here, so the "git" group only has to
	// keep its promise, not block anyone.
	scenCheckRecords(t, m, caps) // includes: no conflict ever overlapped
}

// Git mirror, scenario 3: costly versus cheap. Client A clones linux (15s),
// client B eight small repos (2s), client C two medium ones (4s) at T=5.
// A's one costly clone takes one slot and no more; B's clones take the rest
// at once; C's start the moment they arrive. The scheduler learns that
// linux costs more than the small repos.
func TestSeed002Scenario3CostlyVersusCheap(t *testing.T) {
	cfg := scenSeedConfig()
	caps := scenCaps{cfg}
	m := newSim(t, cfg)
	linux := m.add("linux", 0, Job{Type: scenClone, ID: "linux", Key: "clientA"}, 15*scenSecond)
	for i := 1; i <= 8; i++ {
		m.add(fmt.Sprintf("small%d", i), 0, Job{Type: scenClone, ID: fmt.Sprintf("small%d", i), Key: "clientB"}, 2*scenSecond)
	}
	med1 := m.add("med1", 5*scenSecond, Job{Type: scenClone, ID: "med1", Key: "clientC"}, 4*scenSecond)
	med2 := m.add("med2", 5*scenSecond, Job{Type: scenClone, ID: "med2", Key: "clientC"}, 4*scenSecond)
	m.run(25 * scenSecond)

	if linux.Start != 0 || linux.End != 15*scenSecond {
		t.Errorf("linux ran [%v, %v), want [0s, 15s)", linux.Start, linux.End)
	}
	for i := 1; i <= 7; i++ {
		scenExpectStart(t, m, fmt.Sprintf("small%d", i), 0)
	}
	// The eighth small clone takes the first slot that frees.
	scenExpectStart(t, m, "small8", 2*scenSecond)
	if got := m.slotTime("clientB", 0, 4*scenSecond); got != 16*scenSecond {
		t.Errorf("client B held %v of slot time by T=4, want all 16s it asked for", got)
	}
	if med1.Wait() != 0 || med2.Wait() != 0 {
		t.Errorf("client C's clones waited %v and %v, want no wait\n%v", med1.Wait(), med2.Wait(), m)
	}
	if !scenOverlap(linux, med1) || !scenOverlap(linux, m.job("small1")) {
		t.Errorf("linux did not run alongside the cheap clones\n%v", m)
	}

	// Estimates move from the default (10s) toward the observed time by
	// alpha = 0.3: linux 0.3*15 + 0.7*10 = 11.5s, small 0.3*2 + 0.7*10 = 7.6s.
	var est map[engine.EstimateID]float64
	m.s.rt.Locked(func(e *engine.Engine, _ int64) { est = e.Estimates() })
	gotLinux, gotSmall := est[engine.EstimateID{Type: scenClone, ID: "linux"}], est[engine.EstimateID{Type: scenClone, ID: "small1"}]
	if math.Abs(gotLinux-11.5) > 1e-6 || math.Abs(gotSmall-7.6) > 1e-6 {
		t.Errorf("learned costs: linux %.3fs, small %.3fs; want 11.5s and 7.6s", gotLinux, gotSmall)
	}
	scenCheckRecords(t, m, caps)
}

// Git mirror, scenario 4: a clone and a repack of one repository never run
// at the same time (conflict group "git"), while work on different
// repositories runs in parallel.
func TestSeed002Scenario4ConflictExclusion(t *testing.T) {
	cfg := scenSeedConfig()
	caps := scenCaps{cfg}

	t.Run("seed", func(t *testing.T) {
		m := newSim(t, cfg)
		c1 := m.add("clone1", 0, Job{Type: scenClone, ID: "repo1", Key: "dev1"}, 3*scenSecond)
		r1 := m.add("repack1", 0, Job{Type: scenRepack, ID: "repo1"}, 4*scenSecond)
		c2 := m.add("clone2", 0, Job{Type: scenClone, ID: "repo2", Key: "dev2"}, 3*scenSecond)
		r2 := m.add("repack2", 0, Job{Type: scenRepack, ID: "repo2"}, 4*scenSecond)
		m.run(20 * scenSecond)

		// Same repository: the repack waits for the clone, then starts
		// the moment it ends.
		if scenOverlap(c1, r1) || scenOverlap(c2, r2) {
			t.Errorf("clone and repack of one repo overlapped\n%v", m)
		}
		if c1.Start != 0 || c1.End != 3*scenSecond || r1.Start != 3*scenSecond || r1.End != 7*scenSecond {
			t.Errorf("repo1: clone [%v, %v), repack [%v, %v); want [0s, 3s) and [3s, 7s)", c1.Start, c1.End, r1.Start, r1.End)
		}
		if c2.Start != 0 || r2.Start != 3*scenSecond {
			t.Errorf("repo2: clone at %v, repack at %v; want 0s and 3s", c2.Start, r2.Start)
		}
		// Different repositories: in parallel.
		if !scenOverlap(c1, c2) || !scenOverlap(r1, r2) {
			t.Errorf("work on repo1 and repo2 did not run in parallel\n%v", m)
		}
		scenCheckRecords(t, m, caps)
	})

	// The other way round: a repack is running when a foreground clone of
	// the same repository arrives. The higher tier does not override the
	// conflict; a clone of another repository runs beside the repack.
	t.Run("repack first", func(t *testing.T) {
		m := newSim(t, cfg)
		r1 := m.add("repack1", 0, Job{Type: scenRepack, ID: "repo1"}, 4*scenSecond)
		c1 := m.add("clone1", 1*scenSecond, Job{Type: scenClone, ID: "repo1", Key: "dev1"}, 3*scenSecond)
		c2 := m.add("clone2", 1*scenSecond, Job{Type: scenClone, ID: "repo2", Key: "dev2"}, 3*scenSecond)
		m.run(20 * scenSecond)

		if c1.Start != 4*scenSecond || scenOverlap(c1, r1) {
			t.Errorf("clone of repo1 ran [%v, %v) against repack [%v, %v); want it to start at 4s", c1.Start, c1.End, r1.Start, r1.End)
		}
		if c2.Start != 1*scenSecond || !scenOverlap(c2, r1) {
			t.Errorf("clone of repo2 started at %v, want 1s, beside the repack of repo1", c2.Start)
		}
		scenCheckRecords(t, m, caps)
	})
}

// Git mirror, scenario 5: many background types do not starve foreground.
// Four background types (each capped at 4, conflict group "git") with three
// jobs each share a background tier capped at 4; four foreground clones
// arriving at T=2 all start at once.
func TestSeed002Scenario5ManyBackgroundTypes(t *testing.T) {
	bgTypes := []string{"repack", "pull", "gc", "verify"}
	cfg := Config{
		MaxConcurrency: 8,
		TierLimits:     map[Tier]int{Foreground: 8, Background: 4},
		Types: map[string]TypeConfig{
			scenClone: {Tier: Foreground, MaxConcurrency: 8, ConflictGroup: scenGit, DefaultCost: 10 * scenSecond},
		},
	}
	for _, ty := range bgTypes {
		cfg.Types[ty] = TypeConfig{Tier: Background, MaxConcurrency: 4, ConflictGroup: scenGit, DefaultCost: 15 * scenSecond}
	}
	caps := scenCaps{cfg}
	m := newSim(t, cfg)
	for _, ty := range bgTypes {
		for i := 1; i <= 3; i++ {
			id := fmt.Sprintf("%s%d", ty, i)
			m.add(id, 0, Job{Type: ty, ID: id}, 6*scenSecond)
		}
	}
	for i := 1; i <= 4; i++ {
		id := fmt.Sprintf("clone%d", i)
		m.add(id, 2*scenSecond, Job{Type: scenClone, ID: id, Key: "clientA"}, 2*scenSecond)
	}
	m.run(30 * scenSecond)

	for i := 1; i <= 4; i++ {
		scenExpectStart(t, m, fmt.Sprintf("clone%d", i), 2*scenSecond)
	}
	if got := scenRunning(m, 2*scenSecond, func(*simJob) bool { return true }); got != 8 {
		t.Errorf("running at T=2: %d, want 8 (4 background + 4 foreground)", got)
	}
	if got := scenPeak(m, scenOfTier(caps, Background)); got != 4 {
		t.Errorf("background peaked at %d running, want its tier cap 4", got)
	}
	// Twelve 6s jobs four at a time: the background tier stays busy and
	// the last finishes at 18s.
	var last time.Duration
	for _, sj := range m.jobs {
		if caps.tier(sj.Job.Type) == Background {
			last = max(last, sj.End)
		}
	}
	if last != 18*scenSecond {
		t.Errorf("last background job ended at %v, want 18s\n%v", last, m)
	}
	scenCheckRecords(t, m, caps)
}

// Caps are caps, not reservations. Foreground may use at most 4 of the 8
// slots; while it has no work, background uses every slot its own caps
// allow. Foreground work arriving then takes slots as they free, ahead of
// queued background work.
func TestIdleForegroundCapacityUsedByBackground(t *testing.T) {
	for _, tc := range []struct {
		name     string
		bgCap    int // background tier cap; 0: none
		bgPeak   int // background running before foreground arrives
		fgStarts []time.Duration
		nextBg   time.Duration // when the first queued background job starts
	}{
		// No background cap: all 8 slots; the three foreground jobs take
		// the slots freed at 10s, 11s and 12s, the queued background the
		// one freed at 13s.
		{"background uncapped", 0, 8, []time.Duration{10 * scenSecond, 11 * scenSecond, 12 * scenSecond}, 13 * scenSecond},
		// Background capped at 6, more than the 4 that would be left if
		// the foreground cap were a reservation: two slots stay free for
		// foreground, which starts two jobs at once and the third at 10s.
		{"background capped at 6", 6, 6, []time.Duration{1 * scenSecond, 1 * scenSecond, 10 * scenSecond}, 11 * scenSecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{
				MaxConcurrency: 8,
				TierLimits:     map[Tier]int{Foreground: 4, Background: tc.bgCap},
				Types: map[string]TypeConfig{
					"batch":   {Tier: Background},
					"request": {Tier: Foreground},
				},
			}
			caps := scenCaps{cfg}
			m := newSim(t, cfg)
			// Ten background jobs; the running ones end one a second from
			// T=10.
			for i := 0; i < 10; i++ {
				m.add(fmt.Sprintf("bg%d", i), 0, Job{Type: "batch", ID: fmt.Sprintf("b%d", i)}, time.Duration(10+i)*scenSecond)
			}
			m.run(scenSecond / 2)
			if got := scenRunning(m, 0, scenOfTier(caps, Background)); got != tc.bgPeak {
				t.Fatalf("background running with foreground idle: %d, want %d\n%v", got, tc.bgPeak, m)
			}
			for i := 0; i < 3; i++ {
				m.add(fmt.Sprintf("fg%d", i), 1*scenSecond, Job{Type: "request", ID: fmt.Sprintf("f%d", i), Key: "client"}, 30*scenSecond)
			}
			m.run(60 * scenSecond)

			for i, want := range tc.fgStarts {
				scenExpectStart(t, m, fmt.Sprintf("fg%d", i), want)
			}
			scenExpectStart(t, m, fmt.Sprintf("bg%d", tc.bgPeak), tc.nextBg)
			if got := scenPeak(m, scenOfTier(caps, Background)); got != tc.bgPeak {
				t.Errorf("background peaked at %d, want %d", got, tc.bgPeak)
			}
			scenCheckRecords(t, m, caps)
		})
	}
}

// No head-of-line blocking. Two slots are busy when a high-priority job Y
// and a low-priority job Z of the same key queue behind them. When a slot
// frees, Y is first in order but blocked (by a conflict, its type's cap or
// its tier's cap) until T=5; Z must take the slot at T=2 rather than leave
// it idle behind Y.
func TestNoHOLBlocking(t *testing.T) {
	types := map[string]TypeConfig{
		"repack":  {ConflictGroup: scenGit},
		"clone":   {ConflictGroup: scenGit},
		"limited": {MaxConcurrency: 1},
		"free":    {},
		"fg":      {Tier: Foreground},
	}
	for _, tc := range []struct {
		name    string
		holder  Job // runs [0, 5): what blocks Y
		blocked Job // Y: priority 90, first in order from T=1
		behind  Job // Z: priority 10, admissible
	}{
		{"conflict, same type as the job behind",
			Job{Type: "repack", ID: "repo1", Key: "k"},
			Job{Type: "clone", ID: "repo1", Key: "k", Priority: 90},
			Job{Type: "clone", ID: "repo2", Key: "k", Priority: 10}},
		{"conflict, other type behind",
			Job{Type: "repack", ID: "repo1", Key: "k"},
			Job{Type: "clone", ID: "repo1", Key: "k", Priority: 90},
			Job{Type: "free", ID: "repo1", Key: "k", Priority: 10}},
		{"type cap",
			Job{Type: "limited", ID: "x", Key: "k"},
			Job{Type: "limited", ID: "y", Key: "k", Priority: 90},
			Job{Type: "free", ID: "z", Key: "k", Priority: 10}},
		{"tier cap",
			Job{Type: "fg", ID: "x", Key: "k"},
			Job{Type: "fg", ID: "y", Key: "k", Priority: 90},
			Job{Type: "free", ID: "z", Key: "k", Priority: 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{MaxConcurrency: 2, TierLimits: map[Tier]int{Foreground: 1}, Types: types}
			m := newSim(t, cfg)
			m.add("holder", 0, tc.holder, 5*scenSecond)
			m.add("filler", 0, Job{Type: "free", ID: "filler", Key: "other"}, 2*scenSecond)
			y := m.add("Y", 1*scenSecond, tc.blocked, 1*scenSecond)
			z := m.add("Z", 1*scenSecond, tc.behind, 10*scenSecond)
			m.run(1 * scenSecond)
			if y.started() || z.started() {
				t.Fatalf("Y or Z started while both slots were busy\n%v", m)
			}
			m.run(20 * scenSecond)

			if z.Start != 2*scenSecond {
				t.Errorf("Z started at %v, want 2s: the slot freed then and only Y, which was blocked, was ahead\n%v", z.Start, m)
			}
			if y.Start != 5*scenSecond {
				t.Errorf("Y started at %v, want 5s, when its blocker ended\n%v", y.Start, m)
			}
			scenCheckRecords(t, m, scenCaps{cfg})
		})
	}
}

// Every hard limit of docs/design.md holds under randomized load, and the
// queue is work-conserving: whenever a slot is free, no pending job is
// admissible. Each of 200 seeded workloads draws its own global limit,
// tiers and tier caps, job types (caps, conflict groups, default costs and
// priorities), keys (caps, weights, reservations), aging, and 20-60 jobs
// over a small set of IDs, so that conflicts and caps meet often.
//
// The scheduler checks its own invariants after every step (the sim does);
// this test checks the limits again from outside: from the scheduler's
// list of running and pending jobs after every job's end and at every
// instant something happened, and from the sim's start and end records over
// the whole run.
func TestHardLimitsWorkConservingRandomized(t *testing.T) {
	// blocked counts, over all workloads, the pending jobs found blocked
	// by each kind of limit while checking work conservation: every kind
	// must turn up, or the workloads would not be testing it.
	blocked := map[string]int{}
	for seed := uint64(1); seed <= 200; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			scenRandomRun(t, seed, blocked)
		})
	}
	t.Logf("pending jobs seen at the checks, by the first limit that blocked them: %v", blocked)
	for _, kind := range []string{"global", "tier cap", "type cap", "key cap", "conflict"} {
		if blocked[kind] < 100 {
			t.Errorf("only %d pending jobs seen blocked by %s; the workloads do not exercise it", blocked[kind], kind)
		}
	}
}

func scenRandomConfig(r *rand.Rand) (Config, []string, []string) {
	cfg := Config{
		MaxConcurrency: r.IntN(8), // 0: no global limit, one time in eight
		TierLimits:     map[Tier]int{},
		Types:          map[string]TypeConfig{},
		Keys:           map[string]KeyConfig{},
	}
	nTiers := 1 + r.IntN(3)
	for tier := 0; tier < nTiers; tier++ {
		if r.IntN(2) == 0 {
			cfg.TierLimits[Tier(tier)] = 1 + r.IntN(4)
		}
	}
	groups := []string{"", "", scenGit, "fs"}
	types := []string{""} // the default type is always there
	nTypes := 1 + r.IntN(4)
	for i := 0; i < nTypes; i++ {
		name := fmt.Sprintf("t%d", i)
		tc := TypeConfig{
			Tier:          Tier(r.IntN(nTiers)),
			ConflictGroup: groups[r.IntN(len(groups))],
			DefaultCost:   time.Duration(1+r.IntN(5)) * scenSecond,
		}
		if r.IntN(2) == 0 {
			tc.MaxConcurrency = 1 + r.IntN(4)
		}
		if r.IntN(3) == 0 {
			tc.DefaultPriority = r.IntN(101)
		}
		cfg.Types[name] = tc
		types = append(types, name)
	}
	// k0 and k1 are configured (weights, caps, reservations); "", k2 and
	// k3 get DefaultKey.
	keys := []string{"", "k0", "k1", "k2", "k3"}
	reserved := 0
	for _, k := range keys[1:3] {
		kc := KeyConfig{Weight: float64(1 + r.IntN(3))}
		if r.IntN(2) == 0 {
			kc.MaxConcurrency = 1 + r.IntN(3)
		}
		if n := r.IntN(3); r.IntN(2) == 0 && (cfg.MaxConcurrency == 0 || reserved+n <= cfg.MaxConcurrency) &&
			(kc.MaxConcurrency == 0 || n <= kc.MaxConcurrency) {
			kc.MinSlots = n
			reserved += n
		}
		cfg.Keys[k] = kc
	}
	if r.IntN(2) == 0 {
		cfg.DefaultKey.MaxConcurrency = 1 + r.IntN(3)
	}
	if r.IntN(3) == 0 {
		cfg.Aging = AgingConfig{
			GracePeriod: time.Duration(r.IntN(3)) * scenSecond,
			Interval:    scenSecond,
			Step:        5 + r.IntN(20),
		}
		if r.IntN(2) == 0 {
			cfg.Aging.MaxEffective = 60 + r.IntN(41)
		}
		if r.IntN(2) == 0 {
			cfg.Aging.UrgentThreshold = 60 + r.IntN(80)
		}
	}
	return cfg, types, keys
}

func scenRandomRun(t *testing.T, seed uint64, blocked map[string]int) {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	cfg, types, keys := scenRandomConfig(r)
	caps := scenCaps{cfg}
	m := newSim(t, cfg)
	n := 20 + r.IntN(41)
	for i := 0; i < n; i++ {
		j := Job{
			Type: types[r.IntN(len(types))],
			ID:   fmt.Sprintf("r%d", r.IntN(5)),
			Key:  keys[r.IntN(len(keys))],
		}
		if r.IntN(2) == 0 {
			j.Priority = r.IntN(102) - 1 // includes PriorityLowest
		}
		at := time.Duration(r.IntN(20000)) * time.Millisecond
		dur := time.Duration(100+r.IntN(3000)) * time.Millisecond
		m.add(fmt.Sprintf("j%d", i), at, j, dur)
	}

	// check compares the scheduler's running jobs with every hard limit
	// and, if a slot is free, every pending job with them.
	steps := 0
	check := func() {
		t.Helper()
		steps++
		load := newScenLoad(caps)
		var pending []JobInfo
		for _, ji := range m.s.Snapshot() {
			if ji.Running {
				load.add(ji.Type, ji.ID, ji.Key)
			} else {
				pending = append(pending, ji)
			}
		}
		if v := load.violation(); v != "" {
			t.Fatalf("seed %d at %v: %s\nconfig %+v\n%v", seed, m.now, v, cfg, m)
		}
		for _, p := range pending {
			b := load.blocker(p.Type, p.ID, p.Key)
			blocked[b]++
			if b == "" {
				t.Fatalf("seed %d at %v: not work-conserving: %d running, and pending job %d (type %q, ID %q, key %q, tier %d) is admissible\nconfig %+v\n%v",
					seed, m.now, load.total, p.Seq, p.Type, p.ID, p.Key, p.Tier, cfg, m)
			}
		}
	}
	m.onFinish = func(*simJob) { check() }
	for {
		next, ok := m.nextEvent()
		if !ok {
			break
		}
		m.run(next)
		check()
	}
	if steps < n {
		t.Fatalf("only %d checks for %d jobs", steps, n)
	}
	scenCheckRecords(t, m, caps)

	if max := cfg.MaxConcurrency; max > 0 && m.maxRunning > max {
		t.Fatalf("seed %d: %d running at once, MaxConcurrency %d", seed, m.maxRunning, max)
	}
}
