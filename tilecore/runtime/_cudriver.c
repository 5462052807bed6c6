/*
 * tilecore.runtime._cudriver: the few CUDA driver calls tilecore makes, called
 * straight from C.
 *
 * Why it exists: on the reference H100 host one cuLaunchKernel through
 * cuda.bindings costs about 4.3 us of Python-side time and the first import of
 * cuda.bindings.driver about 20-30 ms; both were most of tilecore's launch
 * overhead and warm-start time. This module loads libcuda itself (dlopen, on
 * first use) and exposes the calls with plain ints for handles. Every function
 * returns a tuple (CUresult, values...) like cuda.bindings does, so the Python
 * side unwraps both the same way (tilecore.runtime.driver.check).
 *
 * `Launcher` holds one kernel's launch configuration and parameter layout; its
 * `launch` packs the parameter values into a stack buffer, makes the context
 * current when it is not, and launches with the GIL released; while its
 * device's error record holds an unreported device-side error it launches
 * nothing and returns TC_PENDING_DEVICE_ERROR (runtime/device_errors.py).
 *
 * The driver types are declared here rather than taken from cuda.h so that the
 * module builds without the CUDA headers; the layouts follow cuda.h of CUDA 12+.
 * The module is optional: without it tilecore uses cuda.bindings.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#include "_cudriver.h"

/* ---- the driver entry points, resolved once ------------------------------ */

static struct {
    CUresult (*init)(unsigned int);
    CUresult (*device_get_count)(int *);
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*device_get_attribute)(int *, int, CUdevice);
    CUresult (*device_get_name)(char *, int, CUdevice);
    CUresult (*primary_ctx_retain)(CUcontext *, CUdevice);
    CUresult (*ctx_get_current)(CUcontext *);
    CUresult (*ctx_set_current)(CUcontext);
    CUresult (*ctx_get_device)(CUdevice *);
    CUresult (*pointer_get_attribute)(void *, int, CUdeviceptr);
    CUresult (*module_load_data)(CUmodule *, const void *);
    CUresult (*module_get_function)(CUfunction *, CUmodule, const char *);
    CUresult (*func_set_attribute)(CUfunction, int, int);
    CUresult (*launch_kernel)(CUfunction, unsigned int, unsigned int, unsigned int,
                              unsigned int, unsigned int, unsigned int, unsigned int,
                              CUstream, void **, void **);
    CUresult (*launch_kernel_ex)(const LaunchConfig *, CUfunction, void **, void **);
    CUresult (*get_error_string)(CUresult, const char **);
    CUresult (*mem_host_alloc)(void **, size_t, unsigned int);
    CUresult (*mem_host_get_device_pointer)(CUdeviceptr *, void *, unsigned int);
    CUresult (*mem_alloc)(CUdeviceptr *, size_t);
    CUresult (*module_get_global)(CUdeviceptr *, size_t *, CUmodule, const char *);
    CUresult (*memcpy_htod)(CUdeviceptr, const void *, size_t);
    CUresult (*ctx_synchronize)(void);
    CUresult (*stream_synchronize)(CUstream);
} cu;

static void *libcuda = NULL;

static int resolve(void **slot, const char *name, int required) {
    *slot = dlsym(libcuda, name);
    if (*slot == NULL && required) {
        PyErr_Format(PyExc_OSError, "the CUDA driver library has no symbol %s", name);
        return -1;
    }
    return 0;
}

/* open(path): load the driver library and resolve the entry points. Raises
 * OSError when the library or a required symbol is missing. Once a library is
 * open, later calls only check that `path` loads: the first one stays in use. */
static PyObject *open_driver(PyObject *self, PyObject *arg) {
    const char *path = PyUnicode_AsUTF8(arg);
    if (path == NULL) return NULL;
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        const char *why = dlerror();
        PyErr_Format(PyExc_OSError, "cannot load %s: %s", path, why ? why : "unknown error");
        return NULL;
    }
    if (libcuda != NULL) {
        if (lib != libcuda) dlclose(lib);
        Py_RETURN_NONE;
    }
    libcuda = lib;
    if (resolve((void **)&cu.init, "cuInit", 1) ||
        resolve((void **)&cu.device_get_count, "cuDeviceGetCount", 1) ||
        resolve((void **)&cu.device_get, "cuDeviceGet", 1) ||
        resolve((void **)&cu.device_get_attribute, "cuDeviceGetAttribute", 1) ||
        resolve((void **)&cu.device_get_name, "cuDeviceGetName", 1) ||
        resolve((void **)&cu.primary_ctx_retain, "cuDevicePrimaryCtxRetain", 1) ||
        resolve((void **)&cu.ctx_get_current, "cuCtxGetCurrent", 1) ||
        resolve((void **)&cu.ctx_set_current, "cuCtxSetCurrent", 1) ||
        resolve((void **)&cu.ctx_get_device, "cuCtxGetDevice", 1) ||
        resolve((void **)&cu.pointer_get_attribute, "cuPointerGetAttribute", 1) ||
        resolve((void **)&cu.module_load_data, "cuModuleLoadData", 1) ||
        resolve((void **)&cu.module_get_function, "cuModuleGetFunction", 1) ||
        resolve((void **)&cu.func_set_attribute, "cuFuncSetAttribute", 1) ||
        resolve((void **)&cu.launch_kernel, "cuLaunchKernel", 1) ||
        resolve((void **)&cu.launch_kernel_ex, "cuLaunchKernelEx", 0) ||
        resolve((void **)&cu.get_error_string, "cuGetErrorString", 1) ||
        resolve((void **)&cu.mem_host_alloc, "cuMemHostAlloc", 1) ||
        resolve((void **)&cu.mem_host_get_device_pointer, "cuMemHostGetDevicePointer_v2", 1) ||
        resolve((void **)&cu.mem_alloc, "cuMemAlloc_v2", 1) ||
        resolve((void **)&cu.module_get_global, "cuModuleGetGlobal_v2", 1) ||
        resolve((void **)&cu.memcpy_htod, "cuMemcpyHtoD_v2", 1) ||
        resolve((void **)&cu.ctx_synchronize, "cuCtxSynchronize", 1) ||
        resolve((void **)&cu.stream_synchronize, "cuStreamSynchronize", 1)) {
        dlclose(lib);
        libcuda = NULL;
        return NULL;
    }
    Py_RETURN_NONE;
}

int tc_require_driver(void) {
    if (libcuda == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the CUDA driver library is not loaded (call open())");
        return -1;
    }
    return 0;
}

#define NEED_DRIVER() do { if (tc_require_driver()) return NULL; } while (0)

static PyObject *handle(const void *p) { return PyLong_FromUnsignedLongLong((uintptr_t)p); }

static int as_handle(PyObject *o, void **out) {
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    *out = (void *)(uintptr_t)v;
    return 0;
}

static int as_int(PyObject *o, int *out) {
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v < INT32_MIN || v > INT32_MAX) {
        PyErr_Format(PyExc_OverflowError, "%ld does not fit a C int", v);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int expect_args(Py_ssize_t nargs, Py_ssize_t n, const char *name) {
    if (nargs != n) {
        PyErr_Format(PyExc_TypeError, "%s() takes %zd arguments (%zd given)", name, n, nargs);
        return -1;
    }
    return 0;
}

/* ---- plain wrappers: (CUresult, value) ----------------------------------- */

static PyObject *py_init(PyObject *self, PyObject *arg) {
    NEED_DRIVER();
    int flags;
    if (as_int(arg, &flags)) return NULL;
    return Py_BuildValue("(i)", cu.init((unsigned int)flags));
}

static PyObject *py_device_count(PyObject *self, PyObject *unused) {
    NEED_DRIVER();
    int n = 0;
    CUresult err = cu.device_get_count(&n);
    return Py_BuildValue("(ii)", err, n);
}

static PyObject *py_device_get(PyObject *self, PyObject *arg) {
    NEED_DRIVER();
    int ordinal;
    if (as_int(arg, &ordinal)) return NULL;
    CUdevice dev = 0;
    CUresult err = cu.device_get(&dev, ordinal);
    return Py_BuildValue("(ii)", err, dev);
}

static PyObject *py_device_attribute(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    NEED_DRIVER();
    int attr, dev, value = 0;
    if (expect_args(nargs, 2, "device_attribute") || as_int(args[0], &attr) ||
        as_int(args[1], &dev))
        return NULL;
    CUresult err = cu.device_get_attribute(&value, attr, dev);
    return Py_BuildValue("(ii)", err, value);
}

static PyObject *py_device_name(PyObject *self, PyObject *arg) {
    NEED_DRIVER();
    int dev;
    if (as_int(arg, &dev)) return NULL;
    char name[256] = {0};
    CUresult err = cu.device_get_name(name, (int)sizeof(name) - 1, dev);
    return Py_BuildValue("(is)", err, err ? "" : name);
}

static PyObject *py_primary_context(PyObject *self, PyObject *arg) {
    NEED_DRIVER();
    int dev;
    if (as_int(arg, &dev)) return NULL;
    CUcontext ctx = NULL;
    CUresult err = cu.primary_ctx_retain(&ctx, dev);
    return Py_BuildValue("(iN)", err, handle(ctx));
}

static PyObject *py_current_context(PyObject *self, PyObject *unused) {
    NEED_DRIVER();
    CUcontext ctx = NULL;
    CUresult err = cu.ctx_get_current(&ctx);
    return Py_BuildValue("(iN)", err, handle(ctx));
}

static PyObject *py_set_current_context(PyObject *self, PyObject *arg) {
    NEED_DRIVER();
    void *ctx;
    if (as_handle(arg, &ctx)) return NULL;
    return Py_BuildValue("(i)", cu.ctx_set_current(ctx));
}

static PyObject *py_context_device(PyObject *self, PyObject *unused) {
    NEED_DRIVER();
    CUdevice dev = 0;
    CUresult err = cu.ctx_get_device(&dev);
    return Py_BuildValue("(ii)", err, dev);
}

static PyObject *py_pointer_device(PyObject *self, PyObject *arg) {
    NEED_DRIVER();
    unsigned long long ptr = PyLong_AsUnsignedLongLong(arg);
    if (ptr == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    int ordinal = -1;
    CUresult err = cu.pointer_get_attribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr);
    return Py_BuildValue("(ii)", err, ordinal);
}

static PyObject *py_module_load(PyObject *self, PyObject *arg) {
    NEED_DRIVER();
    Py_buffer image;
    if (PyObject_GetBuffer(arg, &image, PyBUF_SIMPLE)) return NULL;
    CUmodule module = NULL;
    CUresult err;
    Py_BEGIN_ALLOW_THREADS
    err = cu.module_load_data(&module, image.buf);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&image);
    return Py_BuildValue("(iN)", err, handle(module));
}

static PyObject *py_module_function(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    NEED_DRIVER();
    void *module;
    if (expect_args(nargs, 2, "module_function") || as_handle(args[0], &module)) return NULL;
    const char *name = PyBytes_AsString(args[1]);
    if (name == NULL) return NULL;
    CUfunction fn = NULL;
    CUresult err = cu.module_get_function(&fn, module, name);
    return Py_BuildValue("(iN)", err, handle(fn));
}

static PyObject *py_function_attribute(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    NEED_DRIVER();
    void *fn;
    int attr, value;
    if (expect_args(nargs, 3, "set_function_attribute") || as_handle(args[0], &fn) ||
        as_int(args[1], &attr) || as_int(args[2], &value))
        return NULL;
    return Py_BuildValue("(i)", cu.func_set_attribute(fn, attr, value));
}

/* ---- the device error record (runtime/device_errors.py) ------------------ */

static PyObject *py_mem_host_alloc(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    NEED_DRIVER();
    if (expect_args(nargs, 2, "mem_host_alloc")) return NULL;
    size_t size = PyLong_AsSize_t(args[0]);
    if (size == (size_t)-1 && PyErr_Occurred()) return NULL;
    int flags;
    if (as_int(args[1], &flags)) return NULL;
    void *ptr = NULL;
    CUresult err = cu.mem_host_alloc(&ptr, size, (unsigned int)flags);
    return Py_BuildValue("(iN)", err, handle(ptr));
}

static PyObject *py_mem_host_device_pointer(PyObject *self, PyObject *arg) {
    NEED_DRIVER();
    void *ptr;
    if (as_handle(arg, &ptr)) return NULL;
    CUdeviceptr dptr = 0;
    CUresult err = cu.mem_host_get_device_pointer(&dptr, ptr, 0);
    return Py_BuildValue("(iK)", err, dptr);
}

static PyObject *py_mem_alloc(PyObject *self, PyObject *arg) {
    NEED_DRIVER();
    size_t size = PyLong_AsSize_t(arg);
    if (size == (size_t)-1 && PyErr_Occurred()) return NULL;
    CUdeviceptr dptr = 0;
    CUresult err = cu.mem_alloc(&dptr, size);
    return Py_BuildValue("(iK)", err, dptr);
}

static PyObject *py_module_global(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    NEED_DRIVER();
    void *module;
    if (expect_args(nargs, 2, "module_global") || as_handle(args[0], &module)) return NULL;
    const char *name = PyBytes_AsString(args[1]);
    if (name == NULL) return NULL;
    CUdeviceptr dptr = 0;
    size_t size = 0;
    CUresult err = cu.module_get_global(&dptr, &size, module, name);
    return Py_BuildValue("(iKn)", err, dptr, (Py_ssize_t)size);
}

static PyObject *py_memcpy_htod(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    NEED_DRIVER();
    if (expect_args(nargs, 2, "memcpy_htod")) return NULL;
    unsigned long long dptr = PyLong_AsUnsignedLongLong(args[0]);
    if (dptr == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    Py_buffer data;
    if (PyObject_GetBuffer(args[1], &data, PyBUF_SIMPLE)) return NULL;
    CUresult err;
    Py_BEGIN_ALLOW_THREADS
    err = cu.memcpy_htod((CUdeviceptr)dptr, data.buf, (size_t)data.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    return Py_BuildValue("(i)", err);
}

static PyObject *py_ctx_synchronize(PyObject *self, PyObject *unused) {
    NEED_DRIVER();
    CUresult err;
    Py_BEGIN_ALLOW_THREADS
    err = cu.ctx_synchronize();
    Py_END_ALLOW_THREADS
    return Py_BuildValue("(i)", err);
}

static PyObject *py_stream_synchronize(PyObject *self, PyObject *arg) {
    NEED_DRIVER();
    void *stream;
    if (as_handle(arg, &stream)) return NULL;
    CUresult err;
    Py_BEGIN_ALLOW_THREADS
    err = cu.stream_synchronize((CUstream)stream);
    Py_END_ALLOW_THREADS
    return Py_BuildValue("(i)", err);
}

static PyObject *error_text(PyObject *arg, CUresult (*get)(CUresult, const char **)) {
    NEED_DRIVER();
    int code;
    if (as_int(arg, &code)) return NULL;
    const char *text = NULL;
    CUresult err = get(code, &text);
    if (err || text == NULL) return Py_BuildValue("(is)", err ? err : 1, "");
    return Py_BuildValue("(is)", 0, text);
}

static PyObject *py_error_string(PyObject *self, PyObject *arg) {
    return error_text(arg, cu.get_error_string);
}

/* ---- Launcher ------------------------------------------------------------ */

static void launcher_dealloc(Launcher *self) {
    PyMem_Free(self->codes);
    PyMem_Free(self->offsets);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int launcher_init(Launcher *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"context", "function", "block_threads", "smem_bytes",
                             "cluster_size", "codes", "offsets", "size", "pdl", "error_flag",
                             NULL};
    unsigned long long ctx, fn, error_flag = 0;
    unsigned int block, smem, cluster;
    const char *codes;
    Py_ssize_t n_codes, size;
    PyObject *offsets;
    int pdl = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "KKIIIs#On|pK", kwlist, &ctx, &fn, &block,
                                     &smem, &cluster, &codes, &n_codes, &offsets, &size, &pdl,
                                     &error_flag))
        return -1;
    PyObject *seq = PySequence_Fast(offsets, "offsets must be a sequence");
    if (seq == NULL) return -1;
    if (PySequence_Fast_GET_SIZE(seq) != n_codes || n_codes > MAX_PARAMS) {
        PyErr_Format(PyExc_ValueError, "%zd offsets for %zd parameter codes (at most %d)",
                     PySequence_Fast_GET_SIZE(seq), n_codes, MAX_PARAMS);
        Py_DECREF(seq);
        return -1;
    }
    PyMem_Free(self->codes);
    PyMem_Free(self->offsets);
    self->codes = PyMem_Malloc(n_codes + 1);
    self->offsets = PyMem_Malloc(sizeof(Py_ssize_t) * (n_codes + 1));
    if (self->codes == NULL || self->offsets == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n_codes; i++) {
        if (strchr("?bBhHiIqQfd", codes[i]) == NULL || codes[i] == '\0') {
            PyErr_Format(PyExc_ValueError, "unsupported parameter code %c", codes[i]);
            Py_DECREF(seq);
            return -1;
        }
        self->codes[i] = codes[i];
        self->offsets[i] = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(seq, i));
        if (self->offsets[i] < 0 || self->offsets[i] >= size) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "parameter %zd offset %zd is outside the %zd-byte "
                             "parameter block", i, self->offsets[i], size);
            Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);
    self->ctx = (CUcontext)(uintptr_t)ctx;
    self->fn = (CUfunction)(uintptr_t)fn;
    self->block_x = block;
    self->smem_bytes = smem;
    self->cluster_x = cluster;
    self->pdl = pdl;
    self->error_flag = (const volatile unsigned int *)(uintptr_t)error_flag;
    self->n_params = n_codes;
    self->size = size;
    return 0;
}

