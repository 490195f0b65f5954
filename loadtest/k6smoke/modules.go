package k6smoke

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"hash"
	"maps"
	"strings"
	"time"

	"github.com/dop251/goja"
)

// module builds a k6 module object: its members, itself as its default
// export, and missing members an error that names them.
func (v *vu) module(name string, members map[string]any) *goja.Object {
	m := v.strictObject(name)
	for k, val := range members {
		_ = m.Set(k, val)
	}
	_ = m.DefineDataProperty("__esModule", v.rt.ToValue(true), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_FALSE)
	_ = m.Set("default", m)
	return m
}

// getter defines a read-only property computed on each read.
func (v *vu) getter(obj *goja.Object, name string, get func() any) {
	_ = obj.DefineAccessorProperty(name, v.rt.ToValue(func(goja.FunctionCall) goja.Value { return v.rt.ToValue(get()) }),
		nil, goja.FLAG_FALSE, goja.FLAG_TRUE)
}

// ---- k6 ----

func (v *vu) k6Module() *goja.Object {
	return v.module("k6", map[string]any{
		"check": v.check,
		"sleep": func(secs float64) {
			d := time.Duration(secs * v.run.cfg.SleepScale * float64(time.Second))
			if d <= 0 {
				return
			}
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
			case <-v.run.ctx.Done():
			}
		},
		"fail": func(msg string) { panic(v.rt.NewGoError(errors.New(msg))) },
		"group": func(name string, fn goja.Callable) goja.Value {
			if v.stage == stageInit {
				v.throw("k6.group: using group in the init context is not supported")
			}
			if strings.Contains(name, "::") {
				v.throw("k6.group: group and check names may not contain '::'")
			}
			outer := v.group
			v.group = outer + "::" + name
			defer func() { v.group = outer }()
			start := time.Now()
			res, err := fn(goja.Undefined())
			v.run.metrics.add("group_duration", ms(time.Since(start)), v.tags(nil))
			if err != nil {
				panic(err)
			}
			return res
		},
	})
}

// check is k6's check(val, sets, tags): each named condition (a function
// of val, or a value) is a sample of the checks rate; it returns whether
// all held. A condition that throws throws.
func (v *vu) check(val goja.Value, sets *goja.Object, extra goja.Value) bool {
	if v.stage == stageInit {
		v.throw("k6.check: using check in the init context is not supported")
	}
	if sets == nil {
		v.throw("k6.check: the second argument must be an object of checks")
	}
	tags := v.userTags(extra, "k6.check")
	all := true
	for _, name := range sets.Keys() {
		c := sets.Get(name)
		ok := c.ToBoolean()
		if fn, isFn := goja.AssertFunction(c); isFn {
			res, err := fn(goja.Undefined(), val)
			if err != nil {
				panic(err)
			}
			ok = res.ToBoolean()
		}
		t := v.tags(tags)
		t["check"] = name
		v.run.metrics.add("checks", bool01(ok), t)
		v.run.mu.Lock()
		cc, seen := v.run.checks[name]
		if !seen {
			cc = &checkCount{}
			v.run.checks[name] = cc
			v.run.checkOrder = append(v.run.checkOrder, name)
		}
		if ok {
			cc.passes++
		} else {
			cc.fails++
		}
		v.run.mu.Unlock()
		all = all && ok
	}
	return all
}

// tags are the system tags of a sample here (scenario, group) with extra.
func (v *vu) tags(extra map[string]string) map[string]string {
	t := map[string]string{"group": v.group}
	switch {
	case v.scenario != nil:
		t["scenario"] = v.scenario.name
	case v.stage == stageSetup:
		t["scenario"] = "setup"
	case v.stage == stageTeardown:
		t["scenario"] = "teardown"
	}
	maps.Copy(t, extra)
	return t
}

