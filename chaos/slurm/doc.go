// Package slurm runs a real Slurm cluster on an emulated cluster (package
// chaos/cluster), for ftlaunch's tests under Slurm and for comparing
// ftlaunch with srun.
//
// Up(n) brings up n+1 emulated nodes. Nodes node001 to nodeN are the
// compute nodes: each runs its own slurmd (slurmd -N nodeNNN) with private
// spool, log and pid files. The extra node after them is the controller and
// login node: it runs the cluster's one munged (its socket, on the shared
// file system, serves every node) and slurmctld, and every Slurm client this
// package runs (sinfo, srun, salloc, sbatch, ...) runs inside it, as users
// of a real cluster run them on a login node. Running the clients there, and
// not in the machine's own namespace, matters: slurmctld reaches srun by the
// host name srun reports, which must resolve, from the controller, to an
// address srun listens on; otherwise srun never hears of node failures.
//
// Every process of the Slurm cluster lives in a node's network namespace,
// so the emulated cluster's Down (and Kill of a node) finds and stops them
// by namespace, and Down leaves nothing behind. Configuration, keys, logs
// and spool directories live in the emulated cluster's state directory,
// under slurm/.
//
// Needs root, network namespaces, the emulated cluster's tools
// (chaos/install-deps.sh) and slurmctld, slurmd, the Slurm clients and
// munge (chaos/install-slurm-deps.sh). See docs/slurm-cluster.md.
package slurm
