package main

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestQuickstart(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out strings.Builder
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	want := "served alice\nserved bob\nserved alice\n4 jobs completed\n"
	if out.String() != want {
		t.Fatalf("output %q, want %q", out.String(), want)
	}
}
