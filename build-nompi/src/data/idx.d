build-nompi/src/data/idx.o: src/data/idx.c include/cltrain/data.h \
 include/cltrain/common.h include/cltrain/download.h
include/cltrain/data.h:
include/cltrain/common.h:
include/cltrain/download.h:
