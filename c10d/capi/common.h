/** \file
 * c10d's C API: what every part of it shares (the version, statuses, element types, buffers,
 * handles) and the library's own calls. c10d/capi/c10d.h includes every part and states the
 * conventions they follow. */
#ifndef C10D_CAPI_COMMON_H
#define C10D_CAPI_COMMON_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
/** Marks a call exported from libc10d_c (default visibility); the library hides everything else. */
#define C10D_C_EXPORT __attribute__((visibility("default")))
/** A call kept under a former name for one release; the compiler names the one to call.
 * \param instead the name of the call that replaces it, as a string literal. */
#define C10D_DEPRECATED(instead) __attribute__((deprecated("use " instead)))
#else
/** Marks a call exported from libc10d_c; empty for compilers other than GCC and Clang. */
#define C10D_C_EXPORT
/** A call kept under a former name for one release (no warning with compilers other than GCC and
 * Clang). \param instead the name of the call that replaces it, as a string literal. */
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

/** What every call that can fail returns: C10D_OK, or the kind of error (the C++ exception type
 * it came from); c10d_last_error() has the message and c10d_status_name() the value's name. */
typedef enum c10d_status {
  C10D_OK = 0,                   /**< the call succeeded */
  C10D_ERR_INVALID_ARGUMENT = 1, /**< the caller passed something the call cannot accept */
  C10D_ERR_TIMEOUT = 2,          /**< a blocking call ran past its deadline */
  C10D_ERR_STORE = 3,            /**< the store is unreachable, failed, or spoke another protocol */
  C10D_ERR_BACKEND = 4,          /**< the communication backend failed the operation */
  C10D_ERR_REMOTE = 5,           /**< a remote call failed on the callee */
  C10D_ERR_STATE = 6,            /**< the group, agent or work was shut down or released */
  C10D_ERR_INTERNAL = 7,         /**< anything else; c10d_last_error() says what */
  C10D_ERR_CHECKPOINT = 8        /**< a checkpoint that cannot be written or used (checkpoint.h) */
} c10d_status;

/** Element types (the order of the C++ c10d::ScalarType). */
typedef enum c10d_dtype {
  C10D_FLOAT32 = 0,  /**< 32-bit IEEE float */
  C10D_FLOAT64 = 1,  /**< 64-bit IEEE float */
  C10D_FLOAT16 = 2,  /**< 16-bit IEEE half */
  C10D_BFLOAT16 = 3, /**< 16-bit brain float */
  C10D_INT8 = 4,     /**< signed 8-bit integer */
  C10D_INT16 = 5,    /**< signed 16-bit integer */
  C10D_INT32 = 6,    /**< signed 32-bit integer */
  C10D_INT64 = 7,    /**< signed 64-bit integer */
  C10D_UINT8 = 8,    /**< unsigned 8-bit integer */
  C10D_BOOL = 9      /**< one byte, 0 or 1 */
} c10d_dtype;

/** How a reduction combines the ranks' elements (c10d_op_options.reduce_op; the order of the C++
 * ReduceOp::Kind). */
typedef enum c10d_reduce_op {
  C10D_SUM = 0,       /**< sum */
  C10D_AVG = 1,       /**< mean over the group's ranks */
  C10D_PRODUCT = 2,   /**< product */
  C10D_MIN = 3,       /**< minimum */
  C10D_MAX = 4,       /**< maximum */
  C10D_BAND = 5,      /**< bitwise and (integer and bool types) */
  C10D_BOR = 6,       /**< bitwise or (integer and bool types) */
  C10D_BXOR = 7,      /**< bitwise exclusive or (integer and bool types) */
  C10D_PREMUL_SUM = 8 /**< sum of each input times c10d_op_options.premul_factor */
} c10d_reduce_op;

/** Where a buffer's memory is (c10d_buffer.device_type). */
typedef enum c10d_device_type { C10D_DEVICE_CPU = 0, C10D_DEVICE_CUDA = 1 } c10d_device_type;
/** \var C10D_DEVICE_CPU
 * Host memory (c10d_buffer.device_index 0, stream NULL). */