// userTags reads a tags object of the script.
func (v *vu) userTags(val goja.Value, what string) map[string]string {
	if val == nil || goja.IsUndefined(val) || goja.IsNull(val) {
		return nil
	}
	obj, ok := val.(*goja.Object)
	if !ok {
		v.throw("%s: tags must be an object", what)
	}
	out := map[string]string{}
	for _, k := range obj.Keys() {
		out[k] = obj.Get(k).String()
	}
	return out
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// ---- k6/execution ----

func (v *vu) executionModule() *goja.Object {
	inVU := func(what string) {
		if v.stage != stageVU {
			v.throw("k6/execution.%s: getting scenario information outside of the VU code is not supported", what)
		}
	}
	scenario := v.strictObject("k6/execution.scenario")
	v.getter(scenario, "name", func() any { inVU("scenario.name"); return v.scenario.name })
	v.getter(scenario, "executor", func() any { inVU("scenario.executor"); return v.scenario.executor })
	v.getter(scenario, "startTime", func() any { inVU("scenario.startTime"); return v.scenario.start.UnixMilli() })
	v.getter(scenario, "iterationInTest", func() any { inVU("scenario.iterationInTest"); return v.iterInTest })
	v.getter(scenario, "iterationInInstance", func() any { inVU("scenario.iterationInInstance"); return v.iterInTest })

	vuObj := v.strictObject("k6/execution.vu")
	v.getter(vuObj, "idInTest", func() any { return v.id })
	v.getter(vuObj, "idInInstance", func() any { return v.id })
	v.getter(vuObj, "iterationInScenario", func() any { inVU("vu.iterationInScenario"); return v.iterInScenario })
	v.getter(vuObj, "iterationInInstance", func() any { inVU("vu.iterationInInstance"); return v.iterInInstance })

	test := v.strictObject("k6/execution.test")
	_ = test.Set("fail", func(msg string) {
		// k6 1.0: the test is marked failed and goes on.
		v.run.fail("exec.test.fail: %s", msg)
	})
	_ = test.Set("abort", func(msg string) {
		v.run.fail("exec.test.abort: %s", msg)
		v.run.abort()
		v.throw("test aborted: %s", msg)
	})

	return v.module("k6/execution", map[string]any{"scenario": scenario, "vu": vuObj, "test": test})
}

// ---- k6/metrics ----

func (v *vu) metricsModule() *goja.Object {
	kind := func(typ, class string) func(goja.ConstructorCall) *goja.Object {
		return func(call goja.ConstructorCall) *goja.Object {
			if v.stage != stageInit {
				v.throw("k6/metrics.%s: metrics must be declared in the init context", class)
			}
			name := call.Argument(0).String()
			if err := v.run.metrics.declare(name, typ, call.Argument(1).ToBoolean()); err != nil {
				v.throw("k6/metrics.%s: %v", class, err)
			}
			m := v.strictObject("k6/metrics." + class)
			_ = m.Set("name", name)
			_ = m.Set("add", func(val goja.Value, extra goja.Value) bool {
				if v.stage == stageInit {
					v.throw("k6/metrics.%s.add: using metrics in the init context is not supported", class)
				}
				var x float64
				switch e := val.Export().(type) {
				case bool:
					x = bool01(e)
				case int64, float64:
					x = val.ToFloat()
				default:
					v.throw("k6/metrics.%s.add: %s is an invalid value for metric %q, a number or a boolean value is expected", class, val, name)
				}
				if typ == rate {
					x = bool01(x != 0)
				}
				v.run.metrics.add(name, x, v.tags(v.userTags(extra, class+".add")))
				return true
			})
			return m
		}
	}
	return v.module("k6/metrics", map[string]any{
		"Counter": kind(counter, "Counter"), "Gauge": kind(gauge, "Gauge"),
		"Rate": kind(rate, "Rate"), "Trend": kind(trend, "Trend"),
	})
}

// ---- k6/encoding ----

func (v *vu) b64(encoding, fn string) *base64.Encoding {
	switch encoding {
	case "", "std":
		return base64.StdEncoding
	case "rawstd":
		return base64.RawStdEncoding
	case "url":
		return base64.URLEncoding
	case "rawurl":
		return base64.RawURLEncoding
	}
	panic(v.notImplemented("k6/encoding." + fn + " encoding " + encoding))
}

func (v *vu) encodingModule() *goja.Object {
	return v.module("k6/encoding", map[string]any{
		"b64encode": func(input goja.Value, encoding string) string {
			return v.b64(encoding, "b64encode").EncodeToString(v.bytesOf(input, "k6/encoding.b64encode"))
		},
		"b64decode": func(input string, encoding string, format string) goja.Value {
			b, err := v.b64(encoding, "b64decode").DecodeString(input)
			if err != nil {
				v.throw("k6/encoding.b64decode: %v", err)
			}
			switch format {
			case "s":
				return v.rt.ToValue(string(b))
			case "":
				return v.rt.ToValue(v.rt.NewArrayBuffer(b))
			}
			panic(v.notImplemented("k6/encoding.b64decode format " + format))
		},
	})
}

// bytesOf reads a string (as UTF-8) or an ArrayBuffer.
func (v *vu) bytesOf(val goja.Value, what string) []byte {
	switch e := val.Export().(type) {
	case string:
		return []byte(e)
	case goja.ArrayBuffer:
		return e.Bytes()
	case []byte:
		return e
	}
	v.throw("%s: want a string or an ArrayBuffer, got %s", what, val)
	return nil
}

// ---- k6/crypto ----

var hashes = map[string]func() hash.Hash{
	"md5": md5.New, "sha1": sha1.New, "sha256": sha256.New, "sha384": sha512.New384,
	"sha512": sha512.New, "sha512_224": sha512.New512_224, "sha512_256": sha512.New512_256,
}

// digest writes sum in k6's outputEncoding.
func (v *vu) digest(sum []byte, encoding, fn string) goja.Value {
	switch encoding {
	case "hex":
		return v.rt.ToValue(hex.EncodeToString(sum))
	case "base64":
		return v.rt.ToValue(base64.StdEncoding.EncodeToString(sum))
	case "base64url":
		return v.rt.ToValue(base64.URLEncoding.EncodeToString(sum))
	case "base64rawurl":
		return v.rt.ToValue(base64.RawURLEncoding.EncodeToString(sum))
	case "binary":
		return v.rt.ToValue(v.rt.NewArrayBuffer(sum))
	}
	panic(v.notImplemented("k6/crypto." + fn + " output encoding " + encoding))
}

func (v *vu) cryptoModule() *goja.Object {
	members := map[string]any{
		"hmac": func(algorithm string, secret, data goja.Value, encoding string) goja.Value {
			h, ok := hashes[algorithm]
			if !ok {
				panic(v.notImplemented("k6/crypto.hmac algorithm " + algorithm))
			}
			mac := hmac.New(h, v.bytesOf(secret, "k6/crypto.hmac secret"))
			mac.Write(v.bytesOf(data, "k6/crypto.hmac data"))
			return v.digest(mac.Sum(nil), encoding, "hmac")
		},
	}
	for name, h := range hashes {
		members[name] = func(input goja.Value, encoding string) goja.Value {
			d := h()
			d.Write(v.bytesOf(input, "k6/crypto."+name))
			return v.digest(d.Sum(nil), encoding, name)
		}
	}
	return v.module("k6/crypto", members)
}
