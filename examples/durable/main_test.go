package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestMain lets the test binary stand in for the program: the demo starts
// its workers with os.Executable, which in a test is this binary.
func TestMain(m *testing.M) {
	for i, arg := range os.Args {
		if arg == "-worker" && i+1 < len(os.Args) {
			if err := work(context.Background(), os.Args[i+1], os.Stdout); err != nil {
				os.Stderr.WriteString(err.Error())
				os.Exit(1)
			}
			os.Exit(0)
		}
	}
	os.Exit(m.Run())
}

// The demo loses nothing to the kill: every job completed, and the
// attempts the kill cut short were retried.
func TestKillAndRestart(t *testing.T) {
	var out bytes.Buffer
	res, err := demo(filepath.Join(t.TempDir(), "jobs.db"), 30, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if res.Completed != jobs {
		t.Errorf("%d of %d jobs completed", res.Completed, jobs)
	}
	if res.Lost == 0 {
		t.Errorf("no attempt was cut short: the kill came with no job running")
	}
}
