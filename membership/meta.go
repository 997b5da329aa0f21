package membership

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// metaVersion is the first byte of every encoded metadata blob. A decoder
// refuses versions it does not know rather than guessing.
const metaVersion = 1

// MaxRoleLen bounds the role string carried in node metadata; memberlist
// limits the whole blob to 512 bytes.
const MaxRoleLen = 64

var errBadMeta = errors.New("membership: malformed node metadata")

// metaLeaving is the flag bit set by a member that is leaving gracefully.
const metaLeaving = 1

// nodeMeta is what every agent advertises about itself: the boot incarnation
// (bumped each time the agent is launched under the same name), its role in
// the job (for example "root", "agent"), and whether it is leaving.
type nodeMeta struct {
	Incarnation uint64
	Role        string
	Leaving     bool
}

// encodeMeta renders m as: version byte, flags byte, uvarint incarnation,
// uvarint role length, role bytes.
func encodeMeta(m nodeMeta) ([]byte, error) {
	if len(m.Role) > MaxRoleLen {
		return nil, fmt.Errorf("membership: role %q longer than %d bytes", m.Role, MaxRoleLen)
	}
	b := make([]byte, 0, 1+2*binary.MaxVarintLen64+len(m.Role))
	var flags byte
	if m.Leaving {
		flags |= metaLeaving
	}
	b = append(b, metaVersion, flags)
	b = binary.AppendUvarint(b, m.Incarnation)
	b = binary.AppendUvarint(b, uint64(len(m.Role)))
	b = append(b, m.Role...)
	return b, nil
}

// decodeMeta parses a blob produced by encodeMeta. It never panics: any
// truncation, unknown version, oversized role or trailing byte is an error.
func decodeMeta(b []byte) (nodeMeta, error) {
	if len(b) == 0 {
		return nodeMeta{}, fmt.Errorf("%w: empty", errBadMeta)
	}
	if b[0] != metaVersion {
		return nodeMeta{}, fmt.Errorf("%w: version %d", errBadMeta, b[0])
	}
	if len(b) < 2 || b[1]&^metaLeaving != 0 {
		return nodeMeta{}, fmt.Errorf("%w: flags", errBadMeta)
	}
	leaving := b[1]&metaLeaving != 0
	b = b[2:]
	inc, n := binary.Uvarint(b)
	if n <= 0 {
		return nodeMeta{}, fmt.Errorf("%w: incarnation", errBadMeta)
	}
	b = b[n:]
	l, n := binary.Uvarint(b)
	if n <= 0 {
		return nodeMeta{}, fmt.Errorf("%w: role length", errBadMeta)
	}
	b = b[n:]
	if l > MaxRoleLen || l != uint64(len(b)) {
		return nodeMeta{}, fmt.Errorf("%w: role length %d with %d bytes left", errBadMeta, l, len(b))
	}
	return nodeMeta{Incarnation: inc, Role: string(b), Leaving: leaving}, nil
}

// leaveNoticeType is the first byte of a leave notice, the one user message
// membership sends: a leaving member sends it straight to every peer, so
// that peers can tell its departure from a death even if the gossiped
// leaving flag has not reached them yet.
const leaveNoticeType = 'L'

// maxNameLen bounds node names in leave notices.
const maxNameLen = 512

// encodeLeaveNotice renders: type byte, uvarint name length, name, metadata.
func encodeLeaveNotice(name string, meta []byte) ([]byte, error) {
	if len(name) > maxNameLen {
		return nil, fmt.Errorf("membership: node name longer than %d bytes", maxNameLen)
	}
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(name)+len(meta))
	b = append(b, leaveNoticeType)
	b = binary.AppendUvarint(b, uint64(len(name)))
	b = append(b, name...)
	return append(b, meta...), nil
}

// decodeLeaveNotice parses a leave notice; it never panics and keeps no
// reference to b.
func decodeLeaveNotice(b []byte) (string, nodeMeta, error) {
	if len(b) == 0 || b[0] != leaveNoticeType {
		return "", nodeMeta{}, fmt.Errorf("%w: not a leave notice", errBadMeta)
	}
	b = b[1:]
	l, n := binary.Uvarint(b)
	if n <= 0 || l == 0 || l > maxNameLen || l > uint64(len(b)-n) {
		return "", nodeMeta{}, fmt.Errorf("%w: leave notice name", errBadMeta)
	}
	name := string(b[n : n+int(l)])
	m, err := decodeMeta(b[n+int(l):])
	if err != nil {
		return "", nodeMeta{}, err
	}
	return name, m, nil
}
