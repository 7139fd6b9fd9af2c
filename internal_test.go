package fairsched

import (
	"reflect"
	"testing"

	"github.com/fairsched/fairsched/internal/engine"
	"github.com/fairsched/fairsched/internal/rt"
)

// Test access to the scheduler's insides.

// verify checks the engine's invariants at the scheduler's now.
func verify(s *Scheduler) error { return s.rt.Verify() }

// seqOf returns the sequence number of a Submit job.
func seqOf(h Handle) uint64 { return h.Seq() }

// stateOf returns where a Submit job is in its life.
func stateOf(h Handle) (state engine.State) {
	t, _ := h.h.Task()
	h.h.Runtime().Locked(func(*engine.Engine, int64) { state = t.Rec().State() })
	return state
}

// TestRuntimeMirrors checks the layouts that let the API's values cross
// to the run-time layer without a copy (jobOf, handlesOf,
// enqueueParamsOf, submitParamsOf): each pair has the same fields, of the
// same kinds, at the same offsets, all the way down.
func TestRuntimeMirrors(t *testing.T) {
	for _, pair := range [][2]any{
		{Job{}, rt.Job{}}, {Handle{}, rt.Handle{}}, {EnqueueParams{}, rt.EnqueueParams{}}, {SubmitParams{}, rt.SubmitParams{}},
	} {
		api, inner := reflect.TypeOf(pair[0]), reflect.TypeOf(pair[1])
		if err := sameLayout(api, inner); err != "" {
			t.Errorf("%v and %v differ: %s", api, inner, err)
		}
	}
}

// sameLayout says how a and b are laid out differently, or "".
func sameLayout(a, b reflect.Type) string {
	if a.Size() != b.Size() || a.Kind() != b.Kind() {
		return a.String() + " is not laid out as " + b.String()
	}
	switch a.Kind() {
	case reflect.Struct:
		if a.NumField() == 1 && a.Field(0).Type == b { // a wraps b alone
			return ""
		}
		if a.NumField() != b.NumField() {
			return a.String() + " and " + b.String() + " have different fields"
		}
		for i := range a.NumField() {
			fa, fb := a.Field(i), b.Field(i)
			if fa.Name != fb.Name || fa.Offset != fb.Offset {
				return "field " + fa.Name + " against " + fb.Name
			}
			if err := sameLayout(fa.Type, fb.Type); err != "" {
				return fa.Name + ": " + err
			}
		}
	case reflect.Slice, reflect.Pointer:
		return sameLayout(a.Elem(), b.Elem())
	case reflect.Map:
		if a != b {
			return a.String() + " is not " + b.String()
		}
	}
	return ""
}
