package rt

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched/internal/engine"
)

// fpInput is what Fingerprint reads, as one value to walk.
type fpInput struct {
	Engine engine.Config
	Types  map[string]TypeConfig
	Lease  time.Duration
}

func (in fpInput) fingerprint() string { return Fingerprint(in.Engine, in.Types, in.Lease) }

// fpBase returns a configuration with every map and list holding
// entries, so that the walk reaches every field of every struct; reverse
// builds its maps in the opposite order.
func fpBase(reverse bool) fpInput {
	order := func(keys ...string) []string {
		if reverse {
			slices.Reverse(keys)
		}
		return keys
	}
	rate := engine.Rate{Period: 1000, Burst: 2}
	typ := func(tier int) engine.Type {
		return engine.Type{Tier: tier, MaxConcurrency: 3, ConflictGroup: "repo", DefaultCost: 2, DefaultPriority: 60,
			StartTimeout: 5e6, Rate: rate, Needs: []engine.Need{{Resource: "gpu", Units: 1}, {Resource: "mem", Units: 4}}}
	}
	in := fpInput{
		Engine: engine.Config{
			MaxConcurrency: 16, MaxQueue: 1000,
			TierLimits:  map[int]int{},
			DefaultType: typ(0),
			Keys:        map[string]engine.Key{},
			DefaultKey:  engine.Key{Weight: 1, MinSlots: 1, MaxConcurrency: 4, MaxPending: 10, Rate: rate},
			Aging:       engine.Aging{GracePeriod: 1e6, Interval: 2e6, Step: 1, MaxEffective: 90, UrgentThreshold: 80},
			CostAlpha:   0.3, DefaultCost: 1, IdleTTL: 6e8,
			Resources:         map[string]int{},
			BackfillLookahead: 8,
		},
		Types: map[string]TypeConfig{},
		Lease: 5 * time.Second,
	}
	tiers := []int{0, 1, 2}
	if reverse {
		slices.Reverse(tiers)
	}
	for _, t := range tiers {
		in.Engine.TierLimits[t] = 10 - t
	}
	for _, k := range order("alice", "bob", "carol") {
		in.Engine.Keys[k] = engine.Key{Weight: float64(len(k)), MinSlots: len(k) % 3, MaxConcurrency: len(k), MaxPending: 5, Rate: rate}
	}
	for _, r := range order("gpu", "mem") {
		in.Engine.Resources[r] = len(r) * 2
	}
	for _, name := range order("", "email", "report") {
		in.Types[name] = TypeConfig{Engine: typ(len(name) % 3),
			Retry:      RetryPolicy{Attempts: 3, Backoff: time.Second, MaxBackoff: time.Minute, Jitter: 0.1},
			Disable:    DisablePolicy{Failures: 5, Window: time.Minute, For: time.Hour},
			Duplicates: JoinQueued}
	}
	return in
}

// Equal configurations have one fingerprint, whatever order their maps
// were built in; it is 32 hex digits.
func TestFingerprintEqualConfigs(t *testing.T) {
	a, b := fpBase(false), fpBase(true)
	require.Equal(t, a, b)
	fa := a.fingerprint()
	assert.Len(t, fa, 32)
	assert.Equal(t, strings.ToLower(fa), fa)
	for range 20 { // maps iterate in a new order each time
		assert.Equal(t, fa, b.fingerprint())
	}
	// A field at zero is not written: nil and empty maps are one.
	assert.Equal(t, Fingerprint(engine.Config{}, nil, 0), Fingerprint(engine.Config{TierLimits: map[int]int{}}, map[string]TypeConfig{}, 0))
}

// Changing any one field, anywhere, or adding, removing or renaming an
// entry of a map or a list, changes the fingerprint: every change gives
// a fingerprint of its own. The fields are those of the structs, found
// by reflection: a field added to engine.Config, engine.Type or a
// TypeConfig and not encoded by Fingerprint fails here.
func TestFingerprintEveryField(t *testing.T) {
	base := fpBase(false)
	muts := fpMutations(t, reflect.ValueOf(base), "")
	require.Greater(t, len(muts), 100)
	seen := map[string]string{base.fingerprint(): "(the base)"}
	leaves := 0
	for _, m := range muts {
		in := m.v.Interface().(fpInput)
		fp := in.fingerprint()
		if other, dup := seen[fp]; dup {
			t.Errorf("%s: the fingerprint of %s", m.path, other)
			continue
		}
		seen[fp] = m.path
		if !strings.HasSuffix(m.path, "]") {
			leaves++
		}
	}
	assert.Equal(t, fpBase(false), base, "the base is left as it was")
	t.Logf("%d changes, %d of them to fields", len(muts), leaves)
}

