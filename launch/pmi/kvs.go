package pmi

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrJobEnded is returned by KVS.Barrier after Fail was called with a nil
// error.
var ErrJobEnded = errors.New("pmi job ended")

// KVS is an in-process Backend for one job of Size ranks: a job-wide key
// space and a real barrier over all ranks. Puts are buffered until the next
// barrier completes and become visible to every rank's Get only then, as
// they would be when travelling through the launch tree. A key may be put
// once per job (as in Hydra). Abort records the first abort, calls the
// onAbort function given to NewKVS and fails the job, releasing every
// waiting barrier with an *AbortError.
//
// All methods are safe for concurrent use.
type KVS struct {
	size    int
	onAbort func(rank, code int, msg string)

	mu        sync.Mutex
	committed map[string]string
	pending   map[string]string
	entered   map[int]bool  // ranks in the current barrier
	release   chan struct{} // closed when the current barrier completes
	done      chan struct{} // closed by Fail
	err       error         // why the job ended
	barriers  int           // completed barriers
	aborted   bool          // Abort was called
}

var _ Backend = (*KVS)(nil)

// NewKVS returns a KVS for size ranks. onAbort, if not nil, is called once,
// for the first Abort, on the aborting rank's goroutine; it must start
// killing the job and must not block on the ranks' deaths.
func NewKVS(size int, onAbort func(rank, code int, msg string)) *KVS {
	return &KVS{
		size:      size,
		onAbort:   onAbort,
		committed: map[string]string{},
		pending:   map[string]string{},
		entered:   map[int]bool{},
		release:   make(chan struct{}),
		done:      make(chan struct{}),
	}
}

// checkRank validates a rank number.
func (k *KVS) checkRank(rank int) error {
	if rank < 0 || rank >= k.size {
		return fmt.Errorf("rank %d outside job of %d", rank, k.size)
	}
	return nil
}

// Put buffers key=value until the next completed barrier.
func (k *KVS) Put(rank int, key, value string) error {
	if err := k.checkRank(rank); err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err != nil {
		return k.err
	}
	if _, ok := k.committed[key]; ok {
		return fmt.Errorf("duplicate key %s", key)
	}
	if _, ok := k.pending[key]; ok {
		return fmt.Errorf("duplicate key %s", key)
	}
	k.pending[key] = value
	return nil
}

// Get returns a value committed by a completed barrier.
func (k *KVS) Get(rank int, key string) (string, bool, error) {
	if err := k.checkRank(rank); err != nil {
		return "", false, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.committed[key]
	return v, ok, nil
}

// Barrier waits until every rank entered the current barrier, then commits
// the buffered puts. It returns early with ctx's error (leaving the barrier)
// or with the job's error after Fail or Abort. A rank entering twice is an
// error.
func (k *KVS) Barrier(ctx context.Context, rank int) error {
	if err := k.checkRank(rank); err != nil {
		return err
	}
	k.mu.Lock()
	if k.err != nil {
		err := k.err
		k.mu.Unlock()
		return err
	}
	if k.entered[rank] {
		k.mu.Unlock()
		return fmt.Errorf("rank %d entered the barrier twice", rank)
	}
	k.entered[rank] = true
	release := k.release
	if len(k.entered) == k.size {
		for key, v := range k.pending {
			k.committed[key] = v
		}
		clear(k.pending)
		clear(k.entered)
		k.barriers++
		close(k.release)
		k.release = make(chan struct{})
		k.mu.Unlock()
		return nil
	}
	k.mu.Unlock()

	select {
	case <-release:
		return nil
	case <-k.done:
		select {
		case <-release: // completed before the failure
			return nil
		default:
		}
		k.mu.Lock()
		defer k.mu.Unlock()
		return k.err
	case <-ctx.Done():
		k.mu.Lock()
		defer k.mu.Unlock()
		select {
		case <-release:
			return nil // completed meanwhile
		default:
		}
		delete(k.entered, rank)
		return ctx.Err()
	}
}

// Abort records the abort, calls onAbort (first abort only) and fails the
// job with an *AbortError.
func (k *KVS) Abort(rank, code int, msg string) {
	k.mu.Lock()
	first := k.err == nil && !k.aborted
	k.aborted = true
	k.mu.Unlock()
	if first && k.onAbort != nil {
		k.onAbort(rank, code, msg)
	}
	k.Fail(&AbortError{Rank: rank, Code: code, Msg: msg})
}

// Fail ends the job: waiting and later barriers, and later puts, return err
// (ErrJobEnded when err is nil). Only the first call has an effect.
func (k *KVS) Fail(err error) {
	if err == nil {
		err = ErrJobEnded
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err != nil {
		return
	}
	k.err = err
	close(k.done)
}

// Done is closed when the job failed or was aborted.
func (k *KVS) Done() <-chan struct{} { return k.done }

// Err returns why the job ended, or nil while it runs.
func (k *KVS) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.err
}

// Barriers returns the number of completed barriers.
func (k *KVS) Barriers() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.barriers
}
