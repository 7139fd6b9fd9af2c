package fairschedpg_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched"
	"github.com/fairsched/fairsched/fairschedhttp"
	"github.com/fairsched/fairsched/fairschedpg/internal/pgtest"
	"github.com/fairsched/fairsched/fairschedprom"
)

// The replica that leads has the cluster's figures (Stats.Cluster): every
// durable job, running on any replica or queued in the database, where
// each replica's own figures count only the attempts it runs. Its
// collector exports them as the cluster_ metrics; the others export none.
func TestReplicasClusterStats(t *testing.T) {
	_, schema := pgtest.PoolSchema(t)
	ctx := context.Background()
	// Three replicas of capacity 1: three run, the others wait for a
	// replica's free slot, under a cluster limit of 6.
	const slots, capacity, running, jobs = 6, 1, 3, 10
	release := make(chan struct{})
	got := make(chan durableRun, jobs)
	work := func(ctx context.Context, n int) error {
		<-release
		return nil
	}
	var ss []*fairsched.Scheduler
	for _, name := range []string{"a", "b", "c"} {
		ss = append(ss, durableReplica(t, schema, name, capacity, slots, got, work, nil))
	}
	defer close(release)
	batch := make([]fairsched.EnqueueParams, jobs)
	for i := range batch {
		batch[i] = fairsched.EnqueueParams{Job: fairsched.Job{Type: "mail", Key: "k"}, Args: mail{N: i}}
	}
	_, err := ss[1].EnqueueMany(ctx, batch)
	require.NoError(t, err)
	for range running {
		<-got
	}
	var leader *fairsched.Scheduler
	for _, s := range ss {
		if s.Stats().Replica.Leader {
			leader = s
		}
	}
	require.NotNil(t, leader)
	var cluster *fairsched.Stats
	waitFor(t, "the leader to hold every job", func() bool {
		cluster = leader.Stats().Cluster
		return cluster != nil && cluster.Running+cluster.Queued == jobs
	})
	assert.Equal(t, running, cluster.Running, "running on the replicas, as the leader counts them")
	assert.Equal(t, jobs-running, cluster.Queued, "queued in the database")
	assert.Equal(t, map[fairsched.WaitReason]int{fairsched.WaitReplicasFull: jobs - running}, cluster.Waiting,
		"waiting for a replica's free slot")
	for _, ty := range cluster.Types {
		if ty.Name == "mail" {
			assert.Equal(t, running, ty.Running)
			assert.Equal(t, jobs-running, ty.Queued)
		}
	}
	assert.Nil(t, cluster.Replica)
	ownRunning := 0
	for _, s := range ss {
		st := s.Stats()
		ownRunning += st.Running
		assert.Zero(t, st.Queued, "replica %s: durable jobs queue at the leader", st.Replica.Name)
		if s != leader {
			assert.Nil(t, st.Cluster, "replica %s does not lead", st.Replica.Name)
		}
	}
	assert.Equal(t, running, ownRunning, "each attempt counted by the replica it runs on")

	// Each replica's admin page says whose jobs it shows.
	for _, s := range ss {
		admin := fairschedhttp.Admin(s, fairschedhttp.AdminOptions{Authorize: func(*http.Request, fairschedhttp.AdminAccess) bool { return true }})
		rec := httptest.NewRecorder()
		admin.ServeHTTP(rec, httptest.NewRequest("GET", "/state.json", nil))
		admin.Close()
		require.Equal(t, http.StatusOK, rec.Code)
		var st fairschedhttp.State
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &st))
		name := s.Stats().Replica.Name
		assert.Contains(t, st.Scope, "Replica "+name)
		if s == leader {
			assert.Contains(t, st.Scope, "which leads the cluster")
			require.NotNil(t, st.Stats.Cluster, "the leader's state has the cluster's figures")
		} else {
			assert.Contains(t, st.Scope, "not the cluster's")
		}
	}

	for _, s := range ss {
		reg := prometheus.NewPedanticRegistry()
		require.NoError(t, fairschedprom.Register(reg, s))
		n, err := testutil.GatherAndCount(reg, "fairsched_cluster_queued_jobs")
		require.NoError(t, err)
		if s == leader {
			assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP fairsched_cluster_running_jobs Running jobs of the whole cluster, by tier and job type, wherever they run; only from the replica that leads, as are the cluster_ metrics (Stats.Cluster): sum them across replicas without counting a job twice.
# TYPE fairsched_cluster_running_jobs gauge
fairsched_cluster_running_jobs{tier="background",type="mail"} 3
`), "fairsched_cluster_running_jobs"))
		} else {
			assert.Zero(t, n, "a replica that does not lead exports no cluster_ metric")
		}
	}
}
