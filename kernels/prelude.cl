/* prelude.cl: prepended by the host to every kernel file (see ct_cl_build).
 * Kernels are OpenCL C 1.2, specialised by -D tuning parameters. */
#define CT_ACT_LINEAR 0
#define CT_ACT_RELU 1
/* loads and stores of one float, of eight (float8) or of sixteen (float16), for kernels written
 * once over the element type by a macro (bn.cl, winograd.cl) */
#define LD1(p) (*(p))
#define ST1(v, p) (*(p) = (v))
#define LD8(p) vload8(0, (p))
#define ST8(v, p) vstore8((v), 0, (p))
#define LD16(p) vload16(0, (p))
#define ST16(v, p) vstore16((v), 0, (p))
