// shim.h: the C side of the PMIx server: libpmix.so.2 opened at run time,
// the server module's callbacks (which hand each request to Go), and small
// helpers to build info arrays and to complete PMIx's callbacks.
#ifndef FTPMIX_SHIM_H
#define FTPMIX_SHIM_H

#include "ftpmix.h"

int ft_load(const char *path, char **err);
int ft_server_init(ft_pmix_info_t *info, size_t ninfo);
const char *ft_error_string(int status);

ft_pmix_info_t *ft_info_new(size_t n);
void ft_info_string(ft_pmix_info_t *a, size_t i, const char *key, const char *val);
// ft_info_num sets a number of type FT_PMIX_UINT16, _UINT32, _PROC_RANK or _BOOL.
void ft_info_num(ft_pmix_info_t *a, size_t i, const char *key, uint16_t type, uint32_t v);
void ft_info_infos(ft_pmix_info_t *a, size_t i, const char *key, ft_pmix_info_t *sub, size_t n);
void ft_info_free(ft_pmix_info_t *a, size_t n);

int ft_register_nspace(const char *ns, int nlocal, ft_pmix_info_t *info, size_t ninfo, uintptr_t h);
void ft_deregister_nspace(const char *ns, uintptr_t h);
int ft_register_client(const char *ns, uint32_t rank, uid_t uid, gid_t gid, uintptr_t h);
int ft_setup_fork(const char *ns, uint32_t rank, char ***env);
void ft_env_free(char **env);

void ft_modex_done(void *cbfunc, void *cbdata, int status, char *data, size_t ndata);
void ft_op_done(void *cbfunc, void *cbdata, int status);

#endif
