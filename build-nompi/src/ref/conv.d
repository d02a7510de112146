build-nompi/src/ref/conv.o: src/ref/conv.c include/cltrain/ref.h
include/cltrain/ref.h:
