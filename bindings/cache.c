/*
 * cache.c — the compile cache (see cache.h).
 *
 * Entry file layout (integers little-endian):
 *     "GLCACHE\n"  u32 schema  key[32]  u64 payload_len  payload  sha256(everything before)[32]
 *     payload = blob ptx, u8 has_cubin, blob cubin, blob log, u32 n, n x (blob name, blob lowered)
 *     blob    = u64 len, bytes
 * The checksum makes a torn or bit-flipped file a miss instead of a wrong module.
 */
#define _GNU_SOURCE
#include "cache.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------
 * SHA-256 (FIPS 180-4)
 * ------------------------------------------------------------------------------------------ */
static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t ror(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void sha256_block(uint32_t h[8], const unsigned char *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[(size_t)4 * i] << 24 | (uint32_t)p[(size_t)4 * i + 1] << 16 |
               (uint32_t)p[(size_t)4 * i + 2] << 8 | (uint32_t)p[(size_t)4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = k + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + K256[i] + w[i];
        uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g; g = f; f = e; e = d + t1;
        d = c; c = b; b = a; a = t1 + t2;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += k;
}

void gl_sha256_init(gl_sha256 *c) {
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, iv, sizeof iv);
    c->nbytes = 0;
    c->used = 0;
}

void gl_sha256_update(gl_sha256 *c, const void *data, size_t len) {
    const unsigned char *p = data;
    c->nbytes += len;
    if (c->used) {
        size_t take = 64 - c->used < len ? 64 - c->used : len;
        memcpy(c->block + c->used, p, take);
        c->used += take;
        p += take;
        len -= take;
        if (c->used < 64) return;
        sha256_block(c->h, c->block);
        c->used = 0;
    }
    for (; len >= 64; p += 64, len -= 64) sha256_block(c->h, p);
    memcpy(c->block, p, len);
    c->used = len;
}

void gl_sha256_final(gl_sha256 *c, unsigned char out[32]) {
    uint64_t bits = c->nbytes * 8;
    unsigned char pad[72] = {0x80};
    size_t padlen = (c->used < 56 ? 56 : 120) - c->used;
    for (int i = 0; i < 8; i++) pad[padlen + i] = (unsigned char)(bits >> (56 - 8 * i));
    gl_sha256_update(c, pad, padlen + 8);
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 4; j++) out[4 * i + j] = (unsigned char)(c->h[i] >> (24 - 8 * j));
}

void gl_sha256_bytes(const void *data, size_t len, unsigned char out[32]) {
    gl_sha256 c;
    gl_sha256_init(&c);
    gl_sha256_update(&c, data, len);
    gl_sha256_final(&c, out);
}

void gl_hex(const unsigned char *bytes, size_t n, char *out) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[bytes[i] >> 4];
        out[2 * i + 1] = digits[bytes[i] & 15];
    }
    out[2 * n] = '\0';
}

/* ------------------------------------------------------------------------------------------
 * The key. Every input is hashed as tag + length + bytes so no two input lists collide.
 * ------------------------------------------------------------------------------------------ */
static void hash_item(gl_sha256 *c, char tag, const void *data, size_t len) {
    unsigned char head[9];
    head[0] = (unsigned char)tag;
    for (int i = 0; i < 8; i++) head[1 + i] = (unsigned char)((uint64_t)len >> (8 * i));
    gl_sha256_update(c, head, sizeof head);
    if (len) gl_sha256_update(c, data, len);
}

static void hash_str(gl_sha256 *c, char tag, const char *s) { hash_item(c, tag, s ? s : "", s ? strlen(s) : 0); }

#define SCAN_MAX_FILES 4096
#define SCAN_MAX_DEPTH 64
#define SCAN_MAX_FILE_BYTES (64u << 20)

typedef struct scan {
    gl_sha256 *sha;
    const gl_cache_key_input *in;
    gl_cache_file_fn on_file;
    void *ctx;
    char **seen; /* paths (on disk) and "\1name" (in memory) already hashed */
    int nseen, capseen;
    bool unresolved; /* the script's own text includes a header by macro: no key can cover it */
} scan;

static bool seen_before(scan *s, const char *id) {
    for (int i = 0; i < s->nseen; i++)
        if (strcmp(s->seen[i], id) == 0) return true;
    if (s->nseen == SCAN_MAX_FILES) return true; /* pathological: stop following includes */
    if (s->nseen == s->capseen) {
        int cap = s->capseen ? s->capseen * 2 : 32;
        char **grown = realloc(s->seen, (size_t)cap * sizeof *grown);
        if (!grown) return true;
        s->seen = grown;
        s->capseen = cap;
    }
    char *copy = strdup(id);
    if (!copy) return true;
    s->seen[s->nseen++] = copy;
    return false;
}

/* Reads a whole regular file; NULL if it is not one or cannot be read. */
static char *read_file(const char *path, size_t *len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat st;
    char *buf = NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size <= SCAN_MAX_FILE_BYTES) {
        size_t want = (size_t)st.st_size, got = 0;
        buf = malloc(want + 1);
        while (buf && got < want) {
            ssize_t r = read(fd, buf + got, want - got);
            if (r <= 0) break;
            got += (size_t)r;
        }
        if (buf) {
            buf[got] = '\0';
            *len = got;
        }
    }
    close(fd);
    return buf;
}

static bool is_regular_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* dir + "/" + name into out; false when it does not fit. */
static bool join_path(char *out, size_t cap, const char *dir, const char *name) {
    int n = (name[0] == '/' || dir == NULL || dir[0] == '\0') ? snprintf(out, cap, "%s", name)
                                                             : snprintf(out, cap, "%s/%s", dir, name);
    return n >= 0 && (size_t)n < cap;
}

/* Installed headers do not change between the compiles of one process, so each one's include
 * directives are remembered with its identity; a later key re-reads it only when a stat shows
 * another identity. kind '"' or '<' is an include to resolve, 'X' the text of `#include MACRO`. */
typedef struct memo_include {
    char *text;
    size_t len;
    char kind;
} memo_include;
typedef struct memo_file {
    char *path;
    char identity[96];
    memo_include *inc;
    int ninc, capinc;
    bool complete;  /* false while being recorded, or when recording ran out of memory */
} memo_file;
#define MEMO_MAX_FILES 16384
static memo_file **memo;
static int nmemo, capmemo;

static memo_file *memo_find(const char *path) {
    for (int i = 0; i < nmemo; i++)
        if (strcmp(memo[i]->path, path) == 0) return memo[i];
    return NULL;
}

static void memo_clear(memo_file *m) {
    for (int i = 0; i < m->ninc; i++) free(m->inc[i].text);
    m->ninc = 0;
    m->complete = false;
}

/* The entry for path, new or emptied, or NULL when none can be made (then nothing is kept). */
static memo_file *memo_start(const char *path, const char *identity) {
    memo_file *m = memo_find(path);
    if (m == NULL) {
        if (nmemo == MEMO_MAX_FILES) return NULL;
        if (nmemo == capmemo) {
            int cap = capmemo ? capmemo * 2 : 64;
            /* an array of pointers: sizeof *grown is the pointer's size, as meant */
            memo_file **grown = realloc(memo, (size_t)cap * sizeof *grown); // NOLINT(bugprone-sizeof-expression)
            if (grown == NULL) return NULL;
            memo = grown;
            capmemo = cap;
        }
        m = calloc(1, sizeof *m);
        if (m == NULL || (m->path = strdup(path)) == NULL) {
            free(m);
            return NULL;
        }
        memo[nmemo++] = m;
    }
    memo_clear(m);
    snprintf(m->identity, sizeof m->identity, "%s", identity);
    return m;
}

