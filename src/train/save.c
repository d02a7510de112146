/* train/save.c: saving the run's state at a step (the checkpoint file, and
 * numbered copies under --keep), from the device through host buffers.
 * Tested by tests/checkpoint.sh. */
#include "loop.h"
#include <string.h>
#include <unistd.h>

int ct_train_save(ct_loop *loop, int64_t next) {
    const ct_train_opts *o = &loop->o;
    ct_model *m = &loop->m;
    ct_ckpt st = {.cfg = m->cfg, .lookahead = o->lookahead, .drop_last = o->drop_last, .average = loop->la.have ? loop->buf.average : NULL, .seed = o->seed, .next_batch = next, .batch = o->batch, .n_train = loop->n,
                  .opt_kind = o->optim.kind, .opt_step = m->step, .lr = o->optim.lr, .momentum = o->optim.momentum,
                  .wd = o->optim.wd, .n_params = m->n_params, .params = loop->buf.params, .n_state = loop->opt.type->n_state,
                  .ranks = ct_world.size, .n_names = o->class_names ? m->n_classes : 0, .class_names = o->class_names,
                  .data = {.split = o->data_split, .classes = loop->train->n_classes}};
    snprintf(st.model_name, sizeof st.model_name, "%s", m->name);
    snprintf(st.data.kind, sizeof st.data.kind, "%s", o->dataset ? o->dataset : "");
    snprintf(st.data.path, sizeof st.data.path, "%s", o->data_dir ? o->data_dir : "");
    ct_model_get_params(m, st.params);
    for (int i = 0; i < st.n_state; i++) {
        st.state[i] = loop->buf.state[i];
        ct_optim_get_state(&loop->opt, i, st.state[i]);
    }
    if (st.average) ct_lookahead_get(&loop->la, st.average);
    int rc = ct_ckpt_save(&st, o->checkpoint);
    if (rc == CT_EIO) return ct_train_save_failed(next);
    if (!rc && o->keep > 0) {
        /* numbered copies FILE.<step>; the oldest beyond --keep go */
        char path[4200];
        snprintf(path, sizeof path, "%s.%lld", o->checkpoint, (long long)next);
        if ((rc = ct_ckpt_save(&st, path)) == CT_EIO) return ct_train_save_failed(next);
        if (loop->n_kept == o->keep) {
            snprintf(path, sizeof path, "%s.%lld", o->checkpoint, (long long)loop->kept[0]);
            unlink(path);
            memmove(loop->kept, loop->kept + 1, sizeof *loop->kept * (size_t)(o->keep - 1));
            loop->n_kept--;
        }
        loop->kept[loop->n_kept++] = next;
    }
    return rc;
}
