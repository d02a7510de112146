/* cli.h: shared by the cltrain subcommands. */
#ifndef CLTRAIN_CLI_H
#define CLTRAIN_CLI_H
#include "cltrain/train.h"
int cli_fail(int code);
int cli_parse_train(int argc, char **argv, ct_train_opts *o, const char **data);
int cmd_bench(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_pack(int argc, char **argv);
extern const char *g_confusion_png, *g_augment, *g_labels;
#endif
