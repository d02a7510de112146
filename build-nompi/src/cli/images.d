build-nompi/src/cli/images.o: src/cli/images.c src/cli/cli.h \
 include/cltrain/train.h include/cltrain/data.h include/cltrain/model.h \
 include/cltrain/gemm.h include/cltrain/cl.h include/cltrain/common.h \
 include/cltrain/pipeline.h include/cltrain/ring.h \
 include/cltrain/images.h include/cltrain/shard.h \
 include/cltrain/augment.h include/cltrain/checkpoint.h
src/cli/cli.h:
include/cltrain/train.h:
include/cltrain/data.h:
include/cltrain/model.h:
include/cltrain/gemm.h:
include/cltrain/cl.h:
include/cltrain/common.h:
include/cltrain/pipeline.h:
include/cltrain/ring.h:
include/cltrain/images.h:
include/cltrain/shard.h:
include/cltrain/augment.h:
include/cltrain/checkpoint.h:
