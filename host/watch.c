/* watch.c — placeholder. */
#include "host.h"
int gl_watch_run(int argc, char **argv) { (void)argc; (void)argv; return 1; }
