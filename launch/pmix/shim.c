#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"
#include "_cgo_export.h"

// The library's functions, found once it is opened. One table per process:
// libpmix itself allows one server per process.
static struct {
	ft_pmix_status_t (*server_init)(ft_pmix_server_module_t *module, ft_pmix_info_t info[], size_t ninfo);
	ft_pmix_status_t (*register_nspace)(const char nspace[], int nlocalprocs, ft_pmix_info_t info[],
		size_t ninfo, ft_pmix_op_cbfunc_t cbfunc, void *cbdata);
	void (*deregister_nspace)(const char nspace[], ft_pmix_op_cbfunc_t cbfunc, void *cbdata);
	ft_pmix_status_t (*register_client)(const ft_pmix_proc_t *proc, uid_t uid, gid_t gid,
		void *server_object, ft_pmix_op_cbfunc_t cbfunc, void *cbdata);
	ft_pmix_status_t (*setup_fork)(const ft_pmix_proc_t *proc, char ***env);
	const char *(*error_string)(ft_pmix_status_t status);
} lib;

int ft_load(const char *path, char **err) {
	void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
	if (h == NULL) {
		const char *e = dlerror();
		*err = strdup(e ? e : "dlopen failed");
		return -1;
	}
#define SYM(field, name)                                   \
	do {                                                   \
		*(void **)(&lib.field) = dlsym(h, name);           \
		if (lib.field == NULL) {                           \
			*err = strdup("symbol " name " not found");    \
			return -1;                                     \
		}                                                  \
	} while (0)
	SYM(server_init, "PMIx_server_init");
	SYM(register_nspace, "PMIx_server_register_nspace");
	SYM(deregister_nspace, "PMIx_server_deregister_nspace");
	SYM(register_client, "PMIx_server_register_client");
	SYM(setup_fork, "PMIx_server_setup_fork");
	SYM(error_string, "PMIx_Error_string");
#undef SYM
	return 0;
}

static void set_proc(ft_pmix_proc_t *p, const char *ns, uint32_t rank) {
	memset(p, 0, sizeof(*p));
	strncpy(p->nspace, ns, FT_PMIX_MAX_NSLEN);
	p->rank = rank;
}

// The server module: each callback hands the request to Go (export.go).

static ft_pmix_status_t cb_client_connected(const ft_pmix_proc_t *proc, void *obj,
	ft_pmix_op_cbfunc_t cbfunc, void *cbdata) {
	ftpmixConnected((char *)proc->nspace, proc->rank);
	return FT_PMIX_OPERATION_SUCCEEDED;
}

static ft_pmix_status_t cb_client_finalized(const ft_pmix_proc_t *proc, void *obj,
	ft_pmix_op_cbfunc_t cbfunc, void *cbdata) {
	ftpmixFinalized((char *)proc->nspace, proc->rank);
	return FT_PMIX_OPERATION_SUCCEEDED;
}

static ft_pmix_status_t cb_abort(const ft_pmix_proc_t *proc, void *obj, int status, const char msg[],
	ft_pmix_proc_t procs[], size_t nprocs, ft_pmix_op_cbfunc_t cbfunc, void *cbdata) {
	// The whole job ends: the aborting rank is left waiting for the
	// answer, as a PMI-1 client is, until the launcher kills it.
	ftpmixAbort((char *)proc->nspace, proc->rank, status, (char *)(msg ? msg : ""));
	return FT_PMIX_SUCCESS;
}

static ft_pmix_status_t cb_fence_nb(const ft_pmix_proc_t procs[], size_t nprocs,
	const ft_pmix_info_t info[], size_t ninfo, char *data, size_t ndata,
	ft_pmix_modex_cbfunc_t cbfunc, void *cbdata) {
	if (nprocs != 1 || procs[0].rank != FT_PMIX_RANK_WILDCARD) {
		ftpmixRefused((char *)procs[0].nspace, FT_PMIX_RANK_WILDCARD, (char *)"PMIx_Fence over a subset of the job's ranks");
		return FT_PMIX_ERR_NOT_SUPPORTED;
	}
	return ftpmixFence((char *)procs[0].nspace, data, ndata, (void *)cbfunc, cbdata);
}

