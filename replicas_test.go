package fairsched

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched/fairschedsqlite"
)

// A replica's configuration is checked at New, every problem named: the
// replicas' shared store is PostgreSQL's (fairschedpg), whose tests run
// replicas together; a one-process store is refused.
func TestReplicaValidation(t *testing.T) {
	st, err := fairschedsqlite.Open(filepath.Join(t.TempDir(), "jobs.db"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	for name, tc := range map[string]struct {
		cfg  Config
		want []string
	}{
		"no name, no capacity": {Config{Replica: &Replica{}}, []string{"Replica: Name is empty", "Replica: Capacity is 0",
			"Config.Store is not one that replicas share"}},
		"a store of one process": {Config{Store: st, Replica: &Replica{Name: "a", Capacity: 1}},
			[]string{"open it with fairschedpg.OpenReplica"}},
		"negative lease":     {Config{Replica: &Replica{Name: "a", Capacity: 1, Lease: -time.Second}}, []string{"Lease is -1s"}},
		"grace of half":      {Config{Replica: &Replica{Name: "a", Capacity: 1, Lease: 4 * time.Second, Grace: 2 * time.Second}}, []string{"Grace is 2s", "less than Lease/2 (2s)"}},
		"grace past default": {Config{Replica: &Replica{Name: "a", Capacity: 1, Grace: 3 * time.Second}}, []string{"Grace is 3s"}},
		"negative overflow":  {Config{Replica: &Replica{Name: "a", Capacity: 1, OverflowEvery: -1}}, []string{"OverflowAfter and OverflowEvery"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := New(tc.cfg)
			for _, want := range tc.want {
				require.ErrorContains(t, err, want)
			}
		})
	}
}
