package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// NodeState is what the fault controls last did to a node.
type NodeState string

// Node states.
const (
	// StateUp: running and linked to the bridge.
	StateUp NodeState = "up"
	// StatePartitioned: running, but its link is down (Partition).
	StatePartitioned NodeState = "partitioned"
	// StateKilled: crashed (Kill); only Revive brings it back.
	StateKilled NodeState = "killed"
)

// Node describes one emulated host. It is a snapshot: the cluster's state
// file is the record, and methods of Cluster return fresh copies.
type Node struct {
	Name  string     `json:"name"`  // host name, node001...
	Index int        `json:"index"` // 1-based
	Addr  netip.Addr `json:"addr"`  // address on the cluster network
	MAC   string     `json:"mac"`   // fixed MAC of the node's eth0
	Netns string     `json:"netns"` // network namespace name (ip netns)
	Veth  string     `json:"veth"`  // host side of the node's veth pair
	// Dir is the node's own directory: sshd config, pid file and logs, and
	// the node-local scratch directory Dir/tmp.
	Dir   string    `json:"dir"`
	State NodeState `json:"state"`
	// HolderPID is the process holding the node's UTS and mount namespaces;
	// Exec enters them through it. Zero while the node is down.
	HolderPID int `json:"holder_pid"`
	// SSHDPID is the node's listening sshd. Zero while the node is down.
	SSHDPID int `json:"sshd_pid"`
	// Boots counts how many times the node was started (Up, Revive).
	Boots int `json:"boots"`
}

// Scratch is the node-local scratch directory (also the sessions' TMPDIR).
func (n Node) Scratch() string { return filepath.Join(n.Dir, "tmp") }

// stateVersion is bumped when the state file's meaning changes.
const stateVersion = 1

// state is the on-disk record of a cluster, StateRoot/Name/state.json.
type state struct {
	Version int    `json:"version"`
	Config  Config `json:"config"`
	Nodes   []Node `json:"nodes"`
}

func statePath(cfg Config) string { return filepath.Join(cfg.dir(), "state.json") }

// errNoState reports that the cluster has no state file.
var errNoState = errors.New("no cluster state")

func loadState(cfg Config) (*state, error) {
	p := statePath(cfg)
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("cluster %q (%s): %w", cfg.Name, p, errNoState)
	}
	if err != nil {
		return nil, fmt.Errorf("read cluster state: %w", err)
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("parse %s: %w", p, err)
	}
	if st.Version != stateVersion {
		return nil, fmt.Errorf("parse %s: state version %d, want %d", p, st.Version, stateVersion)
	}
	return &st, nil
}

// save writes the state atomically (temporary file, then rename).
func (st *state) save() error {
	p := statePath(st.Config)
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode cluster state: %w", err)
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write cluster state: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("write cluster state: %w", err)
	}
	return nil
}

func (st *state) node(name string) (*Node, error) {
	for i := range st.Nodes {
		if st.Nodes[i].Name == name {
			return &st.Nodes[i], nil
		}
	}
	return nil, fmt.Errorf("cluster %q has no node %q", st.Config.Name, name)
}

// lockRoot takes an exclusive flock on the state root directory, so that
// operations on clusters from different processes (the ftcluster command, a
// test) do not interleave. It polls so that ctx can cancel the wait. The
// returned function releases the lock.
func lockRoot(ctx context.Context, root string) (func(), error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("create state root: %w", err)
	}
	f, err := os.Open(root)
	if err != nil {
		return nil, fmt.Errorf("open state root for locking: %w", err)
	}
	wait := time.Millisecond
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing releases the flock
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock state root %s: %w", root, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, fmt.Errorf("lock state root %s: %w", root, ctx.Err())
		case <-t.C:
		}
		if wait < 50*time.Millisecond {
			wait *= 2
		}
	}
}
