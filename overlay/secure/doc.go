// Package secure gives every inter-agent TCP link of an ftlaunch job mutual
// TLS 1.3 authentication and encryption with credentials that belong to that
// job alone.
//
// # Credentials
//
// The front-end makes an ephemeral certificate authority per job with
// [NewJobCA]. Its key is Ed25519 and it is valid for [DefaultValidity], with
// [ClockSkewSlack] of back-dating so that agents whose clocks lag the
// front-end's still accept it. The CA issues one [Credentials] per agent
// ([CA.Issue]): the CA certificate, the agent's own Ed25519 key and a
// certificate naming the agent and the job. Per-agent keys (rather than one
// key shared by the job) mean that the name a peer presents is proven, a
// stolen credential names exactly one agent, and one agent's key never
// reaches another node. Credentials of one job are useless for every other
// job: each job has its own CA, each configuration trusts only its own job's
// CA, and the job identifier inside the peer certificate must match too.
//
// [Credentials.Marshal] encodes credentials compactly for the parent agent
// to write to its child's SSH session standard input (never argv, never the
// environment); [UnmarshalCredentials] and [ReadCredentials] decode and fully
// validate them. The CA itself can be encoded ([CA.Marshal], [UnmarshalCA])
// so that root replicas can issue credentials for replacement agents; it must
// never be sent to ordinary agents.
//
// # Links
//
// [Listen] and [Dial] make TCP links with TCP_NODELAY, TCP_USER_TIMEOUT
// (Linux) on both ends, a bounded TLS handshake, and a one-byte acceptance
// message from the server after it has verified the client, so that [Dial]
// returns only links both sides accepted: in TLS 1.3 the client's handshake
// ends before the server has checked the client's certificate. The listener
// runs each handshake in its own goroutine under a deadline; [net.Listener]
// Accept returns only authenticated connections, so a slow, silent or
// garbage-sending client never delays the others. [PeerName] returns the
// authenticated agent name of a connection.
//
// [Credentials.ServerConfig] and [Credentials.ClientConfig] expose the raw
// TLS configurations for callers that run TLS over their own connections;
// such callers do not get the acceptance byte and must not be mixed with
// [Listen] and [Dial] on the same link.
//
// # Threading
//
// [CA] and [Credentials] are immutable after construction and safe for
// concurrent use. The listener returned by [Listen] is safe for concurrent
// use; its Close stops and waits for every goroutine it started.
package secure