static void memo_add(memo_file *m, char kind, const char *text, size_t len) {
    if (m == NULL || (m->ninc == m->capinc && m->capinc >= 65536)) return;
    if (m->ninc == m->capinc) {
        int cap = m->capinc ? m->capinc * 2 : 8;
        memo_include *grown = realloc(m->inc, (size_t)cap * sizeof *grown);
        if (grown == NULL) {
            m->capinc = 65536; /* stays incomplete: never replayed */
            return;
        }
        m->inc = grown;
        m->capinc = cap;
    }
    char *copy = malloc(len + 1);
    if (copy == NULL) {
        m->capinc = 65536;
        return;
    }
    memcpy(copy, text, len);
    copy[len] = '\0';
    m->inc[m->ninc].text = copy;
    m->inc[m->ninc].len = len;
    m->inc[m->ninc].kind = kind;
    m->ninc++;
}

static void scan_text(scan *s, const char *text, size_t len, const char *dir, int depth, memo_file *rec,
                      bool system);

static bool under_system_dir(const scan *s, const char *path) {
    for (int i = 0; i < s->in->nsystem_dirs; i++) {
        size_t n = strlen(s->in->system_dirs[i]);
        if (n && strncmp(path, s->in->system_dirs[i], n) == 0 && path[n] == '/') return true;
    }
    return false;
}

/* An installed header's identity: what changes when it is edited or replaced. */
static void file_identity(const char *path, char *id, size_t cap) {
    struct stat st;
    if (stat(path, &st) != 0) memset(&st, 0, sizeof st);
    snprintf(id, cap, "%lld %lld.%09ld %llu", (long long)st.st_size, (long long)st.st_mtim.tv_sec,
             (long)st.st_mtim.tv_nsec, (unsigned long long)st.st_ino);
}

static void resolve_include(scan *s, const char *name, bool quoted, const char *dir, int depth);

/* The folder part of path into dir (as scan_text resolves "x" includes against it). */
static void dir_of(const char *path, char *dir, size_t cap) {
    snprintf(dir, cap, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == dir) slash[1] = '\0';
    else if (slash) *slash = '\0';
    else snprintf(dir, cap, ".");
}

/* Keys an installed header by identity, from the memo when it is unchanged. True when done. */
static bool scan_system_file(scan *s, const char *path, int depth, memo_file **rec) {
    char id[96];
    file_identity(path, id, sizeof id);
    memo_file *m = memo_find(path);
    if (m && m->complete && strcmp(m->identity, id) == 0) {
        hash_str(s->sha, 'F', path);
        hash_str(s->sha, 'I', id);
        char abs[PATH_MAX];
        if (s->on_file && realpath(path, abs)) s->on_file(abs, s->ctx);
        if (depth + 1 > SCAN_MAX_DEPTH) return true;
        char dir[PATH_MAX];
        dir_of(path, dir, sizeof dir);
        for (int i = 0; i < m->ninc; i++) {
            if (m->inc[i].kind == 'X') hash_item(s->sha, 'X', m->inc[i].text, m->inc[i].len);
            else resolve_include(s, m->inc[i].text, m->inc[i].kind == '"', dir, depth + 1);
        }
        return true;
    }
    *rec = memo_start(path, id);
    return false;
}

static void scan_disk_file(scan *s, const char *path, int depth) {
    if (seen_before(s, path)) return;
    bool system = under_system_dir(s, path);
    memo_file *rec = NULL;
    if (system && scan_system_file(s, path, depth, &rec)) return;
    size_t len = 0;
    char *text = read_file(path, &len);
    if (!text) {
        hash_str(s->sha, 'E', path); /* found but unreadable: NVRTC would fail too */
        return;
    }
    hash_str(s->sha, 'F', path);
    if (system) {
        char id[96];
        file_identity(path, id, sizeof id);
        hash_str(s->sha, 'I', id);
    } else {
        hash_item(s->sha, 'C', text, len);
    }
    char abs[PATH_MAX];
    if (s->on_file && realpath(path, abs)) s->on_file(abs, s->ctx);
    char dir[PATH_MAX];
    dir_of(path, dir, sizeof dir);
    scan_text(s, text, len, dir, depth + 1, rec, system);
    if (rec && rec->capinc < 65536) rec->complete = true;
    free(text);
}

/* Resolves one include the way NVRTC does: in-memory headers, then (for "x") the including
 * file's folder, then the include directories in order. */
static void resolve_include(scan *s, const char *name, bool quoted, const char *dir, int depth) {
    const gl_cache_key_input *in = s->in;
    for (int i = 0; i < in->nheaders; i++) {
        if (strcmp(in->headers[i].name, name) != 0) continue;
        char id[PATH_MAX];
        snprintf(id, sizeof id, "\1%s", name);
        if (!seen_before(s, id)) {
            hash_str(s->sha, 'M', name);
            hash_item(s->sha, 'C', in->headers[i].text, in->headers[i].len);
            scan_text(s, in->headers[i].text, in->headers[i].len, NULL, depth + 1, NULL, false);
        }
        return;
    }
    char path[PATH_MAX];
    if ((quoted || name[0] == '/') && join_path(path, sizeof path, dir, name) && is_regular_file(path)) {
        scan_disk_file(s, path, depth);
        return;
    }
    for (int i = 0; i < in->ninclude_dirs; i++) {
        if (join_path(path, sizeof path, in->include_dirs[i], name) && is_regular_file(path)) {
            scan_disk_file(s, path, depth);
            return;
        }
    }
    hash_str(s->sha, 'U', name); /* built into NVRTC or missing: its name is all we can key on */
}

/* Skips blanks and (after splicing) comments that stay on the line. */
static size_t skip_blanks(const char *text, size_t p, size_t eol) {
    while (p < eol) {
        if (text[p] == ' ' || text[p] == '\t' || text[p] == '\r' || text[p] == '\f' || text[p] == '\v') {
            p++;
        } else if (eol - p >= 2 && text[p] == '/' && text[p + 1] == '*') {
            size_t q = p + 2;
            while (q + 1 < eol && !(text[q] == '*' && text[q + 1] == '/')) q++;
            if (q + 1 >= eol) return eol;
            p = q + 2;
        } else {
            break;
        }
    }
    return p;
}

/* One line's include directive, if it is one: `#` or `%:` first (after blanks and comments),
 * then `include`. Resolves "x" and <x>; anything else is an include by macro. */
static void scan_line(scan *s, const char *text, size_t i, size_t eol, const char *dir, int depth, memo_file *rec,
                      bool system) {
    size_t p = skip_blanks(text, i, eol);
    if (p >= eol) return;
    if (text[p] == '#') p++;
    else if (eol - p >= 2 && text[p] == '%' && text[p + 1] == ':') p += 2;
    else return;
    p = skip_blanks(text, p, eol);
    if (eol - p < 7 || memcmp(text + p, "include", 7) != 0) return;
    p = skip_blanks(text, p + 7, eol);
    char close = (char)(p < eol ? (text[p] == '"' ? '"' : text[p] == '<' ? '>' : 0) : 0);
    size_t q = p + 1;
    while (close && q < eol && text[q] != close) q++;
    if (close && q < eol && q - p - 1 < PATH_MAX / 2) {
        char name[PATH_MAX / 2];
        memcpy(name, text + p + 1, q - p - 1);
        name[q - p - 1] = '\0';
        memo_add(rec, close, name, q - p - 1);
        resolve_include(s, name, close == '"', dir, depth);
    } else {
        size_t end = eol;
        while (end > p && (text[end - 1] == '\r' || text[end - 1] == ' ' || text[end - 1] == '\t')) end--;
        if (end > p && text[end - 1] == '\\') return; /* continued: the spliced pass reads it whole */
        memo_add(rec, 'X', text + p, eol - p);
        hash_item(s->sha, 'X', text + p, eol - p); /* #include MACRO */
        /* an installed header's computed include changes only with the toolkit, which changes
           its identity; the script's own cannot be followed, so its compile is not cached */
        if (!system) s->unresolved = true;
    }
}

/* The text with backslash-newlines spliced (NULL when it has none, or no memory). */
static char *spliced(const char *text, size_t len, size_t *out_len) {
    if (memchr(text, '\\', len) == NULL) return NULL;
    char *out = calloc(len + 1, 1); /* zeroed: the analyzer cannot see that only [0, n) is read */
    if (out == NULL) return NULL;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == '\\' && i + 1 < len && text[i + 1] == '\n') {
            i++;
        } else if (text[i] == '\\' && i + 2 < len && text[i + 1] == '\r' && text[i + 2] == '\n') {
            i += 2;
        } else {
            out[n++] = text[i];
        }
    }
    out[n] = '\0';
    *out_len = n;
    return out;
}

static void scan_lines(scan *s, const char *text, size_t len, const char *dir, int depth, memo_file *rec,
                       bool system) {
    size_t i = 0;
    while (i < len) {
        const char *nl = memchr(text + i, '\n', len - i);
        size_t eol = nl && (size_t)(nl - text) < len ? (size_t)(nl - text) : len;
        scan_line(s, text, i, eol, dir, depth, rec, system);
        i = eol + 1;
    }
}

/* Finds the include directives of a text: in its lines as written and again with backslash-newlines
 * spliced (a directive or its file name can be split across lines). Also inside #if 0 or block
 * comments: hashing a header too many only costs a spurious miss, missing one would serve stale
 * code. */
static void scan_text(scan *s, const char *text, size_t len, const char *dir, int depth, memo_file *rec,
                      bool system) {
    if (depth > SCAN_MAX_DEPTH) {
        if (rec) rec->capinc = 65536; /* cut short: not a complete record */
        return;
    }
    scan_lines(s, text, len, dir, depth, rec, system);
    size_t n = 0;
    char *joined = spliced(text, len, &n);
    if (joined) {
        scan_lines(s, joined, n, dir, depth, rec, system);
        free(joined);
    }
}

bool gl_cache_key(const gl_cache_key_input *in, unsigned char key[32], gl_cache_file_fn on_file,
                  void *ctx) {
    gl_sha256 c;
    gl_sha256_init(&c);
    char schema[16];
    snprintf(schema, sizeof schema, "%d", GL_CACHE_SCHEMA);
    hash_str(&c, 'S', schema);
    hash_str(&c, 'G', in->gpulab_version);
    hash_str(&c, 'N', in->nvrtc_version);
    hash_str(&c, 'A', in->arch);
    for (int i = 0; i < in->noptions; i++) hash_str(&c, 'O', in->options[i]);
    hash_str(&c, 'n', in->source_name); /* __FILE__, line info and messages carry it */
    hash_item(&c, 'T', in->source, in->source_len);
    for (int i = 0; i < in->nnames; i++) hash_str(&c, 'L', in->names[i]);
    scan s = {&c, in, on_file, ctx, NULL, 0, 0, false};
    for (int i = 0; i < in->npre_includes; i++) { /* as if the source began with #include "x" */
        hash_str(&c, 'P', in->pre_includes[i]);
        resolve_include(&s, in->pre_includes[i], true, in->source_dir, 0);
    }
    scan_text(&s, in->source, in->source_len, in->source_dir, 0, NULL, false);
    for (int i = 0; i < s.nseen; i++) free(s.seen[i]);
    free(s.seen);
    gl_sha256_final(&c, key);
    return !s.unresolved;
}

/* ------------------------------------------------------------------------------------------
 * Entries
 * ------------------------------------------------------------------------------------------ */
static const char MAGIC[8] = {'G', 'L', 'C', 'A', 'C', 'H', 'E', '\n'};
#define HEAD_BYTES (8 + 4 + 32 + 8)

typedef struct reader {
    const unsigned char *p;
    size_t left;
} reader;

static bool take(reader *r, void *out, size_t n) {
    if (r->left < n) return false;
    if (out) memcpy(out, r->p, n);
    r->p += n;
    r->left -= n;
    return true;
}

static bool take_u64(reader *r, uint64_t *v) {
    unsigned char b[8];
    if (!take(r, b, 8)) return false;
    *v = 0;
    for (int i = 7; i >= 0; i--) *v = *v << 8 | b[i];
    return true;
}

