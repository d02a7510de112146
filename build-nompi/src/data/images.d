build-nompi/src/data/images.o: src/data/images.c include/cltrain/images.h \
 include/cltrain/common.h include/cltrain/pipeline.h include/cltrain/cl.h \
 include/cltrain/ring.h include/cltrain/tboard.h
include/cltrain/images.h:
include/cltrain/common.h:
include/cltrain/pipeline.h:
include/cltrain/cl.h:
include/cltrain/ring.h:
include/cltrain/tboard.h:
