build-nompi/src/ref/dropout.o: src/ref/dropout.c include/cltrain/ref.h
include/cltrain/ref.h:
