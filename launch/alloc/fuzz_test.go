package alloc

import (
	"strings"
	"testing"
)

// The fuzz targets run their seeds (f.Add and testdata/fuzz/<Name>/) in every
// plain `go test`; explore with e.g.
//
//	go test ./launch/alloc -run '^$' -fuzz FuzzExpandHostlist -fuzztime 60s

func FuzzExpandHostlist(f *testing.F) {
	for _, s := range []string{"node[001-004,010],gpu[1-2]", "a,b", "r[1-2]n[01-02]-ib", "n[3-1]", "n[[1]]", "[", "]", ",", "n[0-99999999999]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		names, err := ExpandHostlist(expr)
		if err != nil {
			return
		}
		if len(names) == 0 || len(names) > MaxHosts {
			t.Fatalf("ExpandHostlist(%q) gave %d names without error", expr, len(names))
		}
		for _, n := range names {
			if err := validHostname(n); err != nil {
				t.Fatalf("ExpandHostlist(%q) gave invalid name %q: %v", expr, n, err)
			}
		}
		// A list without brackets expands to its own entries.
		if !strings.ContainsAny(expr, "[]") && strings.Join(names, ",") != strings.TrimSpace(expr) {
			t.Fatalf("ExpandHostlist(%q) = %q", expr, names)
		}
	})
}

func FuzzParseHostfile(f *testing.F) {
	for _, s := range []string{"a\nb:2\n", "# c\n\nh slots=4 max_slots=8\n", "a:x\n", "a\na\n", "a slots=1 slots=2", "\r\n\t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		hosts, err := ParseHostfile("fuzz", strings.NewReader(text))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz") && !strings.HasPrefix(err.Error(), "read fuzz") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		seen := map[string]bool{}
		for _, h := range hosts {
			if validHostname(h.Name) != nil || h.Slots < 0 || h.Slots > MaxSlots || seen[strings.ToLower(h.Name)] {
				t.Fatalf("bad host %+v from %q", h, text)
			}
			seen[strings.ToLower(h.Name)] = true
		}
		// Whatever parses must also place without panicking.
		if p, err := Place(Allocation{Hosts: hosts}, Request{NP: 1 + len(text)%7, Oversubscribe: true}); err == nil {
			_ = ProcessMapping(p)
		}
	})
}

func FuzzParseTasksPerNode(f *testing.F) {
	for _, s := range []string{"2(x3),1", "1", "(x)", "2(x", "1(x1000001)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		counts, err := ParseTasksPerNode(s)
		if err != nil {
			return
		}
		if len(counts) == 0 || len(counts) > MaxHosts {
			t.Fatalf("ParseTasksPerNode(%q) gave %d counts", s, len(counts))
		}
		for _, c := range counts {
			if c < 1 || c > MaxSlots {
				t.Fatalf("ParseTasksPerNode(%q) gave count %d", s, c)
			}
		}
	})
}
