build-nompi/src/train/checkpoint.o: src/train/checkpoint.c \
 include/cltrain/checkpoint.h include/cltrain/common.h
include/cltrain/checkpoint.h:
include/cltrain/common.h:
