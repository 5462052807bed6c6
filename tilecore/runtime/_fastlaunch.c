/*
 * FastLaunch: tilecore.host.fastpath's generated fast launcher, in C.
 *
 * A cached launch spends most of its host time re-reading its arguments: a
 * torch tensor's dtype, device, data_ptr(), shape and stride(). The Python
 * version of these guards cost about 2.6 us per launch of a 3-array kernel on
 * the H100 host, as much as the driver call itself; here the same reads are
 * C calls and the values go straight into the parameter block.
 *
 * A FastLaunch is built for one specialization's argument kinds (the same
 * spec tuples the Python version is generated from) and called as
 * fast(stream, grid, args) -> bool: False when any guard fails (the caller
 * then takes the general path), True once launched. The launcher is either a
 * _cudriver.Launcher (packed and launched in C) or any Python callable
 * launch(stream, gx, gy, gz, values) -> CUresult (used by the tests).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "_cudriver.h"

/* DLPack's C exchange API (DLPack 1.x, `__dlpack_c_exchange_api__`: a PyCapsule named
 * "dlpack_exchange_api" on the tensor type, PyTorch 2.10 and newer): its
 * dltensor_from_py_object_no_sync fills a DLTensor with a tensor's pointer, device, dtype,
 * shape and strides in about 50 ns, where reading them through torch's Python getters
 * costs 0.45 us per tensor. Declared here from the DLPack specification. */
typedef struct { uint32_t major, minor; } DLVersion;
typedef struct { int32_t device_type, device_id; } DLDeviceRef;
typedef struct { uint8_t code, bits; uint16_t lanes; } DLDType;
typedef struct {
    void *data;
    DLDeviceRef device;
    int32_t ndim;
    DLDType dtype;
    int64_t *shape, *strides;  /* in elements; strides NULL: row-major */
    uint64_t byte_offset;
} DLTensorView;
typedef int (*DLTensorFromObject)(void *object, DLTensorView *out);
typedef struct DLExchangeHeader {
    DLVersion version;
    struct DLExchangeHeader *prev_api;
} DLExchangeHeader;
typedef struct {
    DLExchangeHeader header;
    void *managed_tensor_allocator, *managed_tensor_from_py_object_no_sync,
        *managed_tensor_to_py_object_no_sync;
    DLTensorFromObject dltensor_from_py_object_no_sync;  /* optional */
    void *current_work_stream;
} DLExchangeAPI;
enum { DL_CUDA = 2 };

enum { ARG_CONST, ARG_SCALAR, ARG_TORCH, ARG_CUPY, ARG_TILECORE };
/* The Python numbers a scalar parameter takes besides its NumPy scalar type (fastpath.py's
 * scalar_spec): none, ints in the range the general path gives int32, int64 or uint64, floats
 * (float32), bools (bool_). */
enum { PY_NONE, PY_INT32, PY_INT64, PY_UINT64, PY_FLOAT, PY_BOOL };
#define IS_ARRAY(k) ((k) == ARG_TORCH || (k) == ARG_CUPY || (k) == ARG_TILECORE)
#define MAX_VALUES 256
#define MAX_NDIM 16

typedef struct {
    int kind;
    int py;           /* a scalar's Python numbers (PY_*) */
    PyObject *type;   /* exact type (constants, arrays, a scalar's NumPy type) */
    PyObject *value;  /* a constant's value, an array's dtype */
    long device;
    int ndim, itemsize, aligned, unit, whole;
    int written;      /* the kernel writes it: its elements must be distinct */
    int flat_flags;   /* a CuPy array type with _c_contiguous (cleared when it has none) */
    DLTensorFromObject dl_read;  /* the type's DLPack reader, or NULL */
    PyObject *dl_capsule;        /* keeps dl_read's table alive */
    uint32_t dl_dtype;           /* the spec dtype's DLPack code, bits and lanes, once seen */
    int dl_dtype_known;
} ArgSpec;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *launcher;   /* a Launcher, or a callable */
    PyObject *validated;  /* dict: arrays' (ptr, shape..., strides...) checked by the general path */
    PyObject *fail, *grid_fn, *stream_fn;
    PyObject *stream_attribute_fn;  /* type -> the attribute holding its handle, or None */
    PyObject *stream_type, *stream_attr;  /* the last stream type seen and that attribute */
    Py_ssize_t n_args, n_values, n_layout;
    ArgSpec *specs;
    int have_last;
    long long last_layout[MAX_VALUES];
} FastLaunch;

static PyObject *fast_call(PyObject *callable, PyObject *const *argv, size_t nargsf,
                           PyObject *kwnames);

static PyObject *s_dtype, *s_is_cuda, *s_get_device, *s_data_ptr, *s_shape, *s_stride, *s_data, *s_ptr,
    *s_device_id, *s_strides, *s_c_contiguous, *s_ndim, *s_size, *s_dl_api;

static void fast_clear_specs(FastLaunch *self) {
    if (self->specs == NULL) return;
    for (Py_ssize_t i = 0; i < self->n_args; i++) {
        Py_XDECREF(self->specs[i].type);
        Py_XDECREF(self->specs[i].value);
        Py_XDECREF(self->specs[i].dl_capsule);
    }
    PyMem_Free(self->specs);
    self->specs = NULL;
}

static void fast_dealloc(FastLaunch *self) {
    fast_clear_specs(self);
    Py_XDECREF(self->launcher);
    Py_XDECREF(self->validated);
    Py_XDECREF(self->fail);
    Py_XDECREF(self->grid_fn);
    Py_XDECREF(self->stream_fn);
    Py_XDECREF(self->stream_attribute_fn);
    Py_XDECREF(self->stream_type);
    Py_XDECREF(self->stream_attr);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The DLPack reader of tensor type `type` when it has a DLPack 1.x exchange table with one. */
static void find_dl_reader(ArgSpec *spec, PyObject *type) {
    PyObject *cap = PyObject_GetAttr(type, s_dl_api);
    if (cap == NULL) {
        PyErr_Clear();
        return;
    }
    if (PyCapsule_IsValid(cap, "dlpack_exchange_api")) {
        const DLExchangeAPI *api = PyCapsule_GetPointer(cap, "dlpack_exchange_api");
        if (api != NULL && api->header.version.major == 1 && api->dltensor_from_py_object_no_sync) {
            spec->dl_read = api->dltensor_from_py_object_no_sync;
            spec->dl_capsule = cap;
            return;
        }
    }
    PyErr_Clear();
    Py_DECREF(cap);
}

/* One spec tuple: ("const", type, value), ("scalar", NumPy scalar type, Python numbers:
 * "int32" | "int64" | "uint64" | "float" | "bool" | "") or
 * ("torch" | "cupy" | "tilecore", type, dtype, device, ndim, itemsize, aligned, unit, whole,
 * written) ("tilecore": a tilecore.runtime.DeviceArray, a tuple subclass);
 * a device of -1 means "the process's only GPU". */
static int parse_spec(PyObject *t, ArgSpec *spec, Py_ssize_t *n_values, Py_ssize_t *n_layout) {
    const char *kind;
    PyObject *type = NULL, *value = NULL;
    memset(spec, 0, sizeof *spec);
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) < 1 ||
        !(kind = PyUnicode_AsUTF8(PyTuple_GET_ITEM(t, 0)))) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "a spec is a tuple (kind, ...)");
        return -1;
    }
    if (!strcmp(kind, "const")) {
        if (!PyArg_ParseTuple(t, "sOO", &kind, &type, &value)) return -1;
        spec->kind = ARG_CONST;
    } else if (!strcmp(kind, "scalar")) {
        static const char *const numbers[] = {"", "int32", "int64", "uint64", "float", "bool"};
        const char *py;
        if (!PyArg_ParseTuple(t, "sO!s", &kind, &PyType_Type, &type, &py)) return -1;
        spec->py = -1;
        for (int k = 0; k < (int)(sizeof numbers / sizeof numbers[0]); k++)
            if (!strcmp(py, numbers[k])) spec->py = k;
        if (spec->py < 0) {
            PyErr_Format(PyExc_ValueError, "bad scalar spec %R", t);
            return -1;
        }
        spec->kind = ARG_SCALAR;
        value = Py_None;
        *n_values += 1;
    } else if (!strcmp(kind, "torch") || !strcmp(kind, "cupy") || !strcmp(kind, "tilecore")) {
        if (!PyArg_ParseTuple(t, "sOOliipppp", &kind, &type, &value, &spec->device, &spec->ndim,
                              &spec->itemsize, &spec->aligned, &spec->unit, &spec->whole,
                              &spec->written))
            return -1;
        if (spec->ndim < 0 || spec->ndim > MAX_NDIM || spec->itemsize <= 0) {
            PyErr_Format(PyExc_ValueError, "bad array spec %R", t);
            return -1;
        }
        spec->kind = kind[0] == 'c' ? ARG_CUPY : kind[1] == 'o' ? ARG_TORCH : ARG_TILECORE;
        spec->flat_flags = spec->kind == ARG_CUPY && spec->ndim == 1;
        if (spec->kind == ARG_TORCH) find_dl_reader(spec, type);
        *n_values += 1 + 2 * spec->ndim;
        *n_layout += 1 + 2 * spec->ndim;
    } else {
        PyErr_Format(PyExc_ValueError, "unknown argument kind %R", PyTuple_GET_ITEM(t, 0));
        return -1;
    }
    Py_INCREF(type);
    Py_INCREF(value);
    spec->type = type;
    spec->value = value;
    return 0;
}

