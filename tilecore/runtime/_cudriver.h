/*
 * Shared between the two sources of tilecore.runtime._cudriver: the driver
 * types (declared here so the module builds without the CUDA headers; the
 * layouts follow cuda.h of CUDA 12+), the Launcher object and the calls that
 * _fastlaunch.c makes into _cudriver.c.
 */
#ifndef TILECORE_CUDRIVER_H
#define TILECORE_CUDRIVER_H

#include <Python.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUmodule;
typedef void *CUfunction;
typedef void *CUstream;
typedef unsigned long long CUdeviceptr;

enum { CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4,
       CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6,
       CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9 };

typedef struct {
    int id;                              /* CUlaunchAttributeID */
    char pad[4];                         /* pad[8 - sizeof(CUlaunchAttributeID)] */
    union {
        char bytes[64];
        struct { unsigned int x, y, z; } cluster_dim;
        int programmatic_serialization;
    } value;                             /* CUlaunchAttributeValue */
} LaunchAttribute;

typedef struct {
    unsigned int grid_x, grid_y, grid_z;
    unsigned int block_x, block_y, block_z;
    unsigned int shared_mem_bytes;
    CUstream stream;
    LaunchAttribute *attrs;
    unsigned int num_attrs;
} LaunchConfig;

#define MAX_PARAMS 1024
#define STACK_PARAM_BYTES 4096   /* larger parameter lists use the heap */

typedef struct {
    PyObject_HEAD
    CUcontext ctx;
    CUfunction fn;
    unsigned int block_x, smem_bytes, cluster_x;
    int pdl;            /* programmatic dependent launch: may start before the stream's
                           previous kernel ends (it waits in the kernel, sm_90+) */
    Py_ssize_t n_params, size;
    char *codes;        /* one struct code per parameter */
    Py_ssize_t *offsets;
    const volatile unsigned int *error_flag;  /* the device's error record's `ready` word
                                                 (host-mapped, runtime/device_errors.py) */
} Launcher;

/* What a launch returns, without launching, while a device-side error is recorded and not yet
 * reported (no CUresult has this value; runtime/driver.py PENDING_DEVICE_ERROR). */
#define TC_PENDING_DEVICE_ERROR 0x40000001

extern PyTypeObject LauncherType;

/* Pack n parameter values into buf (Launcher layout): values[i], or where that is NULL the
 * integer raw[i]; -1 with an exception. */
int tc_pack_values(Launcher *self, PyObject *const *values, const long long *raw, Py_ssize_t n,
                   char *buf);

/* Make the launcher's context current and launch with the packed parameters in
 * buf, releasing the GIL; the CUresult, or TC_PENDING_DEVICE_ERROR (nothing launched)
 * while the device has an error to report. */
CUresult tc_launch_packed(Launcher *self, void *stream, unsigned int gx, unsigned int gy,
                          unsigned int gz, char *buf);

/* 0 when the driver library is open, else -1 with RuntimeError. */
int tc_require_driver(void);

/* Add the FastLaunch type to the module (defined in _fastlaunch.c). */
int tc_add_fast_launch(PyObject *module);

#endif
