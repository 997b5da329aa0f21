// Package cluster runs an emulated cluster on one Linux machine, for
// ftlaunch's integration tests and chaos experiments.
//
// Each host is a network namespace attached by a veth pair (with a fixed MAC
// derived from the node's address) to one Linux bridge in the machine's own
// namespace. A long-lived holder process per node keeps a private UTS
// namespace (hostname node001, node002, ...) and mount namespace (the
// cluster's /etc/hosts bind-mounted, so node names resolve inside nodes),
// and each node runs a real OpenSSH sshd on its own address with key-only
// root login. All nodes share one host key, so one wildcard known_hosts line
// covers them; the generated ssh client configuration (SSHConfig) works from
// the machine and from inside every node.
//
// Nodes share the machine's file system, process ID space, /dev/shm and
// CPUs, as the hosts of a cluster share a network file system. Processes of
// a node are found by their network namespace, never by name.
//
// Faults: Kill crashes a node (link down first, then SIGKILL of everything
// in it, so peers see silence and no FIN or RST), Partition and Heal cut and
// restore a node's link, and Revive reboots a node with the same address and
// MAC. Exec and Command run programs inside a node.
//
// Everything a cluster creates is recorded in a fixed state directory
// (Config.StateRoot/Config.Name), so that Up, Clean or Down can remove a
// cluster left by a crashed run. Bridge, namespace and interface names are
// derived from Config.Name; two clusters need different names and prefixes.
//
// All of this needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN), iproute2,
// util-linux and openssh-server; chaos/install-deps.sh installs them.
package cluster
