package cluster

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestSlowLink(t *testing.T) {
	requireEmulation(t)
	c := upTest(t, testConfig(t), 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n1 := netip.AddrPortFrom(c.Config().nodeAddr(1), 22).String()
	dial := func(timeout time.Duration) (time.Duration, error) {
		start := time.Now()
		conn, err := net.DialTimeout("tcp", n1, timeout)
		if err == nil {
			conn.Close()
		}
		return time.Since(start), err
	}
	if _, err := dial(5 * time.Second); err != nil {
		t.Fatal(err)
	}

	const delay = 150 * time.Millisecond
	sl, err := c.SlowLink(ctx, "node001", delay, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The SYN waits for the delay entering node001: connecting cannot be
	// faster than that.
	if took, err := dial(5 * time.Second); err != nil || took < delay {
		t.Errorf("dial through a %v link: %v, %v", delay, took, err)
	}
	if got, err := sshFrom(ctx, c, "node002", "node001", "hostname"); err != nil || got != "node001" {
		t.Errorf("ssh over the slow link = %q, %v", got, err)
	}
	if rules := mustExec(t, c, "node001", "iptables", "-w", "-S", "INPUT"); !strings.Contains(rules, "NFQUEUE") {
		t.Errorf("no NFQUEUE rule in node001: %s", rules)
	}
	if err := sl.Stop(); err != nil {
		t.Fatal(err)
	}
	if passed, _ := sl.Counts(); passed == 0 {
		t.Error("slow link passed no packets")
	}
	if rules := mustExec(t, c, "node001", "iptables", "-w", "-S", "INPUT"); strings.Contains(rules, "NFQUEUE") {
		t.Errorf("NFQUEUE rule left in node001 after Stop: %s", rules)
	}

	// Total loss: silence; Stop restores the link.
	lossy, err := c.SlowLink(ctx, "node001", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dial(time.Second); !isTimeout(err) {
		t.Errorf("dial through a link dropping everything: %v, want a timeout", err)
	}
	if _, dropped := lossy.Counts(); dropped == 0 {
		t.Error("lossy link dropped nothing")
	}
	// Kill stops the node's slow link; Revive brings the node back without it.
	if err := c.Kill(ctx, "node001"); err != nil {
		t.Fatal(err)
	}
	if err := lossy.Stop(); err != nil {
		t.Errorf("Stop after Kill: %v", err)
	}
	if err := c.Revive(ctx, "node001"); err != nil {
		t.Fatal(err)
	}
	if _, err := dial(5 * time.Second); err != nil {
		t.Errorf("dial revived node001: %v", err)
	}

	// A slow link ends with its context.
	lctx, lcancel := context.WithCancel(ctx)
	sl, err = c.SlowLink(lctx, "node002", delay, 0)
	if err != nil {
		t.Fatal(err)
	}
	lcancel()
	waitFor(t, 10*time.Second, "rule removed after cancel", func() error {
		if rules := mustExec(t, c, "node002", "iptables", "-w", "-S", "INPUT"); strings.Contains(rules, "NFQUEUE") {
			return errRuleLeft
		}
		return nil
	})
	if err := sl.Stop(); err != nil {
		t.Error(err)
	}
}

var errRuleLeft = errors.New("NFQUEUE rule still present")

func TestParsePacketIDs(t *testing.T) {
	// Two packet messages and one of another type, as the kernel batches them.
	pkt := func(id uint32) []byte {
		hdr := []byte{byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id), 0x08, 0x00, 1}
		return nfqMessage(nfqnlMsgPacket, 0, slowQueue, [][2]any{{nfqaPacketHdr, hdr}})
	}
	var b []byte
	b = append(b, pkt(7)...)
	b = append(b, nfqMessage(nfqnlMsgConfig, 0, slowQueue, [][2]any{{nfqaPacketHdr, []byte{0, 0, 0, 9}}})...)
	b = append(b, pkt(0x01020304)...)
	got := parsePacketIDs(b)
	if len(got) != 2 || got[0] != 7 || got[1] != 0x01020304 {
		t.Errorf("parsePacketIDs = %v", got)
	}
	for _, bad := range [][]byte{nil, {1, 2, 3}, b[:len(b)-3], make([]byte, 40)} {
		parsePacketIDs(bad) // must not panic
	}
}
