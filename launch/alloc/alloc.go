// Package alloc reads a job's allocation (the hosts it may use and how many
// ranks each host takes) and places ranks on those hosts.
//
// An allocation comes from one of four sources, picked by Discover in the
// order mpirun users expect: an explicit host list (-H) or hostfile
// (--hostfile), else a Slurm allocation (SLURM_JOB_NODELIST with
// SLURM_TASKS_PER_NODE), else a PBS/Torque node file (PBS_NODEFILE), else
// none, which means "this machine only".
//
// Place turns an allocation and a request (-n, --ppn, --map-by,
// oversubscription) into a Placement: for each rank its node, local rank and
// local size, and for each used node its name and ranks. ProcessMapping
// renders a Placement as MPICH's PMI_process_mapping value.
//
// The package never reads the process environment itself: Discover takes
// the environment as a lookup function, and reads the files it names through
// Sources.Open (os.Open when nil). All functions are safe for concurrent use;
// the values they return are owned by the caller.
package alloc

import (
	"fmt"
	"strings"
)

// Limits that turn absurd input into errors instead of huge allocations.
const (
	// MaxSlots is the largest slot count accepted for one host.
	MaxSlots = 1 << 20
	// MaxHosts is the largest number of hosts an allocation may hold
	// (also bounds hostlist expansion).
	MaxHosts = 1 << 20
	// MaxRanks is the largest -n accepted by Place.
	MaxRanks = 1 << 24
	// maxHostnameLen bounds one host name (DNS limit).
	maxHostnameLen = 253
)

// Source tells where an allocation came from.
type Source int

// The allocation sources, in the order Discover prefers them.
const (
	SourceNone     Source = iota // no allocation: run on the local machine
	SourceHostList               // -H host1,host2:4
	SourceHostfile               // --hostfile F
	SourceSlurm                  // SLURM_JOB_NODELIST + SLURM_TASKS_PER_NODE
	SourcePBS                    // PBS_NODEFILE
)

// String returns a short lower-case name of the source.
func (s Source) String() string {
	switch s {
	case SourceNone:
		return "none"
	case SourceHostList:
		return "hostlist"
	case SourceHostfile:
		return "hostfile"
	case SourceSlurm:
		return "slurm"
	case SourcePBS:
		return "pbs"
	}
	return fmt.Sprintf("source(%d)", int(s))
}

// Host is one allocated host. Slots is the number of ranks the allocation
// grants on it; 0 means the source gave no count (Place then gives the host
// ceil(n / hosts) slots).
type Host struct {
	Name  string
	Slots int
}

// Allocation is an ordered list of distinct hosts and where it came from.
// An allocation with Source == SourceNone and no hosts stands for the local
// machine; Place needs at least one host, see Local.
type Allocation struct {
	Source Source
	Hosts  []Host
}

// Local returns the allocation used when no source is present: the single
// host name given (normally os.Hostname or "localhost") without a slot count.
func Local(hostname string) Allocation {
	return Allocation{Source: SourceNone, Hosts: []Host{{Name: hostname}}}
}

// validHostname reports whether name can be a host in an allocation: a
// non-empty run of letters, digits, '.', '-' and '_' no longer than a DNS name.
func validHostname(name string) error {
	if name == "" {
		return fmt.Errorf("empty host name")
	}
	if len(name) > maxHostnameLen {
		return fmt.Errorf("host name %.20q... longer than %d bytes", name, maxHostnameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.' || c == '-' || c == '_':
		default:
			return fmt.Errorf("bad character %q in host name %q", c, name)
		}
	}
	return nil
}

// parseCount parses a slot count: a decimal integer in [1, MaxSlots].
func parseCount(s string) (int, error) {
	if s == "" || len(s) > 9 {
		return 0, fmt.Errorf("bad slot count %q", s)
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("bad slot count %q", s)
		}
		n = n*10 + int(c-'0')
	}
	if n == 0 {
		return 0, fmt.Errorf("slot count 0 for a host")
	}
	if n > MaxSlots {
		return 0, fmt.Errorf("slot count %d exceeds the limit %d", n, MaxSlots)
	}
	return n, nil
}

// hostSet detects hosts listed twice (Slurm node lists, which never repeat a
// node).
type hostSet map[string]int

// add records name at position pos (1-based, for messages). When the name
// (compared without case, as DNS does) is already present it returns the
// earlier position and false.
func (s hostSet) add(name string, pos int) (int, bool) {
	key := strings.ToLower(name)
	if prev, ok := s[key]; ok {
		return prev, false
	}
	s[key] = pos
	return pos, true
}

// hostMerger gathers the hosts of a host list, hostfile or node file in the
// order of their first appearance. A host named again adds its slots, as
// Hydra, Open MPI and PBS read a host repeated on several lines: an entry
// without a count stands for one slot once the host is repeated (a host
// named once without a count keeps Slots 0). Names are compared without
// case and never resolved: "localhost" and "127.0.0.1" stay two hosts.
type hostMerger struct {
	hosts []Host
	index map[string]int
}

// add adds h, or its slots to the host of the same name.
func (m *hostMerger) add(h Host) error {
	key := strings.ToLower(h.Name)
	if i, ok := m.index[key]; ok {
		prev := &m.hosts[i]
		n := max(prev.Slots, 1) + max(h.Slots, 1)
		if n > MaxSlots {
			return fmt.Errorf("host %q has more than %d slots", h.Name, MaxSlots)
		}
		prev.Slots = n
		return nil
	}
	if len(m.hosts) >= MaxHosts {
		return fmt.Errorf("more than %d hosts", MaxHosts)
	}
	if m.index == nil {
		m.index = map[string]int{}
	}
	m.index[key] = len(m.hosts)
	m.hosts = append(m.hosts, h)
	return nil
}
