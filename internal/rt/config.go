package rt

import (
	"log/slog"
	"time"

	"github.com/fairsched/fairsched/internal/engine"
	"github.com/fairsched/fairsched/internal/store"
)

// Config is what a Runtime is built from: the API's Config, validated,
// its defaults resolved and its types converted. The API validates; New
// here takes its Config as valid.
type Config struct {
	Engine engine.Config
	// Types are the job types registered at New (the API's Config.Types);
	// the default type "" is registered whether it is among them or not.
	Types       map[string]Type
	Clock       Clock // nil: the system clock
	OnEvent     func(Event)
	EventBuffer int // 0: DefaultEventBuffer
	Logger      *slog.Logger
	DeadJobs    int // 0: DefaultDeadJobs; negative: none kept
	Store       store.Store
	Handlers    map[string]*Handler
	// Errors makes the errors of the API's types.
	Errors Errors
	// Signals is set by the tests only.
	Signals *Signals
}

// Type is a job type's configuration: the engine's part, and the
// policies of the run-time layer.
type Type struct {
	Engine     engine.Type
	Retry      RetryPolicy
	Disable    DisablePolicy
	Duplicates DuplicatePolicy
}

// Clock is the time source (the API's Clock).
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// Tier numbers a tier, as the API's Tier does.
type Tier = int

// DefaultEventBuffer is how many events may wait for the hook when
// Config.EventBuffer is 0.
const DefaultEventBuffer = 4096
