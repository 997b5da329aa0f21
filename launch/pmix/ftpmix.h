// ftpmix.h: the few OpenPMIx (v4, libpmix.so.2) types, constants and
// functions the server uses, declared here so that building ftlaunch does
// not need the PMIx headers (libpmix-dev): the library itself is opened at
// run time (dlopen), and abicheck.c compares every layout below with the
// real headers whenever they are installed.
#ifndef FTPMIX_H
#define FTPMIX_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <sys/types.h>

#define FT_PMIX_MAX_NSLEN 255
#define FT_PMIX_MAX_KEYLEN 511
#define FT_PMIX_RANK_WILDCARD (UINT32_MAX - 1)

// Status codes.
#define FT_PMIX_SUCCESS 0
#define FT_PMIX_ERROR -1
#define FT_PMIX_ERR_NOT_FOUND -46
#define FT_PMIX_ERR_NOT_SUPPORTED -47
#define FT_PMIX_OPERATION_SUCCEEDED -157

// Data types.
#define FT_PMIX_BOOL 1
#define FT_PMIX_STRING 3
#define FT_PMIX_UINT16 13
#define FT_PMIX_UINT32 14
#define FT_PMIX_INFO 24
#define FT_PMIX_DATA_ARRAY 39
#define FT_PMIX_PROC_RANK 40

typedef int ft_pmix_status_t;
typedef uint16_t ft_pmix_data_type_t;

typedef struct {
	char nspace[FT_PMIX_MAX_NSLEN + 1];
	uint32_t rank;
} ft_pmix_proc_t;

typedef struct {
	ft_pmix_data_type_t type;
	size_t size;
	void *array;
} ft_pmix_data_array_t;

// pmix_value_t: a type and a union whose largest member is pmix_envar_t
// (two pointers and a char).
typedef struct {
	ft_pmix_data_type_t type;
	union {
		bool flag;
		char *string;
		uint16_t uint16;
		uint32_t uint32;
		ft_pmix_data_array_t *darray;
		struct {
			char *envar;
			char *value;
			char separator;
		} envar;
	} data;
} ft_pmix_value_t;

typedef struct {
	char key[FT_PMIX_MAX_KEYLEN + 1];
	uint32_t flags;
	ft_pmix_value_t value;
} ft_pmix_info_t;

typedef void (*ft_pmix_op_cbfunc_t)(ft_pmix_status_t status, void *cbdata);
typedef void (*ft_pmix_release_cbfunc_t)(void *cbdata);
typedef void (*ft_pmix_modex_cbfunc_t)(ft_pmix_status_t status, const char *data, size_t ndata,
	void *cbdata, ft_pmix_release_cbfunc_t release_fn, void *release_cbdata);
typedef void (*ft_pmix_tool_connection_cbfunc_t)(ft_pmix_status_t status, ft_pmix_proc_t *proc, void *cbdata);

// pmix_server_module_t of PMIx 4 (pmix_server_module_4_0_0_t): the
// functions this server provides are typed, the others are left NULL.
typedef struct {
	ft_pmix_status_t (*client_connected)(const ft_pmix_proc_t *proc, void *server_object,
		ft_pmix_op_cbfunc_t cbfunc, void *cbdata);
	ft_pmix_status_t (*client_finalized)(const ft_pmix_proc_t *proc, void *server_object,
		ft_pmix_op_cbfunc_t cbfunc, void *cbdata);
	ft_pmix_status_t (*abort)(const ft_pmix_proc_t *proc, void *server_object, int status,
		const char msg[], ft_pmix_proc_t procs[], size_t nprocs, ft_pmix_op_cbfunc_t cbfunc, void *cbdata);
	ft_pmix_status_t (*fence_nb)(const ft_pmix_proc_t procs[], size_t nprocs,
		const ft_pmix_info_t info[], size_t ninfo, char *data, size_t ndata,
		ft_pmix_modex_cbfunc_t cbfunc, void *cbdata);
	ft_pmix_status_t (*direct_modex)(const ft_pmix_proc_t *proc, const ft_pmix_info_t info[],
		size_t ninfo, ft_pmix_modex_cbfunc_t cbfunc, void *cbdata);
	ft_pmix_status_t (*publish)(const ft_pmix_proc_t *proc, const ft_pmix_info_t info[], size_t ninfo,
		ft_pmix_op_cbfunc_t cbfunc, void *cbdata);
	ft_pmix_status_t (*lookup)(const ft_pmix_proc_t *proc, char **keys, const ft_pmix_info_t info[],
		size_t ninfo, void *cbfunc, void *cbdata);
	ft_pmix_status_t (*unpublish)(const ft_pmix_proc_t *proc, char **keys, const ft_pmix_info_t info[],
		size_t ninfo, ft_pmix_op_cbfunc_t cbfunc, void *cbdata);
	ft_pmix_status_t (*spawn)(const ft_pmix_proc_t *proc, const ft_pmix_info_t job_info[], size_t ninfo,
		const void *apps, size_t napps, void *cbfunc, void *cbdata);
	ft_pmix_status_t (*connect)(const ft_pmix_proc_t procs[], size_t nprocs, const ft_pmix_info_t info[],
		size_t ninfo, ft_pmix_op_cbfunc_t cbfunc, void *cbdata);
	ft_pmix_status_t (*disconnect)(const ft_pmix_proc_t procs[], size_t nprocs, const ft_pmix_info_t info[],
		size_t ninfo, ft_pmix_op_cbfunc_t cbfunc, void *cbdata);
	void *register_events;
	void *deregister_events;
	void *listener;
	void *notify_event;
	void *query;
	void (*tool_connected)(ft_pmix_info_t *info, size_t ninfo, ft_pmix_tool_connection_cbfunc_t cbfunc, void *cbdata);
	void *log;
	void *allocate;
	void *job_control;
	void *monitor;
	void *get_credential;
	void *validate_credential;
	void *iof_pull;
	void *push_stdin;
	ft_pmix_status_t (*group)(int op, char grp[], const ft_pmix_proc_t procs[], size_t nprocs,
		const ft_pmix_info_t directives[], size_t ndirs, void *cbfunc, void *cbdata);
	void *fabric;
	void *client_connected2;
} ft_pmix_server_module_t;

#endif
