// Package chaostest brings the project's emulated clusters up for tests:
// it skips a test where they cannot run (no root, no network namespaces,
// packages missing), picks a random name and a free random /24 in
// 10.200.0.0–10.249.255.0 so that concurrent runs do not collide, and
// takes the cluster down when the test ends.
package chaostest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/chaos/cluster"
	"github.com/ftlaunch/ftlaunch/chaos/slurm"
)

// RequireNamespaces skips the test unless emulated hosts can be made
// here: root, ip (iproute2), network namespaces (probed with a throw-away
// one, not judged by the user id) and OpenSSH's sshd.
func RequireNamespaces(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("emulated cluster: needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		tb.Skip("emulated cluster: ip (iproute2) not installed; make deps installs it")
	}
	probe := fmt.Sprintf("ftprobe%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", probe).CombinedOutput(); err != nil {
		tb.Skipf("emulated cluster: cannot create network namespaces here (ip netns add: %v: %s)", err, strings.TrimSpace(string(out)))
	}
	if out, err := exec.Command("ip", "netns", "del", probe).CombinedOutput(); err != nil {
		tb.Fatalf("remove probe namespace %s: %v: %s", probe, err, out)
	}
	if _, err := os.Stat(cluster.DefaultSSHD); err != nil {
		tb.Skipf("emulated cluster: %s not installed; make deps installs openssh-server", cluster.DefaultSSHD)
	}
}

// RequireSlurm is RequireNamespaces and the Slurm daemons, clients and
// munge.
func RequireSlurm(tb testing.TB) {
	tb.Helper()
	RequireNamespaces(tb)
	for _, p := range []string{slurm.DefaultSlurmctld, slurm.DefaultSlurmd, slurm.DefaultMunged} {
		if _, err := os.Stat(p); err != nil {
			tb.Skipf("slurm cluster: %s not installed; make deps installs it", p)
		}
	}
	for _, p := range []string{"srun", "salloc", "sinfo", "nsenter"} {
		if _, err := exec.LookPath(p); err != nil {
			tb.Skipf("slurm cluster: %s not installed; make deps installs slurm-client", p)
		}
	}
}

// Cluster brings up n emulated hosts with cfg (Name, StateRoot and Prefix
// are filled in when empty; ConnectTimeout defaults to 2 s) and takes
// them down when the test ends.
func Cluster(tb testing.TB, n int, cfg cluster.Config) *cluster.Cluster {
	tb.Helper()
	RequireNamespaces(tb)
	fill(tb, &cfg, tb.TempDir())
	return onFreePrefix(tb, &cfg, func() (*cluster.Cluster, error) { return cluster.Up(context.Background(), cfg, n) },
		func(c *cluster.Cluster) error { return c.Down(context.Background()) })
}

// Slurm brings up a Slurm cluster of n compute nodes with cfg's settings
// (its Cluster field is filled in as by Cluster) and takes it down when
// the test ends.
func Slurm(tb testing.TB, n int, cfg slurm.Config) *slurm.Cluster {
	tb.Helper()
	RequireSlurm(tb)
	// munged wants every directory above its socket executable by all,
	// which tb.TempDir() is not.
	root, err := os.MkdirTemp("", "ftslurm-test-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		tb.Fatal(err)
	}
	fill(tb, &cfg.Cluster, root)
	start := time.Now()
	c := onFreePrefix(tb, &cfg.Cluster, func() (*slurm.Cluster, error) { return slurm.Up(context.Background(), cfg, n) },
		func(c *slurm.Cluster) error { return c.Down(context.Background()) })
	tb.Logf("slurm cluster %s (%v): %d nodes up in %v", cfg.Cluster.Name, cfg.Cluster.Prefix, n, time.Since(start).Round(time.Millisecond))
	return c
}

func fill(tb testing.TB, cfg *cluster.Config, root string) {
	if cfg.Name == "" {
		b := make([]byte, 4)
		if _, err := rand.Read(b); err != nil {
			tb.Fatal(err)
		}
		cfg.Name = "t" + hex.EncodeToString(b)[:7]
	}
	if cfg.StateRoot == "" {
		cfg.StateRoot = root
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 2 * time.Second
	}
}

// onFreePrefix calls up with random prefixes until one is not in use (10
// tries) and registers down as the test's cleanup.
func onFreePrefix[C any](tb testing.TB, cfg *cluster.Config, up func() (C, error), down func(C) error) C {
	tb.Helper()
	for try := 0; ; try++ {
		x, err := rand.Int(rand.Reader, big.NewInt(50*256))
		if err != nil {
			tb.Fatal(err)
		}
		v := int(x.Int64())
		cfg.Prefix = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(200 + v/256), byte(v % 256), 0}), 24)
		c, err := up()
		if errors.Is(err, cluster.ErrPrefixInUse) && try < 10 {
			continue
		}
		if err != nil {
			tb.Fatalf("cluster %s up: %v", cfg.Name, err)
		}
		tb.Cleanup(func() {
			if err := down(c); err != nil {
				tb.Errorf("cluster %s down: %v", cfg.Name, err)
			}
		})
		return c
	}
}
