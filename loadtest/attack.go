package loadtest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// shot is one request of a load phase.
type shot struct {
	method string
	path   string
	body   []byte
	header http.Header
	// notification makes this a gateway's callback, signed at the moment
	// it is fired (a signature may carry a timestamp); event is its event id.
	notification bool
	event        string
	// tag groups answers for the scenario's own checks (an event, an order).
	tag string
	// allowed are the statuses this request may get; anything else is
	// counted as unexpected.
	allowed []int
}

// answer is what came back for one shot.
type answer struct {
	tag    string
	status int
	result string // the callback's result, else the problem's code, else "created"/"ok"
}

// fire sends the shots produced by next (nil when there are no more) with
// at most workers requests in flight, at the pacer's rate (vegeta's
// constant pacer; Freq 0 means as fast as the workers go), for at most
// duration (0: until next runs out). Every answer is checked against its
// shot and added to the phase's stats.
func (r *runner) fire(ctx context.Context, phase string, workers int, pacer vegeta.Pacer, duration time.Duration,
	next func(i int) *shot) []answer {
	var mu sync.Mutex
	shots := map[int]*shot{}
	i := 0
	targeter := func(t *vegeta.Target) error {
		mu.Lock()
		s := next(i)
		if s == nil {
			mu.Unlock()
			return vegeta.ErrNoTargets
		}
		id := i
		shots[id] = s
		i++
		mu.Unlock()
		t.Method, t.Body = s.method, s.body
		t.URL = r.c.base + s.path + "?shot=" + strconv.Itoa(id)
		t.Header = s.header.Clone() // vegeta adds headers to the request's map
		if s.notification {
			var err error
			if t.Header, t.Body, err = r.c.send.Sign(s.body, s.event, time.Now()); err != nil {
				return err
			}
		} else if t.Header == nil {
			t.Header = http.Header{"Content-Type": {"application/json"}}
		}
		return nil
	}
	attacker := vegeta.NewAttacker(
		vegeta.Workers(uint64(workers)), vegeta.MaxWorkers(uint64(workers)),
		vegeta.Connections(workers), vegeta.MaxConnections(workers),
		vegeta.KeepAlive(true), vegeta.Timeout(30*time.Second), vegeta.MaxBody(64<<10),
	)
	go func() {
		<-ctx.Done()
		attacker.Stop()
	}()
	var answers []answer
	for res := range attacker.Attack(vegeta.Targeter(targeter), pacer, duration, phase) {
		if res.URL == "" {
			continue // the targeter ran out: vegeta reports that as a result of its own
		}
		u, _ := url.Parse(res.URL)
		id, _ := strconv.Atoi(u.Query().Get("shot"))
		mu.Lock()
		s := shots[id]
		delete(shots, id)
		mu.Unlock()
		a := answer{tag: s.tag, status: int(res.Code), result: resultOf(res)}
		answers = append(answers, a)
		r.stats.add(phase, res, a, slices.Contains(s.allowed, a.status))
	}
	return answers
}

// resultOf names an answer: a callback's `result`, an error's `code`, or
// what a success means.
func resultOf(res *vegeta.Result) string {
	var body struct {
		Result string `json:"result"`
		Code   string `json:"code"`
	}
	json.Unmarshal(res.Body, &body)
	switch {
	case res.Error != "" && res.Code == 0:
		return "transport_error"
	case body.Result != "":
		return body.Result
	case body.Code != "":
		return body.Code
	case res.Code == http.StatusCreated:
		return "created"
	}
	return http.StatusText(int(res.Code))
}

// count tallies answers by tag and result.
func count(answers []answer) map[string]map[string]int {
	out := map[string]map[string]int{}
	for _, a := range answers {
		if out[a.tag] == nil {
			out[a.tag] = map[string]int{}
		}
		out[a.tag][a.result]++
	}
	return out
}
