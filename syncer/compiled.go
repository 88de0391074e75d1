package syncer

import (
	"encoding/json"
	"runtime"
	"strconv"
	"sync"
	"weak"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
	"github.com/canopy-dev/canopy/topology/status"
)

// compiledCollectors shares compiled StatusCollectors between the syncers
// of a process: every destination of a placement receives the same
// collectors, and a compiled one (its CEL programs, tens of KiB) is
// immutable and safe for concurrent use. An entry lives as long as some
// syncer's model holds its collector (a weak pointer), so the cache never
// outgrows what is in use.
var compiledCollectors = struct {
	mu sync.Mutex
	m  map[string]weak.Pointer[status.Collector]
}{m: map[string]weak.Pointer[status.Collector]{}}

// compileShared is status.Compile, shared between syncers: what Compile
// reads of sc (its name, generation and spec) is the key. Collectors that
// fail to compile are not kept.
func compileShared(sc *v1alpha1.StatusCollector) (*status.Collector, field.ErrorList) {
	key, err := collectorKey(sc)
	if err != nil {
		return status.Compile(sc)
	}
	cc := &compiledCollectors
	cc.mu.Lock()
	if c := cc.m[key].Value(); c != nil {
		cc.mu.Unlock()
		return c, nil
	}
	cc.mu.Unlock()
	c, errs := status.Compile(sc)
	if len(errs) > 0 {
		return c, errs
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if prev := cc.m[key].Value(); prev != nil {
		return prev, nil // compiled meanwhile by another syncer
	}
	wp := weak.Make(c)
	cc.m[key] = wp
	runtime.AddCleanup(c, func(key string) {
		cc.mu.Lock()
		defer cc.mu.Unlock()
		if cc.m[key] == wp {
			delete(cc.m, key)
		}
	}, key)
	return c, nil
}

// collectorKey is what status.Compile reads of sc.
func collectorKey(sc *v1alpha1.StatusCollector) (string, error) {
	spec, err := json.Marshal(&sc.Spec)
	if err != nil {
		return "", err
	}
	return sc.Name + "\x00" + strconv.FormatInt(sc.Generation, 10) + "\x00" + string(spec), nil
}
