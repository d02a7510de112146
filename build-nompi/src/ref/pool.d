build-nompi/src/ref/pool.o: src/ref/pool.c include/cltrain/ref.h
include/cltrain/ref.h:
