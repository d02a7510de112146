build-nompi/src/pipe/pipeline.o: src/pipe/pipeline.c \
 include/cltrain/pipeline.h include/cltrain/cl.h include/cltrain/common.h \
 include/cltrain/ring.h
include/cltrain/pipeline.h:
include/cltrain/cl.h:
include/cltrain/common.h:
include/cltrain/ring.h:
