package k6smoke

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/dop251/goja"
)

// stage is where a VU's code runs; k6 allows some of its API in some only.
type stage int

const (
	stageInit stage = iota
	stageSetup
	stageVU
	stageTeardown
	stageSummary
)

// vu is one virtual user: its own goja runtime (a runtime is not safe for
// two goroutines) and its own connection pool, as a k6 VU has.
type vu struct {
	run     *run
	rt      *goja.Runtime
	id      int // idInTest; 0 for the VU of setup and teardown
	stage   stage
	client  *http.Client
	exports *goja.Object
	modules map[string]*goja.Object
	group   string // the current group's path, "" at the root

	scenario       *scenarioRun
	iterInScenario int64 // this VU's iterations in its scenario, so far
	iterInInstance int64
	iterInTest     int64 // the current iteration's number in its scenario, across VUs
}

// newVU builds a runtime, runs the script's init code in it and keeps its
// exports.
func (r *run) newVU(id int) (*vu, error) {
	v := &vu{run: r, rt: goja.New(), id: id, stage: stageInit, modules: map[string]*goja.Object{}}
	v.rt.SetFieldNameMapper(goja.UncapFieldNameMapper())
	v.rt.SetTimeSource(r.cfg.Now)
	v.client = &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		MaxIdleConnsPerHost: 100,
		IdleConnTimeout:     30 * time.Second,
	}}
	// Cancelling the run (its context, or exec.test.abort) interrupts
	// whatever the VU is running.
	context.AfterFunc(r.ctx, func() { v.rt.Interrupt("the run was stopped") })

	env := v.rt.NewObject()
	for k, val := range r.cfg.Env {
		_ = env.Set(k, val)
	}
	_ = v.rt.Set("__ENV", env)
	_ = v.rt.Set("__VU", id)
	_ = v.rt.Set("__ITER", 0)
	_ = v.rt.Set("console", v.console())
	_ = v.rt.Set("open", func(goja.FunctionCall) goja.Value {
		panic(v.notImplemented("open"))
	})
	module := v.rt.NewObject()
	exports := v.rt.NewObject()
	_ = module.Set("exports", exports)
	_ = v.rt.Set("module", module)
	_ = v.rt.Set("exports", exports)
	_ = v.rt.Set("require", v.require)

	if _, err := v.rt.RunProgram(r.prog); err != nil {
		return nil, err
	}
	v.exports = module.Get("exports").ToObject(v.rt)
	return v, nil
}

// require answers the bundle's imports of k6's modules.
func (v *vu) require(name string) *goja.Object {
	if m, ok := v.modules[name]; ok {
		return m
	}
	build, ok := nativeModules[name]
	if !ok {
		panic(v.notImplemented(name))
	}
	m := build(v)
	v.modules[name] = m
	return m
}

// nativeModules are the k6 modules the runner implements.
var nativeModules = map[string]func(*vu) *goja.Object{
	"k6":           (*vu).k6Module,
	"k6/http":      (*vu).httpModule,
	"k6/execution": (*vu).executionModule,
	"k6/metrics":   (*vu).metricsModule,
	"k6/encoding":  (*vu).encodingModule,
	"k6/crypto":    (*vu).cryptoModule,
}

// notImplemented is the error of a part of k6 the runner lacks: it names
// it, so that the runner grows with the scripts.
func (v *vu) notImplemented(api string) *goja.Object {
	return v.rt.NewGoError(fmt.Errorf("k6 API %s is not implemented by the smoke runner (loadtest/k6smoke): add it there", api))
}

// throw raises a JavaScript error with k6's wording.
func (v *vu) throw(format string, args ...any) {
	panic(v.rt.NewGoError(fmt.Errorf(format, args...)))
}

// allowedUnknown are the names a strict object answers undefined for,
// rather than naming them as missing API: what JavaScript itself and
// esbuild's module glue look up on any object.
var allowedUnknown = map[string]bool{
	"toJSON": true, "then": true, "__esModule": true,
	"constructor": true, "toString": true, "valueOf": true, "toLocaleString": true,
	"hasOwnProperty": true, "isPrototypeOf": true, "propertyIsEnumerable": true, "__proto__": true,
	"__defineGetter__": true, "__defineSetter__": true, "__lookupGetter__": true, "__lookupSetter__": true,
}

// strictObject returns a new object whose missing properties are an
// error naming them (what.name): its prototype is a proxy that throws on
// any name the object lacks. esbuild's import glue copies a module's own
// properties onto an object with the module's prototype, so a named
// import k6 has and the runner lacks fails too, with its name.
func (v *vu) strictObject(what string) *goja.Object {
	base := v.rt.NewObject()
	proxy := v.rt.NewProxy(base, &goja.ProxyTrapConfig{
		Get: func(target *goja.Object, property string, receiver goja.Value) goja.Value {
			if allowedUnknown[property] {
				return target.Get(property)
			}
			panic(v.notImplemented(what + "." + property))
		},
	})
	obj := v.rt.NewObject()
	_ = obj.SetPrototype(v.rt.ToValue(proxy).ToObject(v.rt))
	return obj
}

// function returns the exported function name, if the script has one.
func (v *vu) function(name string) (goja.Callable, bool) {
	val := v.exports.Get(name)
	if val == nil || goja.IsUndefined(val) {
		return nil, false
	}
	fn, ok := goja.AssertFunction(val)
	return fn, ok
}

// call calls fn, turning a Go panic in the runner's own code into an
// error rather than a crash.
func (v *vu) call(fn goja.Callable, what string, args ...goja.Value) (result goja.Value, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s: the runner panicked: %v", what, p)
		}
	}()
	return fn(goja.Undefined(), args...)
}

// stringify is JSON.stringify(val): how k6 hands setup's data to the VUs.
func (v *vu) stringify(val goja.Value) (string, error) {
	if val == nil || goja.IsUndefined(val) {
		return "", nil
	}
	stringify, _ := goja.AssertFunction(v.rt.Get("JSON").ToObject(v.rt).Get("stringify"))
	s, err := stringify(goja.Undefined(), val)
	if err != nil || goja.IsUndefined(s) { // a function, say: nothing to hand over
		return "", err
	}
	return s.String(), nil
}

// parse is JSON.parse(text) in this VU's runtime.
func (v *vu) parse(text string) (goja.Value, error) {
	if text == "" {
		return goja.Undefined(), nil
	}
	parse, _ := goja.AssertFunction(v.rt.Get("JSON").ToObject(v.rt).Get("parse"))
	return parse(goja.Undefined(), v.rt.ToValue(text))
}

// console writes to the run's log, objects as JSON, as k6 does.
func (v *vu) console() *goja.Object {
	c := v.rt.NewObject()
	for _, level := range []string{"log", "info", "warn", "error", "debug"} {
		_ = c.Set(level, func(call goja.FunctionCall) goja.Value {
			parts := make([]string, len(call.Arguments))
			for i, a := range call.Arguments {
				if o, ok := a.(*goja.Object); ok {
					if _, isFn := goja.AssertFunction(o); !isFn {
						if s, err := v.stringify(o); err == nil {
							parts[i] = s
							continue
						}
					}
				}
				parts[i] = a.String()
			}
			v.run.logf("%s [vu %d] %s", level, v.id, strings.Join(parts, " "))
			return goja.Undefined()
		})
	}
	return c
}

func jsonValid(b []byte) bool { return json.Valid(b) }
