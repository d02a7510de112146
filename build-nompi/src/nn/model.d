build-nompi/src/nn/model.o: src/nn/model.c include/cltrain/model.h \
 include/cltrain/gemm.h include/cltrain/cl.h include/cltrain/common.h
include/cltrain/model.h:
include/cltrain/gemm.h:
include/cltrain/cl.h:
include/cltrain/common.h:
