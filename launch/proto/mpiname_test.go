package proto

import "testing"

// TestMPIName: the default (both PMI-1 and PMIx) has a name of its own;
// any other --mpi value is its own name.
func TestMPIName(t *testing.T) {
	for mpi, want := range map[string]string{"": "pmi1+pmix", "pmi1": "pmi1", "pmix": "pmix", "none": "none"} {
		if got := MPIName(mpi); got != want {
			t.Errorf("MPIName(%q) = %q, want %q", mpi, got, want)
		}
	}
}
