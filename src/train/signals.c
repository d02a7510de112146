/* train/signals.c: SIGINT and SIGTERM during training: the step finishes,
 * the checkpoint is saved, training stops; a second signal kills at once.
 * Tested by tests/checkpoint.sh. */
#include "loop.h"
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

/* The handler may run on any thread that does not block the signal (Open
 * MPI's and PMIx's threads included), not only the training loop's: a
 * volatile sig_atomic_t is only defined for a handler on the same thread, so
 * the flag is a lock-free atomic (async-signal-safe in C11), released by the
 * handler and acquired by the loop. */
static atomic_int g_signal;
static struct sigaction g_sa_old[2];
static void on_signal(int sig) { atomic_store_explicit(&g_signal, sig, memory_order_release); }

void ct_signals_install(void) {
    /* Ctrl-C / SIGTERM: finish the step, save, stop; a second one kills at once */
    atomic_store_explicit(&g_signal, 0, memory_order_relaxed);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND | SA_RESTART;
    sigaction(SIGINT, &sa, &g_sa_old[0]);
    sigaction(SIGTERM, &sa, &g_sa_old[1]);
    signal(SIGXFSZ, SIG_IGN); /* past a file-size limit a write fails (EFBIG) and is reported, not a silent kill */
}

void ct_signals_restore(void) {
    sigaction(SIGINT, &g_sa_old[0], NULL);
    sigaction(SIGTERM, &g_sa_old[1], NULL);
}

int ct_signal_caught(void) { return atomic_load_explicit(&g_signal, memory_order_acquire); }

int ct_signal_pending(void) { return ct_signal_caught() != 0; }
