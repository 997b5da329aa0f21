// Package sshspawn starts commands on remote hosts over SSH, the way
// ftlaunch agents start their children: one SSH connection per child agent,
// kept open for the life of the job, with the job's credentials written to
// the command's standard input (never its argv or environment).
//
// A Spawner is built on golang.org/x/crypto/ssh and reads a subset of the
// OpenSSH client configuration (HostName, User, Port, IdentityFile,
// UserKnownHostsFile, StrictHostKeyChecking, ConnectTimeout, ForwardAgent).
// It authenticates with ssh-agent keys and identity files, verifies host
// keys against known_hosts (optionally recording new ones), and is built
// for launching many hosts at once:
//
//   - at most Options.MaxConcurrent starts are in progress, and at most
//     Options.MaxPerHost unauthenticated connections go to one host, since
//     sshd (MaxStartups 10:30:100 by default) resets connections beyond ~10;
//   - a connection that sshd resets or closes before the key exchange
//     completes is retried with exponential backoff and jitter, a bounded
//     number of times; host key and authentication failures are not;
//   - TCP_QUICKACK is re-armed after every read (sshd leaves Nagle on for
//     sessions without a terminal, which otherwise costs a delayed ACK of
//     ~40 ms per round trip), TCP_NODELAY is set, and TCP_USER_TIMEOUT
//     bounds how long a dead peer goes unnoticed while data is in flight;
//   - each Session reports the time spent dialling, in key exchange, in
//     authentication and starting the command (Timings), the inputs of the
//     launch-time model's REM and SEQ.
//
// The command runs as "exec ARGV..." through the remote user's login shell,
// each argument quoted for a POSIX shell (Command). The package starts no
// goroutines of its own beyond those of x/crypto/ssh, which end when the
// session's connection closes.
package sshspawn
