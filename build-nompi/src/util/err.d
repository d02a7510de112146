build-nompi/src/util/err.o: src/util/err.c include/cltrain/common.h
include/cltrain/common.h:
