// Command durable shows durable jobs surviving kill -9: it starts itself
// as a worker process that enqueues 100 thumbnail jobs into a SQLite file
// and runs them, kills that process with SIGKILL part-way through, starts
// a second one on the same file, and shows that every job completed:
// those that were queued, and those whose attempt the kill cut short
// (found "lost" and retried).
//
//	go run ./examples/durable
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/fairsched/fairsched"
	"github.com/fairsched/fairsched/fairschedsqlite"
)

// Thumbnail is the arguments of a job: what to resize, encoded as JSON in
// the store.
type Thumbnail struct {
	Image string `json:"image"`
	Width int    `json:"width"`
}

const jobs = 100

func main() {
	worker := flag.String("worker", "", "run as the worker process on this SQLite file")
	killAfter := flag.Int("kill-after", 30, "kill the first worker after this many completed jobs")
	flag.Parse()
	if *worker != "" {
		if err := work(context.Background(), *worker, os.Stdout); err != nil {
			log.Fatal(err)
		}
		return
	}
	dir, err := os.MkdirTemp("", "fairsched-durable")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	res, err := demo(filepath.Join(dir, "jobs.db"), *killAfter, os.Stdout)
	if err != nil {
		log.Fatal(err)
	}
	if res.Completed != jobs {
		log.Fatalf("%d of %d jobs completed", res.Completed, jobs)
	}
}

// result is what the demo found in the file at the end.
type result struct {
	Completed int // jobs completed
	Lost      int // attempts the kill cut short, retried by the second worker
}

// demo runs the two workers on the file at db, killing the first after
// killAfter completions, and reports what the file holds then.
func demo(db string, killAfter int, out io.Writer) (result, error) {
	fmt.Fprintf(out, "worker 1: enqueues %d jobs and runs them, 4 at a time\n", jobs)
	done, err := runWorker(db, killAfter, out)
	if err != nil {
		return result{}, err
	}
	fmt.Fprintf(out, "worker 1: killed with SIGKILL after %d completed jobs\n", done)
	fmt.Fprintln(out, "worker 2: opens the same file")
	if _, err := runWorker(db, 0, out); err != nil {
		return result{}, err
	}
	st, err := fairschedsqlite.Open(db)
	if err != nil {
		return result{}, err
	}
	defer st.Close()
	var res result
	q := st.DB().QueryRow(`SELECT count(*) FILTER (WHERE state = 3),
	(SELECT count(*) FROM fairsched_jobs, json_each(attempts) WHERE json_each.value ->> 'err' LIKE '%lost%')
FROM fairsched_jobs`)
	if err := q.Scan(&res.Completed, &res.Lost); err != nil {
		return result{}, err
	}
	fmt.Fprintf(out, "the file: %d of %d jobs completed; %d attempts cut short by the kill were retried\n", res.Completed, jobs, res.Lost)
	return res, nil
}

// runWorker runs this program as a worker on db, passing its output on,
// and kills it with SIGKILL once it has reported killAfter completed jobs
// (0: never). It returns the completions it saw.
func runWorker(db string, killAfter int, out io.Writer) (int, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(self, "-worker", db)
	cmd.Stderr = os.Stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	done := 0
	lines := bufio.NewScanner(pipe)
	for lines.Scan() {
		line := lines.Text()
		if strings.HasPrefix(line, "done ") {
			done++
			if done == killAfter {
				cmd.Process.Signal(syscall.SIGKILL)
			}
			continue // too many to show
		}
		fmt.Fprintln(out, "  "+line)
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if killAfter > 0 && errors.As(err, &exit) && done >= killAfter {
		return done, nil // killed, as planned
	}
	if err != nil {
		return done, fmt.Errorf("worker: %w", err)
	}
	return done, nil
}

// work is a worker process: it opens the store (which queues again what
// the last process left), enqueues the jobs if the file has none, and
// runs until every job has ended.
func work(ctx context.Context, db string, out io.Writer) error {
	st, err := fairschedsqlite.Open(db)
	if err != nil {
		return err
	}
	defer st.Close()
	var handlers fairsched.Handlers
	fairsched.AddHandler(&handlers, "thumbnail", func(ctx context.Context, t Thumbnail) error {
		select { // the work: resizing takes a while
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		fmt.Fprintf(out, "done %d %s attempt %d\n", fairsched.JobID(ctx), t.Image, fairsched.Attempt(ctx))
		return nil
	})
	s, err := fairsched.New(fairsched.Config{
		MaxConcurrency: 4,
		Store:          st,
		Handlers:       &handlers,
		Types: map[string]fairsched.TypeConfig{
			"thumbnail": {Retry: fairsched.RetryPolicy{Attempts: 3, Backoff: 100 * time.Millisecond}},
		},
	})
	if err != nil {
		return err
	}
	defer s.Close()
	if n := s.Stats().Queued + s.Stats().Running; n > 0 {
		fmt.Fprintf(out, "found %d unfinished jobs in the file; the attempts that were running are lost and wait to be retried\n", n)
	} else {
		var batch []fairsched.EnqueueParams
		for i := range jobs {
			batch = append(batch, fairsched.EnqueueParams{
				Job:  fairsched.Job{Type: "thumbnail", Key: fmt.Sprint("user-", i%3)},
				Args: Thumbnail{Image: fmt.Sprintf("img-%03d.png", i), Width: 128},
			})
		}
		if _, err := s.EnqueueMany(ctx, batch); err != nil {
			return err
		}
		b, _ := json.Marshal(batch[0].Args)
		fmt.Fprintf(out, "enqueued %d jobs, committed; the first one's arguments: %s\n", jobs, b)
	}
	if err := s.WaitIdle(ctx); err != nil {
		return err
	}
	fmt.Fprintln(out, "all jobs ended")
	return s.Shutdown(ctx)
}
