build-nompi/src/data/shard.o: src/data/shard.c include/cltrain/shard.h \
 include/cltrain/common.h include/cltrain/pipeline.h include/cltrain/cl.h \
 include/cltrain/ring.h include/cltrain/tboard.h
include/cltrain/shard.h:
include/cltrain/common.h:
include/cltrain/pipeline.h:
include/cltrain/cl.h:
include/cltrain/ring.h:
include/cltrain/tboard.h:
