// abicheck.c: where the OpenPMIx headers are installed (libpmix-dev, which
// `make deps` installs), the build checks that ftpmix.h declares the types,
// constants and the server module exactly as libpmix.so.2 lays them out.
// Elsewhere this file compiles to nothing, and the build needs no PMIx
// header at all.
#if defined(__has_include)
#if __has_include(<pmix_server.h>)
#include <stddef.h>
#include <pmix_server.h>
#include "ftpmix.h"

#define SAME_SIZE(a, b) _Static_assert(sizeof(a) == sizeof(b), "size of " #a " differs from " #b)
#define SAME_OFF(a, b, f) _Static_assert(offsetof(a, f) == offsetof(b, f), "offset of " #f " in " #a " differs")
#define SAME_VAL(a, b) _Static_assert((a) == (b), #a " differs from " #b)

SAME_SIZE(ft_pmix_proc_t, pmix_proc_t);
SAME_OFF(ft_pmix_proc_t, pmix_proc_t, rank);
SAME_SIZE(ft_pmix_data_array_t, pmix_data_array_t);
SAME_OFF(ft_pmix_data_array_t, pmix_data_array_t, size);
SAME_OFF(ft_pmix_data_array_t, pmix_data_array_t, array);
SAME_SIZE(ft_pmix_value_t, pmix_value_t);
SAME_OFF(ft_pmix_value_t, pmix_value_t, data);
SAME_SIZE(ft_pmix_info_t, pmix_info_t);
SAME_OFF(ft_pmix_info_t, pmix_info_t, flags);
SAME_OFF(ft_pmix_info_t, pmix_info_t, value);
SAME_SIZE(ft_pmix_server_module_t, pmix_server_module_t);
SAME_OFF(ft_pmix_server_module_t, pmix_server_module_t, client_connected);
SAME_OFF(ft_pmix_server_module_t, pmix_server_module_t, client_finalized);
SAME_OFF(ft_pmix_server_module_t, pmix_server_module_t, abort);
SAME_OFF(ft_pmix_server_module_t, pmix_server_module_t, fence_nb);
SAME_OFF(ft_pmix_server_module_t, pmix_server_module_t, direct_modex);
SAME_OFF(ft_pmix_server_module_t, pmix_server_module_t, publish);
SAME_OFF(ft_pmix_server_module_t, pmix_server_module_t, lookup);
SAME_OFF(ft_pmix_server_module_t, pmix_server_module_t, unpublish);
SAME_OFF(ft_pmix_server_module_t, pmix_server_module_t, spawn);
SAME_OFF(ft_pmix_server_module_t, pmix_server_module_t, connect);
SAME_OFF(ft_pmix_server_module_t, pmix_server_module_t, disconnect);
SAME_OFF(ft_pmix_server_module_t, pmix_server_module_t, tool_connected);
SAME_OFF(ft_pmix_server_module_t, pmix_server_module_t, group);
SAME_OFF(ft_pmix_server_module_t, pmix_server_module_t, client_connected2);

SAME_VAL(FT_PMIX_MAX_NSLEN, PMIX_MAX_NSLEN);
SAME_VAL(FT_PMIX_MAX_KEYLEN, PMIX_MAX_KEYLEN);
SAME_VAL(FT_PMIX_RANK_WILDCARD, PMIX_RANK_WILDCARD);
SAME_VAL(FT_PMIX_SUCCESS, PMIX_SUCCESS);
SAME_VAL(FT_PMIX_ERROR, PMIX_ERROR);
SAME_VAL(FT_PMIX_ERR_NOT_FOUND, PMIX_ERR_NOT_FOUND);
SAME_VAL(FT_PMIX_ERR_NOT_SUPPORTED, PMIX_ERR_NOT_SUPPORTED);
SAME_VAL(FT_PMIX_OPERATION_SUCCEEDED, PMIX_OPERATION_SUCCEEDED);
SAME_VAL(FT_PMIX_BOOL, PMIX_BOOL);
SAME_VAL(FT_PMIX_STRING, PMIX_STRING);
SAME_VAL(FT_PMIX_UINT16, PMIX_UINT16);
SAME_VAL(FT_PMIX_UINT32, PMIX_UINT32);
SAME_VAL(FT_PMIX_INFO, PMIX_INFO);
SAME_VAL(FT_PMIX_DATA_ARRAY, PMIX_DATA_ARRAY);
SAME_VAL(FT_PMIX_PROC_RANK, PMIX_PROC_RANK);
#endif
#endif

// ftpmix_abicheck_unit keeps this translation unit non-empty without the headers.
int ftpmix_abicheck_unit;