#define PACK_INT(ctype, lo, hi) do {                                             \
        long long v = PyLong_AsLongLong(value);                                  \
        if (v == -1 && PyErr_Occurred()) return -1;                              \
        if (v < (lo) || v > (hi)) goto range;                                    \
        ctype c = (ctype)v;                                                      \
        memcpy(dst, &c, sizeof c);                                               \
    } while (0)

/* Write parameter i (code `code`) at dst; -1 with an exception on bad values. */
static int pack_one(char code, PyObject *value, char *dst, Py_ssize_t i) {
    switch (code) {
    case '?': {
        int t = PyObject_IsTrue(value);
        if (t < 0) return -1;
        unsigned char c = (unsigned char)t;
        memcpy(dst, &c, 1);
        return 0;
    }
    case 'b': PACK_INT(int8_t, INT8_MIN, INT8_MAX); return 0;
    case 'B': PACK_INT(uint8_t, 0, UINT8_MAX); return 0;
    case 'h': PACK_INT(int16_t, INT16_MIN, INT16_MAX); return 0;
    case 'H': PACK_INT(uint16_t, 0, UINT16_MAX); return 0;
    case 'i': PACK_INT(int32_t, INT32_MIN, INT32_MAX); return 0;
    case 'I': PACK_INT(uint32_t, 0, UINT32_MAX); return 0;
    case 'q': PACK_INT(int64_t, INT64_MIN, INT64_MAX); return 0;
    case 'Q': {
        unsigned long long v = PyLong_AsUnsignedLongLong(value);
        if (v == (unsigned long long)-1 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_TypeError)) goto range;
            /* not an int: try __index__ (NumPy integers) */
            PyErr_Clear();
            PyObject *index = PyNumber_Index(value);
            if (index == NULL) return -1;
            v = PyLong_AsUnsignedLongLong(index);
            Py_DECREF(index);
            if (v == (unsigned long long)-1 && PyErr_Occurred()) goto range;
        }
        memcpy(dst, &v, sizeof v);
        return 0;
    }
    case 'f': {
        double d = PyFloat_AsDouble(value);
        if (d == -1.0 && PyErr_Occurred()) return -1;
        float f = (float)d;
        memcpy(dst, &f, sizeof f);
        return 0;
    }
    case 'd': {
        double d = PyFloat_AsDouble(value);
        if (d == -1.0 && PyErr_Occurred()) return -1;
        memcpy(dst, &d, sizeof d);
        return 0;
    }
    }
    PyErr_Format(PyExc_ValueError, "unsupported parameter code %c", code);
    return -1;
range:
    PyErr_Clear();
    PyErr_Format(PyExc_OverflowError, "kernel parameter %zd: %R is out of range for struct "
                 "code '%c'", i, value, code);
    return -1;
}

/* Write the integer parameter i (code `code`) at dst; -1 with OverflowError when out of range. */
static int pack_raw(char code, long long v, char *dst, Py_ssize_t i) {
#define PUT(ctype, lo, hi) do {                                                  \
        if (v < (lo) || v > (hi)) goto range;                                    \
        ctype c = (ctype)v;                                                      \
        memcpy(dst, &c, sizeof c);                                               \
        return 0;                                                                \
    } while (0)
    switch (code) {
    case 'b': PUT(int8_t, INT8_MIN, INT8_MAX);
    case 'B': PUT(uint8_t, 0, UINT8_MAX);
    case 'h': PUT(int16_t, INT16_MIN, INT16_MAX);
    case 'H': PUT(uint16_t, 0, UINT16_MAX);
    case 'i': PUT(int32_t, INT32_MIN, INT32_MAX);
    case 'I': PUT(uint32_t, 0, UINT32_MAX);
    case 'q': PUT(int64_t, INT64_MIN, INT64_MAX);
    case 'Q': PUT(uint64_t, 0, INT64_MAX);
    }
#undef PUT
    PyErr_Format(PyExc_ValueError, "kernel parameter %zd: an integer for struct code '%c'",
                 i, code);
    return -1;
range:
    PyErr_Format(PyExc_OverflowError, "kernel parameter %zd: %lld is out of range for struct "
                 "code '%c'", i, v, code);
    return -1;
}

int tc_pack_values(Launcher *self, PyObject *const *values, const long long *raw, Py_ssize_t n,
                   char *buf) {
    if (n != self->n_params) {
        PyErr_Format(PyExc_TypeError, "expected %zd parameter values, got %zd",
                     self->n_params, n);
        return -1;
    }
    memset(buf, 0, self->size);
    for (Py_ssize_t i = 0; i < n; i++)
        if (values[i] ? pack_one(self->codes[i], values[i], buf + self->offsets[i], i)
                      : pack_raw(self->codes[i], raw[i], buf + self->offsets[i], i))
            return -1;
    return 0;
}

static int pack_all(Launcher *self, PyObject *values, char *buf) {
    if (!PyTuple_Check(values)) {
        PyErr_Format(PyExc_TypeError, "expected a tuple of %zd parameter values, got %R",
                     self->n_params, values);
        return -1;
    }
    return tc_pack_values(self, &PyTuple_GET_ITEM(values, 0), NULL, PyTuple_GET_SIZE(values),
                          buf);
}

static int as_dim(PyObject *o, unsigned int *out) {
    unsigned long v = PyLong_AsUnsignedLong(o);
    if (v == (unsigned long)-1 && PyErr_Occurred()) return -1;
    if (v > UINT32_MAX) {
        PyErr_Format(PyExc_OverflowError, "grid dimension %lu does not fit 32 bits", v);
        return -1;
    }
    *out = (unsigned int)v;
    return 0;
}

