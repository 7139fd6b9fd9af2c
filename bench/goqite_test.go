package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"maragu.dev/goqite"
	"maragu.dev/goqite/jobs"
)

// goqiteSchema is goqite's schema_sqlite.sql, read from the module's
// directory in the module cache, as its README reads it: not copied here.
var goqiteSchema = sync.OnceValues(func() (string, error) {
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "maragu.dev/goqite").Output()
	if err != nil {
		return "", fmt.Errorf("locating goqite's schema: go list: %w", err)
	}
	schema, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(dir)), "schema_sqlite.sql"))
	return string(schema), err
})

// goqiteLog counts the errors the jobs Runner logs (it logs them at Info).
type goqiteLog struct {
	errors atomic.Int64
	first  atomic.Value // string
}

func (l *goqiteLog) Info(msg string, args ...any) {
	if strings.HasPrefix(msg, "Error") {
		if l.errors.Add(1) == 1 {
			l.first.Store(strings.TrimSuffix(fmt.Sprintln(append([]any{msg}, args...)...), "\n"))
		}
	}
}

// setupGoqite: a goqite Queue and its jobs Runner, Limit 100 and
// PollInterval 1ms, on one connection (as goqite's README sets it up).
// goqite has no insert-many: a bulk batch is 1,000 jobs.CreateTx in one
// transaction.
func setupGoqite(ctx context.Context, path string, sm syncMode, ran func()) (*system, error) {
	schema, err := goqiteSchema()
	if err != nil {
		return nil, err
	}
	db, err := openDB(path, sm)
	if err != nil {
		return nil, err
	}
	if _, err := db.ExecContext(ctx, schema); err != nil {
		db.Close()
		return nil, err
	}
	q := goqite.New(goqite.NewOpts{DB: db, Name: "bench"})
	log := &goqiteLog{}
	r := jobs.NewRunner(jobs.NewRunnerOpts{Limit: workers, PollInterval: time.Millisecond, Queue: q, Log: log})
	r.Register("noop", func(_ context.Context, m []byte) error {
		var a noopArgs
		if err := json.Unmarshal(m, &a); err != nil {
			return err
		}
		ran()
		return nil
	})
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stopped := make(chan struct{})
	go func() {
		r.Start(rctx)
		close(stopped)
	}()
	body := func(i int) []byte {
		b, _ := json.Marshal(noopArgs{N: i})
		return b
	}
	return &system{
		enqueueMany: func(ctx context.Context, first, n int) error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			for k := range n {
				if _, err := jobs.CreateTx(ctx, tx, q, "noop", goqite.Message{Body: body(first + k)}); err != nil {
					return err
				}
			}
			return tx.Commit()
		},
		enqueue: func(ctx context.Context, i int) error {
			_, err := jobs.Create(ctx, q, "noop", goqite.Message{Body: body(i)})
			return err
		},
		unfinished: func(ctx context.Context) (int, error) {
			return count(ctx, db, `SELECT count(*) FROM goqite`)
		},
		verify: func(context.Context) error {
			return nil // unfinished saw the table empty: every job was deleted
		},
		notes: func() string {
			if n := log.errors.Load(); n > 0 {
				return fmt.Sprintf("goqite's runner logged %d errors (a failed delete: the job runs again after its timeout), the first: %v", n, log.first.Load())
			}
			return ""
		},
		stop: func() error {
			cancel()
			<-stopped
			return db.Close()
		},
	}, nil
}
