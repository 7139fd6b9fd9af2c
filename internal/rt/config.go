package rt

import (
	"log/slog"

	"github.com/fairsched/fairsched/internal/cluster"
	"github.com/fairsched/fairsched/internal/decide"
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
	Types       map[string]TypeConfig
	Clock       Clock // nil: the system clock
	OnEvent     func(Event)
	EventBuffer int // 0: DefaultEventBuffer
	Logger      *slog.Logger
	DeadJobs    int // 0: DefaultDeadJobs; negative: none kept
	Store       store.Store
	Handlers    map[string]*Handler
	// Errors makes the errors of the API's types.
	Errors Errors
	// Decider, if set, makes the decisions the Runtime asks in place of
	// the engine's in-process ones, from the engine, the Grantee to hand
	// grants to within Grant, and deliver for what comes later (the
	// Runtime's Deliver): decisions taken elsewhere.
	Decider func(e *engine.Engine, g decide.Grantee, deliver func(apply func(now int64))) decide.Decider
	// Cluster, if set, makes the scheduler a replica of a cluster that
	// shares a database (internal/cluster): its decisions are the
	// leader's, and it takes its turn to lead. New sets its NewEngine
	// and its Fingerprint.
	Cluster *cluster.Config
	// Signals is set by the tests only.
	Signals *Signals

	// keeper, if set, makes the Runtime the keeper of a leader's term
	// (keeper.go): its Decider is that term's Leader, and its Store the
	// term's view of the durable jobs.
	keeper *keeperConfig
}

// TypeConfig is a job type's configuration: the engine's part, and the
// policies of the run-time layer.
type TypeConfig struct {
	Engine     engine.Type
	Retry      RetryPolicy
	Disable    DisablePolicy
	Duplicates DuplicatePolicy
}