static ft_pmix_status_t cb_direct_modex(const ft_pmix_proc_t *proc, const ft_pmix_info_t info[],
	size_t ninfo, ft_pmix_modex_cbfunc_t cbfunc, void *cbdata) {
	// Every fence collects every node's data: what a rank put before the
	// job's last fence is known here already, and nothing else is.
	return FT_PMIX_ERR_NOT_FOUND;
}

static ft_pmix_status_t refuse(const ft_pmix_proc_t *proc, const char *what) {
	ftpmixRefused((char *)proc->nspace, proc->rank, (char *)what);
	return FT_PMIX_ERR_NOT_SUPPORTED;
}

static ft_pmix_status_t cb_publish(const ft_pmix_proc_t *proc, const ft_pmix_info_t info[], size_t ninfo,
	ft_pmix_op_cbfunc_t cbfunc, void *cbdata) {
	return refuse(proc, "PMIx_Publish (MPI_Publish_name)");
}

static ft_pmix_status_t cb_lookup(const ft_pmix_proc_t *proc, char **keys, const ft_pmix_info_t info[],
	size_t ninfo, void *cbfunc, void *cbdata) {
	return refuse(proc, "PMIx_Lookup (MPI_Lookup_name)");
}

static ft_pmix_status_t cb_unpublish(const ft_pmix_proc_t *proc, char **keys, const ft_pmix_info_t info[],
	size_t ninfo, ft_pmix_op_cbfunc_t cbfunc, void *cbdata) {
	return refuse(proc, "PMIx_Unpublish (MPI_Unpublish_name)");
}

static ft_pmix_status_t cb_spawn(const ft_pmix_proc_t *proc, const ft_pmix_info_t job_info[], size_t ninfo,
	const void *apps, size_t napps, void *cbfunc, void *cbdata) {
	return refuse(proc, "PMIx_Spawn (MPI_Comm_spawn)");
}

static ft_pmix_status_t cb_connect(const ft_pmix_proc_t procs[], size_t nprocs, const ft_pmix_info_t info[],
	size_t ninfo, ft_pmix_op_cbfunc_t cbfunc, void *cbdata) {
	return refuse(&procs[0], "PMIx_Connect (MPI_Comm_connect/accept)");
}

static ft_pmix_status_t cb_disconnect(const ft_pmix_proc_t procs[], size_t nprocs, const ft_pmix_info_t info[],
	size_t ninfo, ft_pmix_op_cbfunc_t cbfunc, void *cbdata) {
	return refuse(&procs[0], "PMIx_Disconnect (MPI_Comm_disconnect)");
}

static void cb_tool_connected(ft_pmix_info_t *info, size_t ninfo, ft_pmix_tool_connection_cbfunc_t cbfunc,
	void *cbdata) {
	ftpmixRefused((char *)"", FT_PMIX_RANK_WILDCARD, (char *)"a PMIx tool connection");
	if (cbfunc != NULL) {
		cbfunc(FT_PMIX_ERR_NOT_SUPPORTED, NULL, cbdata);
	}
}

static ft_pmix_status_t cb_group(int op, char grp[], const ft_pmix_proc_t procs[], size_t nprocs,
	const ft_pmix_info_t directives[], size_t ndirs, void *cbfunc, void *cbdata) {
	if (nprocs == 0) {
		ftpmixRefused((char *)"", FT_PMIX_RANK_WILDCARD, (char *)"PMIx groups");
		return FT_PMIX_ERR_NOT_SUPPORTED;
	}
	return refuse(&procs[0], "PMIx groups (PMIx_Group_construct)");
}

static ft_pmix_server_module_t module = {
	.client_connected = cb_client_connected,
	.client_finalized = cb_client_finalized,
	.abort = cb_abort,
	.fence_nb = cb_fence_nb,
	.direct_modex = cb_direct_modex,
	.publish = cb_publish,
	.lookup = cb_lookup,
	.unpublish = cb_unpublish,
	.spawn = cb_spawn,
	.connect = cb_connect,
	.disconnect = cb_disconnect,
	.tool_connected = cb_tool_connected,
	.group = cb_group,
};

int ft_server_init(ft_pmix_info_t *info, size_t ninfo) {
	return lib.server_init(&module, info, ninfo);
}

