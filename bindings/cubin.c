/*
 * cubin.c — resources of a kernel from its cubin's ELF and from ptxas's verbose report
 * (cubin.h). Every read is bounds-checked: the image comes from a cache file or a script.
 *
 * The .nv.info sections are lists of attributes: one byte format, one byte attribute, then
 * for format 4 a 16-bit size and that many bytes, for the others a 16-bit value. The global
 * .nv.info holds per-function values keyed by symbol index (register count, frame size, stack
 * sizes); .nv.info.<kernel> holds the kernel's own (launch bounds, barriers, parameter size).
 */
#include "cubin.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { FMT_SVAL = 4 };
enum {
    ATTR_MAX_THREADS = 0x05, ATTR_FRAME_SIZE = 0x11, ATTR_MIN_STACK_SIZE = 0x12, ATTR_CBANK_PARAM_SIZE = 0x19,
    ATTR_MAXREG_COUNT = 0x1b, ATTR_MAX_STACK_SIZE = 0x23, ATTR_REGCOUNT = 0x2f, ATTR_NUM_BARRIERS = 0x4c
};
enum { SHT_SYMTAB_ = 2, SHT_NOBITS_ = 8 };

typedef struct elf {
    const unsigned char *p;
    size_t len;
    uint64_t shoff;
    unsigned shnum, shentsize, shstrndx;
} elf;

typedef struct section {
    uint32_t name, type, link;
    uint64_t offset, size, entsize;
} section;

static uint64_t rd(const unsigned char *p, int bytes) {
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static bool in_image(const elf *e, uint64_t off, uint64_t n) { return off <= e->len && n <= e->len - off; }

static bool read_section(const elf *e, unsigned i, section *s) {
    uint64_t at = e->shoff + (uint64_t)i * e->shentsize;
    if (i >= e->shnum || !in_image(e, at, 64)) return false;
    const unsigned char *h = e->p + at;
    s->name = (uint32_t)rd(h, 4);
    s->type = (uint32_t)rd(h + 4, 4);
    s->offset = rd(h + 24, 8);
    s->size = rd(h + 32, 8);
    s->link = (uint32_t)rd(h + 40, 4);
    s->entsize = rd(h + 56, 8);
    return s->type == SHT_NOBITS_ || in_image(e, s->offset, s->size);
}

/* The NUL-terminated string at `off` of string table section `tab`, or NULL. */
static const char *string_at(const elf *e, unsigned tab, uint64_t off) {
    section s;
    if (!read_section(e, tab, &s) || s.type == SHT_NOBITS_ || off >= s.size) return NULL;
    const char *str = (const char *)e->p + s.offset + off;
    return memchr(str, '\0', s.size - off) ? str : NULL;
}

static bool open_elf(elf *e, const void *image, size_t len, char *err, size_t errlen) {
    e->p = image;
    e->len = len;
    if (len < 64 || memcmp(image, "\177ELF", 4) != 0) {
        snprintf(err, errlen, "not an ELF image (%zu bytes)", len);
        return false;
    }
    if (e->p[4] != 2 || e->p[5] != 1) {
        snprintf(err, errlen, "not a 64-bit little-endian ELF image");
        return false;
    }
    e->shoff = rd(e->p + 0x28, 8);
    e->shentsize = (unsigned)rd(e->p + 0x3a, 2);
    e->shnum = (unsigned)rd(e->p + 0x3c, 2);
    e->shstrndx = (unsigned)rd(e->p + 0x3e, 2);
    if (e->shentsize < 64 || !in_image(e, e->shoff, (uint64_t)e->shnum * e->shentsize)) {
        snprintf(err, errlen, "truncated ELF image: section headers past its %zu bytes", len);
        return false;
    }
    return true;
}

/* True when section name is prefix + kernel exactly. */
static bool names_kernel(const char *sname, const char *prefix, const char *kernel) {
    size_t n = strlen(prefix);
    return strncmp(sname, prefix, n) == 0 && strcmp(sname + n, kernel) == 0;
}

/* The symbol table's index of `kernel`, or -1. */
static long symbol_index(const elf *e, const char *kernel) {
    for (unsigned i = 0; i < e->shnum; i++) {
        section s;
        if (!read_section(e, i, &s) || s.type != SHT_SYMTAB_ || s.entsize < 24) continue;
        for (uint64_t k = 0; k < s.size / s.entsize; k++) {
            const char *n = string_at(e, s.link, rd(e->p + s.offset + k * s.entsize, 4));
            if (n && strcmp(n, kernel) == 0) return (long)k;
        }
    }
    return -1;
}

/* Walks the attribute list of one .nv.info section. `sym` >= 0: the global section, where a
 * value counts only when its first word is that symbol; -1: the kernel's own section. */
static void read_attributes(const unsigned char *p, uint64_t size, long sym, gl_cubin_kernel *k) {
    uint64_t at = 0;
    while (at + 4 <= size) {
        unsigned fmt = p[at], attr = p[at + 1];
        uint64_t n = fmt == FMT_SVAL ? rd(p + at + 2, 2) : 0;
        const unsigned char *v = fmt == FMT_SVAL ? p + at + 4 : p + at + 2;
        if (fmt == FMT_SVAL && at + 4 + n > size) return;
        long value = fmt == FMT_SVAL ? (n >= 4 ? (long)rd(v, 4) : -1) : (long)rd(v, 2);
        if (sym >= 0) {
            long *slot = attr == ATTR_REGCOUNT         ? &k->regs
                         : attr == ATTR_FRAME_SIZE     ? &k->frame
                         : attr == ATTR_MIN_STACK_SIZE ? &k->min_stack
                         : attr == ATTR_MAX_STACK_SIZE ? &k->max_stack
                                                       : NULL;
            if (slot && fmt == FMT_SVAL && n >= 8 && (long)rd(v, 4) == sym) *slot = (long)rd(v + 4, 4);
        } else if (attr == ATTR_MAX_THREADS && fmt == FMT_SVAL && n >= 12) {
            k->max_threads = (long)(rd(v, 4) * rd(v + 4, 4) * rd(v + 8, 4));
        } else if (attr == ATTR_MAXREG_COUNT) {
            k->max_regs = value;
        } else if (attr == ATTR_NUM_BARRIERS) {
            k->barriers = value;
        } else if (attr == ATTR_CBANK_PARAM_SIZE) {
            k->param_bytes = value;
        }
        at += fmt == FMT_SVAL ? 4 + n : 4;
    }
}

/* ".nv.constant3" or ".nv.constant0.kernel": the bank, when the section belongs to the kernel. */
static int constant_bank(const char *sname, const char *kernel) {
    const char *prefix = ".nv.constant";
    size_t n = strlen(prefix);
    if (strncmp(sname, prefix, n) != 0) return -1;
    char *end;
    long bank = strtol(sname + n, &end, 10);
    if (end == sname + n || bank < 0 || bank >= GL_CUBIN_BANKS) return -1;
    if (*end == '\0' || (*end == '.' && strcmp(end + 1, kernel) == 0)) return (int)bank;
    return -1;
}

static void read_section_facts(const elf *e, const section *s, const char *sname, const char *kernel, long sym,
                               gl_cubin_kernel *k) {
    if (strcmp(sname, ".nv.info") == 0 && s->type != SHT_NOBITS_) {
        read_attributes(e->p + s->offset, s->size, sym, k);
    } else if (names_kernel(sname, ".nv.info.", kernel) && s->type != SHT_NOBITS_) {
        read_attributes(e->p + s->offset, s->size, -1, k);
    } else if (names_kernel(sname, ".nv.shared.", kernel)) {
        k->smem_section = (long)s->size;
    } else if (strncmp(sname, ".nv.shared.reserved.", 20) == 0) {
        k->reserved_smem = true;
    } else if (names_kernel(sname, ".text.", kernel)) {
        k->code_bytes = (long)s->size;
    } else {
        int bank = constant_bank(sname, kernel);
        if (bank >= 0) k->cmem[bank] = (k->cmem[bank] < 0 ? 0 : k->cmem[bank]) + (long)s->size;
    }
}

bool gl_cubin_kernel_info(const void *image, size_t len, const char *name, gl_cubin_kernel *out, char *err,
                          size_t errlen) {
    gl_cubin_kernel k = {.regs = -1, .frame = -1, .min_stack = -1, .max_stack = -1, .max_regs = -1,
                         .max_threads = -1, .barriers = 0, .param_bytes = -1, .smem_section = 0, .code_bytes = -1};
    for (int b = 0; b < GL_CUBIN_BANKS; b++) k.cmem[b] = -1;
    elf e;
    if (!open_elf(&e, image, len, err, errlen)) return false;
    long sym = symbol_index(&e, name);
    for (unsigned i = 0; i < e.shnum; i++) {
        section s;
        if (!read_section(&e, i, &s)) continue;
        const char *sname = string_at(&e, e.shstrndx, s.name);
        if (sname) read_section_facts(&e, &s, sname, name, sym, &k);
    }
    if (k.code_bytes < 0) {
        snprintf(err, errlen, "the image has no code for kernel '%s'", name);
        return false;
    }
    *out = k;
    return true;
}

bool gl_cubin_has_section(const void *image, size_t len, const char *name) {
    elf e;
    char err[128];
    if (!open_elf(&e, image, len, err, sizeof err)) return false;
    for (unsigned i = 0; i < e.shnum; i++) {
        section s;
        const char *sname = read_section(&e, i, &s) ? string_at(&e, e.shstrndx, s.name) : NULL;
        if (sname && strcmp(sname, name) == 0) return true;
    }
    return false;
}

/* ---- ptxas -v ------------------------------------------------------------------------------ */
bool gl_ptxas_is_report_line(const char *line, size_t len) {
    static const char info[] = "ptxas info", cont[] = "ptxas         .";
    return (len >= sizeof info - 1 && memcmp(line, info, sizeof info - 1) == 0) ||
           (len >= sizeof cont - 1 && memcmp(line, cont, sizeof cont - 1) == 0);
}

/* The number right before `what` in line (e.g. "360 bytes spill stores"), or -1. */
static long number_before(const char *line, size_t len, const char *what) {
    size_t wn = strlen(what);
    for (size_t i = 0; i + wn <= len; i++) {
        if (memcmp(line + i, what, wn) != 0) continue;
        size_t j = i;
        while (j > 0 && line[j - 1] == ' ') j--;
        size_t end = j;
        while (j > 0 && line[j - 1] >= '0' && line[j - 1] <= '9') j--;
        if (j < end) return strtol(line + j, NULL, 10);
    }
    return -1;
}

static void read_cmem(const char *line, size_t len, gl_ptxas_info *out) {
    for (size_t i = 0; i + 5 < len; i++) {
        if (memcmp(line + i, "cmem[", 5) != 0) continue;
        long bank = strtol(line + i + 5, NULL, 10);
        size_t j = i;
        while (j > 0 && line[j - 1] != ',' && line[j - 1] != ':') j--;
        long bytes = strtol(line + j, NULL, 10);
        if (bank >= 0 && bank < GL_CUBIN_BANKS) out->cmem[bank] = bytes;
    }
}

/* Is this line "... Compiling entry function 'X' ..." and X == name? *other: it names another. */
static bool entry_line(const char *line, size_t len, const char *name, bool *other) {
    static const char tag[] = "Compiling entry function '";
    const char *t = NULL;
    for (size_t i = 0; i + sizeof tag - 1 <= len && !t; i++)
        if (memcmp(line + i, tag, sizeof tag - 1) == 0) t = line + i + sizeof tag - 1;
    *other = t != NULL;
    size_t n = strlen(name);
    if (t == NULL || (size_t)(line + len - t) <= n || memcmp(t, name, n) != 0 || t[n] != '\'') return false;
    *other = false;
    return true;
}

static bool properties_line(const char *line, size_t len, const char *name, bool *mine) {
    static const char tag[] = "Function properties for ";
    for (size_t i = 0; i + sizeof tag - 1 <= len; i++) {
        if (memcmp(line + i, tag, sizeof tag - 1) != 0) continue;
        const char *f = line + i + sizeof tag - 1;
        size_t flen = (size_t)(line + len - f);
        while (flen > 0 && (f[flen - 1] == '\n' || f[flen - 1] == '\r' || f[flen - 1] == ' ')) flen--;
        *mine = flen == strlen(name) && memcmp(f, name, flen) == 0;
        return true;
    }
    return false;
}

bool gl_ptxas_info_parse(const char *log, const char *name, gl_ptxas_info *out) {
    gl_ptxas_info r = {-1, -1, -1, -1, -1, -1, -1, {0}};
    for (int b = 0; b < GL_CUBIN_BANKS; b++) r.cmem[b] = -1;
    bool inside = false, found = false, props_mine = false;
    for (const char *line = log; line && *line;) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        bool other;
        if (entry_line(line, len, name, &other)) inside = found = true;
        else if (other) inside = false;
        else if (inside && properties_line(line, len, name, &props_mine)) {
        } else if (inside && props_mine && number_before(line, len, "bytes stack frame") >= 0) {
            r.stack_frame = number_before(line, len, "bytes stack frame");
            r.spill_stores = number_before(line, len, "bytes spill stores");
            r.spill_loads = number_before(line, len, "bytes spill loads");
            props_mine = false;
        } else if (inside && number_before(line, len, "registers") >= 0) {
            r.regs = number_before(line, len, "registers");
            r.barriers = number_before(line, len, "barriers");
            r.smem = number_before(line, len, "bytes smem");
            r.cumulative_stack = number_before(line, len, "bytes cumulative stack size");
            read_cmem(line, len, &r);
        }
        line = eol ? eol + 1 : NULL;
    }
    if (found) *out = r;
    return found;
}
