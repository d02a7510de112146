build-nompi/src/data/download.o: src/data/download.c \
 include/cltrain/download.h include/cltrain/common.h
include/cltrain/download.h:
include/cltrain/common.h:
