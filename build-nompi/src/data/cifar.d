build-nompi/src/data/cifar.o: src/data/cifar.c include/cltrain/cifar.h \
 include/cltrain/augment.h include/cltrain/common.h \
 include/cltrain/data.h include/cltrain/download.h \
 include/cltrain/pipeline.h include/cltrain/cl.h include/cltrain/ring.h
include/cltrain/cifar.h:
include/cltrain/augment.h:
include/cltrain/common.h:
include/cltrain/data.h:
include/cltrain/download.h:
include/cltrain/pipeline.h:
include/cltrain/cl.h:
include/cltrain/ring.h:
