build-nompi/src/dist/dist.o: src/dist/dist.c include/cltrain/dist.h \
 include/cltrain/model.h include/cltrain/gemm.h include/cltrain/cl.h \
 include/cltrain/common.h
include/cltrain/dist.h:
include/cltrain/model.h:
include/cltrain/gemm.h:
include/cltrain/cl.h:
include/cltrain/common.h:
