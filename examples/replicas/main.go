// Command replicas starts three replicas of one service on one PostgreSQL
// database, each a process of its own whose scheduler is one replica of
// a cluster, kills one of them with SIGKILL while they work, and shows
// that the others go on (one of them leading, if the one killed led):
// the cluster's limit of 4 jobs at once holds across the processes,
// every call of a replica still alive returns, and no durable job is
// lost: each replica also enqueues durable jobs, which run on any
// replica, and at the end the database has every one of them completed,
// or queued for the next start.
//
// It needs a PostgreSQL server: set DATABASE_URL (or FAIRSCHED_PG_DSN),
// or start a throwaway one with the repository's scripts/pg.sh, which
// prints the line to paste:
//
//	bash scripts/pg.sh start /tmp/pg
//	cd examples/replicas && go run .
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fairsched/fairsched"
	"github.com/fairsched/fairsched/fairschedpg"
)

// invoice is the durable job type's arguments.
type invoice struct {
	Customer int `json:"customer"`
}

func main() {
	replica := flag.String("replica", "", "run as the replica of this name (the parent starts them)")
	run := flag.Duration("for", 6*time.Second, "how long the replicas work")
	flag.Parse()
	dsn := os.Getenv("DATABASE_URL")
	if dsn == "" {
		dsn = os.Getenv("FAIRSCHED_PG_DSN")
	}
	if dsn == "" {
		log.Fatal("set DATABASE_URL to a PostgreSQL database; for a throwaway server: bash scripts/pg.sh start /tmp/pg")
	}
	if *replica != "" {
		runReplica(*replica, dsn)
		return
	}
	parent(dsn, *run)
}

// parent starts three replicas, kills the first to lead once they have
// worked a third of the time, and stops the others at the end.
func parent(dsn string, run time.Duration) {
	names := []string{"web-1", "web-2", "web-3"}
	runKey := fmt.Sprintf("run-%d", time.Now().UnixNano()) // this run's durable jobs' key
	procs := map[string]*exec.Cmd{}
	leads := make(chan string, 16)
	var out sync.WaitGroup
	var ending sync.Map // the replicas the parent kills or stops
	for _, name := range names {
		cmd := exec.Command(os.Args[0], "-replica", name)
		cmd.Env = append(os.Environ(), "DATABASE_URL="+dsn, "REPLICAS_RUN="+runKey)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			log.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if _, err := cmd.StdinPipe(); err != nil { // closed when the parent ends: the replica ends too
			log.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			log.Fatal(err)
		}
		procs[name] = cmd
		out.Add(1)
		go func() { // relay its lines, and tell who leads
			defer out.Done()
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				line := sc.Text()
				fmt.Printf("%-6s %s\n", name, line)
				if strings.HasPrefix(line, "leads") {
					leads <- name
				}
			}
			if _, ok := ending.Load(name); !ok {
				log.Fatalf("%s ended on its own", name)
			}
		}()
	}
	leader := awaitLeader(leads)
	time.Sleep(run / 3) // let them work
	fmt.Printf("-- killing %s (the leader) with SIGKILL\n", leader)
	killed := time.Now()
	ending.Store(leader, true)
	if err := procs[leader].Process.Kill(); err != nil {
		log.Fatal(err)
	}
	_ = procs[leader].Wait()
	next := awaitLeader(leads)
	fmt.Printf("-- %s leads, %v after the kill\n", next, time.Since(killed).Round(time.Millisecond))
	time.Sleep(run * 2 / 3)
	for name, cmd := range procs {
		if name != leader {
			ending.Store(name, true)
			_ = cmd.Process.Signal(syscall.SIGTERM) // each closes its scheduler and reports
		}
	}
	for name, cmd := range procs {
		if name != leader {
			if err := cmd.Wait(); err != nil {
				log.Fatalf("%s: %v", name, err)
			}
		}
	}
	out.Wait()
	checkDurable(dsn, runKey)
}

// checkDurable reads from the database how this run's durable jobs
// ended: none may be lost (ended otherwise than completed).
func checkDurable(dsn, run string) {
	ctx := context.Background()
	st, err := fairschedpg.OpenReplica(ctx, dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	var jobs, completed, queued, attempts int
	err = st.Pool().QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state = 3), count(*) FILTER (WHERE state IN (1, 2)),
	coalesce(sum(attempt) FILTER (WHERE state = 3), 0) FROM fairsched_jobs WHERE key = $1`, run).Scan(&jobs, &completed, &queued, &attempts)
	if err != nil {
		log.Fatal(err)
	}
	lost := jobs - completed - queued
	fmt.Printf("-- durable jobs: %d enqueued, %d completed (in %d attempts), %d queued for the next start, %d lost\n",
		jobs, completed, attempts, queued, lost)
	if lost != 0 || completed == 0 {
		log.Fatal("durable jobs were lost, or none completed")
	}
}

// awaitLeader returns the next replica to say it leads; a cluster with
// no leader for a minute is a failure.
func awaitLeader(leads <-chan string) string {
	select {
	case name := <-leads:
		return name
	case <-time.After(time.Minute):
		log.Fatal("no replica leads")
		return ""
	}
}

// runReplica is one replica: 8 callers submit short jobs until SIGTERM;
// then it closes its scheduler and reports what its callers got.
func runReplica(name, dsn string) {
	ctx := context.Background()
	st, err := fairschedpg.OpenReplica(ctx, dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	var handlers fairsched.Handlers
	fairsched.AddHandler(&handlers, "invoice", func(ctx context.Context, inv invoice) error {
		select { // the work: idempotent, as every durable job's should be
		case <-time.After(time.Duration(20+rand.IntN(30)) * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	s, err := fairsched.New(fairsched.Config{
		MaxConcurrency: 4, // for the whole cluster
		Store:          st,
		Handlers:       &handlers,
		Types: map[string]fairsched.TypeConfig{ // an attempt lost with its replica runs again elsewhere
			"invoice": {Retry: fairsched.RetryPolicy{Attempts: 10, Backoff: 50 * time.Millisecond}},
		},
		Replica: &fairsched.Replica{Name: name, Capacity: 2, Lease: 2 * time.Second},
	})
	if err != nil {
		log.Fatal(err)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM)
	go func() { // the parent is gone: so is the replica
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(2)
	}()
	var calls, returned, lost, enqueued atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // durable jobs, every 40 ms: the leader runs them on any replica
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-time.After(40 * time.Millisecond):
			}
			if _, err := s.Enqueue(ctx, fairsched.Job{Type: "invoice", Key: os.Getenv("REPLICAS_RUN")}, invoice{Customer: i}); err != nil {
				log.Fatal(err)
			}
			enqueued.Add(1)
		}
	}()
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				calls.Add(1)
				err := s.RunSync(ctx, fairsched.Job{Key: fmt.Sprint("tenant-", i%3)}, func(ctx context.Context) error {
					select {
					case <-time.After(time.Duration(20+rand.IntN(30)) * time.Millisecond): // the work
						return nil
					case <-ctx.Done():
						return ctx.Err()
					}
				})
				returned.Add(1)
				if errors.Is(err, fairsched.ErrLost) {
					lost.Add(1)
				}
			}
		}()
	}
	led := false
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			close(done)
			wg.Wait()
			if err := s.Close(); err != nil {
				log.Fatal(err)
			}
			fmt.Printf("stopped: %d calls, %d returned (%d lost to fencing); %d durable jobs enqueued\n",
				calls.Load(), returned.Load(), lost.Load(), enqueued.Load())
			return
		case <-tick.C:
			r := s.Stats().Replica
			if r.Leader && !led {
				fmt.Printf("leads, in term %d\n", r.Term)
			}
			led = r.Leader
			fmt.Printf("running %d of its %d slots; busy %v, idle %v; %d calls returned\n",
				r.Running, r.Capacity, r.Busy.Round(time.Millisecond), r.Idle.Round(time.Millisecond), returned.Load())
		}
	}
}
