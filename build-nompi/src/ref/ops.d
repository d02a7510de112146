build-nompi/src/ref/ops.o: src/ref/ops.c include/cltrain/ref.h
include/cltrain/ref.h:
