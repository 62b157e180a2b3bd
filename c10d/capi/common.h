/** \file
 * c10d's C API: what every part of it shares (the version, statuses, element types, buffers,
 * handles) and the library's own calls. c10d/capi/c10d.h includes every part and states the
 * conventions they follow. */
#ifndef C10D_CAPI_COMMON_H
#define C10D_CAPI_COMMON_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define C10D_C_EXPORT __attribute__((visibility("default")))
/** A call kept under a former name for one release; the compiler names the one to call. */
#define C10D_DEPRECATED(instead) __attribute__((deprecated("use " instead)))
#else
#define C10D_C_EXPORT
#define C10D_DEPRECATED(instead)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** The version of this API: what c10d_api_version() of the library linked at run time returns,
 * at least. Raised when calls or fields are added; the soname changes when any is removed. */
#define C10D_API_VERSION 5
/** The number in libc10d_c's soname (libc10d_c.so.1): raised only when a call or field is removed
 * or changed, which breaks programs built before. */
#define C10D_ABI_VERSION 1

typedef enum c10d_status {
  C10D_OK = 0,
  C10D_ERR_INVALID_ARGUMENT = 1, /**< the caller passed something the call cannot accept */
  C10D_ERR_TIMEOUT = 2,          /**< a blocking call ran past its deadline */
  C10D_ERR_STORE = 3,            /**< the store is unreachable, failed, or spoke another protocol */
  C10D_ERR_BACKEND = 4,          /**< the communication backend failed the operation */
  C10D_ERR_REMOTE = 5,           /**< a remote call failed on the callee */
  C10D_ERR_STATE = 6,            /**< the group, agent or work was shut down or released */
  C10D_ERR_INTERNAL = 7,         /**< anything else; c10d_last_error() says what */
  C10D_ERR_CHECKPOINT = 8        /* a checkpoint that cannot be written or used (see below) */
} c10d_status;

/** Element types (the order of the C++ c10d::ScalarType). */
typedef enum c10d_dtype {
  C10D_FLOAT32 = 0,
  C10D_FLOAT64 = 1,
  C10D_FLOAT16 = 2,
  C10D_BFLOAT16 = 3,
  C10D_INT8 = 4,
  C10D_INT16 = 5,
  C10D_INT32 = 6,
  C10D_INT64 = 7,
  C10D_UINT8 = 8,
  C10D_BOOL = 9
} c10d_dtype;

typedef enum c10d_reduce_op {
  C10D_SUM = 0,
  C10D_AVG = 1,
  C10D_PRODUCT = 2,
  C10D_MIN = 3,
  C10D_MAX = 4,
  C10D_BAND = 5,
  C10D_BOR = 6,
  C10D_BXOR = 7,
  C10D_PREMUL_SUM = 8 /* sum of each input times c10d_op_options.premul_factor */
} c10d_reduce_op;

typedef enum c10d_device_type { C10D_DEVICE_CPU = 0, C10D_DEVICE_CUDA = 1 } c10d_device_type;

typedef struct c10d_buffer {
  void* data;
  int64_t count; /**< elements, not bytes */
  c10d_dtype dtype;
  c10d_device_type device_type;
  int device_index; /**< CUDA device ordinal; 0 for CPU */
  void* stream;     /**< CUDA: the cudaStream_t to order after; must be NULL for CPU */
} c10d_buffer;

typedef struct c10d_store c10d_store;
typedef struct c10d_group c10d_group;
typedef struct c10d_work c10d_work;
struct DLManagedTensor; /**< <dlpack/dlpack.h> */

/** Bytes the library allocated for the caller (store values); release data with c10d_free. */
typedef struct c10d_bytes {
  void* data;
  size_t size;
} c10d_bytes;

/* ---- library ---- */

C10D_C_EXPORT int c10d_api_version(void);
/** The failing call's message on this thread ("" when none failed yet). */
C10D_C_EXPORT const char* c10d_last_error(void);
/** "C10D_ERR_TIMEOUT" for C10D_ERR_TIMEOUT; "unknown status" for values not listed above. */
C10D_C_EXPORT const char* c10d_status_name(c10d_status status);
/** "float32", "bfloat16"... (NULL for values not listed above) and the size of one element. */
C10D_C_EXPORT const char* c10d_dtype_name(c10d_dtype dtype);
C10D_C_EXPORT size_t c10d_dtype_size(c10d_dtype dtype);
/** Releases what the library allocated for the caller (c10d_bytes.data); NULL is ignored. */
C10D_C_EXPORT void c10d_free(void* data);
/** Writes message as the error file a launcher names in TORCHELASTIC_ERROR_FILE (torchrun, c10drun),
 * whose failure summary then shows it. *written: 1, or 0 when no launcher named a file. Call it
 * before exiting with an error; c10d_group_init already arranges it for uncaught C++ errors. */
C10D_C_EXPORT c10d_status c10d_write_error_file(const char* message, int* written);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* C10D_CAPI_COMMON_H */
