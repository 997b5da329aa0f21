package proto

import (
	"fmt"

	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// RecMsg is every message of the restart protocol, down (commands) and up
// (acknowledgements); each uses the fields its type needs (messages.go).
type RecMsg struct {
	Epoch       uint64
	Version     uint64 // the node table's version (patch, resume)
	Rank        int    // respawn, respawned, PMI init
	Incarnation uint64 // respawn, respawned
	Restarts    int    // respawn: the rank's restarts; restart-job: the job's
	Addr        []byte // respawned: the rank's new I-tuple
	Rows        []RecRow
}

// RecRow is one row of a patch.
type RecRow struct {
	Rank        int
	Incarnation uint64
	Addr        []byte
}

// maxPatchRows bounds a patch's rows as decoded.
const maxPatchRows = 1 << 24

func (m RecMsg) Encode() []byte {
	var e wire.Encoder
	e.Uint(m.Epoch).Uint(m.Version).Uint(uint64(m.Rank)).Uint(m.Incarnation).Uint(uint64(m.Restarts)).Bytes(m.Addr)
	e.Uint(uint64(len(m.Rows)))
	for _, r := range m.Rows {
		e.Uint(uint64(r.Rank)).Uint(r.Incarnation).Bytes(r.Addr)
	}
	return e.Data()
}

func DecodeRecMsg(p []byte) (RecMsg, error) {
	d := wire.NewDecoder(p)
	m := RecMsg{Epoch: d.Uint(), Version: d.Uint(), Rank: int(d.Uint()), Incarnation: d.Uint(), Restarts: int(d.Uint()), Addr: d.Bytes()}
	n := d.Count(3)
	if n > maxPatchRows {
		return m, fmt.Errorf("recovery message: %d rows", n)
	}
	for range n {
		m.Rows = append(m.Rows, RecRow{Rank: int(d.Uint()), Incarnation: d.Uint(), Addr: d.Bytes()})
	}
	if err := d.Err(); err != nil {
		return m, fmt.Errorf("recovery message: %w", err)
	}
	if m.Rank < 0 {
		return m, fmt.Errorf("recovery message: rank %d", m.Rank)
	}
	for _, r := range m.Rows {
		if r.Rank < 0 {
			return m, fmt.Errorf("recovery message: row of rank %d", r.Rank)
		}
	}
	return m, nil
}
