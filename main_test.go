package fairsched

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// goroutine the scheduler starts must have an owner that waits for it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// longRun is set by FAIRSCHED_LONG=1: the randomized tests run their long
// counts (CI does), where the everyday run checks fewer workloads of the
// same kinds.
var longRun = os.Getenv("FAIRSCHED_LONG") != ""