const char *ft_error_string(int status) {
	return lib.error_string ? lib.error_string(status) : "unknown PMIx status";
}

ft_pmix_info_t *ft_info_new(size_t n) {
	return calloc(n ? n : 1, sizeof(ft_pmix_info_t));
}

static void set_key(ft_pmix_info_t *in, const char *key) {
	strncpy(in->key, key, FT_PMIX_MAX_KEYLEN);
}

void ft_info_string(ft_pmix_info_t *a, size_t i, const char *key, const char *val) {
	set_key(&a[i], key);
	a[i].value.type = FT_PMIX_STRING;
	a[i].value.data.string = strdup(val);
}

void ft_info_num(ft_pmix_info_t *a, size_t i, const char *key, uint16_t type, uint32_t v) {
	set_key(&a[i], key);
	a[i].value.type = type;
	switch (type) {
	case FT_PMIX_UINT16:
		a[i].value.data.uint16 = (uint16_t)v;
		break;
	case FT_PMIX_BOOL:
		a[i].value.data.flag = v != 0;
		break;
	default: // FT_PMIX_UINT32, FT_PMIX_PROC_RANK
		a[i].value.data.uint32 = v;
	}
}

void ft_info_infos(ft_pmix_info_t *a, size_t i, const char *key, ft_pmix_info_t *sub, size_t n) {
	set_key(&a[i], key);
	ft_pmix_data_array_t *d = calloc(1, sizeof(*d));
	d->type = FT_PMIX_INFO;
	d->size = n;
	d->array = sub;
	a[i].value.type = FT_PMIX_DATA_ARRAY;
	a[i].value.data.darray = d;
}

void ft_info_free(ft_pmix_info_t *a, size_t n) {
	if (a == NULL) {
		return;
	}
	for (size_t i = 0; i < n; i++) {
		ft_pmix_value_t *v = &a[i].value;
		if (v->type == FT_PMIX_STRING) {
			free(v->data.string);
		} else if (v->type == FT_PMIX_DATA_ARRAY && v->data.darray != NULL) {
			ft_info_free(v->data.darray->array, v->data.darray->size);
			free(v->data.darray);
		}
	}
	free(a);
}

static void op_done(ft_pmix_status_t status, void *cbdata) {
	ftpmixOpDone((uintptr_t)cbdata, status);
}

int ft_register_nspace(const char *ns, int nlocal, ft_pmix_info_t *info, size_t ninfo, uintptr_t h) {
	char nspace[FT_PMIX_MAX_NSLEN + 1] = {0};
	strncpy(nspace, ns, FT_PMIX_MAX_NSLEN);
	return lib.register_nspace(nspace, nlocal, info, ninfo, op_done, (void *)h);
}

void ft_deregister_nspace(const char *ns, uintptr_t h) {
	char nspace[FT_PMIX_MAX_NSLEN + 1] = {0};
	strncpy(nspace, ns, FT_PMIX_MAX_NSLEN);
	lib.deregister_nspace(nspace, op_done, (void *)h);
}

int ft_register_client(const char *ns, uint32_t rank, uid_t uid, gid_t gid, uintptr_t h) {
	ft_pmix_proc_t p;
	set_proc(&p, ns, rank);
	return lib.register_client(&p, uid, gid, NULL, op_done, (void *)h);
}

int ft_setup_fork(const char *ns, uint32_t rank, char ***env) {
	ft_pmix_proc_t p;
	set_proc(&p, ns, rank);
	return lib.setup_fork(&p, env);
}

void ft_env_free(char **env) {
	if (env == NULL) {
		return;
	}
	for (char **e = env; *e != NULL; e++) {
		free(*e);
	}
	free(env);
}

static void free_release(void *p) {
	free(p);
}

void ft_modex_done(void *cbfunc, void *cbdata, int status, char *data, size_t ndata) {
	ft_pmix_modex_cbfunc_t f = (ft_pmix_modex_cbfunc_t)cbfunc;
	f(status, data, ndata, cbdata, free_release, data);
}

void ft_op_done(void *cbfunc, void *cbdata, int status) {
	if (cbfunc != NULL) {
		((ft_pmix_op_cbfunc_t)cbfunc)(status, cbdata);
	}
}
