package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The kernel here has no sch_netem, so slow links are made with an iptables
// NFQUEUE rule on the node's ingress (INPUT from eth0) and a netlink
// consumer in this process that holds each packet for the delay before it
// lets it through, and drops a fraction. Packets are delayed entering the
// node, not leaving it: held outgoing packets would count against the
// sender's socket and throttle it.

// nfnetlink_queue protocol constants (linux/netfilter/nfnetlink_queue.h).
const (
	nfqnlMsgPacket  = 0
	nfqnlMsgVerdict = 1
	nfqnlMsgConfig  = 2

	nfqaPacketHdr  = 1
	nfqaVerdictHdr = 2

	nfqaCfgCmd      = 1
	nfqaCfgParams   = 2
	nfqaCfgQueueMax = 3
	nfqaCfgMask     = 4
	nfqaCfgFlags    = 5

	nfqnlCfgCmdBind = 1
	nfqnlCopyMeta   = 1
	nfqaCfgFailOpen = 1

	nfDrop   = 0
	nfAccept = 1
)

// slowQueue is the NFQUEUE number used inside every node (queues are per
// network namespace).
const slowQueue = 7

// slowQueueMax is the kernel queue length asked for; beyond it packets pass
// undelayed (fail-open) rather than being dropped.
const slowQueueMax = 16384

// SlowLink is an active delay on a node's incoming traffic, made by
// Cluster.SlowLink. Its goroutines belong to it; Stop ends them. Its methods
// are safe for concurrent use.
type SlowLink struct {
	node  string
	netns string
	f     *os.File // the nfnetlink socket, bound in the node's namespace

	wg    sync.WaitGroup // receive and release
	watch sync.WaitGroup // the goroutine that stops the link when ctx ends
	once  sync.Once
	flush chan struct{} // closed when stopping: release held packets at once
	done  chan struct{} // closed when stopped

	mu      sync.Mutex
	err     error
	dropped uint64
	passed  uint64
}

// SlowLink delays every packet entering node (from its link, not loopback)
// by delay and drops each with probability loss (0 to 1), until Stop, ctx
// ends, or the node is killed or revived or the cluster goes down through
// this handle. A node has at most one slow link per handle; a new one
// replaces the old. If this process dies, the rule's --queue-bypass lets
// traffic through undelayed.
func (c *Cluster) SlowLink(ctx context.Context, node string, delay time.Duration, loss float64) (*SlowLink, error) {
	if delay < 0 || loss < 0 || loss > 1 {
		return nil, fmt.Errorf("slow link on %s: delay %v, loss %v: want delay >= 0 and 0 <= loss <= 1", node, delay, loss)
	}
	nd, err := c.Node(node)
	if err != nil {
		return nil, err
	}
	if nd.State == StateKilled {
		return nil, fmt.Errorf("slow link on %s: %w", node, ErrNodeDown)
	}
	c.stopSlow(node)

	fd, err := socketInNetns(nd.Netns)
	if err != nil {
		return nil, fmt.Errorf("slow link on %s: %w", node, err)
	}
	f := os.NewFile(uintptr(fd), "nfqueue:"+nd.Netns)
	if err := nfqConfigure(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("slow link on %s: %w", node, err)
	}
	if err := iptablesIn(ctx, nd.Netns, "-I"); err != nil {
		f.Close()
		return nil, fmt.Errorf("slow link on %s: %w", node, err)
	}
	s := &SlowLink{node: node, netns: nd.Netns, f: f, flush: make(chan struct{}), done: make(chan struct{})}
	held := make(chan heldPacket, slowQueueMax)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(nd.Index)))
	s.wg.Add(2)
	go func() { defer s.wg.Done(); s.receive(held, delay, loss, rng) }()
	go func() { defer s.wg.Done(); s.release(held) }()
	s.watch.Add(1)
	go func() {
		defer s.watch.Done()
		select {
		case <-ctx.Done():
			s.stop()
		case <-s.done:
		}
	}()

	c.hmu.Lock()
	if c.slow == nil {
		c.slow = make(map[string]*SlowLink)
	}
	c.slow[node] = s
	c.hmu.Unlock()
	return s, nil
}

// stopSlow stops node's slow link, if any.
func (c *Cluster) stopSlow(node string) {
	c.hmu.Lock()
	s := c.slow[node]
	delete(c.slow, node)
	c.hmu.Unlock()
	if s != nil {
		_ = s.Stop()
	}
}

// stopAllSlow stops every slow link of the handle.
func (c *Cluster) stopAllSlow() {
	c.hmu.Lock()
	var nodes []string
	for n := range c.slow {
		nodes = append(nodes, n)
	}
	c.hmu.Unlock()
	for _, n := range nodes {
		c.stopSlow(n)
	}
}

// Stop removes the rule (if the node's namespace still exists), lets the
// held packets through at once, and waits for the link's goroutines. It is
// idempotent; it returns the first error the link met.
func (s *SlowLink) Stop() error {
	s.stop()
	s.watch.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *SlowLink) stop() {
	s.once.Do(func() {
		if _, err := os.Stat(filepath.Join(netnsDir, s.netns)); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := iptablesIn(ctx, s.netns, "-D"); err != nil && !strings.Contains(err.Error(), "does a matching rule exist") {
				s.setErr(fmt.Errorf("stop slow link on %s: %w", s.node, err))
			}
			cancel()
		}
		close(s.flush)
		_ = s.f.SetReadDeadline(time.Now()) // ends receive, which ends release
		s.wg.Wait()
		s.f.Close() // the kernel drops what is still queued
		close(s.done)
	})
}

func (s *SlowLink) setErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

// Counts reports how many packets the link passed and dropped so far.
func (s *SlowLink) Counts() (passed, dropped uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.passed, s.dropped
}

type heldPacket struct {
	id  uint32
	due time.Time
}

// receive reads queued packets and hands them, with their due time, to
// release; dropped ones get their verdict at once. It returns when the
// socket's read deadline is set to the past (stop) and closes held.
func (s *SlowLink) receive(held chan<- heldPacket, delay time.Duration, loss float64, rng *rand.Rand) {
	defer close(held)
	buf := make([]byte, 1<<16)
	for {
		n, err := s.f.Read(buf)
		if errors.Is(err, unix.ENOBUFS) {
			continue // the kernel overran the socket: those packets passed (fail-open) or were lost
		}
		if err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				s.setErr(fmt.Errorf("slow link on %s: read: %w", s.node, err))
			}
			return
		}
		now := time.Now()
		for _, id := range parsePacketIDs(buf[:n]) {
			if loss > 0 && rng.Float64() < loss {
				s.verdict(id, nfDrop)
				continue
			}
			// The kernel queue holds at most slowQueueMax packets, so
			// there is always room.
			held <- heldPacket{id: id, due: now.Add(delay)}
		}
	}
}

// release gives each held packet its accept verdict when due (with one delay
// for all packets, arrival order is due order), or at once when stopping. It
// returns when receive closes held.
func (s *SlowLink) release(held <-chan heldPacket) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for p := range held {
		if d := time.Until(p.due); d > 0 {
			t.Reset(d)
			select {
			case <-t.C:
			case <-s.flush:
			}
		}
		s.verdict(p.id, nfAccept)
	}
}

func (s *SlowLink) verdict(id uint32, v uint32) {
	payload := make([]byte, 8)
	binary.BigEndian.PutUint32(payload[0:4], v)
	binary.BigEndian.PutUint32(payload[4:8], id)
	msg := nfqMessage(nfqnlMsgVerdict, 0, slowQueue, [][2]any{{nfqaVerdictHdr, payload}})
	if _, err := s.f.Write(msg); err != nil {
		return // the namespace is gone
	}
	s.mu.Lock()
	if v == nfDrop {
		s.dropped++
	} else {
		s.passed++
	}
	s.mu.Unlock()
}

// iptablesIn adds (-I) or deletes (-D) the NFQUEUE rule in the namespace.
func iptablesIn(ctx context.Context, netns, op string) error {
	args := []string{"--net=" + filepath.Join(netnsDir, netns), "--", "iptables", "-w", op, "INPUT",
		"-i", "eth0", "-j", "NFQUEUE", "--queue-num", strconv.Itoa(slowQueue), "--queue-bypass"}
	out, err := exec.CommandContext(ctx, "nsenter", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s in %s: %w: %s", op, netns, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// socketInNetns opens a non-blocking NETLINK_NETFILTER socket in the named
// network namespace. The socket keeps that namespace for its life. The
// switch happens on a locked thread of a goroutine of its own; if the thread
// cannot be switched back it is not unlocked, so the runtime discards it.
func socketInNetns(netns string) (int, error) {
	type result struct {
		fd  int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{-1, fmt.Errorf("open own network namespace: %w", err)}
			return
		}
		defer unix.Close(orig)
		target, err := unix.Open(filepath.Join(netnsDir, netns), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{-1, fmt.Errorf("open network namespace %s: %w", netns, err)}
			return
		}
		defer unix.Close(target)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{-1, fmt.Errorf("enter network namespace %s: %w", netns, err)}
			return
		}
		fd, serr := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			if serr == nil {
				unix.Close(fd)
			}
			ch <- result{-1, fmt.Errorf("return from network namespace %s: %w", netns, err)}
			return // the thread stays locked and dies with this goroutine
		}
		runtime.UnlockOSThread()
		if serr != nil {
			ch <- result{-1, fmt.Errorf("netfilter netlink socket: %w", serr)}
			return
		}
		ch <- result{fd, nil}
	}()
	r := <-ch
	if r.err != nil {
		return -1, r.err
	}
	if err := unix.Bind(r.fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(r.fd)
		return -1, fmt.Errorf("bind netlink socket: %w", err)
	}
	_ = unix.SetsockoptInt(r.fd, unix.SOL_NETLINK, unix.NETLINK_NO_ENOBUFS, 1)
	_ = unix.SetsockoptInt(r.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
	return r.fd, nil
}

// nfqConfigure binds the socket to slowQueue, asks for packet metadata
// only, a long queue and fail-open, and checks the kernel's answers.
func nfqConfigure(f *os.File) error {
	cmd := []byte{nfqnlCfgCmdBind, 0, 0, 0} // command, pad, pf (unused since Linux 3.8)
	params := make([]byte, 5)
	binary.BigEndian.PutUint32(params[0:4], 0)
	params[4] = nfqnlCopyMeta
	maxlen := binary.BigEndian.AppendUint32(nil, slowQueueMax)
	flags := binary.BigEndian.AppendUint32(nil, nfqaCfgFailOpen)
	msgs := [][]byte{
		nfqMessage(nfqnlMsgConfig, unix.NLM_F_ACK, slowQueue, [][2]any{{nfqaCfgCmd, cmd}}),
		nfqMessage(nfqnlMsgConfig, unix.NLM_F_ACK, slowQueue, [][2]any{{nfqaCfgParams, params}}),
		nfqMessage(nfqnlMsgConfig, unix.NLM_F_ACK, slowQueue, [][2]any{{nfqaCfgQueueMax, maxlen}}),
		nfqMessage(nfqnlMsgConfig, unix.NLM_F_ACK, slowQueue, [][2]any{{nfqaCfgMask, flags}, {nfqaCfgFlags, flags}}),
	}
	buf := make([]byte, 8192)
	for i, m := range msgs {
		if _, err := f.Write(m); err != nil {
			return fmt.Errorf("nfqueue config %d: %w", i, err)
		}
		if err := f.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
			return fmt.Errorf("nfqueue config %d: %w", i, err)
		}
		n, err := f.Read(buf)
		if err != nil {
			return fmt.Errorf("nfqueue config %d: read ack: %w", i, err)
		}
		if err := netlinkAckError(buf[:n]); err != nil {
			return fmt.Errorf("nfqueue config %d: %w", i, err)
		}
	}
	return f.SetReadDeadline(time.Time{})
}

// nfqMessage builds one nfnetlink_queue message: netlink header, nfgenmsg,
// attributes (type, payload).
func nfqMessage(msgType uint16, flags uint16, queue uint16, attrs [][2]any) []byte {
	b := make([]byte, unix.SizeofNlMsghdr, 64)
	b = append(b, unix.AF_UNSPEC, unix.NFNETLINK_V0)
	b = binary.BigEndian.AppendUint16(b, queue)
	for _, a := range attrs {
		typ, payload := a[0].(int), a[1].([]byte)
		l := unix.SizeofNlAttr + len(payload)
		b = binary.NativeEndian.AppendUint16(b, uint16(l))
		b = binary.NativeEndian.AppendUint16(b, uint16(typ))
		b = append(b, payload...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
	}
	binary.NativeEndian.PutUint32(b[0:4], uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:6], unix.NFNL_SUBSYS_QUEUE<<8|msgType)
	binary.NativeEndian.PutUint16(b[6:8], unix.NLM_F_REQUEST|flags)
	return b
}

// netlinkAckError returns the error carried by a netlink ack, nil for a
// positive ack.
func netlinkAckError(b []byte) error {
	if len(b) < unix.SizeofNlMsghdr+4 {
		return fmt.Errorf("short netlink reply (%d bytes)", len(b))
	}
	typ := binary.NativeEndian.Uint16(b[4:6])
	if typ != unix.NLMSG_ERROR {
		return fmt.Errorf("netlink reply of type %d, want an ack", typ)
	}
	if code := int32(binary.NativeEndian.Uint32(b[16:20])); code != 0 {
		return fmt.Errorf("kernel: %w", unix.Errno(-code))
	}
	return nil
}

// parsePacketIDs returns the packet ids of the NFQNL_MSG_PACKET messages in
// one read; anything malformed is skipped.
func parsePacketIDs(b []byte) []uint32 {
	var ids []uint32
	for len(b) >= unix.SizeofNlMsghdr {
		l := int(binary.NativeEndian.Uint32(b[0:4]))
		if l < unix.SizeofNlMsghdr || l > len(b) {
			break
		}
		msg := b[:l]
		if al := (l + 3) &^ 3; al <= len(b) {
			b = b[al:]
		} else {
			b = b[len(b):]
		}
		if binary.NativeEndian.Uint16(msg[4:6]) != unix.NFNL_SUBSYS_QUEUE<<8|nfqnlMsgPacket {
			continue
		}
		attrs := msg[unix.SizeofNlMsghdr+4:]
		for len(attrs) >= unix.SizeofNlAttr {
			al := int(binary.NativeEndian.Uint16(attrs[0:2]))
			typ := binary.NativeEndian.Uint16(attrs[2:4]) & 0x3fff // strip NLA_F_NESTED and byte-order flags
			if al < unix.SizeofNlAttr || al > len(attrs) {
				break
			}
			if typ == nfqaPacketHdr && al >= unix.SizeofNlAttr+4 {
				ids = append(ids, binary.BigEndian.Uint32(attrs[4:8]))
			}
			next := (al + 3) &^ 3
			if next > len(attrs) {
				break
			}
			attrs = attrs[next:]
		}
	}
	return ids
}
