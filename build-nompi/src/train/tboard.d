build-nompi/src/train/tboard.o: src/train/tboard.c \
 include/cltrain/tboard.h include/cltrain/common.h
include/cltrain/tboard.h:
include/cltrain/common.h:
