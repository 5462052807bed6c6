/*
 * The floor under any launcher's host overhead on this machine: the time of
 * one cuLaunchKernel called from C in a tight loop (an empty kernel with the
 * same parameter list as bench_launch's add: 3 x (pointer, int, int) + int),
 * timed per call like bench_launch.py does (sync every 200 launches), on the
 * legacy default stream, the per-thread default stream and a non-blocking stream;
 * then on the legacy stream again with the parameters passed as one packed
 * buffer (CU_LAUNCH_PARAM_BUFFER_POINTER) instead of an array of pointers;
 * last, cuLaunchKernelEx with programmatic dependent launch on a non-blocking
 * stream (tilecore's launch on sm_90+).
 *
 *   gcc -O2 -o /tmp/launch_floor benchmarks/launch_floor.c -ldl && /tmp/launch_floor
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int (*fn_t)();
static const char *PTX =
    ".version 8.0\n.target sm_80\n.address_size 64\n"
    ".visible .entry empty(.param .u64 a, .param .u32 b, .param .u32 c, .param .u64 d,"
    " .param .u32 e, .param .u32 f, .param .u64 g, .param .u32 h, .param .u32 i,"
    " .param .u32 j) { ret; }\n";

/* CUlaunchAttribute and CUlaunchConfig of cuda.h (CUDA 12+). */
typedef struct { int id; char pad[4]; union { char bytes[64]; int pdl; } value; } attr_t;
typedef struct {
    unsigned int gx, gy, gz, bx, by, bz, smem;
    void *stream;
    attr_t *attrs;
    unsigned int n_attrs;
} config_t;

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define CHECK(call) do { int e_ = (call); if (e_) { printf("%s failed: %d\n", #call, e_); return 1; } } while (0)

int main(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) { printf("no libcuda\n"); return 1; }
    fn_t init = (fn_t)dlsym(lib, "cuInit"), dev_get = (fn_t)dlsym(lib, "cuDeviceGet"),
         retain = (fn_t)dlsym(lib, "cuDevicePrimaryCtxRetain"),
         set_cur = (fn_t)dlsym(lib, "cuCtxSetCurrent"), load = (fn_t)dlsym(lib, "cuModuleLoadData"),
         get_fn = (fn_t)dlsym(lib, "cuModuleGetFunction"), launch = (fn_t)dlsym(lib, "cuLaunchKernel"),
         launch_ex = (fn_t)dlsym(lib, "cuLaunchKernelEx"),
         sync = (fn_t)dlsym(lib, "cuCtxSynchronize"),
         stream_create = (fn_t)dlsym(lib, "cuStreamCreate");
    int dev;
    void *ctx, *mod, *fn;
    CHECK(init(0));
    CHECK(dev_get(&dev, 0));
    CHECK(retain(&ctx, dev));
    CHECK(set_cur(ctx));
    CHECK(load(&mod, PTX));
    CHECK(get_fn(&fn, mod, "empty"));
    unsigned long long p = 0;
    int v = 1;
    void *params[] = {&p, &v, &v, &p, &v, &v, &p, &v, &v, &v};
    void *non_blocking;
    CHECK(stream_create(&non_blocking, 1 /* CU_STREAM_NON_BLOCKING */));
    /* The same values packed at their offsets: u64, u32, u32 three times, then u32. */
    unsigned char packed[56] __attribute__((aligned(8))) = {0};
    for (int k = 0; k < 3; k++) {
        memcpy(packed + 16 * k + 8, &v, 4);
        memcpy(packed + 16 * k + 12, &v, 4);
    }
    memcpy(packed + 48, &v, 4);
    size_t packed_size = 52;
    void *extra[] = {(void *)1 /* CU_LAUNCH_PARAM_BUFFER_POINTER */, packed,
                     (void *)2 /* CU_LAUNCH_PARAM_BUFFER_SIZE */, &packed_size,
                     (void *)0 /* CU_LAUNCH_PARAM_END */};
    attr_t pdl;
    memset(&pdl, 0, sizeof pdl);
    pdl.id = 6; /* CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION */
    pdl.value.pdl = 1;
    config_t config = {1, 1, 1, 128, 1, 1, 0, non_blocking, &pdl, 1};
    /* config: launched through cuLaunchKernelEx with it, else through cuLaunchKernel */
    struct { const char *name; void *stream; void **params, **extra; config_t *config; } cases[] = {
        {"legacy default stream", NULL, params, NULL, NULL},
        {"per-thread default stream", (void *)2 /* CU_STREAM_PER_THREAD */, params, NULL, NULL},
        {"non-blocking stream", non_blocking, params, NULL, NULL},
        {"legacy default stream, one parameter buffer", NULL, NULL, extra, NULL},
        {"non-blocking stream, programmatic dependent launch", non_blocking, params, NULL, &config},
    };
    enum { N = 20000, WARM = 500, SYNC = 200, CASES = sizeof cases / sizeof cases[0] };
    static double t[N];
    for (int s = 0; s < CASES; s++) {
        if (cases[s].config && !launch_ex) break;
#define LAUNCH() (cases[s].config ? launch_ex(cases[s].config, fn, cases[s].params, NULL)      \
                                  : launch(fn, 1, 1, 1, 128, 1, 1, 0, cases[s].stream,         \
                                           cases[s].params, cases[s].extra))
        for (int i = 0; i < WARM; i++)
            CHECK(LAUNCH());
        CHECK(sync());
        for (int i = 0; i < N; i++) {
            struct timespec a, b;
            clock_gettime(CLOCK_MONOTONIC, &a);
            LAUNCH();
            clock_gettime(CLOCK_MONOTONIC, &b);
            t[i] = (b.tv_sec - a.tv_sec) * 1e6 + (b.tv_nsec - a.tv_nsec) / 1e3;
            if (i % SYNC == SYNC - 1) sync();
        }
        sync();
        qsort(t, N, sizeof t[0], cmp);
        printf("%s from C, %s, us per launch (%d launches): median %.2f p10 %.2f p90 %.2f\n",
               cases[s].config ? "cuLaunchKernelEx" : "cuLaunchKernel", cases[s].name, N,
               t[N / 2], t[N / 10], t[9 * N / 10]);
    }
    return 0;
}
