package fairsched

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// goroutine the scheduler starts must have an owner that waits for it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
