#!/usr/bin/env python3
"""tb_read.py EVENTFILE: print every scalar in a TensorBoard event file as
`tag step value`, read with TensorBoard's own loader. tests/test_tboard.c
compares this with what cltrain wrote."""
import sys

from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

for event in EventFileLoader(sys.argv[1]).Load():
    if event.HasField("summary"):
        for v in event.summary.value:
            # the loader migrates simple_value to a scalar tensor; read whichever is present
            value = v.simple_value if v.HasField("simple_value") else v.tensor.float_val[0]
            print(v.tag, event.step, repr(value))
