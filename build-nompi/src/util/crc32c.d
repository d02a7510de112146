build-nompi/src/util/crc32c.o: src/util/crc32c.c include/cltrain/common.h
include/cltrain/common.h:
