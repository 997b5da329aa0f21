package journal

// TreeTells are a root's changes of the launch tree recorded in the state
// log and not committed yet, each with what the agents are told of it
// (docs/design.md: no agent acts on a tree change that a successor would
// not know). A change is told once the log committed it, and changes are
// told in the order they were made: the log commits in order, so a commit
// up to a change's number commits every change before it. The root's event
// loop owns it.
type TreeTells struct {
	seq     uint64
	pending []treeTell
}

type treeTell struct {
	seq  uint64
	tell func()
}

// Add queues tell, what the agents are told of the change just recorded,
// and returns the change's number.
func (t *TreeTells) Add(tell func()) uint64 {
	t.seq++
	t.pending = append(t.pending, treeTell{t.seq, tell})
	return t.seq
}

// Last is the number of the last change recorded (0: none): what the log
// records after it is committed with it.
func (t *TreeTells) Last() uint64 { return t.seq }

// Committed carries out, in order, the tells of the changes up to seq,
// which the log committed (or could not: they are told all the same).
func (t *TreeTells) Committed(seq uint64) {
	for len(t.pending) > 0 && t.pending[0].seq <= seq {
		tt := t.pending[0]
		t.pending = t.pending[1:]
		tt.tell()
	}
}
