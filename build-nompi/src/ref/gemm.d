build-nompi/src/ref/gemm.o: src/ref/gemm.c include/cltrain/ref.h
include/cltrain/ref.h:
