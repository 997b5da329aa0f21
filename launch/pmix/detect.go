package pmix

import (
	"debug/elf"
	"strings"
)

// openMPILibs are the sonames, up to their version, of the libraries an
// Open MPI or OpenPMIx client program links with.
var openMPILibs = []string{"libpmix.so.", "libmpi.so.4", "libmpi_", "libopen-rte.so.", "libopen-pal.so.", "liboshmem.so."}

// Uses reports whether the program at path may be a PMIx client: an ELF
// executable linked directly with Open MPI's or OpenPMIx's libraries, or
// anything that is not an ELF executable (a script, whose interpreter may
// load them). An ELF executable linked with neither (MPICH programs,
// `true`, a static binary) is not: the server's start (tens of
// milliseconds) is then spared. A program that loads Open MPI itself
// (dlopen, e.g. an interpreter's MPI module) needs --mpi pmix.
func Uses(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return true
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		return true
	}
	for _, l := range libs {
		for _, p := range openMPILibs {
			if strings.HasPrefix(l, p) {
				return true
			}
		}
	}
	return false
}
