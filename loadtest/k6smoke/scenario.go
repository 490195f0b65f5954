package k6smoke

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dop251/goja"
)

// scenarioRun is one scenario while it runs.
type scenarioRun struct {
	scenario
	start  time.Time
	next   atomic.Int64 // the next iteration's number in the scenario
	errors atomic.Int64 // iterations that threw
}

// plan is how a scenario runs at smoke scale: vus VUs, either sharing
// total iterations or running perVU each.
func (r *run) plan(sc scenario) (vus, total, perVU int) {
	switch sc.executor {
	case "shared-iterations":
		return max(1, min(sc.vus, sc.iterations, r.cfg.MaxVUs)), sc.iterations, 0
	case "per-vu-iterations":
		return sc.vus, 0, sc.iterations
	case "constant-arrival-rate":
		// rate per timeUnit for duration, unpaced: the iterations it
		// would start, cut to MaxIterations.
		n := int(math.Ceil(float64(sc.rate) * float64(sc.duration) / float64(sc.timeUnit)))
		total = max(1, min(n, r.cfg.MaxIterations))
		return max(1, min(sc.preAllocatedVUs, r.cfg.MaxVUs, total)), total, 0
	case "constant-vus":
		vus = max(1, min(sc.vus, r.cfg.MaxVUs))
		return vus, 0, max(1, r.cfg.MaxIterations/vus)
	}
	panic("unknown executor " + sc.executor) // parseScenario refuses it
}

func (r *run) runScenario(sc scenario, dataJSON string) {
	vus, total, perVU := r.plan(sc)
	sr := &scenarioRun{scenario: sc, start: time.Now()}
	if total > 0 {
		r.logf("scenario %s (%s): %d iterations shared by %d VUs", sc.name, sc.executor, total, vus)
	} else {
		r.logf("scenario %s (%s): %d VUs, %d iterations each", sc.name, sc.executor, vus, perVU)
	}
	ctx := r.scenarios
	if sc.maxDuration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(r.scenarios, sc.maxDuration)
		defer cancel()
	}

	r.mu.Lock()
	firstID := r.nextVU + 1
	r.nextVU += vus
	r.mu.Unlock()

	var wg sync.WaitGroup
	for i := range vus {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := r.newVU(firstID + i)
			if err != nil {
				r.fail("scenario %s: VU %d: init: %s", sc.name, firstID+i, errorText(err))
				return
			}
			defer v.client.CloseIdleConnections()
			stop := context.AfterFunc(ctx, func() { v.rt.Interrupt("scenario " + sc.name + " stopped") })
			defer stop()
			v.scenario, v.stage = sr, stageVU
			fn, ok := v.function(sc.exec)
			if !ok {
				r.fail("scenario %s: exec: the script exports no function %q", sc.name, sc.exec)
				return
			}
			data, err := v.parse(dataJSON)
			if err != nil {
				r.fail("scenario %s: setup's data: %s", sc.name, errorText(err))
				return
			}
			for n := 0; perVU == 0 || n < perVU; n++ {
				it := sr.next.Add(1) - 1
				if total > 0 && it >= int64(total) {
					return
				}
				if !v.iteration(fn, data, it) {
					return
				}
			}
		}()
	}
	wg.Wait()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && r.scenarios.Err() == nil {
		r.fail("scenario %s: not done within its maxDuration (%s)", sc.name, sc.maxDuration)
	}
	if n := sr.errors.Load(); n > maxIterationErrors {
		r.fail("scenario %s: %d iterations threw in all (the first %d above)", sc.name, n, maxIterationErrors)
	}
}

// maxIterationErrors is how many thrown iterations a scenario reports one
// by one.
const maxIterationErrors = 5

// iteration runs one iteration; false when the VU must stop (the run or
// the scenario was interrupted).
func (v *vu) iteration(fn goja.Callable, data goja.Value, n int64) bool {
	v.iterInTest = n
	_ = v.rt.Set("__ITER", v.iterInScenario)
	start := time.Now()
	_, err := v.call(fn, v.scenario.exec, data)
	v.iterInScenario++
	v.iterInInstance++
	if err != nil {
		var interrupted *goja.InterruptedError
		if errors.As(err, &interrupted) {
			return false
		}
		if v.scenario.errors.Add(1) <= maxIterationErrors {
			v.run.fail("scenario %s: VU %d, iteration %d: %s", v.scenario.name, v.id, n, errorText(err))
		}
	}
	v.run.metrics.add("iterations", 1, v.tags(nil))
	v.run.metrics.add("iteration_duration", ms(time.Since(start)), v.tags(nil))
	v.run.mu.Lock()
	v.run.iterations++
	v.run.mu.Unlock()
	return true
}
