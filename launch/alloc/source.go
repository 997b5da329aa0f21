package alloc

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// Sources holds everything Discover may read an allocation from.
type Sources struct {
	// HostList is the value of -H ("" when not given).
	HostList string
	// Hostfile is the path given to --hostfile ("" when not given).
	Hostfile string
	// Getenv looks up an environment variable; nil means an empty
	// environment. Pass os.Getenv from the command line, a map lookup in
	// tests.
	Getenv func(string) string
	// Open opens a file named by Hostfile or PBS_NODEFILE; nil means os.Open.
	Open func(name string) (io.ReadCloser, error)
}

// Discover picks the allocation the way mpirun users expect: an explicit
// host list or hostfile first (giving both is an error), else a Slurm
// allocation (SLURM_JOB_NODELIST, or SLURM_NODELIST, with
// SLURM_TASKS_PER_NODE), else PBS_NODEFILE, else none: an Allocation with
// Source SourceNone and no hosts, which the caller turns into Local.
func Discover(src Sources) (Allocation, error) {
	getenv := src.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	open := src.Open
	if open == nil {
		open = func(name string) (io.ReadCloser, error) { return os.Open(name) }
	}
	switch {
	case src.HostList != "" && src.Hostfile != "":
		return Allocation{}, errors.New("both -H and --hostfile given; use one")
	case src.HostList != "":
		hosts, err := ParseHostList(src.HostList)
		if err != nil {
			return Allocation{}, err
		}
		return Allocation{Source: SourceHostList, Hosts: hosts}, nil
	case src.Hostfile != "":
		hosts, err := readWith(open, src.Hostfile, ParseHostfile)
		if err != nil {
			return Allocation{}, err
		}
		return Allocation{Source: SourceHostfile, Hosts: hosts}, nil
	}
	if a, ok, err := FromSlurm(getenv); ok || err != nil {
		return a, err
	}
	if path := getenv("PBS_NODEFILE"); path != "" {
		hosts, err := readWith(open, path, ParsePBSNodefile)
		if err != nil {
			return Allocation{}, fmt.Errorf("PBS_NODEFILE: %w", err)
		}
		return Allocation{Source: SourcePBS, Hosts: hosts}, nil
	}
	return Allocation{Source: SourceNone}, nil
}

// readWith opens path and hands it to parse.
func readWith(open func(string) (io.ReadCloser, error), path string,
	parse func(string, io.Reader) ([]Host, error)) ([]Host, error) {
	f, err := open(path)
	if err != nil {
		return nil, fmt.Errorf("open host file: %w", err)
	}
	defer f.Close()
	return parse(path, f)
}

// FromSlurm reads a Slurm allocation from the environment: the hosts of
// SLURM_JOB_NODELIST (or the older SLURM_NODELIST) with slot counts from
// SLURM_TASKS_PER_NODE when set. ok is false when no Slurm node list is
// present. A node named twice, or a tasks-per-node list whose length differs
// from the node count, is an error.
func FromSlurm(getenv func(string) string) (a Allocation, ok bool, err error) {
	list := getenv("SLURM_JOB_NODELIST")
	if list == "" {
		list = getenv("SLURM_NODELIST")
	}
	if list == "" {
		return Allocation{}, false, nil
	}
	names, err := ExpandHostlist(list)
	if err != nil {
		return Allocation{}, true, fmt.Errorf("SLURM_JOB_NODELIST: %w", err)
	}
	hosts := make([]Host, len(names))
	seen := hostSet{}
	for i, n := range names {
		if prev, ok := seen.add(n, i+1); !ok {
			return Allocation{}, true, fmt.Errorf("SLURM_JOB_NODELIST: node %q listed twice (positions %d and %d)", n, prev, i+1)
		}
		hosts[i].Name = n
	}
	if tpn := getenv("SLURM_TASKS_PER_NODE"); tpn != "" {
		counts, err := ParseTasksPerNode(tpn)
		if err != nil {
			return Allocation{}, true, fmt.Errorf("SLURM_TASKS_PER_NODE: %w", err)
		}
		if len(counts) != len(hosts) {
			return Allocation{}, true, fmt.Errorf("SLURM_TASKS_PER_NODE %q gives %d nodes, SLURM_JOB_NODELIST %d",
				tpn, len(counts), len(hosts))
		}
		for i, c := range counts {
			hosts[i].Slots = c
		}
	}
	return Allocation{Source: SourceSlurm, Hosts: hosts}, true, nil
}