CUresult tc_launch_packed(Launcher *self, void *stream, unsigned int gx, unsigned int gy,
                          unsigned int gz, char *buf) {
    /* One read of host memory: a kernel's device-side check failed, and the error is
     * reported (by the caller's fail()) instead of making this launch. */
    if (self->error_flag != NULL && *self->error_flag) return TC_PENDING_DEVICE_ERROR;
    void *stack_ptrs[64];
    void **ptrs = self->n_params <= 64 ? stack_ptrs
                                       : PyMem_Malloc(sizeof(void *) * self->n_params);
    if (ptrs == NULL) return 2;  /* CUDA_ERROR_OUT_OF_MEMORY */
    for (Py_ssize_t i = 0; i < self->n_params; i++) ptrs[i] = buf + self->offsets[i];
    CUresult err;
    Py_BEGIN_ALLOW_THREADS
    CUcontext current = NULL;
    err = cu.ctx_get_current(&current);
    if (err || current != self->ctx) err = cu.ctx_set_current(self->ctx);
    if (!err) {
        LaunchAttribute attrs[2];
        unsigned int n_attrs = 0;
        /* A cluster size is a hint: a grid it does not divide runs without clusters. */
        if (self->cluster_x > 1 && gx % self->cluster_x == 0) {
            memset(&attrs[n_attrs], 0, sizeof attrs[0]);
            attrs[n_attrs].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
            attrs[n_attrs].value.cluster_dim.x = self->cluster_x;
            attrs[n_attrs].value.cluster_dim.y = 1;
            attrs[n_attrs].value.cluster_dim.z = 1;
            n_attrs++;
        }
        if (self->pdl) {
            memset(&attrs[n_attrs], 0, sizeof attrs[0]);
            attrs[n_attrs].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
            attrs[n_attrs].value.programmatic_serialization = 1;
            n_attrs++;
        }
        if (n_attrs && cu.launch_kernel_ex != NULL) {
            LaunchConfig config = {gx, gy, gz, self->block_x, 1, 1, self->smem_bytes,
                                   (CUstream)stream, attrs, n_attrs};
            err = cu.launch_kernel_ex(&config, self->fn, self->n_params ? ptrs : NULL, NULL);
        } else {
            err = cu.launch_kernel(self->fn, gx, gy, gz, self->block_x, 1, 1, self->smem_bytes,
                                   (CUstream)stream, self->n_params ? ptrs : NULL, NULL);
        }
    }
    Py_END_ALLOW_THREADS
    if (ptrs != stack_ptrs) PyMem_Free(ptrs);
    return err;
}

/* launch(stream, gx, gy, gz, values) -> CUresult */
static PyObject *launcher_launch(Launcher *self, PyObject *const *args, Py_ssize_t nargs) {
    NEED_DRIVER();
    void *stream;
    unsigned int gx, gy, gz;
    if (expect_args(nargs, 5, "launch") || as_handle(args[0], &stream) || as_dim(args[1], &gx) ||
        as_dim(args[2], &gy) || as_dim(args[3], &gz))
        return NULL;
    char stack_buf[STACK_PARAM_BYTES] __attribute__((aligned(16)));
    char *buf = self->size <= STACK_PARAM_BYTES ? stack_buf : PyMem_Malloc(self->size);
    if (buf == NULL) return PyErr_NoMemory();
    PyObject *result = NULL;
    if (!pack_all(self, args[4], buf))
        result = PyLong_FromLong(tc_launch_packed(self, stream, gx, gy, gz, buf));
    if (buf != stack_buf) PyMem_Free(buf);
    return result;
}