static bool take_u32(reader *r, uint32_t *v) {
    unsigned char b[4];
    if (!take(r, b, 4)) return false;
    *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return true;
}

/* A blob copied into a NUL-terminated malloc'd string. */
static bool take_blob(reader *r, char **out, size_t *len) {
    uint64_t n;
    if (!take_u64(r, &n) || n > r->left) return false;
    char *s = malloc((size_t)n + 1);
    if (!s) return false;
    memcpy(s, r->p, (size_t)n);
    s[n] = '\0';
    r->p += n;
    r->left -= (size_t)n;
    *out = s;
    if (len) *len = (size_t)n;
    return true;
}

void gl_cache_entry_free(gl_cache_entry *e) {
    if (!e) return;
    free(e->ptx);
    free(e->cubin);
    free(e->log);
    for (int i = 0; i < e->nlowered; i++) {
        if (e->names) free(e->names[i]);
        if (e->lowered) free(e->lowered[i]);
    }
    free(e->names);
    free(e->lowered);
    memset(e, 0, sizeof *e);
}

static int parse_fail(gl_cache_entry *e, char *err, size_t errlen, const char *why) {
    gl_cache_entry_free(e);
    if (err && errlen) snprintf(err, errlen, "%s", why);
    return -1;
}

int gl_cache_parse(const unsigned char *buf, size_t len, const unsigned char *key,
                   gl_cache_entry *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (buf == NULL || len < HEAD_BYTES + 32) return parse_fail(out, err, errlen, "truncated header");
    if (memcmp(buf, MAGIC, sizeof MAGIC) != 0) return parse_fail(out, err, errlen, "not a cache entry");
    reader r = {buf + 8, len - 8};
    uint32_t schema;
    unsigned char stored_key[32];
    uint64_t payload;
    take_u32(&r, &schema);
    take(&r, stored_key, 32);
    take_u64(&r, &payload);
    if (schema != GL_CACHE_SCHEMA) return parse_fail(out, err, errlen, "other schema version");
    if (key && memcmp(key, stored_key, 32) != 0) return parse_fail(out, err, errlen, "entry of another key");
    if (payload != r.left - 32) return parse_fail(out, err, errlen, "truncated or padded payload");
    unsigned char sum[32];
    gl_sha256_bytes(buf, len - 32, sum);
    if (memcmp(sum, buf + len - 32, 32) != 0) return parse_fail(out, err, errlen, "checksum mismatch");
    r.left -= 32; /* the checksum is not part of the payload */

    unsigned char has_cubin;
    uint32_t n;
    if (!take_blob(&r, &out->ptx, &out->ptx_len) || !take(&r, &has_cubin, 1) || has_cubin > 1)
        return parse_fail(out, err, errlen, "bad ptx field");
    char *cubin = NULL;
    size_t cubin_len = 0;
    if (!take_blob(&r, &cubin, &cubin_len)) return parse_fail(out, err, errlen, "bad cubin field");
    if (has_cubin) {
        out->cubin = cubin;
        out->cubin_len = cubin_len;
    } else {
        free(cubin);
    }
    if (!take_blob(&r, &out->log, &out->log_len)) return parse_fail(out, err, errlen, "bad log field");
    if (!take_u32(&r, &n) || n > r.left / 16) return parse_fail(out, err, errlen, "bad name count");
    if (n) {
        out->names = calloc(n, sizeof(char *));
        out->lowered = calloc(n, sizeof(char *));
        if (!out->names || !out->lowered) return parse_fail(out, err, errlen, "out of memory");
    }
    for (uint32_t i = 0; i < n; i++) {
        out->nlowered = (int)i + 1;
        if (!take_blob(&r, &out->names[i], NULL) || !take_blob(&r, &out->lowered[i], NULL))
            return parse_fail(out, err, errlen, "bad name field");
    }
    if (r.left != 0) return parse_fail(out, err, errlen, "trailing bytes");
    return 0;
}

