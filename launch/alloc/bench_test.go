package alloc

import (
	"fmt"
	"testing"
)

// BenchmarkPlace places ranks on 4096 hosts of 64 slots and renders the
// process mapping, for block and round-robin order:
//
//	go test ./launch/alloc -run '^$' -bench Place -benchmem
func BenchmarkPlace(b *testing.B) {
	a := Allocation{Source: SourceHostList}
	for i := range 4096 {
		a.Hosts = append(a.Hosts, Host{Name: fmt.Sprintf("node%04d", i), Slots: 64})
	}
	for _, mb := range []MapBy{MapBySlot, MapByNode} {
		b.Run("map-by="+mb.String(), func(b *testing.B) {
			var mapping string
			for b.Loop() {
				p, err := Place(a, Request{NP: 4096 * 64, MapBy: mb})
				if err != nil {
					b.Fatal(err)
				}
				mapping = ProcessMapping(p)
			}
			if mapping != "(vector,(0,4096,64))" && mapping != "(vector,(0,4096,1))" {
				b.Fatalf("mapping %s", mapping)
			}
		})
	}
}

// BenchmarkExpandHostlist expands a 10,000-node Slurm list.
func BenchmarkExpandHostlist(b *testing.B) {
	for b.Loop() {
		names, err := ExpandHostlist("node[00001-05000],gpu[0001-4000,4002-5001]")
		if err != nil || len(names) != 10000 {
			b.Fatal(len(names), err)
		}
	}
}
