package rt

import (
	"context"
	"reflect"
	"testing"
	"unsafe"

	"github.com/fairsched/fairsched/internal/engine"
)

func noop(context.Context) error { return nil }

// TestTaskRecordFirst checks the layout taskOf relies on: a task's engine
// record is its first field, so the record's address is the task's.
func TestTaskRecordFirst(t *testing.T) {
	if off := unsafe.Offsetof(task{}.rec); off != 0 {
		t.Fatalf("task.rec is at offset %d, want 0", off)
	}
	tk := newSubmitTask(context.Background(), noop)
	if taskOf(&tk.rec) != tk {
		t.Fatal("taskOf does not return the task of its record")
	}
}

// TestRecordSizeClasses keeps the records made per job within the size
// classes of the allocator they were measured in: a record that grows
// past one costs every job more than its bytes (docs/performance.md, the
// engine round), and a queued job's record is most of its memory.
func TestRecordSizeClasses(t *testing.T) {
	if n := unsafe.Sizeof(task{}); n > 144 {
		t.Errorf("a task is %d bytes, past the 144-byte size class", n)
	}
	if n := unsafe.Sizeof(jobContext{}); n > 64 {
		t.Errorf("a job context is %d bytes, past the 64-byte size class", n)
	}
}

// descOf reads a Job as the engine's Desc: its first fields must be the
// Desc's, in order, with the same types and offsets.
func TestDescMirrorsJob(t *testing.T) {
	jt, dt := reflect.TypeOf(Job{}), reflect.TypeOf(engine.Desc{})
	for i := range dt.NumField() {
		jf, df := jt.Field(i), dt.Field(i)
		if jf.Name != df.Name || jf.Type.Kind() != df.Type.Kind() || jf.Offset != df.Offset {
			t.Fatalf("Job field %d is %s %v at %d, Desc's is %s %v at %d", i, jf.Name, jf.Type, jf.Offset, df.Name, df.Type, df.Offset)
		}
	}
	job := Job{Type: "t", ID: "i", Key: "k", Priority: 7}
	if d := descOf(&job); *d != (engine.Desc{Type: "t", ID: "i", Key: "k", Priority: 7}) {
		t.Fatalf("descOf gives %+v", *d)
	}
}
