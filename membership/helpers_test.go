package membership

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

var testSecret = []byte("job-4711-secret-0123456789abcdef")

// recorder collects the evidence one member reports. Its goroutine ends when
// the member's Events channel closes, that is at Shutdown.
type recorder struct {
	m       *Member
	mu      sync.Mutex
	evs     []Evidence
	changed chan struct{} // closed and replaced on every append
	done    chan struct{}
}

func record(t testing.TB, m *Member) *recorder {
	r := &recorder{m: m, changed: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for e := range m.Events() {
			r.mu.Lock()
			r.evs = append(r.evs, e)
			close(r.changed)
			r.changed = make(chan struct{})
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		if err := m.Shutdown(); err != nil {
			t.Errorf("shutdown %s: %v", m.Name(), err)
		}
		<-r.done
	})
	return r
}

func (r *recorder) snapshot() ([]Evidence, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.evs), r.changed
}

// first returns the first evidence matching node, incarnation and kind.
func (r *recorder) first(node string, inc uint64, k Kind) (Evidence, bool) {
	evs, _ := r.snapshot()
	for _, e := range evs {
		if e.Node == node && e.Incarnation == inc && e.Kind == k {
			return e, true
		}
	}
	return Evidence{}, false
}

// waitFor waits until cond holds for the evidence recorded so far, or fails
// the test after timeout (fake time inside a synctest bubble).
func (r *recorder) waitFor(t testing.TB, timeout time.Duration, what string, cond func([]Evidence) bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		evs, changed := r.snapshot()
		if cond(evs) {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("%s: %s not seen within %v; evidence: %v", r.m.Name(), what, timeout, evs)
		}
	}
}

func (r *recorder) waitKind(t testing.TB, timeout time.Duration, node string, inc uint64, k Kind) Evidence {
	t.Helper()
	r.waitFor(t, timeout, fmt.Sprintf("%s#%d %s", node, inc, k), func([]Evidence) bool {
		_, ok := r.first(node, inc, k)
		return ok
	})
	e, _ := r.first(node, inc, k)
	return e
}

// udpConfig is a member on 127.0.0.1 with an ephemeral port.
func udpConfig(name string, inc uint64, p *memberlist.Config, seeds ...string) Config {
	return Config{
		Name:        name,
		Incarnation: inc,
		Role:        "agent",
		Secret:      testSecret,
		Label:       "job-4711",
		BindAddr:    "127.0.0.1",
		Seeds:       seeds,
		Profile:     p,
	}
}

func startRecorded(t testing.TB, ctx context.Context, cfg Config) (*Member, *recorder) {
	t.Helper()
	m, err := Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start %s: %v", cfg.Name, err)
	}
	return m, record(t, m)
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p * float64(len(s)-1))
	return s[i]
}
