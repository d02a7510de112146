/* prelude.cl: prepended by the host to every kernel file (see ct_cl_build).
 * Kernels are OpenCL C 1.2, specialised by -D tuning parameters. */
#define CT_ACT_LINEAR 0
#define CT_ACT_RELU 1