/* pack(values) -> bytes: the parameter block as the kernel will read it (for tests). */
static PyObject *launcher_pack(Launcher *self, PyObject *values) {
    PyObject *out = PyBytes_FromStringAndSize(NULL, self->size);
    if (out == NULL) return NULL;
    if (pack_all(self, values, PyBytes_AS_STRING(out))) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

static PyMethodDef launcher_methods[] = {
    {"launch", (PyCFunction)(void (*)(void))launcher_launch, METH_FASTCALL,
     "launch(stream, gx, gy, gz, values) -> CUresult: pack, make the context current, launch "
     "(TC_PENDING_DEVICE_ERROR, without launching, while error_flag's word is set)."},
    {"pack", (PyCFunction)launcher_pack, METH_O,
     "pack(values) -> bytes: the parameter block as the kernel reads it."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject LauncherType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tilecore.runtime._cudriver.Launcher",
    .tp_basicsize = sizeof(Launcher),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One kernel's launch configuration and parameter layout.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)launcher_init,
    .tp_dealloc = (destructor)launcher_dealloc,
    .tp_methods = launcher_methods,
};

/* ---- module -------------------------------------------------------------- */

#define FAST(name, fn, doc) {name, (PyCFunction)(void (*)(void))fn, METH_FASTCALL, doc}

static PyMethodDef module_methods[] = {
    {"open", open_driver, METH_O, "open(path): load the CUDA driver library (OSError if absent)."},
    {"init", py_init, METH_O, "init(flags) -> (CUresult,)"},
    {"device_count", py_device_count, METH_NOARGS, "device_count() -> (CUresult, n)"},
    {"device_get", py_device_get, METH_O, "device_get(ordinal) -> (CUresult, device)"},
    FAST("device_attribute", py_device_attribute, "device_attribute(attr, device) -> (CUresult, v)"),
    {"device_name", py_device_name, METH_O, "device_name(device) -> (CUresult, str)"},
    {"primary_context", py_primary_context, METH_O,
     "primary_context(device) -> (CUresult, context): retains the device's primary context"},
    {"current_context", py_current_context, METH_NOARGS, "current_context() -> (CUresult, ctx)"},
    {"set_current_context", py_set_current_context, METH_O,
     "set_current_context(ctx) -> (CUresult,)"},
    {"context_device", py_context_device, METH_NOARGS, "context_device() -> (CUresult, device)"},
    {"pointer_device", py_pointer_device, METH_O,
     "pointer_device(ptr) -> (CUresult, ordinal of the device owning ptr)"},
    {"module_load", py_module_load, METH_O, "module_load(image) -> (CUresult, module)"},
    FAST("module_function", py_module_function,
         "module_function(module, name: bytes) -> (CUresult, function)"),
    FAST("set_function_attribute", py_function_attribute,
         "set_function_attribute(function, attr, value) -> (CUresult,)"),
    {"error_string", py_error_string, METH_O, "error_string(code) -> (CUresult, str)"},
    FAST("mem_host_alloc", py_mem_host_alloc,
         "mem_host_alloc(size, flags) -> (CUresult, host pointer): page-locked host memory"),
    {"mem_host_device_pointer", py_mem_host_device_pointer, METH_O,
     "mem_host_device_pointer(host pointer) -> (CUresult, device pointer) of mapped memory"},
    {"mem_alloc", py_mem_alloc, METH_O,
     "mem_alloc(size) -> (CUresult, device pointer): device memory, not cleared"},
    FAST("module_global", py_module_global,
         "module_global(module, name: bytes) -> (CUresult, device pointer, size)"),
    FAST("memcpy_htod", py_memcpy_htod,
         "memcpy_htod(device pointer, data: bytes-like) -> (CUresult,)"),
    {"ctx_synchronize", py_ctx_synchronize, METH_NOARGS,
     "ctx_synchronize() -> (CUresult,): wait for the current context's work"},
    {"stream_synchronize", py_stream_synchronize, METH_O,
     "stream_synchronize(stream) -> (CUresult,): wait for the stream's work"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_cudriver",
    "The CUDA driver calls tilecore makes, called from C (see tilecore.runtime.driver).",
    -1, module_methods,
};

PyMODINIT_FUNC PyInit__cudriver(void) {
    if (PyType_Ready(&LauncherType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) return NULL;
    Py_INCREF(&LauncherType);
    if (PyModule_AddObject(m, "Launcher", (PyObject *)&LauncherType) < 0) {
        Py_DECREF(&LauncherType);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "PENDING_DEVICE_ERROR", TC_PENDING_DEVICE_ERROR) < 0 ||
        tc_add_fast_launch(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
