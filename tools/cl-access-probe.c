/* cl-access-probe.c: how fast one OpenCL device reads memory through
 * buffers and through images: a streaming add (ns per element) and a 256^3
 * matrix product three ways (one output per work-item from buffers, a 4x4
 * tile per work-item from buffers, the same tile read through image views).
 * Standalone (not built by make, not used by cltrain); it showed why Mesa's
 * rusticl on llvmpipe was 100x slower than PoCL (BENCHMARKS.md).
 *   cc -O2 -o /tmp/cl-access-probe tools/cl-access-probe.c -lOpenCL -lm
 *   OCL_ICD_VENDORS=/etc/OpenCL/vendors/pocl.icd /tmp/cl-access-probe
 *   OCL_ICD_VENDORS=/etc/OpenCL/vendors/rusticl.icd RUSTICL_ENABLE=llvmpipe /tmp/cl-access-probe */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define D 256
static const char *src =
    "__kernel void add1(__global float *a) { a[get_global_id(0)] += 1.0f; }\n"
    "__kernel void naive(__global const float *A, __global const float *B, __global float *C) {\n"
    "  int j = get_global_id(0), i = get_global_id(1); float s = 0;\n"
    "  for (int k = 0; k < 256; k++) s += A[i * 256 + k] * B[k * 256 + j];\n"
    "  C[i * 256 + j] = s; }\n"
    "__kernel void tile(__global const float *A, __global const float *B, __global float *C) {\n"
    "  int j = get_global_id(0) * 4, i = get_global_id(1) * 4; float c[4][4];\n"
    "  for (int r = 0; r < 4; r++) for (int q = 0; q < 4; q++) c[r][q] = 0;\n"
    "  for (int k = 0; k < 256; k++) { float a[4], b[4];\n"
    "    for (int r = 0; r < 4; r++) a[r] = A[(i + r) * 256 + k];\n"
    "    for (int q = 0; q < 4; q++) b[q] = B[k * 256 + j + q];\n"
    "    for (int r = 0; r < 4; r++) for (int q = 0; q < 4; q++) c[r][q] += a[r] * b[q]; }\n"
    "  for (int r = 0; r < 4; r++) for (int q = 0; q < 4; q++) C[(i + r) * 256 + j + q] = c[r][q]; }\n"
    "__kernel void tile_img(__read_only image1d_buffer_t A, __read_only image1d_buffer_t B, __global float *C) {\n"
    "  int j = get_global_id(0) * 4, i = get_global_id(1) * 4; float c[4][4];\n"
    "  for (int r = 0; r < 4; r++) for (int q = 0; q < 4; q++) c[r][q] = 0;\n"
    "  for (int k = 0; k < 256; k++) { float a[4], b[4];\n"
    "    for (int r = 0; r < 4; r++) a[r] = read_imagef(A, (i + r) * 256 + k).x;\n"
    "    for (int q = 0; q < 4; q++) b[q] = read_imagef(B, k * 256 + j + q).x;\n"
    "    for (int r = 0; r < 4; r++) for (int q = 0; q < 4; q++) c[r][q] += a[r] * b[q]; }\n"
    "  for (int r = 0; r < 4; r++) for (int q = 0; q < 4; q++) C[(i + r) * 256 + j + q] = c[r][q]; }\n";

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
#define CK(x) do { cl_int e_ = (x); if (e_) { fprintf(stderr, "line %d: OpenCL error %d\n", __LINE__, e_); exit(1); } } while (0)

static cl_mem view(cl_context ctx, cl_mem b, size_t n) {
    cl_image_format f = {CL_R, CL_FLOAT};
    cl_image_desc d;
    memset(&d, 0, sizeof d);
    d.image_type = CL_MEM_OBJECT_IMAGE1D_BUFFER;
    d.image_width = n;
    d.buffer = b;
    cl_int e;
    cl_mem m = clCreateImage(ctx, CL_MEM_READ_ONLY, &f, &d, NULL, &e);
    CK(e);
    return m;
}

/* seconds per launch, best of 3 after one warm-up */
static double time_launch(cl_command_queue q, cl_kernel k, int dims, const size_t *g) {
    double best = 1e30;
    for (int r = 0; r < 4; r++) {
        double t0 = now();
        CK(clEnqueueNDRangeKernel(q, k, (cl_uint)dims, NULL, g, NULL, 0, NULL, NULL));
        CK(clFinish(q));
        if (r && now() - t0 < best) best = now() - t0;
    }
    return best;
}

int main(void) {
    cl_platform_id plat;
    cl_device_id dev;
    cl_int e;
    char name[256];
    CK(clGetPlatformIDs(1, &plat, NULL));
    CK(clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL));
    clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name, name, NULL);
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
    CK(e);
    cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &e);
    CK(e);
    cl_program p = clCreateProgramWithSource(ctx, 1, &src, NULL, &e);
    CK(e);
    CK(clBuildProgram(p, 1, &dev, "", NULL, NULL));
    printf("device: %s\n", name);

    size_t n = (size_t)1 << 22;
    cl_mem big = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * 4, NULL, &e);
    CK(e);
    float zero = 0;
    CK(clEnqueueFillBuffer(q, big, &zero, 4, 0, n * 4, 0, NULL, NULL));
    cl_kernel add = clCreateKernel(p, "add1", &e);
    CK(e);
    CK(clSetKernelArg(add, 0, sizeof big, &big));
    printf("streaming add, 4 M floats: %.2f ns per element\n", time_launch(q, add, 1, &n) / n * 1e9);

    float *a = malloc(D * D * 4), *b = malloc(D * D * 4), *c = malloc(D * D * 4);
    for (int i = 0; i < D * D; i++) { a[i] = (float)(i % 7) - 3; b[i] = (float)(i % 5) - 2; }
    cl_mem A = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, D * D * 4, a, &e);
    CK(e);
    cl_mem B = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, D * D * 4, b, &e);
    CK(e);
    cl_mem C = clCreateBuffer(ctx, CL_MEM_READ_WRITE, D * D * 4, NULL, &e);
    CK(e);
    cl_mem IA = view(ctx, A, D * D), IB = view(ctx, B, D * D);
    const char *names[] = {"naive", "tile", "tile_img"}, *what[] = {"one output per work-item, buffers",
                                                                     "4x4 tile per work-item, buffers",
                                                                     "4x4 tile per work-item, image views"};
    for (int v = 0; v < 3; v++) {
        cl_kernel k = clCreateKernel(p, names[v], &e);
        CK(e);
        CK(clSetKernelArg(k, 0, sizeof A, v == 2 ? &IA : &A));
        CK(clSetKernelArg(k, 1, sizeof B, v == 2 ? &IB : &B));
        CK(clSetKernelArg(k, 2, sizeof C, &C));
        size_t g[2] = {v ? D / 4 : D, v ? D / 4 : D};
        double t = time_launch(q, k, 2, g);
        CK(clEnqueueReadBuffer(q, C, CL_TRUE, 0, D * D * 4, c, 0, NULL, NULL));
        double err = 0; /* against a plain C product at a few places */
        for (int i = 0; i < D; i += 37)
            for (int j = 0; j < D; j += 41) {
                double s = 0;
                for (int kk = 0; kk < D; kk++) s += (double)a[i * D + kk] * b[kk * D + j];
                if (fabs(s - c[i * D + j]) > err) err = fabs(s - c[i * D + j]);
            }
        printf("256^3 product, %-38s %8.2f ms  %6.2f GFLOP/s%s\n", what[v], t * 1e3, 2.0 * D * D * D / t * 1e-9,
               err > 1e-3 ? "  WRONG RESULT" : "");
        clReleaseKernel(k);
    }
    return 0;
}
