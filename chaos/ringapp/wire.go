package ringapp

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"time"
)

// The ring's wire: a connection starts with a hello from the sender (its
// rank, incarnation and the ring round it was made for), then carries
// messages: (step, sender's incarnation, value at that step).

const ringFrame = 24

var ringMagic = [4]byte{'R', 'I', 'N', 'G'}

type ringHello struct {
	rank       uint32
	inc, round uint64
}

func (h ringHello) encode() []byte {
	b := append([]byte(nil), ringMagic[:]...)
	b = binary.BigEndian.AppendUint32(b, h.rank)
	b = binary.BigEndian.AppendUint64(b, h.inc)
	return binary.BigEndian.AppendUint64(b, h.round)
}

func decodeRingHello(b []byte) (ringHello, error) {
	if len(b) != ringFrame || [4]byte(b[:4]) != ringMagic {
		return ringHello{}, errors.New("not a ringapp hello")
	}
	return ringHello{binary.BigEndian.Uint32(b[4:]), binary.BigEndian.Uint64(b[8:]), binary.BigEndian.Uint64(b[16:])}, nil
}

type ringMsg struct{ step, inc, value uint64 }

func (m ringMsg) encode() []byte {
	b := binary.BigEndian.AppendUint64(nil, m.step)
	b = binary.BigEndian.AppendUint64(b, m.inc)
	return binary.BigEndian.AppendUint64(b, m.value)
}

func decodeRingMsg(b []byte) ringMsg {
	return ringMsg{binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:]), binary.BigEndian.Uint64(b[16:])}
}

// helloConn is a connection accepted with its hello read.
type helloConn struct {
	conn  net.Conn
	hello ringHello
}

// ringAcceptor accepts the ring's connections for the listener's life and
// reads their hellos; stop ends it.
type ringAcceptor struct {
	ln    net.Listener
	conns chan helloConn
	quit  chan struct{}
	done  chan struct{}
	err   error // why Accept ended (read after done)
}

func startRingAcceptor(ln net.Listener, helloWait time.Duration) *ringAcceptor {
	a := &ringAcceptor{ln: ln, conns: make(chan helloConn, 16), quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(a.done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				a.err = err
				return
			}
			b := make([]byte, ringFrame)
			conn.SetReadDeadline(time.Now().Add(helloWait))
			_, err = io.ReadFull(conn, b)
			h, herr := decodeRingHello(b)
			if err != nil || herr != nil {
				conn.Close()
				continue
			}
			conn.SetReadDeadline(time.Time{})
			select {
			case a.conns <- helloConn{conn, h}:
			case <-a.quit:
				conn.Close()
				return
			}
		}
	}()
	return a
}

func (a *ringAcceptor) stop() {
	close(a.quit)
	a.ln.Close()
	<-a.done
	for {
		select {
		case hc := <-a.conns:
			hc.conn.Close()
		default:
			return
		}
	}
}

// ringRecv is a message from the left neighbour, or why its connection
// ended.
type ringRecv struct {
	msg ringMsg
	err error
}

// inLink reads the left neighbour's connection; close ends it.
type inLink struct {
	conn net.Conn
	inc  uint64 // the sender's incarnation, from its hello
	msgs chan ringRecv
	quit chan struct{}
	done chan struct{}
}

func startInLink(hc helloConn) *inLink {
	l := &inLink{conn: hc.conn, inc: hc.hello.inc, msgs: make(chan ringRecv, 64), quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		b := make([]byte, ringFrame)
		for {
			var r ringRecv
			if _, err := io.ReadFull(l.conn, b); err != nil {
				r.err = err
			} else {
				r.msg = decodeRingMsg(b)
			}
			select {
			case l.msgs <- r:
			case <-l.quit:
				return
			}
			if r.err != nil {
				return
			}
		}
	}()
	return l
}

func (l *inLink) close() {
	close(l.quit)
	l.conn.Close()
	<-l.done
}
