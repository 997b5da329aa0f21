//go:build unix

package pmi

import (
	"bufio"
	"context"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ioGuard bounds every blocking test read so that a broken server fails the
// test instead of hanging it. It is a guard, not a wait: reads return as
// soon as data arrives.
const ioGuard = 20 * time.Second

// socketPair returns two connected unix stream sockets as net.Conns.
func socketPair(t testing.TB) (net.Conn, net.Conn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("socketpair: %v", err)
	}
	conns := make([]net.Conn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "pmi-test")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatalf("FileConn: %v", err)
		}
		conns[i] = c
	}
	return conns[0], conns[1]
}

// serveResult is what Serve returned.
type serveResult struct {
	stats Stats
	err   error
}

// harness runs Serve on one end of a connection and plays the client on the
// other.
type harness struct {
	t       *testing.T
	client  net.Conn
	server  net.Conn
	r       *bufio.Reader
	done    chan serveResult
	cancel  context.CancelFunc
	mu      sync.Mutex
	events  []Event
	eventCh chan Event
}

// testJob is the job used by most tests.
var testJob = Job{Size: 1, KVSName: "kvs_42_0", ProcessMapping: "(vector,(0,1,1))"}

// start serves cfg (Backend defaults to a one-rank KVS, Job to testJob) on a
// socketpair, or on net.Pipe when pipe is set.
func start(t *testing.T, cfg Config, pipe bool) *harness {
	t.Helper()
	if cfg.Job.Size == 0 {
		cfg.Job = testJob
	}
	if cfg.Backend == nil {
		cfg.Backend = NewKVS(cfg.Job.Size, nil)
	}
	var server, client net.Conn
	if pipe {
		server, client = net.Pipe()
	} else {
		server, client = socketPair(t)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{t: t, client: client, server: server, r: bufio.NewReader(client),
		done: make(chan serveResult, 1), cancel: cancel, eventCh: make(chan Event, 100)}
	observe := cfg.Observe
	cfg.Observe = func(ev Event) {
		h.mu.Lock()
		h.events = append(h.events, ev)
		h.mu.Unlock()
		select {
		case h.eventCh <- ev:
		default:
		}
		if observe != nil {
			observe(ev)
		}
	}
	go func() {
		st, err := Serve(ctx, server, cfg)
		h.done <- serveResult{st, err}
	}()
	t.Cleanup(func() {
		cancel()
		client.Close()
		<-h.done // Serve must return once cancelled; a hang fails the test run
		server.Close()
	})
	return h
}

// send writes raw bytes as the client.
func (h *harness) send(s string) {
	h.t.Helper()
	h.client.SetWriteDeadline(time.Now().Add(ioGuard))
	if _, err := h.client.Write([]byte(s)); err != nil {
		h.t.Fatalf("client write %q: %v", s, err)
	}
}

// expect reads one response line and compares it (without "\n").
func (h *harness) expect(want string) {
	h.t.Helper()
	if got := h.line(); got != want {
		h.t.Fatalf("response %q, want %q", got, want)
	}
}

// line reads one response line without its newline.
func (h *harness) line() string {
	h.t.Helper()
	h.client.SetReadDeadline(time.Now().Add(ioGuard))
	s, err := h.r.ReadString('\n')
	if err != nil {
		h.t.Fatalf("client read: %v (got %q)", err, s)
	}
	return strings.TrimSuffix(s, "\n")
}

// roundTrip sends one request line and expects one response line.
func (h *harness) roundTrip(req, want string) {
	h.t.Helper()
	h.send(req + "\n")
	h.expect(want)
}

// closeAndWait closes the client end and returns Serve's result.
func (h *harness) closeAndWait() serveResult {
	h.t.Helper()
	h.client.Close()
	return h.wait()
}

// wait returns Serve's result.
func (h *harness) wait() serveResult {
	h.t.Helper()
	select {
	case r := <-h.done:
		h.done <- r // keep it for Cleanup
		return r
	case <-time.After(ioGuard):
		h.t.Fatal("Serve did not return")
		return serveResult{}
	}
}

// kinds returns the kinds of the events seen so far.
func (h *harness) kinds() []EventKind {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []EventKind
	for _, ev := range h.events {
		out = append(out, ev.Kind)
	}
	return out
}

// nextEvent waits for the next event.
func (h *harness) nextEvent() Event {
	h.t.Helper()
	select {
	case ev := <-h.eventCh:
		return ev
	case <-time.After(ioGuard):
		h.t.Fatal("no event")
		return Event{}
	}
}
