package pmi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

// The fuzz targets run their seeds (f.Add and testdata/fuzz/<Name>/) in every
// plain `go test`; explore with e.g.
//
//	go test ./launch/pmi -run '^$' -fuzz FuzzParseLine -fuzztime 60s

func FuzzParseLine(f *testing.F) {
	for _, s := range []string{
		"cmd=init pmi_version=1 pmi_subversion=1\n",
		"cmd=put kvsname=k key=a value=segments=2\n",
		"cmd=get  kvsname=k   key=a",
		"=", "cmd", "cmd=a cmd=b", "a=\r\n", "\x00=1", "k=v\x7f",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		req, err := parseLine(line)
		if err != nil {
			return
		}
		// A parsed request re-serializes to a line that parses the same.
		var b strings.Builder
		for i, fl := range req.fields {
			if fl.key == "" || strings.ContainsAny(fl.key, " =") || strings.Contains(fl.value, " ") {
				t.Fatalf("bad field %+v from %q", fl, line)
			}
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(fl.key + "=" + fl.value)
		}
		again, err := parseLine([]byte(b.String()))
		if err != nil || len(again.fields) != len(req.fields) {
			t.Fatalf("re-parse of %q: %v %+v", b.String(), err, again)
		}
		for i := range again.fields {
			if again.fields[i] != req.fields[i] {
				t.Fatalf("re-parse of %q changed field %d", b.String(), i)
			}
		}
	})
}

// FuzzServe feeds an arbitrary byte stream to Serve as one rank of a
// one-rank job: Serve must return (never hang or panic), count every byte,
// and never answer more lines than it read.
func FuzzServe(f *testing.F) {
	var session strings.Builder
	for _, rt := range mpichInit {
		session.WriteString(rt[0] + "\n")
	}
	for _, s := range []string{
		session.String(),
		"cmd=init pmi_version=1 pmi_subversion=1\ncmd=abort exitcode=7\n",
		"cmd=initack pmiid=0\ncmd=init pmi_version=1 pmi_subversion=1\ncmd=barrier_in\ncmd=finalize\n",
		"mcmd=spawn\nnprocs=1\nendcmd\n",
		strings.Repeat("x", 3000) + "\ncmd=get_appnum\n",
		"cmd=put kvsname=kvs_42_0 key=a value=1\ncmd=put kvsname=kvs_42_0 key=a value=2\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		var out bytes.Buffer
		rw := struct {
			io.Reader
			io.Writer
		}{bytes.NewReader(input), &out}
		st, err := Serve(context.Background(), rw, Config{Job: testJob, Backend: NewKVS(1, nil)})
		var ae *AbortError
		stopped := errors.As(err, &ae) || errors.Is(err, ErrProtocol)
		if err != nil && !stopped && !errors.Is(err, ErrLost) {
			t.Fatalf("Serve: %v", err)
		}
		if !stopped && st.BytesIn != int64(len(input)) {
			t.Fatalf("read %d of %d bytes", st.BytesIn, len(input))
		}
		if st.BytesOut != int64(out.Len()) {
			t.Fatalf("BytesOut %d, wrote %d", st.BytesOut, out.Len())
		}
		answers := bytes.Count(out.Bytes(), []byte("\n"))
		lines := bytes.Count(input, []byte("\n"))
		if answers > lines+3 { // initack is the one request answered with four lines
			t.Fatalf("%d answer lines for %d request lines", answers, lines)
		}
		for _, l := range bytes.SplitAfter(out.Bytes(), []byte("\n")) {
			if len(l) > MaxLine {
				t.Fatalf("answer line of %d bytes", len(l))
			}
		}
	})
}
