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
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// netnsDir is where iproute2 keeps named network namespaces.
const netnsDir = "/run/netns"

// sysClassNet lists the network interfaces of the caller's (root) namespace.
const sysClassNet = "/sys/class/net"

// ipBatch runs one `ip -batch -` with lines on its standard input. With force,
// ip goes on after a failing line (-force) and the error is only reported.
func ipBatch(ctx context.Context, force bool, lines []string) error {
	args := []string{"-batch", "-"}
	if force {
		args = append([]string{"-force"}, args...)
	}
	cmd := exec.CommandContext(ctx, "ip", args...)
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip -batch (%d commands): %w: %s", len(lines), err, bytes.TrimSpace(out))
	}
	return nil
}

// ipCmd runs one ip command.
func ipCmd(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// nsID identifies a namespace by the device and inode of its nsfs file.
type nsID struct{ dev, ino uint64 }

func statNS(path string) (nsID, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nsID{}, err
	}
	return nsID{dev: uint64(st.Dev), ino: st.Ino}, nil
}

// netnsID identifies the named network namespace.
func netnsID(name string) (nsID, error) {
	id, err := statNS(filepath.Join(netnsDir, name))
	if err != nil {
		return nsID{}, fmt.Errorf("network namespace %s: %w", name, err)
	}
	return id, nil
}

// PidsInNetns returns, per namespace name, the processes whose network
// namespace is that one. It is what `ip netns pids` does, for many
// namespaces in one pass over /proc: processes are found by namespace, never
// by name. Namespaces that do not exist are left out.
func PidsInNetns(names []string) (map[string][]int, error) {
	want := make(map[nsID]string, len(names))
	for _, n := range names {
		id, err := netnsID(n)
		if err != nil {
			continue
		}
		want[id] = n
	}
	out := make(map[string][]int)
	if len(want) == 0 {
		return out, nil
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		id, err := statNS("/proc/" + e.Name() + "/ns/net")
		if err != nil {
			continue // exited, or a zombie whose namespaces are gone
		}
		if n, ok := want[id]; ok {
			out[n] = append(out[n], pid)
		}
	}
	return out, nil
}

// killNetns sends SIGKILL to every process in the named network namespaces
// and repeats until none is left (a process may fork between the scan and
// the kill), or until ctx ends.
func killNetns(ctx context.Context, names []string) error {
	wait := time.Millisecond
	for {
		byNS, err := PidsInNetns(names)
		if err != nil {
			return err
		}
		n := 0
		for _, pids := range byNS {
			for _, pid := range pids {
				n++
				if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
					return fmt.Errorf("kill pid %d: %w", pid, err)
				}
			}
		}
		if n == 0 {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("kill %d processes in %d namespaces: %w", n, len(byNS), ctx.Err())
		case <-t.C:
		}
		if wait < 20*time.Millisecond {
			wait *= 2
		}
	}
}

// listNetns returns the named network namespaces whose names start with
// prefix+"node" followed by digits only.
func listNetns(prefix string) ([]string, error) {
	ents, err := os.ReadDir(netnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list network namespaces: %w", err)
	}
	var out []string
	for _, e := range ents {
		if isDigitsAfter(e.Name(), prefix+"node") {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// listLinks returns the root namespace's interfaces named prefix+digits.
func listLinks(prefix string) ([]string, error) {
	ents, err := os.ReadDir(sysClassNet)
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	var out []string
	for _, e := range ents {
		if isDigitsAfter(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

func linkExists(name string) bool {
	_, err := os.Lstat(filepath.Join(sysClassNet, name))
	return err == nil
}

// linkUp reports whether the interface is administratively up.
func linkUp(name string) bool {
	b, err := os.ReadFile(filepath.Join(sysClassNet, name, "flags"))
	if err != nil {
		return false
	}
	v, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(string(b), "0x")), 16, 32)
	return err == nil && v&unix.IFF_UP != 0
}

func isDigitsAfter(s, prefix string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || rest == "" {
		return false
	}
	for _, r := range rest {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	return b[i+2] != 'Z' && b[i+2] != 'X'
}

// Poll calls cond until it reports true, with an interval growing from
// 1 ms to 20 ms, or until cond fails, ctx ends or timeout passes. It is how
// the chaos packages wait on a condition instead of sleeping.
func Poll(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	wait := time.Millisecond
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not done after %v", what, timeout)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-t.C:
		}
		if wait < 20*time.Millisecond {
			wait *= 2
		}
	}
}
