/* repl.c — placeholder until the REPL is written. */
#include "host.h"
#include <stdio.h>
int gl_repl(lua_State *L, const char *replay) { (void)L; (void)replay; fprintf(stderr, "no REPL yet\n"); return 1; }
