package pmix

/*
#cgo CFLAGS: -I/usr/lib/x86_64-linux-gnu/pmix2/include -I/usr/lib/aarch64-linux-gnu/pmix2/include
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"runtime/cgo"
	"strings"
	"unsafe"
)

// The cgo side: calls into libpmix (through shim.c's table of the
// functions dlopen found) and the server module's callbacks, which arrive
// on libpmix's progress thread and are handed to the namespace they name.

// load opens the library at path.
func load(path string) error {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var cerr *C.char
	if C.ft_load(cpath, &cerr) != 0 {
		defer C.free(unsafe.Pointer(cerr))
		return &UnavailableError{Library: path, Reason: C.GoString(cerr)}
	}
	return nil
}

// status turns a PMIx status into an error (nil for success).
func status(op string, st C.int) error {
	if st == C.FT_PMIX_SUCCESS || st == C.FT_PMIX_OPERATION_SUCCEEDED {
		return nil
	}
	return &StatusError{Op: op, Status: int(st), Text: C.GoString(C.ft_error_string(st))}
}

// infos builds a C array of pmix_info_t; free releases it with everything
// it points to.
type infos struct {
	p *C.ft_pmix_info_t
	n int
	i int
}

func newInfos(n int) *infos { return &infos{p: C.ft_info_new(C.size_t(n)), n: n} }

func (a *infos) next(key string) (*C.ft_pmix_info_t, C.size_t, *C.char) {
	if a.i >= a.n {
		panic(fmt.Sprintf("pmix: info array of %d overflows at %q", a.n, key))
	}
	i := a.i
	a.i++
	return a.p, C.size_t(i), C.CString(key)
}

func (a *infos) str(key, v string) {
	p, i, k := a.next(key)
	cv := C.CString(v)
	C.ft_info_string(p, i, k, cv)
	C.free(unsafe.Pointer(k))
	C.free(unsafe.Pointer(cv))
}

// num sets a number of a PMIx type (FT_PMIX_UINT16, _UINT32, _PROC_RANK, _BOOL).
func (a *infos) num(key string, typ C.uint16_t, v int) {
	p, i, k := a.next(key)
	C.ft_info_num(p, i, k, typ, C.uint32_t(v))
	C.free(unsafe.Pointer(k))
}

// array stores sub (which a then owns) as a data array of infos.
func (a *infos) array(key string, sub *infos) {
	p, i, k := a.next(key)
	C.ft_info_infos(p, i, k, sub.p, C.size_t(sub.i))
	C.free(unsafe.Pointer(k))
	sub.p = nil
}

func (a *infos) free() {
	C.ft_info_free(a.p, C.size_t(a.i))
	a.p = nil
}

// add sets one value of the kind v's type says.
func (a *infos) add(kv keyValue) {
	switch kv.kind {
	case kindString:
		a.str(kv.key, kv.s)
	case kindU32:
		a.num(kv.key, C.FT_PMIX_UINT32, kv.n)
	case kindU16:
		a.num(kv.key, C.FT_PMIX_UINT16, kv.n)
	case kindRank:
		a.num(kv.key, C.FT_PMIX_PROC_RANK, kv.n)
	case kindBool:
		a.num(kv.key, C.FT_PMIX_BOOL, kv.n)
	}
}

// cInfos turns a list of values (and nested per-process lists) into C.
func cInfos(top []keyValue, procs [][]keyValue, procKey string) *infos {
	a := newInfos(len(top) + len(procs))
	for _, kv := range top {
		a.add(kv)
	}
	for _, pd := range procs {
		sub := newInfos(len(pd))
		for _, kv := range pd {
			sub.add(kv)
		}
		a.array(procKey, sub)
	}
	return a
}

func serverInit(a *infos) error {
	return status("PMIx_server_init", C.ft_server_init(a.p, C.size_t(a.i)))
}

// opWait is a pending asynchronous PMIx operation: its callback sends the
// status on ch.
type opWait struct{ ch chan int }

func newOp() (*opWait, cgo.Handle) {
	w := &opWait{ch: make(chan int, 1)}
	return w, cgo.NewHandle(w)
}

//export ftpmixOpDone
func ftpmixOpDone(h C.uintptr_t, st C.int) {
	hd := cgo.Handle(h)
	w := hd.Value().(*opWait)
	hd.Delete()
	w.ch <- int(st)
}

func registerNspace(ns string, nlocal int, a *infos) (*opWait, error) {
	cns := C.CString(ns)
	defer C.free(unsafe.Pointer(cns))
	w, h := newOp()
	if err := status("PMIx_server_register_nspace", C.ft_register_nspace(cns, C.int(nlocal), a.p, C.size_t(a.i), C.uintptr_t(h))); err != nil {
		h.Delete()
		return nil, err
	}
	return w, nil
}

func deregisterNspace(ns string) *opWait {
	cns := C.CString(ns)
	defer C.free(unsafe.Pointer(cns))
	w, h := newOp()
	C.ft_deregister_nspace(cns, C.uintptr_t(h))
	return w
}

func registerClient(ns string, rank, uid, gid int) (*opWait, error) {
	cns := C.CString(ns)
	defer C.free(unsafe.Pointer(cns))
	w, h := newOp()
	if err := status("PMIx_server_register_client", C.ft_register_client(cns, C.uint32_t(rank), C.uid_t(uid), C.gid_t(gid), C.uintptr_t(h))); err != nil {
		h.Delete()
		return nil, err
	}
	return w, nil
}

// setupFork returns the environment PMIx gives a client rank.
func setupFork(ns string, rank int) ([]string, error) {
	cns := C.CString(ns)
	defer C.free(unsafe.Pointer(cns))
	env := (**C.char)(C.calloc(1, C.size_t(unsafe.Sizeof(uintptr(0)))))
	defer func() { C.ft_env_free(env) }()
	if err := status("PMIx_server_setup_fork", C.ft_setup_fork(cns, C.uint32_t(rank), &env)); err != nil {
		return nil, err
	}
	var out []string
	for _, p := range unsafe.Slice(env, 1<<20) {
		if p == nil {
			break
		}
		out = append(out, C.GoString(p))
	}
	return out, nil
}

func goRank(r C.uint32_t) int {
	if r == C.FT_PMIX_RANK_WILDCARD {
		return -1
	}
	return int(r)
}

//export ftpmixConnected
func ftpmixConnected(ns *C.char, rank C.uint32_t) {
	if n := lookup(C.GoString(ns)); n != nil {
		n.backend.Connected(goRank(rank))
	}
}

//export ftpmixFinalized
func ftpmixFinalized(ns *C.char, rank C.uint32_t) {
	if n := lookup(C.GoString(ns)); n != nil {
		n.backend.Finalized(goRank(rank))
	}
}

//export ftpmixAbort
func ftpmixAbort(ns *C.char, rank C.uint32_t, st C.int, msg *C.char) {
	if n := lookup(C.GoString(ns)); n != nil {
		n.backend.Abort(goRank(rank), int(st), C.GoString(msg))
	}
}

//export ftpmixRefused
func ftpmixRefused(ns *C.char, rank C.uint32_t, what *C.char) {
	name := C.GoString(ns)
	if n := lookup(name); n != nil {
		n.backend.Refused(goRank(rank), C.GoString(what))
		return
	}
	if s := current(); s != nil {
		s.refused(strings.TrimSpace(C.GoString(what)))
	}
}

//export ftpmixFence
func ftpmixFence(ns *C.char, data *C.char, ndata C.size_t, cbfunc, cbdata unsafe.Pointer) C.int {
	n := lookup(C.GoString(ns))
	if n == nil {
		return C.FT_PMIX_ERR_NOT_FOUND
	}
	blob := C.GoBytes(unsafe.Pointer(data), C.int(ndata))
	n.fence(blob, func(all []byte, err error) {
		if err != nil {
			C.ft_modex_done(cbfunc, cbdata, C.FT_PMIX_ERROR, nil, 0)
			return
		}
		var p *C.char
		if len(all) > 0 {
			p = (*C.char)(C.CBytes(all))
		}
		C.ft_modex_done(cbfunc, cbdata, C.FT_PMIX_SUCCESS, p, C.size_t(len(all)))
	})
	return C.FT_PMIX_SUCCESS
}
