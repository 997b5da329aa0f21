// Command ftdemo is the ftlaunch demo application: a parallel program that
// shows the startup the launcher exists for. Each rank listens on a TCP
// port, publishes its address as its I-tuple, reads the node table (and
// checks that the ring exchange gives the same neighbours), and passes a
// token around a ring of direct TCP connections between ranks
// (not through the launcher). Rank 0 checks that the token visited every
// rank in order and prints the result.
//
//	ftlaunch run -n 8 ftdemo [-rounds R] [-v]
//
// With -coll K it times the launcher's collectives instead (make
// bench-coll): after the node table, K allgathers of -size bytes per
// rank, K barriers and K rings; rank 0 prints each kind's median latency.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/client"
)

func main() {
	rounds := flag.Int("rounds", 1, "times the token goes around the ring")
	verbose := flag.Bool("v", false, "every rank reports its neighbours")
	coll := flag.Int("coll", 0, "time K allgathers, K barriers and K rings instead of passing the token")
	size := flag.Int("size", 1024, "with -coll: the bytes each rank gives each allgather")
	flag.Parse()
	if *coll > 0 {
		if err := benchColl(*coll, *size); err != nil {
			fmt.Fprintf(os.Stderr, "ftdemo: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*rounds, *verbose); err != nil {
		fmt.Fprintf(os.Stderr, "ftdemo: %v\n", err)
		os.Exit(1)
	}
}

// listenAddr picks the address other ranks reach this one at: the
// address the node's hostname resolves to, or loopback.
func listenAddr() string {
	host, err := os.Hostname()
	if err == nil {
		if addrs, err := net.LookupHost(host); err == nil {
			for _, a := range addrs {
				if ip := net.ParseIP(a); ip != nil && ip.To4() != nil && !ip.IsLoopback() {
					return a
				}
			}
		}
	}
	return "127.0.0.1"
}

func run(rounds int, verbose bool) error {
	start := time.Now()
	c, err := client.Init()
	if err != nil {
		return err
	}
	defer c.Close()
	rank, size := c.Rank(), c.Size()

	ln, err := net.Listen("tcp", net.JoinHostPort(listenAddr(), "0"))
	if err != nil {
		return fmt.Errorf("rank %d: listen: %w", rank, err)
	}
	defer ln.Close()
	table, err := c.Publish([]byte(ln.Addr().String()))
	if err != nil {
		return fmt.Errorf("rank %d: publish: %w", rank, err)
	}
	tableAt := time.Since(start)
	right := string(table[(rank+1)%size])
	// The ring exchange gives the same neighbours, receiving only theirs
	// (docs/collectives.md): a check that both agree.
	l, r, err := c.Ring(table[rank])
	if err != nil {
		return fmt.Errorf("rank %d: ring: %w", rank, err)
	}
	if string(r) != right || string(l) != string(table[(rank-1+size)%size]) {
		return fmt.Errorf("rank %d: the ring exchange gave neighbours %q and %q, the node table %q and %q", rank, l, r, table[(rank-1+size)%size], right)
	}
	if verbose {
		fmt.Printf("rank %d of %d on %s listens on %s, sends to %s\n", rank, size, c.Info().Node, ln.Addr(), right)
	}

	// Accept from the left neighbour while connecting to the right one.
	// The left neighbour introduces itself: a connection that does not
	// (a stray dial to a port this rank reuses) is closed, and the next
	// one is taken.
	left := (rank + size - 1) % size
	type inbound struct {
		conn net.Conn
		rd   *bufio.Reader
	}
	accepted := make(chan inbound, 1)
	acceptErr := make(chan error, 1)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				acceptErr <- err
				return
			}
			rd := bufio.NewReader(conn)
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			hello, err := rd.ReadString('\n')
			_ = conn.SetReadDeadline(time.Time{})
			if err != nil || hello != fmt.Sprintf("ftdemo %d\n", left) {
				conn.Close()
				continue
			}
			accepted <- inbound{conn, rd}
			return
		}
	}()
	out, err := net.DialTimeout("tcp", right, 10*time.Second)
	if err != nil {
		return fmt.Errorf("rank %d: connect to rank %d at %s: %w", rank, (rank+1)%size, right, err)
	}
	defer out.Close()
	if _, err := fmt.Fprintf(out, "ftdemo %d\n", rank); err != nil {
		return fmt.Errorf("rank %d: introduce itself to rank %d: %w", rank, (rank+1)%size, err)
	}
	var in inbound
	select {
	case in = <-accepted:
	case err := <-acceptErr:
		return fmt.Errorf("rank %d: accept: %w", rank, err)
	}
	defer in.conn.Close()
	rd := in.rd

	for round := 0; round < rounds; round++ {
		if rank == 0 {
			if _, err := fmt.Fprintf(out, "0\n"); err != nil {
				return fmt.Errorf("rank 0: send token: %w", err)
			}
		}
		line, err := rd.ReadString('\n')
		if err != nil {
			return fmt.Errorf("rank %d: receive token: %w", rank, err)
		}
		token := strings.TrimSpace(line)
		if rank == 0 {
			if err := checkToken(token, size); err != nil {
				return fmt.Errorf("ring round %d: %w", round, err)
			}
			continue
		}
		if _, err := fmt.Fprintf(out, "%s %d\n", token, rank); err != nil {
			return fmt.Errorf("rank %d: pass token: %w", rank, err)
		}
	}
	if err := c.Barrier(); err != nil {
		return fmt.Errorf("rank %d: barrier: %w", rank, err)
	}
	if rank == 0 {
		fmt.Printf("ring of %d ranks verified: the token visited ranks 0..%d in order over direct TCP, %d round(s); node table after %.1f ms, ring done after %.1f ms\n",
			size, size-1, rounds, tableAt.Seconds()*1e3, time.Since(start).Seconds()*1e3)
	}
	return nil
}

// benchColl times k allgathers of size bytes per rank, k barriers and k
// rings, each call as rank 0 sees it, after the node table; it checks what
// they give, and rank 0 prints each kind's median latency:
//
//	collectives: allgather K x SIZE B median M ms; barrier K median M ms; ring K median M ms
func benchColl(k, size int) error {
	c, err := client.Init()
	if err != nil {
		return err
	}
	defer c.Close()
	rank, n := c.Rank(), c.Size()
	if _, err := c.Publish([]byte(strconv.Itoa(rank))); err != nil {
		return fmt.Errorf("rank %d: publish: %w", rank, err)
	}
	value := func(r, i int) []byte {
		v := make([]byte, size)
		for j := range v {
			v[j] = byte(r + i + j)
		}
		return v
	}
	var gather, barrier, ring []time.Duration
	for i := range k {
		t0 := time.Now()
		vs, err := c.Allgather(value(rank, i))
		if err != nil {
			return fmt.Errorf("rank %d: allgather %d: %w", rank, i, err)
		}
		gather = append(gather, time.Since(t0))
		if len(vs) != n || string(vs[(rank+1)%n]) != string(value((rank+1)%n, i)) {
			return fmt.Errorf("rank %d: allgather %d: %d values, or the wrong ones", rank, i, len(vs))
		}
	}
	for i := range k {
		t0 := time.Now()
		if err := c.Barrier(); err != nil {
			return fmt.Errorf("rank %d: barrier %d: %w", rank, i, err)
		}
		barrier = append(barrier, time.Since(t0))
	}
	for i := range k {
		t0 := time.Now()
		l, r, err := c.Ring([]byte(fmt.Sprintf("%d.%d", rank, i)))
		if err != nil {
			return fmt.Errorf("rank %d: ring %d: %w", rank, i, err)
		}
		ring = append(ring, time.Since(t0))
		if string(l) != fmt.Sprintf("%d.%d", (rank-1+n)%n, i) || string(r) != fmt.Sprintf("%d.%d", (rank+1)%n, i) {
			return fmt.Errorf("rank %d: ring %d gave %q and %q", rank, i, l, r)
		}
	}
	if rank == 0 {
		fmt.Printf("collectives: allgather %d x %d B median %.3f ms; barrier %d median %.3f ms; ring %d median %.3f ms\n",
			k, size, median(gather), k, median(barrier), k, median(ring))
	}
	return nil
}

// median is the median of ds, in milliseconds.
func median(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + m) / 2
	}
	return m.Seconds() * 1e3
}

// checkToken verifies the token lists 0 1 … size-1.
func checkToken(token string, size int) error {
	f := strings.Fields(token)
	if len(f) != size {
		return fmt.Errorf("token visited %d ranks, want %d: %q", len(f), size, token)
	}
	for i, s := range f {
		if n, err := strconv.Atoi(s); err != nil || n != i {
			return fmt.Errorf("token out of order at position %d: %q", i, token)
		}
	}
	return nil
}
