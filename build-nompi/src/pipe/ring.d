build-nompi/src/pipe/ring.o: src/pipe/ring.c include/cltrain/ring.h \
 include/cltrain/common.h
include/cltrain/ring.h:
include/cltrain/common.h:
