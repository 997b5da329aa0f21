package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// killTimeout bounds how long Kill waits for a node's processes to die.
const killTimeout = 10 * time.Second

// update runs fn on the freshly loaded state under the handle's mutex and the
// root lock, then saves the state (also when fn fails part-way, so the record
// follows what was done).
func (c *Cluster) update(ctx context.Context, fn func(st *state) error) error {
	c.opMu.Lock()
	defer c.opMu.Unlock()
	unlock, err := lockRoot(ctx, c.cfg.StateRoot)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := loadState(c.cfg)
	if err != nil {
		return err
	}
	ferr := fn(st)
	if err := st.save(); err != nil {
		return errors.Join(ferr, err)
	}
	return ferr
}

// updateNode is update for one node.
func (c *Cluster) updateNode(ctx context.Context, name string, fn func(nd *Node) error) error {
	return c.update(ctx, func(st *state) error {
		nd, err := st.node(name)
		if err != nil {
			return err
		}
		return fn(nd)
	})
}

// Kill crashes a node the way a machine dies: it first takes the host side of
// the node's veth down, so that nothing the dying processes send (FIN, RST)
// reaches anyone, then SIGKILLs every process in the node's network
// namespace and waits until they are gone. Peers see silence: established
// connections stay ESTABLISHED and retransmit into the void, and new
// connections time out. Only Revive brings the node back. Killing a killed
// node is a no-op.
func (c *Cluster) Kill(ctx context.Context, node string) error {
	return c.updateNode(ctx, node, func(nd *Node) error {
		return c.kill(ctx, nd)
	})
}

// kill is Kill on a loaded node; the caller holds the locks.
func (c *Cluster) kill(ctx context.Context, nd *Node) error {
	c.stopSlow(nd.Name)
	if linkExists(nd.Veth) {
		if err := ipCmd(ctx, "link", "set", nd.Veth, "down"); err != nil {
			return fmt.Errorf("kill %s: %w", nd.Name, err)
		}
	}
	kctx, cancel := context.WithTimeout(ctx, killTimeout)
	defer cancel()
	if err := killNetns(kctx, []string{nd.Netns}); err != nil {
		return fmt.Errorf("kill %s: %w", nd.Name, err)
	}
	c.reap(nd.Name)
	nd.State = StateKilled
	nd.HolderPID = 0
	nd.SSHDPID = 0
	return nil
}

// Partition cuts a running node off the network (its link goes down) without
// killing anything. Its processes and connections live on; peers see
// silence, as for a crash, until Heal.
func (c *Cluster) Partition(ctx context.Context, node string) error {
	return c.updateNode(ctx, node, func(nd *Node) error {
		if nd.State == StateKilled {
			return fmt.Errorf("partition %s: node is down", nd.Name)
		}
		if err := ipCmd(ctx, "link", "set", nd.Veth, "down"); err != nil {
			return fmt.Errorf("partition %s: %w", nd.Name, err)
		}
		nd.State = StatePartitioned
		return nil
	})
}

// ErrNodeDown reports an operation that needs a running node on one that was
// killed.
var ErrNodeDown = errors.New("node is down")

// Heal reconnects a partitioned node. Healing a killed node is refused: its
// dead sockets' FINs would escape; Revive it instead.
func (c *Cluster) Heal(ctx context.Context, node string) error {
	return c.updateNode(ctx, node, func(nd *Node) error {
		if nd.State == StateKilled {
			return fmt.Errorf("heal %s: %w (Revive it)", nd.Name, ErrNodeDown)
		}
		if err := ipCmd(ctx, "link", "set", nd.Veth, "up"); err != nil {
			return fmt.Errorf("heal %s: %w", nd.Name, err)
		}
		nd.State = StateUp
		return nil
	})
}

// Revive reboots a node: a running node is killed first; then its namespace
// and veth are replaced by fresh ones with the same address and MAC, and a
// new holder and sshd start. Peers holding connections to the old node get
// RST on their next retransmission, as from a rebooted host.
func (c *Cluster) Revive(ctx context.Context, node string) error {
	return c.updateNode(ctx, node, func(nd *Node) error {
		if nd.State != StateKilled {
			if err := c.kill(ctx, nd); err != nil {
				return fmt.Errorf("revive %s: %w", nd.Name, err)
			}
		}
		// Deleting one end of a veth deletes the pair at once; the old
		// namespace (and its dead sockets) goes with its last reference.
		lines := []string{}
		if linkExists(nd.Veth) {
			lines = append(lines, "link del "+nd.Veth)
		}
		if _, err := os.Stat(filepath.Join(netnsDir, nd.Netns)); err == nil {
			lines = append(lines, "netns del "+nd.Netns)
		}
		lines = append(lines, linkLines(c.cfg, *nd)...)
		if err := ipBatch(ctx, false, lines); err != nil {
			return fmt.Errorf("revive %s: %w", nd.Name, err)
		}
		if err := c.boot(ctx, nd); err != nil {
			return fmt.Errorf("revive: %w", err)
		}
		return nil
	})
}

// Command returns a command that runs argv inside the node: in its network,
// UTS and mount namespaces (nsenter through the node's holder), with the
// node's session variables (FTCLUSTER_NODE, FTCLUSTER_SCRATCH, TMPDIR, HOME
// and the rest, as ssh sessions get them) added to this process's
// environment. It works on a partitioned node, not on a killed one. The
// caller runs the command; ctx kills it as in exec.CommandContext.
func (c *Cluster) Command(ctx context.Context, node string, argv ...string) (*exec.Cmd, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("exec on %s: empty command", node)
	}
	nd, err := c.Node(node)
	if err != nil {
		return nil, err
	}
	if nd.State == StateKilled || nd.HolderPID == 0 {
		return nil, fmt.Errorf("exec on %s: %w", node, ErrNodeDown)
	}
	// Make sure the pid still is the node's holder, not a reused pid.
	want, err := netnsID(nd.Netns)
	if err != nil {
		return nil, fmt.Errorf("exec on %s: %w", node, err)
	}
	got, err := statNS("/proc/" + strconv.Itoa(nd.HolderPID) + "/ns/net")
	if err != nil || got != want {
		return nil, fmt.Errorf("exec on %s: holder process %d is gone: %w", node, nd.HolderPID, ErrNodeDown)
	}
	args := append([]string{"-t", strconv.Itoa(nd.HolderPID), "-n", "-u", "-m", "--"}, argv...)
	cmd := exec.CommandContext(ctx, "nsenter", args...)
	cmd.Env = append(os.Environ(), nodeEnv(c.cfg, nd)...)
	return cmd, nil
}

// Exec runs argv inside the node (see Command) and returns its standard
// output. A failure's error includes the command's standard error.
func (c *Cluster) Exec(ctx context.Context, node string, argv ...string) ([]byte, error) {
	cmd, err := c.Command(ctx, node, argv...)
	if err != nil {
		return nil, err
	}
	var out, errb bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("exec %q on %s: %w: %s", argv, node, err, bytes.TrimSpace(errb.Bytes()))
	}
	return out.Bytes(), nil
}

// NodeStatus is a node's recorded state together with what is observed.
type NodeStatus struct {
	Node
	LinkUp      bool // host side of the veth is up
	HolderAlive bool // the namespace holder runs
	SSHDAlive   bool // the node's sshd runs
	Procs       int  // processes in the node's network namespace
}

// Status observes every node.
func (c *Cluster) Status() ([]NodeStatus, error) {
	nodes, err := c.Nodes()
	if err != nil {
		return nil, err
	}
	names := make([]string, len(nodes))
	for i, nd := range nodes {
		names[i] = nd.Netns
	}
	pids, err := PidsInNetns(names)
	if err != nil {
		return nil, err
	}
	out := make([]NodeStatus, len(nodes))
	for i, nd := range nodes {
		out[i] = NodeStatus{
			Node:        nd,
			LinkUp:      linkUp(nd.Veth),
			HolderAlive: alive(nd.HolderPID),
			SSHDAlive:   alive(nd.SSHDPID),
			Procs:       len(pids[nd.Netns]),
		}
	}
	return out, nil
}
