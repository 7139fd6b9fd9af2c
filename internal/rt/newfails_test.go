package rt

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched/internal/engine"
)

// A New that fails leaves nothing running behind it: its event hook's
// goroutine ends with it (TestMain's leak check).
func TestNewFailsCleanly(t *testing.T) {
	_, err := New(Config{
		Engine:  engine.Config{MaxConcurrency: 1, CostAlpha: 0.3, DefaultCost: 1, IdleTTL: int64(time.Minute / time.Microsecond)},
		Errors:  testErrors,
		OnEvent: func(Event) {},
		Types:   map[string]TypeConfig{"x": {Engine: engine.Type{Needs: []engine.Need{{Resource: "none such", Units: 1}}}}},
	})
	require.Error(t, err)
}
