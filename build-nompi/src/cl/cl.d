build-nompi/src/cl/cl.o: src/cl/cl.c include/cltrain/cl.h \
 include/cltrain/common.h
include/cltrain/cl.h:
include/cltrain/common.h:
