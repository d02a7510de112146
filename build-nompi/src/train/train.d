build-nompi/src/train/train.o: src/train/train.c include/cltrain/train.h \
 include/cltrain/data.h include/cltrain/model.h include/cltrain/gemm.h \
 include/cltrain/cl.h include/cltrain/common.h include/cltrain/pipeline.h \
 include/cltrain/ring.h include/cltrain/checkpoint.h \
 include/cltrain/dist.h include/cltrain/tboard.h
include/cltrain/train.h:
include/cltrain/data.h:
include/cltrain/model.h:
include/cltrain/gemm.h:
include/cltrain/cl.h:
include/cltrain/common.h:
include/cltrain/pipeline.h:
include/cltrain/ring.h:
include/cltrain/checkpoint.h:
include/cltrain/dist.h:
include/cltrain/tboard.h:
