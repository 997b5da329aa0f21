package slurm

import (
	"fmt"
	"math"
	"net/netip"
	"path/filepath"
	"strings"
	"time"

	"github.com/ftlaunch/ftlaunch/chaos/cluster"
)

// Config describes a Slurm cluster. The zero value of every field means its
// default.
type Config struct {
	// Cluster names the emulated cluster underneath (name, state root,
	// prefix, ...). A zero Name means DefaultName and a zero Prefix
	// DefaultPrefix, so that a Slurm cluster and a plain emulated cluster
	// made with the chaos/cluster defaults can run side by side.
	Cluster cluster.Config
	// SlurmdTimeout is slurm.conf's SlurmdTimeout: how long slurmctld waits
	// for a silent slurmd before it sets the node DOWN. Default 300 s, as in
	// Slurm; fault tests lower it. Rounded up to whole seconds.
	SlurmdTimeout time.Duration
	// CPUs is the number of CPUs slurm.conf gives each node. Default 2.
	// Slurm believes it even above the hardware (config_overrides).
	CPUs int
	// RealMemory is each node's memory in MiB for slurm.conf. Default 1000.
	RealMemory int
	// Partition is the name of the one (default) partition. Default "debug".
	Partition string
	// ReadyTimeout bounds how long Up waits for every node to be idle.
	// Default 60 s.
	ReadyTimeout time.Duration
	// Slurmctld, Slurmd and Munged are the daemons, by absolute path.
	// Defaults /usr/sbin/slurmctld, /usr/sbin/slurmd, /usr/sbin/munged.
	Slurmctld, Slurmd, Munged string
}

// Defaults used for a zero Config field.
const (
	DefaultName          = "fts"
	DefaultSlurmdTimeout = 300 * time.Second
	DefaultCPUs          = 2
	DefaultRealMemory    = 1000
	DefaultPartition     = "debug"
	DefaultReadyTimeout  = 60 * time.Second
	DefaultSlurmctld     = "/usr/sbin/slurmctld"
	DefaultSlurmd        = "/usr/sbin/slurmd"
	DefaultMunged        = "/usr/sbin/munged"
)

// defaultPrefix is the network of a Slurm cluster whose Config.Cluster.Prefix
// is unset: not chaos/cluster's default, so both can run at once.
var defaultPrefix = netip.MustParsePrefix("10.76.0.0/16")

// DefaultPrefix returns the network used when Config.Cluster.Prefix is unset.
func DefaultPrefix() netip.Prefix { return defaultPrefix }

// withDefaults fills in the zero fields and validates the configuration.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Cluster.Name == "" {
		cfg.Cluster.Name = DefaultName
	}
	if !cfg.Cluster.Prefix.IsValid() {
		cfg.Cluster.Prefix = defaultPrefix
	}
	if cfg.SlurmdTimeout <= 0 {
		cfg.SlurmdTimeout = DefaultSlurmdTimeout
	}
	if cfg.CPUs <= 0 {
		cfg.CPUs = DefaultCPUs
	}
	if cfg.RealMemory <= 0 {
		cfg.RealMemory = DefaultRealMemory
	}
	if cfg.Partition == "" {
		cfg.Partition = DefaultPartition
	}
	if strings.ContainsAny(cfg.Partition, " \t\n=#,") {
		return cfg, fmt.Errorf("partition name %q: no spaces, '=', '#' or ','", cfg.Partition)
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = DefaultReadyTimeout
	}
	for _, p := range []*string{&cfg.Slurmctld, &cfg.Slurmd, &cfg.Munged} {
		if *p == "" {
			continue
		}
		if !filepath.IsAbs(*p) {
			return cfg, fmt.Errorf("daemon %q: want an absolute path", *p)
		}
	}
	if cfg.Slurmctld == "" {
		cfg.Slurmctld = DefaultSlurmctld
	}
	if cfg.Slurmd == "" {
		cfg.Slurmd = DefaultSlurmd
	}
	if cfg.Munged == "" {
		cfg.Munged = DefaultMunged
	}
	return cfg, nil
}

// layout names the files of a Slurm cluster inside the emulated cluster's
// state directory.
type layout struct{ dir string } // StateRoot/Name/slurm

func (l layout) conf() string        { return filepath.Join(l.dir, "slurm.conf") }
func (l layout) cgroupConf() string  { return filepath.Join(l.dir, "cgroup.conf") }
func (l layout) state() string       { return filepath.Join(l.dir, "state.json") }
func (l layout) mungeDir() string    { return filepath.Join(l.dir, "munge") }
func (l layout) mungeKey() string    { return filepath.Join(l.mungeDir(), "munge.key") }
func (l layout) mungeRun() string    { return filepath.Join(l.mungeDir(), "run") }
func (l layout) mungeSocket() string { return filepath.Join(l.mungeRun(), "munge.socket") }
func (l layout) mungePid() string    { return filepath.Join(l.mungeDir(), "munged.pid") }
func (l layout) mungeLog() string    { return filepath.Join(l.mungeDir(), "munged.log") }
func (l layout) mungeSeed() string   { return filepath.Join(l.mungeDir(), "munged.seed") }
func (l layout) ctlDir() string      { return filepath.Join(l.dir, "ctl") }
func (l layout) ctlState() string    { return filepath.Join(l.ctlDir(), "state") }
func (l layout) ctlPid() string      { return filepath.Join(l.ctlDir(), "slurmctld.pid") }
func (l layout) ctlLog() string      { return filepath.Join(l.ctlDir(), "slurmctld.log") }
func (l layout) nodesDir() string    { return filepath.Join(l.dir, "nodes") }
func (l layout) nodeDir(node string) string {
	return filepath.Join(l.nodesDir(), node)
}
func (l layout) slurmdPid(node string) string {
	return filepath.Join(l.nodeDir(node), "slurmd.pid")
}
func (l layout) slurmdLog(node string) string {
	return filepath.Join(l.nodeDir(node), "slurmd.log")
}
func (l layout) slurmdOut(node string) string {
	return filepath.Join(l.nodeDir(node), "slurmd.out")
}

// confNode is what slurm.conf needs of one compute node.
type confNode struct {
	Name string
	Addr netip.Addr
}

// slurmConf is the cluster's slurm.conf. Every path is private to the
// cluster; per-node files use %n, which slurmd replaces by its -N name.
func slurmConf(cfg Config, l layout, ctlName string, ctlAddr netip.Addr, nodes []confNode) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	w("# slurm.conf of the Slurm test cluster on emulated cluster %q (generated by chaos/slurm).", cfg.Cluster.Name)
	w("ClusterName=%s", cfg.Cluster.Name)
	w("SlurmctldHost=%s(%s)", ctlName, ctlAddr)
	w("SlurmUser=root")
	w("SlurmdUser=root")
	w("AuthType=auth/munge")
	w("AuthInfo=socket=%s", l.mungeSocket())
	w("CredType=cred/munge")
	w("StateSaveLocation=%s", l.ctlState())
	w("SlurmctldPidFile=%s", l.ctlPid())
	w("SlurmctldLogFile=%s", l.ctlLog())
	w("SlurmdSpoolDir=%s", filepath.Join(l.nodesDir(), "%n", "spool"))
	w("SlurmdPidFile=%s", filepath.Join(l.nodesDir(), "%n", "slurmd.pid"))
	w("SlurmdLogFile=%s", filepath.Join(l.nodesDir(), "%n", "slurmd.log"))
	w("ProctrackType=proctrack/linuxproc")
	w("TaskPlugin=task/none")
	w("MpiDefault=none")
	w("AccountingStorageType=accounting_storage/none")
	w("JobAcctGatherType=jobacct_gather/none")
	w("JobCompType=jobcomp/none")
	w("SelectType=select/cons_tres")
	w("SelectTypeParameters=CR_CPU")
	w("ReturnToService=2")
	w("SlurmdTimeout=%d", int(math.Ceil(cfg.SlurmdTimeout.Seconds())))
	w("SlurmdParameters=config_overrides")
	w("MailProg=/bin/true")
	for _, n := range nodes {
		w("NodeName=%s NodeAddr=%s CPUs=%d RealMemory=%d State=UNKNOWN", n.Name, n.Addr, cfg.CPUs, cfg.RealMemory)
	}
	w("PartitionName=%s Nodes=ALL Default=YES MaxTime=INFINITE State=UP", cfg.Partition)
	return b.String()
}

// cgroupConf keeps slurmd from mounting or requiring cgroup v2; the
// cluster uses proctrack/linuxproc and task/none.
const cgroupConf = "CgroupPlugin=cgroup/v1\nCgroupAutomount=no\n"
