package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestGitMirror(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out bytes.Buffer
	res, err := run(context.Background(), options{Duration: 2 * time.Second, Burst: 16, Seed: 3}, &out)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	t.Logf("output:\n%s", out.String())

	// Structural claims: exact.
	if res.Ran != res.Submitted || res.Failed != 0 {
		t.Errorf("%d jobs submitted, %d ran, %d failed; want all to run and succeed", res.Submitted, res.Ran, res.Failed)
	}
	if len(res.Overlaps) != 0 {
		t.Errorf("jobs overlapped on one repository: %v", res.Overlaps)
	}
	if res.Waited == 0 {
		t.Error("no job ever found its repository busy: the run did not exercise the conflict group")
	}
	if strings.Contains(out.String(), "FAILED") {
		t.Error("output reports a failed check")
	}

	byKey := map[string]waits{}
	for _, c := range res.Clients {
		byKey[c.Key] = c
		if c.Rejected != 0 {
			t.Errorf("client %q had %d requests refused; no client passes MaxPending in this run", c.Key, c.Rejected)
		}
	}
	burst := byKey[ciRunner]
	if burst.Jobs != 2*16 {
		t.Errorf("%s ran %d clones; want %d", ciRunner, burst.Jobs, 2*16)
	}
	if byKey[""].Jobs == 0 {
		t.Error("no background job ran")
	}

	// Real-time claims: generous margins. A light client's clone waits at
	// most for the job holding its repository, then for one slot to free
	// (fair share puts it ahead of the burst): two jobs' time, plus slack.
	var light []time.Duration
	for _, key := range []string{alice, bob} {
		c := byKey[key]
		if c.Jobs == 0 {
			t.Errorf("client %s ran no clone", key)
			continue
		}
		light = append(light, c.P50)
		if limit := 2*res.LongestJob + 500*time.Millisecond; c.Max > limit {
			t.Errorf("client %s waited up to %v; want at most %v (two of the longest job, %v, plus slack)",
				key, c.Max, limit, res.LongestJob)
		}
	}
	for i, p50 := range light {
		if p50 > burst.P50 {
			t.Errorf("light client %d's median wait %v is above the bursting client's %v", i, p50, burst.P50)
		}
	}
}

// TestGitMirrorQueueFull checks that a burst past a client's MaxPending
// is refused at once with ErrQueueFull, and that the rest still run.
func TestGitMirrorQueueFull(t *testing.T) {
	defer goleak.VerifyNone(t)
	burst := maxPending + 20
	res, err := run(context.Background(), options{Duration: time.Second, Burst: burst, Seed: 3}, &bytes.Buffer{})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	for _, c := range res.Clients {
		if c.Key != ciRunner {
			continue
		}
		// Each burst queues at most maxPending clones (a few may start at
		// once and free their place): at least 2*(burst-maxPending-slots)
		// are refused, and every accepted one runs.
		if least := 2 * (burst - maxPending - 6); c.Rejected < least {
			t.Errorf("%d of %s's clones were refused; want at least %d", c.Rejected, ciRunner, least)
		}
		if c.Jobs+c.Rejected != 2*burst {
			t.Errorf("%s: %d clones ran and %d were refused; want %d in all", ciRunner, c.Jobs, c.Rejected, 2*burst)
		}
	}
	if res.Ran != res.Submitted || len(res.Overlaps) != 0 {
		t.Errorf("%d submitted, %d ran, overlaps %v", res.Submitted, res.Ran, res.Overlaps)
	}
}

// TestGitMirrorInterrupted checks that cancelling the context ends the run
// promptly, with every goroutine gone.
func TestGitMirrorInterrupted(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	begin := time.Now()
	if _, err := run(ctx, options{Duration: time.Minute, Burst: 16, Seed: 3}, &bytes.Buffer{}); err == nil {
		t.Error("run returned no error after its context ended")
	}
	if d := time.Since(begin); d > 10*time.Second {
		t.Errorf("run took %v to stop after its context ended", d)
	}
}
