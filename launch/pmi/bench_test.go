//go:build unix

package pmi

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// BenchmarkServeSession measures the server side of one rank's MPI_Init and
// MPI_Finalize conversation (12 requests, as mpichInit lists) over a unix
// socketpair, client and server in one process:
//
//	go test ./launch/pmi -run '^$' -bench ServeSession -benchmem
func BenchmarkServeSession(b *testing.B) {
	var script strings.Builder
	for _, rt := range mpichInit {
		script.WriteString(rt[0] + "\n")
	}
	lines := len(mpichInit)
	var bytesIn, bytesOut int64
	for b.Loop() {
		server, client := socketPair(b)
		done := make(chan error, 1)
		var st Stats
		go func() {
			var err error
			st, err = Serve(context.Background(), server, Config{Job: testJob, Backend: NewKVS(1, nil)})
			done <- err
		}()
		r := bufio.NewReader(client)
		for _, rt := range mpichInit { // strict request/response, as MPICH does
			if _, err := client.Write([]byte(rt[0] + "\n")); err != nil {
				b.Fatal(err)
			}
			if _, err := r.ReadString('\n'); err != nil {
				b.Fatal(err)
			}
		}
		client.Close()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		server.Close()
		bytesIn, bytesOut = st.BytesIn, st.BytesOut
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*lines), "ns/request")
	b.ReportMetric(float64(bytesIn+bytesOut), "wire-bytes/session")
}

// BenchmarkKVSJob measures a whole job's key exchange through KVS and Serve
// in one process: every rank puts a 430-byte address, enters the barrier and
// gets every other rank's address (the one-rank-per-node worst case of
// MPI_Init).
//
//	go test ./launch/pmi -run '^$' -bench KVSJob -benchmem
func BenchmarkKVSJob(b *testing.B) {
	for _, n := range []int{8, 64} {
		b.Run(fmt.Sprintf("ranks=%d", n), func(b *testing.B) {
			addr := strings.Repeat("a1", 215)
			job := Job{Size: n, KVSName: "bench"}
			for b.Loop() {
				kvs := NewKVS(n, nil)
				var wg sync.WaitGroup
				errs := make(chan error, 2*n)
				for r := range n {
					server, client := socketPair(b)
					wg.Go(func() {
						defer server.Close()
						if _, err := Serve(context.Background(), server, Config{Job: job, Rank: r, Backend: kvs}); err != nil {
							errs <- err
						}
					})
					wg.Go(func() {
						defer client.Close()
						rd := bufio.NewReader(client)
						ask := func(req string) {
							if _, err := client.Write([]byte(req)); err != nil {
								errs <- err
								return
							}
							if _, err := rd.ReadString('\n'); err != nil {
								errs <- err
							}
						}
						ask("cmd=init pmi_version=1 pmi_subversion=1\n")
						ask(fmt.Sprintf("cmd=put kvsname=bench key=-allgather-shm-1-%d value=%s\n", r, addr))
						ask("cmd=barrier_in\n")
						for p := range n {
							ask(fmt.Sprintf("cmd=get kvsname=bench key=-allgather-shm-1-%d\n", p))
						}
						ask("cmd=finalize\n")
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					b.Fatal(err)
				}
			}
		})
	}
}
