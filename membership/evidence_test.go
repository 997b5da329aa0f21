package membership

import (
	"fmt"
	"testing"
	"time"
)

func ev(node string, inc uint64, k Kind) Evidence {
	return Evidence{Node: node, Incarnation: inc, Kind: k, Time: time.Unix(0, 0), Observer: "o"}
}

func drain(q *queue) []string {
	var out []string
	for {
		e, ok := q.pop()
		if !ok {
			return out
		}
		out = append(out, fmt.Sprintf("%s#%d:%s", e.Node, e.Incarnation, e.Kind))
	}
}

func eq(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestQueueCoalescesFlapping(t *testing.T) {
	q := newQueue(16)
	q.push(ev("a", 1, KindAlive))
	q.push(ev("b", 1, KindAlive))
	q.push(ev("a", 1, KindSuspect))
	q.push(ev("a", 1, KindAlive))
	q.push(ev("a", 1, KindSuspect))
	got := drain(q)
	want := []string{"a#1:suspect", "b#1:alive"}
	if !eq(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if s := q.snapshot(); s.Coalesced != 3 || s.Pushed != 5 {
		t.Fatalf("stats %+v", s)
	}
}

func TestQueueKeepsTerminalEvidence(t *testing.T) {
	q := newQueue(16)
	q.push(ev("a", 1, KindSuspect))
	q.push(ev("a", 1, KindDead))    // replaces the pending suspect
	q.push(ev("a", 1, KindSuspect)) // stale: incarnation 1 already dead
	q.push(ev("a", 1, KindDead))    // duplicate
	q.push(ev("a", 2, KindAlive))   // relaunched: kept after the dead
	q.push(ev("a", 2, KindSuspect)) // coalesces with the alive of #2
	q.push(ev("a", 2, KindLeft))    // replaces it
	got := drain(q)
	want := []string{"a#1:dead", "a#2:left"}
	if !eq(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	s := q.snapshot()
	if s.Stale != 1 || s.Coalesced != 4 {
		t.Fatalf("stats %+v", s)
	}
}

func TestQueueOverflowEvictsOldestNonTerminal(t *testing.T) {
	q := newQueue(3)
	q.push(ev("a", 1, KindAlive))
	q.push(ev("b", 1, KindDead))
	q.push(ev("c", 1, KindSuspect))
	q.push(ev("d", 1, KindDead)) // full: evicts a's alive
	q.push(ev("e", 1, KindDead)) // full: evicts c's suspect
	q.push(ev("f", 1, KindDead)) // full of terminals: grows
	q.push(ev("g", 1, KindAlive))
	got := drain(q)
	want := []string{"b#1:dead", "d#1:dead", "e#1:dead", "f#1:dead", "g#1:alive"}
	if !eq(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if s := q.snapshot(); s.Evicted != 2 || s.MaxLen != 5 {
		t.Fatalf("stats %+v", s)
	}
	// The alive of g was appended to a queue of four terminals: a later
	// non-terminal evicts it before any dead.
	q.push(ev("h", 1, KindDead))
	q.push(ev("i", 1, KindAlive))
	q.push(ev("j", 1, KindSuspect))
	q.push(ev("k", 1, KindAlive))
	got = drain(q)
	want = []string{"h#1:dead", "j#1:suspect", "k#1:alive"}
	if !eq(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestQueueSignalsWithoutBlocking(t *testing.T) {
	q := newQueue(2)
	for i := range 100 {
		q.push(ev(fmt.Sprint("n", i), 1, KindAlive)) // nobody reads ready
	}
	select {
	case <-q.ready:
	default:
		t.Fatal("no signal after pushes")
	}
	if len(drain(q)) != 2 {
		t.Fatal("limit not kept for non-terminal evidence")
	}
}

func TestDeriveKey(t *testing.T) {
	s := []byte("0123456789abcdef-job-secret")
	k1, err := DeriveKey(s)
	if err != nil || len(k1) != 32 {
		t.Fatalf("DeriveKey = %x, %v", k1, err)
	}
	k2, _ := DeriveKey(s)
	k3, _ := DeriveKey([]byte("0123456789abcdef-job-secreT"))
	if string(k1) != string(k2) || string(k1) == string(k3) {
		t.Fatal("key derivation is not a deterministic function of the secret")
	}
	if _, err := DeriveKey([]byte("short")); err == nil {
		t.Fatal("short secret accepted")
	}
}