static int fast_init(FastLaunch *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"launcher", "specs", "validated", "fail", "grid", "stream",
                             "stream_attribute", NULL};
    PyObject *launcher, *specs, *validated, *fail, *grid_fn, *stream_fn;
    PyObject *stream_attribute_fn = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO!OOO|O", kwlist, &launcher, &specs,
                                     &PyDict_Type, &validated, &fail, &grid_fn, &stream_fn,
                                     &stream_attribute_fn))
        return -1;
    PyObject *seq = PySequence_Fast(specs, "specs must be a sequence");
    if (seq == NULL) return -1;
    fast_clear_specs(self);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    self->specs = PyMem_Calloc(n ? n : 1, sizeof(ArgSpec));
    self->n_args = 0;
    self->n_values = self->n_layout = 0;
    if (self->specs == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (parse_spec(PySequence_Fast_GET_ITEM(seq, i), &self->specs[i], &self->n_values,
                       &self->n_layout)) {
            Py_DECREF(seq);
            return -1;
        }
        self->n_args = i + 1;
    }
    Py_DECREF(seq);
    if (self->n_values > MAX_VALUES) {
        PyErr_Format(PyExc_ValueError, "%zd parameter values (at most %d)", self->n_values,
                     MAX_VALUES);
        return -1;
    }
    if (PyObject_TypeCheck(launcher, &LauncherType) &&
        ((Launcher *)launcher)->n_params != self->n_values) {
        PyErr_Format(PyExc_ValueError, "the launcher takes %zd parameters, the specs give %zd",
                     ((Launcher *)launcher)->n_params, self->n_values);
        return -1;
    }
    Py_INCREF(launcher);
    Py_INCREF(validated);
    Py_INCREF(fail);
    Py_INCREF(grid_fn);
    Py_INCREF(stream_fn);
    Py_XSETREF(self->launcher, launcher);
    Py_XSETREF(self->validated, validated);
    Py_XSETREF(self->fail, fail);
    Py_XSETREF(self->grid_fn, grid_fn);
    Py_XSETREF(self->stream_fn, stream_fn);
    Py_XSETREF(self->stream_attribute_fn,
               stream_attribute_fn == Py_None ? NULL : Py_NewRef(stream_attribute_fn));
    Py_CLEAR(self->stream_type);
    Py_CLEAR(self->stream_attr);
    self->have_last = 0;
    self->vectorcall = fast_call;
    return 0;
}

/* The values gathered from one call's arguments (new references). */
typedef struct {
    PyObject *vals[MAX_VALUES];    /* NULL where the value is the integer raw[i] */
    long long raw[MAX_VALUES];
    Py_ssize_t n;
    long long layout_ll[MAX_VALUES];
    Py_ssize_t n_layout;
} Gathered;

static void release(Gathered *g) {
    for (Py_ssize_t i = 0; i < g->n; i++) Py_XDECREF(g->vals[i]);
    g->n = 0;
}

/* Push an integer value read in C (no Python object), also onto the layout. */
static void push_raw(Gathered *g, long long v) {
    g->layout_ll[g->n_layout++] = v;
    g->raw[g->n] = v;
    g->vals[g->n++] = NULL;
}

/* Value i as a new reference (an int object for a raw value). */
static PyObject *value_object(const Gathered *g, Py_ssize_t i) {
    return g->vals[i] ? Py_NewRef(g->vals[i]) : PyLong_FromLongLong(g->raw[i]);
}

/* Push a new reference onto the values (a scalar argument). */
static void push(Gathered *g, PyObject *v) {
    g->vals[g->n++] = v;
}

/* 1: the int `o` as a long long in *out; 0: not an exact int in range. */
static int exact_int(PyObject *o, long long *out) {
    if (!PyLong_CheckExact(o)) return 0;
    int overflow;
    *out = PyLong_AsLongLongAndOverflow(o, &overflow);
    return !overflow && !(*out == -1 && PyErr_Occurred());
}

/* A 1-D CuPy array that is contiguous with more than one element: its length in *n and 1.
 * Read from CuPy's size and _c_contiguous, which cost far less than the shape and
 * strides tuples (H100 host: 0.06 against 0.19 us); 0 when the shape and strides must be
 * read instead, -1 on error. */
static int cupy_flat(ArgSpec *s, PyObject *a, long long *n) {
    PyObject *t = PyObject_GetAttr(a, s_c_contiguous);
    if (t == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
        PyErr_Clear();
        s->flat_flags = 0;  /* a CuPy without the attribute: never ask again */
        return 0;
    }
    int contiguous = t == Py_True;
    Py_DECREF(t);
    long long ndim;
    if (!contiguous || !(t = PyObject_GetAttr(a, s_ndim))) return contiguous ? -1 : 0;
    int one = exact_int(t, &ndim) && ndim == 1;
    Py_DECREF(t);
    if (!one) return PyErr_Occurred() ? -1 : 0;
    if (!(t = PyObject_GetAttr(a, s_size))) return -1;
    int ok = exact_int(t, n) && *n > 1;
    Py_DECREF(t);
    return ok ? 1 : PyErr_Occurred() ? -1 : 0;
}

/* Whether a view's elements are provably distinct (runtime/overlap.py's quick rule, in
 * elements): with the axes sorted by |stride|, each stride clears what the smaller ones span.
 * Views it cannot decide take the general path, which enumerates them. */
static int distinct_elements(int ndim, const long long *dims, const long long *st) {
    long long s[MAX_NDIM], n[MAX_NDIM], reach = 1;
    int m = 0;
    for (int d = 0; d < ndim; d++) {
        if (dims[d] == 0) return 1;
        if (dims[d] > 1) {
            s[m] = st[d] < 0 ? -st[d] : st[d];
            n[m++] = dims[d];
        }
    }
    for (int i = 1; i < m; i++)
        for (int j = i; j > 0 && s[j - 1] > s[j]; j--) {
            long long ts = s[j], tn = n[j];
            s[j] = s[j - 1], n[j] = n[j - 1], s[j - 1] = ts, n[j - 1] = tn;
        }
    for (int i = 0; i < m; i++) {
        if (s[i] < reach) return 0;
        reach += (n[i] - 1) * s[i];
    }
    return 1;
}

/* The layout guards of an array whose pointer, dims and element strides are known, then its
 * values pushed (as integers: no Python objects). 1 ok, 0 guard failed. */
static int finish_array(const ArgSpec *s, long long ptr, const long long *dims,
                        const long long *st, Gathered *g) {
    for (int d = 0; d < s->ndim; d++)  /* int32 holds them (else a wide specialization) */
        if (dims[d] < 0 || dims[d] >= 2147483648LL || st[d] <= -2147483648LL ||
            st[d] >= 2147483648LL) return 0;
    int aligned = !(ptr & 15);
    for (int d = 0; d + 1 < s->ndim; d++) aligned = aligned && !((st[d] * s->itemsize) & 15);
    if (aligned != s->aligned) return 0;
    if (s->ndim) {
        int last = s->ndim - 1;
        int whole = ((dims[last] * s->itemsize) & 15) == 0;
        if ((st[last] == 1) != s->unit || whole != s->whole) return 0;
    }
    if (s->written && !distinct_elements(s->ndim, dims, st)) return 0;
    push_raw(g, ptr);
    for (int d = 0; d < s->ndim; d++) push_raw(g, dims[d]);
    for (int d = 0; d < s->ndim; d++) push_raw(g, st[d]);
    return 1;
}

/* A torch tensor through its type's DLPack reader: 1 ok, 0 guard failed, -1 error, 2 the
 * reader failed (then the attribute path decides, and the reader is not used again). */
static int gather_dl(ArgSpec *s, PyObject *a, Gathered *g) {
    DLTensorView t;
    if (s->dl_read(a, &t) != 0) {
        PyErr_Clear();
        s->dl_read = NULL;
        return 2;
    }
    uint32_t dtype = (uint32_t)t.dtype.code | (uint32_t)t.dtype.bits << 8 |
                     (uint32_t)t.dtype.lanes << 16;
    if (!s->dl_dtype_known) {  /* the first tensor: its dtype object tells what the code means */
        PyObject *d = PyObject_GetAttr(a, s_dtype);
        if (d == NULL) return -1;
        int same = d == s->value;
        Py_DECREF(d);
        if (!same) return 0;
        s->dl_dtype = dtype;
        s->dl_dtype_known = 1;
    } else if (dtype != s->dl_dtype) {
        return 0;
    }
    if (t.device.device_type != DL_CUDA || (s->device >= 0 && t.device.device_id != s->device) ||
        t.ndim != s->ndim)
        return 0;
    long long dims[MAX_NDIM], st[MAX_NDIM];
    long long stride = 1;
    for (int d = s->ndim - 1; d >= 0; d--) {
        dims[d] = t.shape[d];
        st[d] = t.strides ? t.strides[d] : stride;
        stride *= dims[d];
    }
    return finish_array(s, (long long)(uintptr_t)t.data + (long long)t.byte_offset, dims, st, g);
}

