//go:build unix

package secure

import (
	"context"
	"net"
	"syscall"
	"testing"
	"time"
)

// cpuTime returns the user and system CPU time of this process so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports CPU time per operation, a steadier figure than wall
// time on a loaded machine.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime(b)-start)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}

// BenchmarkHandshake measures one link: TCP connect over loopback, the TLS
// 1.3 handshake with both certificates verified, the acceptance byte, and
// Accept. Both ends run in this process, so the figure is the CPU of both
// sides plus loopback latency.
func BenchmarkHandshake(b *testing.B) {
	ca := newTestCA(b, "bench-job")
	ln, err := Listen(context.Background(), "tcp", "127.0.0.1:0", issue(b, ca, "server"))
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	client := issue(b, ca, "client")
	addr := ln.Addr().String()
	accepted := make(chan net.Conn, 1)
	start := cpuTime(b)
	for b.Loop() {
		go func() {
			c, err := ln.Accept()
			if err != nil {
				accepted <- nil
				return
			}
			accepted <- c
		}()
		cc, err := Dial(context.Background(), addr, client)
		if err != nil {
			b.Fatal(err)
		}
		sc := <-accepted
		if sc == nil {
			b.Fatal("Accept failed")
		}
		cc.Close()
		sc.Close()
	}
	reportCPU(b, start)
}

// BenchmarkIssue1000 measures what the front-end spends on credentials for
// a job of 1,000 agents: one CA, 1,000 issues and their encodings.
func BenchmarkIssue1000(b *testing.B) {
	start := cpuTime(b)
	for b.Loop() {
		ca, err := NewJobCA("bench-job")
		if err != nil {
			b.Fatal(err)
		}
		for range 1000 {
			c, err := ca.Issue("node-00000")
			if err != nil {
				b.Fatal(err)
			}
			_ = c.Marshal()
		}
	}
	reportCPU(b, start)
}

// BenchmarkUnmarshal measures what an agent spends decoding and validating
// its credentials.
func BenchmarkUnmarshal(b *testing.B) {
	enc := issue(b, newTestCA(b, "bench-job"), "node").Marshal()
	start := cpuTime(b)
	for b.Loop() {
		if _, err := UnmarshalCredentials(enc); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, start)
}
