package proto

import (
	"fmt"

	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// pick selects the entry of a group bootstrap for the node named name.
func (b *Bootstrap) Pick(name string) error {
	if len(b.Group) == 0 {
		return nil
	}
	for _, g := range b.Group {
		if g.Name == name {
			b.Creds, b.Idx = g.Creds, g.Idx
			return nil
		}
	}
	return fmt.Errorf("bootstrap: no credentials for node %q in a group of %d", name, len(b.Group))
}

func (b *Bootstrap) Encode() []byte {
	var e wire.Encoder
	e.Bytes(b.Creds).Uint(uint64(b.Port)).Strings(b.Hosts).Uint(uint64(b.Idx)).String(b.Parent)
	e.Uint(uint64(len(b.Group)))
	for _, g := range b.Group {
		e.String(g.Name).Uint(uint64(g.Idx)).Bytes(g.Creds)
	}
	e.Uint(b.Inc)
	return wire.AppendFrame(nil, MSpec, e.Data())
}