// fpMutation is a changed copy of the whole value walked, and the path
// of what changed.
type fpMutation struct {
	path string
	v    reflect.Value
}

// fpMutations returns every change of v by one field or one entry, each
// a copy of v (v itself unchanged). It fails the test for a kind it does
// not know how to change, an unexported field (which it cannot reach),
// and an empty map or list (whose elements' fields it would not reach).
func fpMutations(t *testing.T, v reflect.Value, path string) []fpMutation {
	t.Helper()
	var out []fpMutation
	leaf := func(nv reflect.Value) []fpMutation { return []fpMutation{{path, nv}} }
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		nv := reflect.New(v.Type()).Elem()
		nv.SetInt(v.Int() + 1)
		return leaf(nv)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		nv := reflect.New(v.Type()).Elem()
		nv.SetUint(v.Uint() + 1)
		return leaf(nv)
	case reflect.Float32, reflect.Float64:
		nv := reflect.New(v.Type()).Elem()
		nv.SetFloat(v.Float() + 0.5)
		return leaf(nv)
	case reflect.String:
		nv := reflect.New(v.Type()).Elem()
		nv.SetString(v.String() + "x")
		return leaf(nv)
	case reflect.Bool:
		nv := reflect.New(v.Type()).Elem()
		nv.SetBool(!v.Bool())
		return leaf(nv)
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				t.Errorf("%s.%s: unexported: the test cannot change it", path, f.Name)
				continue
			}
			for _, m := range fpMutations(t, v.Field(i), path+"."+f.Name) {
				c := reflect.New(v.Type()).Elem()
				c.Set(v)
				c.Field(i).Set(m.v)
				out = append(out, fpMutation{m.path, c})
			}
		}
	case reflect.Map:
		if v.Len() == 0 {
			t.Errorf("%s: an empty map: its values' fields are not reached", path)
		}
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
		with := func(change func(m reflect.Value)) reflect.Value {
			m := reflect.MakeMap(v.Type())
			for _, k := range keys {
				m.SetMapIndex(k, v.MapIndex(k))
			}
			change(m)
			return m
		}
		newKey := reflect.New(v.Type().Key()).Elem()
		switch newKey.Kind() {
		case reflect.String:
			newKey.SetString("new")
		case reflect.Int:
			newKey.SetInt(100)
		default:
			t.Fatalf("%s: a map's key of kind %v", path, newKey.Kind())
		}
		zero := reflect.New(v.Type().Elem()).Elem()
		out = append(out, fpMutation{path + "[+]", with(func(m reflect.Value) { m.SetMapIndex(newKey, zero) })})
		for _, k := range keys {
			kp := fmt.Sprintf("%s[%v]", path, k)
			out = append(out,
				fpMutation{kp + "[-]", with(func(m reflect.Value) { m.SetMapIndex(k, reflect.Value{}) })},
				fpMutation{kp + "[renamed]", with(func(m reflect.Value) {
					m.SetMapIndex(k, reflect.Value{})
					m.SetMapIndex(newKey, v.MapIndex(k))
				})})
			for _, mm := range fpMutations(t, v.MapIndex(k), kp) {
				out = append(out, fpMutation{mm.path, with(func(m reflect.Value) { m.SetMapIndex(k, mm.v) })})
			}
		}
	case reflect.Slice:
		if v.Len() == 0 {
			t.Errorf("%s: an empty list: its elements' fields are not reached", path)
		}
		with := func(n int, change func(s reflect.Value)) reflect.Value {
			s := reflect.MakeSlice(v.Type(), n, n)
			reflect.Copy(s, v)
			change(s)
			return s
		}
		out = append(out,
			fpMutation{path + "[+]", with(v.Len()+1, func(reflect.Value) {})},
			fpMutation{path + "[-]", with(v.Len()-1, func(reflect.Value) {})})
		if v.Len() > 1 {
			out = append(out, fpMutation{path + "[swapped]", with(v.Len(), func(s reflect.Value) { reflect.Swapper(s.Interface())(0, 1) })})
		}
		for i := range v.Len() {
			for _, m := range fpMutations(t, v.Index(i), fmt.Sprintf("%s[%d]", path, i)) {
				out = append(out, fpMutation{m.path, with(v.Len(), func(s reflect.Value) { s.Index(i).Set(m.v) })})
			}
		}
	default:
		t.Fatalf("%s: a field of kind %v: teach Fingerprint and this test to change it", path, v.Kind())
	}
	return out
}