/* A DeviceArray (ptr, shape, strides, dtype, device_id, readonly): its fields are tuple
 * items, read without attribute lookups. 1 ok, 0 guard failed. */
static int gather_described(ArgSpec *s, PyObject *a, Gathered *g) {
    long long ptr, device, dims[MAX_NDIM], st[MAX_NDIM];
    if (PyTuple_GET_SIZE(a) < 6) return 0;
    PyObject *shape = PyTuple_GET_ITEM(a, 1), *strides = PyTuple_GET_ITEM(a, 2);
    if (PyTuple_GET_ITEM(a, 3) != s->value) return 0;  /* dtypes are singletons */
    if (s->device >= 0 && (!exact_int(PyTuple_GET_ITEM(a, 4), &device) || device != s->device))
        return PyErr_Occurred() ? -1 : 0;
    if (s->written && PyTuple_GET_ITEM(a, 5) != Py_False) return 0;
    if (!exact_int(PyTuple_GET_ITEM(a, 0), &ptr) || !PyTuple_Check(shape) ||
        !PyTuple_Check(strides) || PyTuple_GET_SIZE(shape) != s->ndim ||
        PyTuple_GET_SIZE(strides) != s->ndim)
        return PyErr_Occurred() ? -1 : 0;
    for (int d = 0; d < s->ndim; d++)
        if (!exact_int(PyTuple_GET_ITEM(shape, d), &dims[d]) ||
            !exact_int(PyTuple_GET_ITEM(strides, d), &st[d]))
            return PyErr_Occurred() ? -1 : 0;
    return finish_array(s, ptr, dims, st, g);
}

/* Guards and values of one array argument: 1 ok, 0 guard failed, -1 error. */
static int gather_array(ArgSpec *s, PyObject *a, Gathered *g) {
    PyObject *ptr_o = NULL, *shape = NULL, *strides = NULL, *mem = NULL, *tmp;
    long long ptr, dims[MAX_NDIM], st[MAX_NDIM];
    int result = 0;
    if ((PyObject *)Py_TYPE(a) != s->type) return 0;
    if (s->kind == ARG_TILECORE) return gather_described(s, a, g);
    if (s->dl_read) {
        int r = gather_dl(s, a, g);
        if (r != 2) return r;
    }
    if (!(tmp = PyObject_GetAttr(a, s_dtype))) return -1;
    int same = s->kind == ARG_TORCH ? tmp == s->value
                                    : PyObject_RichCompareBool(tmp, s->value, Py_EQ);
    Py_DECREF(tmp);
    if (same <= 0) return same;
    long long device;
    if (s->kind == ARG_TORCH) {
        if (s->device < 0) {  /* the process's only GPU: any CUDA tensor is on it */
            if (!(tmp = PyObject_GetAttr(a, s_is_cuda))) return -1;
            int cuda = tmp == Py_True;
            Py_DECREF(tmp);
            if (!cuda) return 0;
        } else {
            if (!(tmp = PyObject_CallMethodNoArgs(a, s_get_device))) return -1;
            int ok = exact_int(tmp, &device);
            Py_DECREF(tmp);
            if (!ok || device != s->device) return PyErr_Occurred() ? -1 : 0;
        }
        if (!(ptr_o = PyObject_CallMethodNoArgs(a, s_data_ptr))) goto error;
        if (!(shape = PyObject_GetAttr(a, s_shape))) goto error;
        if (!(strides = PyObject_CallMethodNoArgs(a, s_stride))) goto error;
    } else {
        if (!(mem = PyObject_GetAttr(a, s_data))) return -1;
        if (s->device >= 0) {  /* else the process's only GPU: every CuPy array is on it */
            if (!(tmp = PyObject_GetAttr(mem, s_device_id))) goto error;
            int ok = exact_int(tmp, &device);
            Py_DECREF(tmp);
            if (!ok || device != s->device) goto done;
        }
        if (!(ptr_o = PyObject_GetAttr(mem, s_ptr))) goto error;
        int flat = s->flat_flags ? cupy_flat(s, a, &dims[0]) : 0;
        if (flat < 0) goto error;
        if (flat) {
            st[0] = 1;
        } else {
            if (!(shape = PyObject_GetAttr(a, s_shape))) goto error;
            if (!(strides = PyObject_GetAttr(a, s_strides))) goto error;
        }
    }
    if (!exact_int(ptr_o, &ptr)) goto done;
    if (shape != NULL) {
        if (!PyTuple_Check(shape) || !PyTuple_Check(strides) ||
            PyTuple_GET_SIZE(shape) != s->ndim || PyTuple_GET_SIZE(strides) != s->ndim)
            goto done;
        for (int d = 0; d < s->ndim; d++) {
            if (!exact_int(PyTuple_GET_ITEM(shape, d), &dims[d]) ||
                !exact_int(PyTuple_GET_ITEM(strides, d), &st[d]))
                goto done;
            if (s->kind == ARG_CUPY) {  /* byte strides: element strides */
                if (st[d] % s->itemsize) goto done;
                st[d] /= s->itemsize;
            }
        }
    }
    result = finish_array(s, ptr, dims, st, g);
    goto done;
error:
    result = -1;
done:
    Py_XDECREF(ptr_o);
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    Py_XDECREF(mem);
    return result;
}

