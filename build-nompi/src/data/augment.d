build-nompi/src/data/augment.o: src/data/augment.c \
 include/cltrain/augment.h include/cltrain/common.h
include/cltrain/augment.h:
include/cltrain/common.h:
