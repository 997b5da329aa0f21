package raftstore

// Every bbolt bucket in a replica's database file (STATE/<node>/raft.db) is
// named here, and nowhere else.
//
// raft-boltdb creates and owns "logs" and "conf"; their names are fixed by
// that library and repeated here so that the read-only inspector can check
// for them. ftlaunch adds one bucket of its own, "ftlaunch", written once
// when the replica's directory is created; it is how a replica's file is
// told apart from any other bbolt file.
const (
	// bucketLogs holds the raft log, keyed by big-endian index; values are
	// raft.Log records encoded by raft-boltdb (msgpack). Owned by raft-boltdb.
	bucketLogs = "logs"

	// bucketConf holds raft's stable store: CurrentTerm, LastVoteTerm,
	// LastVoteCand. Owned by raft-boltdb.
	bucketConf = "conf"

	// bucketMeta is ftlaunch's: the keys below.
	bucketMeta = "ftlaunch"
)

// Keys of bucketMeta.
const (
	metaKeyFormat  = "format"  // uvarint: file format version, formatVersion
	metaKeyNode    = "node"    // the replica's node name (raft server ID)
	metaKeyCreated = "created" // RFC 3339 time the directory was created
)

// Keys raft stores in bucketConf (hashicorp/raft's stable-store keys).
const (
	confKeyCurrentTerm  = "CurrentTerm"
	confKeyLastVoteTerm = "LastVoteTerm"
	confKeyLastVoteCand = "LastVoteCand"
)

// formatVersion is the replica directory format written by this package.
const formatVersion = 1