typedef struct writer {
    unsigned char *p;
    size_t len, cap;
    bool failed;
} writer;

static void put(writer *w, const void *data, size_t n) {
    if (w->failed) return;
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < w->len + n) cap *= 2;
        unsigned char *grown = realloc(w->p, cap);
        if (!grown) {
            w->failed = true;
            return;
        }
        w->p = grown;
        w->cap = cap;
    }
    if (n) memcpy(w->p + w->len, data, n);
    w->len += n;
}

static void put_u64(writer *w, uint64_t v) {
    unsigned char b[8];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
    put(w, b, 8);
}

static void put_blob(writer *w, const char *s, size_t n) {
    put_u64(w, n);
    put(w, s, n);
}

unsigned char *gl_cache_serialize(const gl_cache_entry *e, const unsigned char key[32], size_t *len) {
    writer w = {0};
    put(&w, MAGIC, sizeof MAGIC);
    unsigned char schema[4] = {GL_CACHE_SCHEMA & 255, (GL_CACHE_SCHEMA >> 8) & 255, 0, 0};
    put(&w, schema, 4);
    put(&w, key, 32);
    put_u64(&w, 0); /* payload length, patched below */
    size_t start = w.len;
    put_blob(&w, e->ptx, e->ptx_len);
    unsigned char has_cubin = e->cubin != NULL;
    put(&w, &has_cubin, 1);
    put_blob(&w, e->cubin, e->cubin ? e->cubin_len : 0);
    put_blob(&w, e->log, e->log_len);
    unsigned char n[4] = {(unsigned char)e->nlowered, (unsigned char)(e->nlowered >> 8),
                          (unsigned char)(e->nlowered >> 16), (unsigned char)(e->nlowered >> 24)};
    put(&w, n, 4);
    for (int i = 0; i < e->nlowered; i++) {
        put_blob(&w, e->names[i], strlen(e->names[i]));
        put_blob(&w, e->lowered[i], strlen(e->lowered[i]));
    }
    if (w.failed) {
        free(w.p);
        return NULL;
    }
    uint64_t payload = w.len - start;
    for (int i = 0; i < 8; i++) w.p[start - 8 + i] = (unsigned char)(payload >> (8 * i));
    unsigned char sum[32];
    gl_sha256_bytes(w.p, w.len, sum);
    put(&w, sum, 32);
    if (w.failed) {
        free(w.p);
        return NULL;
    }
    *len = w.len;
    return w.p;
}

/* ------------------------------------------------------------------------------------------
 * The directory and the files in it
 * ------------------------------------------------------------------------------------------ */
static bool warned;

static void warn_once(const char *what, const char *path, const char *why) {
    if (warned) return;
    warned = true;
    fprintf(stderr, "gpulab: warning: not using the compile cache: %s %s %s; compiling uncached\n", what,
            path, why);
}

/* Why a directory or entry we found must not be trusted, or NULL when it is fine. */
static const char *untrusted(const struct stat *st, char *buf, size_t cap) {
    if (S_ISLNK(st->st_mode)) return "is a symlink";
    if (st->st_uid != geteuid()) {
        snprintf(buf, cap, "is owned by uid %u, not by uid %u", (unsigned)st->st_uid, (unsigned)geteuid());
        return buf;
    }
    if (st->st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(buf, cap, "is writable by group or others (mode %04o)", (unsigned)(st->st_mode & 07777));
        return buf;
    }
    return NULL;
}

/* mkdir -p with mode 0700 for what it creates. */
static bool make_dirs(const char *path) {
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) return false;
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(tmp, 0700) != 0 && errno != EEXIST) return false;
        *p = '/';
    }
    return mkdir(tmp, 0700) == 0 || errno == EEXIST;
}