/* Whether `a` is a Python number of class `py` (PY_*), one the general path specializes as
 * the scalar's dtype: 1 yes, 0 no (then the general path decides), -1 error. */
static int python_number(int py, PyObject *a) {
    long long v;
    switch (py) {
    case PY_FLOAT: return PyFloat_CheckExact(a);
    case PY_BOOL: return PyBool_Check(a);
    case PY_INT32:
    case PY_INT64:
        if (!exact_int(a, &v)) return PyErr_Occurred() ? -1 : 0;  /* not an int64 */
        return (v >= INT32_MIN && v <= INT32_MAX) == (py == PY_INT32);
    case PY_UINT64: {
        int overflow;
        if (!PyLong_CheckExact(a)) return 0;
        PyLong_AsLongLongAndOverflow(a, &overflow);
        if (overflow <= 0) return PyErr_Occurred() ? -1 : 0;  /* an int64 or below it */
        if (PyLong_AsUnsignedLongLong(a) == (unsigned long long)-1 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return -1;
            PyErr_Clear();  /* 2**64 or more: the general path raises */
            return 0;
        }
        return 1;
    }
    }
    return 0;
}

/* Guards and values of every argument: 1 ok, 0 a guard failed, -1 error. */
static int gather(FastLaunch *self, PyObject *args, Gathered *g) {
    for (Py_ssize_t i = 0; i < self->n_args; i++) {
        ArgSpec *s = &self->specs[i];
        PyObject *a = PyTuple_GET_ITEM(args, i);
        int r;
        switch (s->kind) {
        case ARG_CONST:
            if ((PyObject *)Py_TYPE(a) != s->type) return 0;
            r = PyObject_RichCompareBool(a, s->value, Py_EQ);
            if (r <= 0) return r;
            break;
        case ARG_SCALAR:
            if ((PyObject *)Py_TYPE(a) != s->type) {
                r = python_number(s->py, a);
                if (r <= 0) return r;
            }
            push(g, Py_NewRef(a));  /* packed by the launcher, as the general path's value */
            break;
        default:
            r = gather_array(s, a, g);
            if (r <= 0) return r;
        }
    }
    return 1;
}

/* 1 when no two non-empty arrays' byte extents intersect (then they cannot overlap and the
 * general path's overlap check would pass). The layout holds, per array in spec order, the
 * pointer, the dims and the element strides. */
static int extents_disjoint(const FastLaunch *self, const Gathered *g) {
    long long lo[MAX_VALUES], hi[MAX_VALUES];
    Py_ssize_t n = 0, at = 0;
    for (Py_ssize_t i = 0; i < self->n_args; i++) {
        const ArgSpec *s = &self->specs[i];
        if (!IS_ARRAY(s->kind)) continue;
        const long long *f = g->layout_ll + at;
        at += 1 + 2 * s->ndim;
        long long first = 0, last = 0;
        int empty = 0;
        for (int d = 0; d < s->ndim; d++) {
            long long span = (f[1 + d] - 1) * f[1 + s->ndim + d];
            empty |= f[1 + d] == 0;
            if (span < 0) first += span; else last += span;
        }
        if (empty) continue;
        lo[n] = f[0] + first * s->itemsize;
        hi[n] = f[0] + (last + 1) * s->itemsize;
        for (Py_ssize_t j = 0; j < n; j++)
            if (lo[n] < hi[j] && lo[j] < hi[n]) return 0;
        n++;
    }
    return 1;
}

/* 1 when the arrays may be launched on: their extents are disjoint, or their layout
 * passed the general path's overlap check (interleaved views such as x[0::2], x[1::2]).
 * Their device was checked by the guards. */
static int layout_validated(FastLaunch *self, Gathered *g) {
    size_t bytes = sizeof(long long) * g->n_layout;
    if (self->have_last && !memcmp(self->last_layout, g->layout_ll, bytes)) return 1;
    if (extents_disjoint(self, g)) return 1;
    PyObject *key = PyTuple_New(g->n_layout);
    if (key == NULL) return -1;
    for (Py_ssize_t i = 0; i < g->n_layout; i++) {
        PyObject *v = PyLong_FromLongLong(g->layout_ll[i]);
        if (v == NULL) {
            Py_DECREF(key);
            return -1;
        }
        PyTuple_SET_ITEM(key, i, v);
    }
    int found = PyDict_Contains(self->validated, key);
    Py_DECREF(key);
    if (found == 1) {
        memcpy(self->last_layout, g->layout_ll, bytes);
        self->have_last = 1;
    }
    return found;
}

/* gx, gy, gz of a grid (the general normalizer for anything but (int,)); -1 on error, 1 for
 * an empty grid (a zero extent: left to the general path, which launches nothing). */
static int grid_dims(FastLaunch *self, PyObject *grid, unsigned int dims[3]) {
    long long x = 0;
    if (PyTuple_CheckExact(grid) && PyTuple_GET_SIZE(grid) == 1 &&
        exact_int(PyTuple_GET_ITEM(grid, 0), &x) && x > 0 && x < 2147483648LL) {
        dims[0] = (unsigned int)x;
        dims[1] = dims[2] = 1;
        return 0;
    }
    PyErr_Clear();
    PyObject *t = PyObject_CallOneArg(self->grid_fn, grid);
    if (t == NULL) return -1;
    int ok = PyTuple_Check(t) && PyTuple_GET_SIZE(t) == 3, empty = 0;
    for (int d = 0; ok && d < 3; d++) {
        ok = exact_int(PyTuple_GET_ITEM(t, d), &x) && x >= 0 && x <= UINT32_MAX;
        empty |= x == 0;
        dims[d] = (unsigned int)x;
    }
    Py_DECREF(t);
    if (!ok) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "grid normalizer gave no 3 ints");
        return -1;
    }
    return empty;
}

/* Remember which attribute of `type` holds its handle (a PyTorch stream's cuda_stream, a
 * CuPy stream's ptr), or that it has none (then stream_fn resolves it); -1 on error. */
static int learn_stream_type(FastLaunch *self, PyObject *type) {
    PyObject *attr = NULL;
    if (self->stream_attribute_fn != NULL) {
        attr = PyObject_CallOneArg(self->stream_attribute_fn, type);
        if (attr == NULL) return -1;
        if (!PyUnicode_Check(attr)) Py_CLEAR(attr);
    }
    Py_XSETREF(self->stream_type, Py_NewRef(type));
    Py_XSETREF(self->stream_attr, attr);
    return 0;
}

static int stream_value(FastLaunch *self, PyObject *stream, unsigned long long *out) {
    long long x;
    if (stream == Py_None) {
        *out = 0;
        return 0;
    }
    if (exact_int(stream, &x) && x >= 0) {
        *out = (unsigned long long)x;
        return 0;
    }
    PyErr_Clear();
    PyObject *type = (PyObject *)Py_TYPE(stream);
    if (type != self->stream_type && learn_stream_type(self, type)) return -1;
    PyObject *h = self->stream_attr ? PyObject_GetAttr(stream, self->stream_attr)
                                    : PyObject_CallOneArg(self->stream_fn, stream);
    if (h == NULL) return -1;
    *out = PyLong_AsUnsignedLongLong(h);
    Py_DECREF(h);
    return *out == (unsigned long long)-1 && PyErr_Occurred() ? -1 : 0;
}

static long launch_values(FastLaunch *self, unsigned long long stream, unsigned int *dims,
                          Gathered *g) {
    if (PyObject_TypeCheck(self->launcher, &LauncherType)) {
        Launcher *l = (Launcher *)self->launcher;
        if (tc_require_driver()) return -1;
        char stack_buf[STACK_PARAM_BYTES] __attribute__((aligned(16)));
        char *buf = l->size <= STACK_PARAM_BYTES ? stack_buf : PyMem_Malloc(l->size);
        if (buf == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        long err = -1;
        if (!tc_pack_values(l, g->vals, g->raw, g->n, buf))
            err = tc_launch_packed(l, (void *)(uintptr_t)stream, dims[0], dims[1], dims[2], buf);
        if (buf != stack_buf) PyMem_Free(buf);
        return err;
    }
    PyObject *values = PyTuple_New(g->n);
    if (values == NULL) return -1;
    for (Py_ssize_t i = 0; i < g->n; i++) {
        PyObject *v = value_object(g, i);
        if (v == NULL) {
            Py_DECREF(values);
            return -1;
        }
        PyTuple_SET_ITEM(values, i, v);
    }
    PyObject *r = PyObject_CallFunction(self->launcher, "KIIIN", stream, dims[0], dims[1],
                                        dims[2], values);
    if (r == NULL) return -1;
    long err = PyLong_AsLong(r);
    Py_DECREF(r);
    if (err == -1 && PyErr_Occurred()) return -1;
    if (err < 0) {
        PyErr_Format(PyExc_ValueError, "launch returned %ld", err);
        return -1;
    }
    return err;
}

/* One fast launch: 1 launched, 0 a guard failed (nothing done), -1 error. */
static int fast_run(FastLaunch *self, PyObject *stream, PyObject *grid, PyObject *kargs) {
    if (!PyTuple_CheckExact(kargs) || PyTuple_GET_SIZE(kargs) != self->n_args) return 0;
    Gathered g;
    g.n = g.n_layout = 0;
    int r = gather(self, kargs, &g);
    if (r == 1) r = layout_validated(self, &g);
    if (r == 1) {
        unsigned int dims[3];
        unsigned long long handle;
        long err = -1;
        int grid_state = grid_dims(self, grid, dims);
        if (grid_state == 1)
            err = r = 0;  /* an empty grid: the general path checks and launches nothing */
        else if (!grid_state && !stream_value(self, stream, &handle))
            err = launch_values(self, handle, dims, &g);
        if (err > 0) {
            PyObject *f = PyObject_CallFunction(self->fail, "l(III)", err, dims[0], dims[1],
                                                dims[2]);
            Py_XDECREF(f);
            if (f == NULL) err = -1;
        }
        if (err < 0) r = -1;
    }
    release(&g);
    return r;
}

/* fast(stream, grid, args) -> bool (a vectorcall: no argument tuple is built) */
static PyObject *fast_call(PyObject *callable, PyObject *const *argv, size_t nargsf,
                           PyObject *kwnames) {
    if (PyVectorcall_NARGS(nargsf) != 3 || (kwnames && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "FastLaunch takes 3 positional arguments: "
                        "(stream, grid, args)");
        return NULL;
    }
    int r = fast_run((FastLaunch *)callable, argv[0], argv[1], argv[2]);
    return r < 0 ? NULL : Py_NewRef(r ? Py_True : Py_False);
}

static PyTypeObject FastLaunchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tilecore.runtime._cudriver.FastLaunch",
    .tp_basicsize = sizeof(FastLaunch),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(FastLaunch, vectorcall),
    .tp_doc = "FastLaunch(launcher, specs, validated, fail, grid, stream, stream_attribute=None): "
              "fast(stream, grid, args) -> bool launches when every guard holds.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)fast_init,
    .tp_dealloc = (destructor)fast_dealloc,
    .tp_call = PyVectorcall_Call,
};

int tc_add_fast_launch(PyObject *module) {
    struct { PyObject **slot; const char *text; } names[] = {
        {&s_dtype, "dtype"}, {&s_is_cuda, "is_cuda"}, {&s_get_device, "get_device"}, {&s_data_ptr, "data_ptr"},
        {&s_shape, "shape"}, {&s_stride, "stride"}, {&s_data, "data"}, {&s_ptr, "ptr"},
        {&s_device_id, "device_id"}, {&s_strides, "strides"}, {&s_c_contiguous, "_c_contiguous"},
        {&s_ndim, "ndim"}, {&s_size, "size"}, {&s_dl_api, "__dlpack_c_exchange_api__"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!(*names[i].slot = PyUnicode_InternFromString(names[i].text))) return -1;
    if (PyType_Ready(&FastLaunchType) < 0) return -1;
    Py_INCREF(&FastLaunchType);
    if (PyModule_AddObject(module, "FastLaunch", (PyObject *)&FastLaunchType) < 0) {
        Py_DECREF(&FastLaunchType);
        return -1;
    }
    return 0;
}
