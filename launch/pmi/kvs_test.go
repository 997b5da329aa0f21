package pmi

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
)

func TestKVSBarrierRounds(t *testing.T) {
	const n, rounds = 8, 20
	k := NewKVS(n, nil)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for r := range n {
		wg.Go(func() {
			for round := range rounds {
				if err := k.Put(r, fmt.Sprintf("k-%d-%d", round, r), fmt.Sprint(round*n+r)); err != nil {
					errs <- err
					return
				}
				if err := k.Barrier(context.Background(), r); err != nil {
					errs <- err
					return
				}
				// After the barrier every rank sees every put of this round.
				for peer := range n {
					v, ok, err := k.Get(r, fmt.Sprintf("k-%d-%d", round, peer))
					if err != nil || !ok || v != fmt.Sprint(round*n+peer) {
						errs <- fmt.Errorf("rank %d round %d: get peer %d = %q %v %v", r, round, peer, v, ok, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if k.Barriers() != rounds {
		t.Errorf("%d barriers, want %d", k.Barriers(), rounds)
	}
}

func TestKVSRules(t *testing.T) {
	k := NewKVS(2, nil)
	if err := k.Put(2, "a", "b"); err == nil {
		t.Error("put from rank 2 of 2 accepted")
	}
	if _, _, err := k.Get(-1, "a"); err == nil {
		t.Error("get from rank -1 accepted")
	}
	if err := k.Put(0, "a", "1"); err != nil {
		t.Fatal(err)
	}
	if err := k.Put(1, "a", "2"); err == nil {
		t.Error("duplicate pending key accepted")
	}
	if _, ok, _ := k.Get(0, "a"); ok {
		t.Error("put visible before the barrier")
	}

	// A rank leaving a barrier through its context can enter again.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Barrier(ctx, 0) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled barrier: %v", err)
	}
	go func() { done <- k.Barrier(context.Background(), 0) }()
	if err := k.Barrier(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if v, ok, _ := k.Get(1, "a"); !ok || v != "1" {
		t.Errorf("after barrier get a = %q %v", v, ok)
	}
	if err := k.Put(0, "a", "3"); err == nil {
		t.Error("duplicate committed key accepted")
	}
}

func TestKVSDoubleEntry(t *testing.T) {
	k := NewKVS(3, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := make(chan error, 1)
	go func() { first <- k.Barrier(ctx, 0) }()
	waitEntered(t, k, 1)
	if err := k.Barrier(ctx, 0); err == nil {
		t.Fatal("double entry completed a barrier")
	}
	k.Fail(nil)
	if err := <-first; !errors.Is(err, ErrJobEnded) {
		t.Fatalf("barrier after Fail(nil): %v", err)
	}
}

// waitEntered waits until n ranks are inside k's current barrier.
func waitEntered(t *testing.T, k *KVS, n int) {
	t.Helper()
	for {
		k.mu.Lock()
		got := len(k.entered)
		k.mu.Unlock()
		if got >= n {
			return
		}
		runtime.Gosched()
	}
}

func TestKVSAbortOnce(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	k := NewKVS(4, func(rank, code int, msg string) {
		mu.Lock()
		calls++
		mu.Unlock()
	})
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Go(func() { k.Abort(r, 7, "x") })
	}
	wg.Wait()
	if calls != 1 {
		t.Fatalf("onAbort called %d times", calls)
	}
	var ae *AbortError
	if !errors.As(k.Err(), &ae) || ae.Code != 7 {
		t.Fatalf("Err() = %v", k.Err())
	}
	if err := k.Put(0, "a", "b"); !errors.As(err, &ae) {
		t.Fatalf("put after abort: %v", err)
	}
}