static bool choose_dir(char *out, size_t cap) {
    const char *dir = getenv("GPULAB_CACHE_DIR");
    int n;
    if (dir && *dir) {
        n = snprintf(out, cap, "%s", dir);
    } else if ((dir = getenv("XDG_CACHE_HOME")) && *dir == '/') {
        n = snprintf(out, cap, "%s/gpulab", dir);
    } else {
        const char *home = getenv("HOME");
        if (!home || !*home) {
            struct passwd *pw = getpwuid(getuid());
            home = pw ? pw->pw_dir : NULL;
        }
        if (!home) return false;
        n = snprintf(out, cap, "%s/.cache/gpulab", home);
    }
    if (n < 0 || (size_t)n >= cap) return false;
    size_t len = (size_t)n;
    while (len > 1 && out[len - 1] == '/') out[--len] = '\0';
    return true;
}

bool gl_cache_dir(char *out, size_t cap) {
    const char *env = getenv("GPULAB_CACHE");
    if (env && strcmp(env, "0") == 0) return false;
    if (!choose_dir(out, cap)) return false;
    if (!make_dirs(out)) {
        warn_once("directory", out, strerror(errno));
        return false;
    }
    struct stat st;
    char why[96];
    if (lstat(out, &st) != 0) {
        warn_once("directory", out, strerror(errno));
        return false;
    }
    const char *bad = untrusted(&st, why, sizeof why);
    if (!bad && !S_ISDIR(st.st_mode)) bad = "is not a directory";
    if (bad) {
        warn_once("directory", out, bad);
        return false;
    }
    return true;
}

static bool entry_path(char *out, size_t cap, const char *dir, const unsigned char key[32]) {
    char hex[65];
    gl_hex(key, 32, hex);
    int n = snprintf(out, cap, "%s/%s.entry", dir, hex);
    return n > 0 && (size_t)n < cap;
}

gl_cache_status gl_cache_load(const char *dir, const unsigned char key[32], gl_cache_entry *out) {
    memset(out, 0, sizeof *out);
    char path[PATH_MAX];
    if (!entry_path(path, sizeof path, dir, key)) return GL_CACHE_UNUSABLE;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ELOOP) {
            warn_once("entry", path, "is a symlink");
            return GL_CACHE_UNUSABLE;
        }
        return GL_CACHE_MISS; /* absent or unreadable: compiled and rewritten */
    }
    struct stat st;
    char why[96];
    const char *bad = fstat(fd, &st) != 0 ? "cannot be examined" : untrusted(&st, why, sizeof why);
    if (!bad && !S_ISREG(st.st_mode)) bad = "is not a regular file";
    if (bad) {
        close(fd);
        warn_once("entry", path, bad);
        return GL_CACHE_UNUSABLE;
    }
    size_t want = (size_t)st.st_size, got = 0;
    unsigned char *buf = want < ((size_t)1 << 31) ? malloc(want ? want : 1) : NULL;
    while (buf && got < want) {
        ssize_t r = read(fd, buf + got, want - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    int rc = buf ? gl_cache_parse(buf, got, key, out, NULL, 0) : -1;
    free(buf);
    return rc == 0 ? GL_CACHE_HIT : GL_CACHE_MISS;
}

static bool write_all(int fd, const unsigned char *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

bool gl_cache_store(const char *dir, const unsigned char key[32], const gl_cache_entry *e) {
    size_t len;
    unsigned char *buf = gl_cache_serialize(e, key, &len);
    if (!buf) return false;
    char path[PATH_MAX], tmp[PATH_MAX];
    static unsigned counter;
    char hex[65];
    gl_hex(key, 32, hex);
    bool ok = entry_path(path, sizeof path, dir, key) &&
              snprintf(tmp, sizeof tmp, "%s/.tmp-%.16s-%ld-%u", dir, hex, (long)getpid(), counter++) <
                  (int)sizeof tmp;
    int fd = ok ? open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600) : -1;
    ok = fd >= 0 && write_all(fd, buf, len) && fsync(fd) == 0;
    if (fd >= 0 && close(fd) != 0) ok = false;
    /* rename replaces an old entry atomically: readers see the old or the new file, whole */
    if (ok) ok = rename(tmp, path) == 0;
    if (!ok && fd >= 0) unlink(tmp);
    free(buf);
    return ok;
}
