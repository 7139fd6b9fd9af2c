package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// shortOptions runs the demo briefly. The live view ticks four times as
// often as by default, so the output has as many lines as a default run.
func shortOptions() options {
	return options{Duration: 2 * time.Second, Tick: 125 * time.Millisecond, Seed: 7}
}

func TestDemo(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out bytes.Buffer
	res, err := run(context.Background(), shortOptions(), &out)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	text := out.String()
	t.Logf("output:\n%s", text)

	// The output reads as README promises: a header, a live view and a
	// summary, on one screen. The short run ticks four times as often as
	// the default one, so it prints as many lines.
	for _, want := range []string{"fairsched demo", "done/submitted", "Summary", "org-big", "org-small", "MaxWait", "overlaps: 0"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(text, "FAILED") {
		t.Errorf("output reports a failed check")
	}
	if n := strings.Count(text, "\n"); n > 60 {
		t.Errorf("output has %d lines; want at most 60", n)
	}

	// Structural claims: exact.
	if res.Submitted == 0 {
		t.Fatal("no job was submitted")
	}
	if res.Ran != res.Submitted || res.RanTwice != 0 || res.Failed != 0 {
		t.Errorf("%d jobs submitted, %d ran, %d ran twice, %d failed; want each to run exactly once",
			res.Submitted, res.Ran, res.RanTwice, res.Failed)
	}
	if st := res.Stats; st.Submitted != uint64(res.Submitted) || st.Completed != uint64(res.Submitted) || st.Running != 0 || st.Queued != 0 {
		t.Errorf("Stats: submitted %d, completed %d, active %d, queued %d; want %d, %d, 0, 0",
			st.Submitted, st.Completed, st.Running, st.Queued, res.Submitted, res.Submitted)
	}
	if res.Overlaps != 0 {
		t.Errorf("%d jobs started on a repository another job held", res.Overlaps)
	}

	// Real-time claims: generous margins, the machine may be busy.
	for _, k := range res.Keys {
		if k.Jobs == 0 {
			t.Errorf("key %s ran no job", k.Key)
		}
		if k.Entitled > 0 && (k.Share < k.Entitled-0.12 || k.Share > k.Entitled+0.12) {
			t.Errorf("key %s had %.1f%% of the background slot-time; want about %.1f%%", k.Key, 100*k.Share, 100*k.Entitled)
		}
	}
	if limit := res.StarvationBound + res.LongestJob + time.Second; res.LongestLowWait > limit {
		t.Errorf("a low-priority job waited %v; want at most %v (bound %v + longest job %v + 1s slack)",
			res.LongestLowWait, limit, res.StarvationBound, res.LongestJob)
	}
}

// TestDemoInterrupted checks that cancelling the context (Ctrl-C) ends the
// run promptly, with every goroutine gone.
func TestDemoInterrupted(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	opts := shortOptions()
	opts.Duration = time.Minute
	begin := time.Now()
	_, err := run(ctx, opts, &bytes.Buffer{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("run returned %v; want context.DeadlineExceeded", err)
	}
	if d := time.Since(begin); d > 10*time.Second {
		t.Errorf("run took %v to stop after its context ended", d)
	}
}
