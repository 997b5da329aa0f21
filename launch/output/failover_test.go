package output

import (
	"reflect"
	"testing"

	"github.com/ftlaunch/ftlaunch/launch/proto"
)

// TestOutputFailover: frames lost with the old root, copies buffered on
// the way, and the frames sent again reach the new root; it writes each
// once, in order, and the agent gets back all its credit.
func TestOutputFailover(t *testing.T) {
	q := proto.NewOutQueue()
	var wire [][]byte // what went up, in order
	up := func(p []byte) { wire = append(wire, p) }
	for i := range 5 {
		q.Send(0, proto.StreamStdout, []byte{'a' + byte(i), '\n'}, up)
	}
	// The old root wrote frames 1 and 2 and acknowledged them; 3 died
	// with its socket; 4 and 5 waited in a parent's buffer.
	if n, err := q.Ack(2); err != nil || n != 4 {
		t.Fatalf("ack 2: %d bytes, %v", n, err)
	}
	if _, err := q.Ack(9); err == nil {
		t.Error("an acknowledgement of a frame never sent was taken")
	}
	var newRoot Next // 0: a successor's
	var written []string
	deliver := func(typ uint8, p []byte) {
		switch typ {
		case proto.MOutputResync:
			first, err := proto.DecodeSeq(p)
			if err != nil {
				t.Fatal(err)
			}
			newRoot.Resync(first)
		case proto.MOutput:
			seq, _, _, data, err := proto.DecodeOutput(p)
			if err != nil {
				t.Fatal(err)
			}
			if newRoot.Take(seq) {
				written = append(written, string(data))
			}
		}
	}
	deliver(proto.MOutput, wire[3]) // the buffered copies come first
	deliver(proto.MOutput, wire[4])
	q.Resend(deliver) // the adopted agent's resync
	q.Resend(deliver) // and the new root's broadcast request
	q.Send(0, proto.StreamStdout, []byte("f\n"), func(p []byte) { deliver(proto.MOutput, p) })
	if want := []string{"c\n", "d\n", "e\n", "f\n"}; !reflect.DeepEqual(written, want) {
		t.Fatalf("written %q, want %q", written, want)
	}
	if n, err := q.Ack(6); err != nil || n != 8 {
		t.Fatalf("ack 6: %d bytes, %v", n, err)
	}
	if len(q.Frames) != 0 {
		t.Errorf("%d frames kept after the last acknowledgement", len(q.Frames))
	}
}
