/*
 * cache.h — the compile cache: SHA-256, the cache key over everything a compilation reads,
 * and entries on disk (atomic writes, checksums, ownership checks). cache.c
 *
 * No Lua and no NVRTC in here: nvrtc.c gathers the inputs and decides when to use it.
 */
#ifndef GPULAB_CACHE_H
#define GPULAB_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bumped whenever the key's inputs or the entry layout change. */
#define GL_CACHE_SCHEMA 3

/* SHA-256 ------------------------------------------------------------------------------------ */
typedef struct gl_sha256 {
    uint32_t h[8];
    uint64_t nbytes;
    unsigned char block[64];
    size_t used;
} gl_sha256;

void gl_sha256_init(gl_sha256 *c);
void gl_sha256_update(gl_sha256 *c, const void *data, size_t len);
void gl_sha256_final(gl_sha256 *c, unsigned char out[32]);
void gl_sha256_bytes(const void *data, size_t len, unsigned char out[32]);
/* 64 hex digits and a NUL. */
void gl_hex(const unsigned char *bytes, size_t n, char *out);

/* The key ----------------------------------------------------------------------------------- */
typedef struct gl_cache_header {   /* an in-memory header passed to NVRTC */
    const char *name;
    const char *text;
    size_t len;
} gl_cache_header;

typedef struct gl_cache_key_input {
    const char *gpulab_version;
    const char *nvrtc_version;     /* "13.0"; an input so tests can vary it */
    const char *arch;              /* exactly as passed: sm_90a differs from sm_90 */
    const char *const *options;    /* the ordered list given to nvrtcCompileProgram */
    int noptions;
    const char *source_name;       /* NVRTC's name for the source (__FILE__, line info) */
    const char *source;
    size_t source_len;
    const char *source_dir;        /* where `#include "x"` of the source is looked up first */
    const char *const *names;      /* name expressions, in order */
    int nnames;
    const gl_cache_header *headers; /* in-memory headers */
    int nheaders;
    const char *const *include_dirs; /* searched in order after the including file's folder */
    int ninclude_dirs;
    /* folders of installed headers (the CUDA toolkit's): a header found under one is keyed by
     * its identity (path, size, modification time in ns, inode) instead of its contents, which
     * keeps the key cheap for the thousands of lines cuda/std pulls in; an edited or replaced
     * header still changes the key. Its includes are followed as for any header. */
    const char *const *system_dirs;
    int nsystem_dirs;
    const char *const *pre_includes; /* --pre-include / -include headers, in order */
    int npre_includes;
} gl_cache_key_input;

/* Called with the absolute path of every header file found on disk (for --watch). */
typedef void (*gl_cache_file_fn)(const char *path, void *ctx);

/* Hashes every input above plus, recursively, the path and contents of each header the
 * source includes (an include that cannot be resolved is hashed by its name). False when the key
 * cannot cover the compile: the script's source or one of its own headers includes a header
 * named by a macro (`#include HEADER`), which the key cannot follow; such a compile must not use
 * the cache. */
bool gl_cache_key(const gl_cache_key_input *in, unsigned char key[32], gl_cache_file_fn on_file,
                  void *ctx);

/* Entries ----------------------------------------------------------------------------------- */
typedef struct gl_cache_entry {
    char *ptx;
    size_t ptx_len;
    char *cubin;          /* NULL when the compilation made none (virtual arch) */
    size_t cubin_len;
    char *log;
    size_t log_len;
    int nlowered;
    char **names;         /* name expressions ... */
    char **lowered;       /* ... and their lowered (mangled) names */
} gl_cache_entry;

/* Parses an entry file's bytes. Returns 0 and fills *out (free with gl_cache_entry_free), or
 * -1 with a message for anything truncated, corrupt (checksum) or from another key (when
 * key != NULL). Never reads outside buf[0..len). */
int gl_cache_parse(const unsigned char *buf, size_t len, const unsigned char *key,
                   gl_cache_entry *out, char *err, size_t errlen);
/* Serializes an entry for `key`; returns a malloc'd buffer (NULL on out of memory). */
unsigned char *gl_cache_serialize(const gl_cache_entry *e, const unsigned char key[32], size_t *len);
void gl_cache_entry_free(gl_cache_entry *e);

/* The cache directory ----------------------------------------------------------------------- */
/* Resolves and checks the cache directory (creating it 0700). Returns false when caching is
 * off (GPULAB_CACHE=0) or the directory cannot be used; in the latter case one warning per
 * process is printed on stderr. */
bool gl_cache_dir(char *out, size_t cap);

typedef enum gl_cache_status { GL_CACHE_HIT, GL_CACHE_MISS, GL_CACHE_UNUSABLE } gl_cache_status;
/* Looks up `key` in `dir`. A missing, truncated or corrupt entry is a MISS; an entry that is a
 * symlink, owned by someone else or group/other-writable is UNUSABLE (warned once). */
gl_cache_status gl_cache_load(const char *dir, const unsigned char key[32], gl_cache_entry *out);
/* Writes the entry atomically (temporary file in dir, fsync, rename). Returns false on failure
 * (the compilation result is still good; a failed write only costs the next run a compile). */
bool gl_cache_store(const char *dir, const unsigned char key[32], const gl_cache_entry *e);

#endif
