build-nompi/src/nn/gemm.o: src/nn/gemm.c include/cltrain/gemm.h \
 include/cltrain/cl.h include/cltrain/common.h
include/cltrain/gemm.h:
include/cltrain/cl.h:
include/cltrain/common.h:
