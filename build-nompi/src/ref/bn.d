build-nompi/src/ref/bn.o: src/ref/bn.c include/cltrain/ref.h
include/cltrain/ref.h:
