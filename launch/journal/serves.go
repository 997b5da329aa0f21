package journal

// Serves reports whether the replica group has n servers or more (the
// front-end's and the replica agents' that joined): a replicated root's
// group that serves every replica of the job survives the front-end.
// A log without a raft server, or not up yet, serves none.
func (j *Journal) Serves(n int) bool {
	_, servers, ok := j.Members()
	return ok && servers >= n
}