/** \var C10D_DEVICE_CUDA
 * CUDA device memory, of the device c10d_buffer.device_index. */

/** A buffer the operations read and write in place: `count` contiguous elements of `dtype` at
 * `data` (c10d/capi/c10d.h, "Buffers"). The library never frees it. */
typedef struct c10d_buffer {
  void* data;                   /**< the first element; may be NULL only when count is 0 */
  int64_t count;                /**< elements, not bytes */
  c10d_dtype dtype;             /**< the elements' type */
  c10d_device_type device_type; /**< where data is */
  int device_index;             /**< CUDA device ordinal; 0 for CPU */
  void* stream;                 /**< CUDA: the cudaStream_t to order after; must be NULL for CPU */
} c10d_buffer;

/** A store handle (store.h): free it with c10d_store_free. */
typedef struct c10d_store c10d_store;
/** A process group handle (group.h): free it with c10d_group_free. */
typedef struct c10d_group c10d_group;
/** A started operation's handle (ops.h, work.h): free it with c10d_work_free. */
typedef struct c10d_work c10d_work;
/* DLPack's managed tensor, defined in <dlpack/dlpack.h>; declared here for the calls that take
 * or return one, so that this header does not need DLPack's. */
struct DLManagedTensor;

/** Bytes the library allocated for the caller (store values); release data with c10d_free. */
typedef struct c10d_bytes {
  void* data;  /**< malloc'ed by the library (not NULL, also for 0 bytes, unless a call says so) */
  size_t size; /**< bytes at data */
} c10d_bytes;

/* ---- library ---- */

/** The version of the C API the linked library implements (C10D_API_VERSION when it was built),
 * for a program or binding that checks at run time that the library has the calls it uses.
 * \return the library's C10D_API_VERSION. */
C10D_C_EXPORT int c10d_api_version(void);
/** The failing call's message on this thread ("" when none failed yet).
 * \return the message, owned by the library: valid until this thread's next failing c10d call. */
C10D_C_EXPORT const char* c10d_last_error(void);
/** "C10D_ERR_TIMEOUT" for C10D_ERR_TIMEOUT; "unknown status" for values not listed above.
 * \param status any value.
 * \return the status's name: a static string, never NULL. */
C10D_C_EXPORT const char* c10d_status_name(c10d_status status);
/** "float32", "bfloat16"... (NULL for values not listed above) and the size of one element.
 * \param dtype any value.
 * \return the dtype's name, a static string; NULL for a value that is not a c10d_dtype. */
C10D_C_EXPORT const char* c10d_dtype_name(c10d_dtype dtype);
/** The size of one element of dtype.
 * \param dtype any value.
 * \return bytes per element (4 for C10D_FLOAT32); 0 for a value that is not a c10d_dtype. */
C10D_C_EXPORT size_t c10d_dtype_size(c10d_dtype dtype);
/** Releases what the library allocated for the caller (c10d_bytes.data); NULL is ignored.
 * \param data memory a c10d call returned for the caller to free (it is free()'s), or NULL. */
C10D_C_EXPORT void c10d_free(void* data);
/** Writes message as the error file a launcher names in TORCHELASTIC_ERROR_FILE (torchrun,
 * c10drun), whose failure summary then shows it. *written: 1, or 0 when no launcher named a file.
 * Call it before exiting with an error; c10d_group_init already arranges it for uncaught C++
 * errors. A file that cannot be written is logged, not reported: *written is 1 then too.
 * \param message the error's text; must not be NULL.
 * \param[out] written 1 when a launcher named a file, else 0; may be NULL.
 * \return C10D_OK; C10D_ERR_INVALID_ARGUMENT when message is NULL. */
C10D_C_EXPORT c10d_status c10d_write_error_file(const char* message, int* written);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* C10D_CAPI_COMMON_H */
