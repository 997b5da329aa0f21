package launcher

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/spawn"
)

// FenceFunc kills, on node, what the agent incarnations up to upTo of the
// job left there, and reports what it did (Launcher.Fence, with the job's
// name bound).
type FenceFunc func(ctx context.Context, node string, upTo uint64) (string, error)

// Fences are a root's fences from outside of lost agents' nodes
// (docs/recovery.md, "Fencing"): each runs in the background, bounded by
// FenceTimeout, and says when it reached its node; the planner decides
// what a fence that has not reached it counts for, and when. The root's
// event loop owns it; its goroutines are started by Go, which the root
// joins.
type Fences struct {
	run  FenceFunc
	goFn func(func())
	mu   sync.Mutex
	// reached closes, per fence begun (by node and incarnation), once it
	// reached its node; done once it ended.
	reached map[fenceKey]chan struct{}
	done    []chan struct{}
}

type fenceKey struct {
	node string
	inc  uint64
}

// NewFences runs fences with run (nil: no way to reach nodes, as in a job
// on this machine), each on a goroutine started by goFn.
func NewFences(run FenceFunc, goFn func(func())) *Fences {
	return &Fences{run: run, goFn: goFn, reached: map[fenceKey]chan struct{}{}}
}

// FenceEnd is how a fence ended (Begin).
type FenceEnd struct {
	Record journal.Fence // for the state log
	// Confirmed: the fence's end confirms that nothing of the lost
	// incarnations runs on: it ended what they left on the node, or it
	// failed after it reached the node (FenceTimeout; a spawner that
	// reaches its node or fails at once: test nodes, srun). A fence that
	// failed without reaching it confirms nothing: the node's self-fence
	// bound does (the planner's: AwaitSelf).
	Confirmed bool
}

// Words is the fence's end in the user's words, and whether it is a
// warning (a failed fence).
func (e FenceEnd) Words() (string, bool) {
	if r := e.Record; r.Err != "" {
		return r.Err + "; the agent kills its ranks itself if it hears from the root again", true
	}
	r := e.Record
	return fmt.Sprintf("fenced node %s (incarnation %d) in %v: %s", r.Node, r.Incarnation, r.Took.Round(time.Millisecond), r.Result), false
}

// Begin fences node's agent incarnations up to inc, in the background, and
// returns when it began. Once the fence ended, ended is called (on the
// fence's goroutine) with how it ended.
func (f *Fences) Begin(ctx context.Context, node string, inc uint64, ended func(FenceEnd)) time.Time {
	done, reached := make(chan struct{}), make(chan struct{})
	var once sync.Once
	key := fenceKey{node, inc}
	f.mu.Lock()
	f.done = append(f.done, done)
	f.reached[key] = reached
	f.mu.Unlock()
	ctx = spawn.WithReached(ctx, func() { once.Do(func() { close(reached) }) })
	began := time.Now()
	f.goFn(func() {
		defer close(done)
		msg, err := "", errors.New("no fence reaches a node from here")
		if f.run != nil {
			msg, err = f.run(ctx, node, inc)
		}
		rec := journal.Fence{Node: node, Incarnation: inc, Took: time.Since(began), Result: msg}
		if err != nil {
			rec.Err = err.Error()
		}
		select {
		case <-reached:
			ended(FenceEnd{Record: rec, Confirmed: true})
		default:
			ended(FenceEnd{Record: rec, Confirmed: rec.Err == ""})
		}
	})
	return began
}

// AwaitSelf calls due (on a goroutine of its own) once at passed, unless
// the fence of node's incarnation inc reached its node by then: the
// planner then takes the fence for the node's own (its agent, if it runs,
// killed its ranks itself: docs/recovery.md, "Fencing"). A fence not
// under way is waited for as one that never reaches its node.
func (f *Fences) AwaitSelf(ctx context.Context, node string, inc uint64, at time.Time, due func()) {
	f.mu.Lock()
	reached := f.reached[fenceKey{node, inc}]
	f.mu.Unlock()
	f.goFn(func() {
		t := time.NewTimer(time.Until(at))
		defer t.Stop()
		select {
		case <-t.C:
		case <-reached:
			return // the fence decides
		case <-ctx.Done():
			return
		}
		select {
		case <-reached:
			return
		default:
		}
		due()
	})
}

// Wait waits for the fences under way (each ends within its bound; nil
// Fences have none).
func (f *Fences) Wait() {
	if f == nil {
		return
	}
	f.mu.Lock()
	done := f.done
	f.done = nil
	clear(f.reached)
	f.mu.Unlock()
	for _, d := range done {
		<-d
	}
}
