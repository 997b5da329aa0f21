//go:build !cgo

package pmix

import "errors"

// Without cgo (CGO_ENABLED=0) the package builds and serves nothing: every
// start reports the library unavailable.

var errNoCgo = errors.New("this ftlaunch was built without cgo")

func load(path string) error { return &UnavailableError{Library: path, Reason: errNoCgo.Error()} }

type infos struct{ i int }

func cInfos(top []keyValue, procs [][]keyValue, procKey string) *infos { return &infos{} }

func (a *infos) free() {}

type opWait struct{ ch chan int }

func serverInit(a *infos) error                                  { return errNoCgo }
func registerNspace(ns string, n int, a *infos) (*opWait, error) { return nil, errNoCgo }
func deregisterNspace(ns string) *opWait {
	w := &opWait{ch: make(chan int, 1)}
	w.ch <- 0
	return w
}
func registerClient(ns string, rank, uid, gid int) (*opWait, error) { return nil, errNoCgo }
func setupFork(ns string, rank int) ([]string, error)               { return nil, errNoCgo }
