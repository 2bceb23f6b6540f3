/*
 * ptx.c — reads one kernel's parameter list from PTX text.
 *
 * Only the part of the grammar a signature needs is understood:
 *     [.visible|.weak|.extern] .entry NAME [( .param ATTRS TYPE NAME[N], ... )]
 * where ATTRS are .align N, .ptr and state spaces. Comments, strings (.file directives) and
 * everything outside entry headers are skipped. Malformed text returns -1 with a message;
 * the parser never reads past `len` and never trusts a number it has not range-checked.
 */
#include "ptx.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The largest parameter we accept: CUDA allows 32764 bytes of parameters in total, so
 * anything bigger is malformed text rather than a real kernel. */
#define PTX_MAX_PARAM_BYTES (1u << 20)
#define PTX_MAX_ALIGN 4096u

typedef struct lexer {
    const char *s;
    size_t len, pos;
} lexer;

typedef struct token {
    const char *text; /* points into the PTX; not NUL-terminated */
    size_t len;       /* 0 at end of input */
} token;

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
static bool is_punct(char c) { return strchr("(),;[]{}:<>=+-*@!", c) != NULL && c != '\0'; }

/* Skips whitespace and comments. An unterminated block comment ends the input. */
static void skip_blank(lexer *lx) {
    while (lx->pos < lx->len) {
        char c = lx->s[lx->pos];
        if (is_space(c)) {
            lx->pos++;
        } else if (c == '/' && lx->pos + 1 < lx->len && lx->s[lx->pos + 1] == '/') {
            while (lx->pos < lx->len && lx->s[lx->pos] != '\n') lx->pos++;
        } else if (c == '/' && lx->pos + 1 < lx->len && lx->s[lx->pos + 1] == '*') {
            lx->pos += 2;
            while (lx->pos + 1 < lx->len && !(lx->s[lx->pos] == '*' && lx->s[lx->pos + 1] == '/'))
                lx->pos++;
            lx->pos = lx->pos + 1 < lx->len ? lx->pos + 2 : lx->len;
        } else {
            return;
        }
    }
}

/* A token is one punctuation character, a quoted string, or a run of anything else. */
static token next_token(lexer *lx) {
    skip_blank(lx);
    token t = {lx->s + lx->pos, 0};
    if (lx->pos >= lx->len) return t;
    size_t start = lx->pos;
    char c = lx->s[start];
    if (is_punct(c)) {
        lx->pos++;
    } else if (c == '"') {
        lx->pos++;
        while (lx->pos < lx->len && lx->s[lx->pos] != '"' && lx->s[lx->pos] != '\n') lx->pos++;
        if (lx->pos < lx->len && lx->s[lx->pos] == '"') lx->pos++;
    } else {
        while (lx->pos < lx->len) {
            char d = lx->s[lx->pos];
            if (is_space(d) || is_punct(d) || d == '"' || d == '\0') break;
            if (d == '/' && lx->pos + 1 < lx->len && (lx->s[lx->pos + 1] == '/' || lx->s[lx->pos + 1] == '*'))
                break;
            lx->pos++;
        }
        if (lx->pos == start) lx->pos++; /* a stray NUL or slash: a token of its own */
    }
    t.len = lx->pos - start;
    return t;
}

static bool tok_is(token t, const char *word) {
    size_t n = strlen(word);
    return t.len == n && memcmp(t.text, word, n) == 0;
}

static void set_err(char *err, size_t errlen, const char *fmt, ...) {
    if (err == NULL || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* Tokens quoted in messages are cut to 64 characters. */
static int tok_width(token t) { return t.len > 64 ? 64 : (int)t.len; }

/* The value of digit c in base `base`, or -1. */
static int digit_value(char c, unsigned base) {
    int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    return v >= 0 && (unsigned)v < base ? v : -1;
}

/* A PTX integer literal that fits in 32 bits: decimal, 0x hexadecimal, 0b binary, or octal with a
 * leading 0 (as ptxas reads `010`: eight), with an optional U suffix; false otherwise. */
static bool tok_number(token t, unsigned *out) {
    size_t len = t.len, i = 0;
    if (len > 0 && (t.text[len - 1] == 'U' || t.text[len - 1] == 'u')) len--;
    if (len == 0 || len > 40) return false;
    unsigned base = 10;
    if (len > 2 && t.text[0] == '0' && (t.text[1] == 'x' || t.text[1] == 'X')) base = 16, i = 2;
    else if (len > 2 && t.text[0] == '0' && (t.text[1] == 'b' || t.text[1] == 'B')) base = 2, i = 2;
    else if (len > 1 && t.text[0] == '0') base = 8, i = 1;
    uint64_t v = 0;
    for (; i < len; i++) {
        int d = digit_value(t.text[i], base);
        if (d < 0) return false;
        v = v * base + (uint64_t)d;
        if (v > UINT32_MAX) return false;
    }
    *out = (unsigned)v;
    return true;
}

typedef struct ptx_type {
    const char *name;
    unsigned size;
} ptx_type;

static const ptx_type types[] = {
    {".u8", 1},  {".u16", 2},  {".u32", 4},  {".u64", 8},     {".s8", 1},    {".s16", 2},
    {".s32", 4}, {".s64", 8},  {".b8", 1},   {".b16", 2},     {".b32", 4},   {".b64", 8},
    {".b128", 16}, {".f16", 2}, {".f16x2", 4}, {".bf16", 2}, {".bf16x2", 4}, {".f32", 4},
    {".f64", 8}, {".pred", 1},
};

static const ptx_type *find_type(token t) {
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (tok_is(t, types[i].name)) return &types[i];
    return NULL;
}

/* Attributes a .param may carry before its type that do not change its layout. */
static bool is_layout_neutral(token t) {
    static const char *const words[] = {".ptr", ".global", ".const", ".shared", ".local",
                                        ".reg", ".ptx", NULL};
    for (int i = 0; words[i]; i++)
        if (tok_is(t, words[i])) return true;
    return false;
}

static bool is_power_of_two(unsigned v) { return v != 0 && (v & (v - 1)) == 0; }

/* Parses one `.param ...` declaration (the .param token already read). */
static bool parse_param(lexer *lx, gl_param *p, token *name_out, int index, char *err, size_t errlen) {
    unsigned align = 0;
    const ptx_type *type = NULL;
    bool pointer = false; /* after .ptr, .align is the pointed-to memory's (PTX ISA, kernel parameter
                             attributes), not the parameter's */
    token t;
    /* attributes and the type, in any order, until the name */
    for (;;) {
        t = next_token(lx);
        if (t.len == 0) {
            set_err(err, errlen, "parameter %d: unexpected end of PTX", index);
            return false;
        }
        if (tok_is(t, ".align")) {
            token n = next_token(lx);
            unsigned value = 0;
            if (!tok_number(n, &value) || !is_power_of_two(value) || (!pointer && value > PTX_MAX_ALIGN)) {
                set_err(err, errlen, "parameter %d: bad .align value '%.*s'", index, tok_width(n), n.text);
                return false;
            }
            if (!pointer) align = value;
        } else if (tok_is(t, ".ptr")) {
            pointer = true;
        } else if (find_type(t)) {
            if (type) {
                set_err(err, errlen, "parameter %d: two types ('%s' and '%.*s')", index, type->name + 1,
                        tok_width(t), t.text);
                return false;
            }
            type = find_type(t);
        } else if (is_layout_neutral(t)) {
            continue;
        } else if (t.text[0] == '.') {
            set_err(err, errlen, "parameter %d: unsupported parameter attribute '%.*s'", index,
                    tok_width(t), t.text);
            return false;
        } else {
            break; /* the name */
        }
    }
    if (type == NULL) {
        set_err(err, errlen, "parameter %d: no type before its name '%.*s'", index, tok_width(t), t.text);
        return false;
    }
    if (is_punct(t.text[0]) || t.text[0] == '"') {
        set_err(err, errlen, "parameter %d: expected a name, got '%.*s'", index, tok_width(t), t.text);
        return false;
    }
    *name_out = t;
    /* optional array dimensions: NAME[N][M] */
    uint64_t count = 1;
    size_t mark = lx->pos;
    token b = next_token(lx);
    while (tok_is(b, "[")) {
        unsigned n;
        token num = next_token(lx);
        token close = next_token(lx);
        if (!tok_number(num, &n) || n == 0 || !tok_is(close, "]")) {
            set_err(err, errlen, "parameter %d: bad array size '%.*s'", index, tok_width(num), num.text);
            return false;
        }
        count *= n;
        if (count * type->size > PTX_MAX_PARAM_BYTES) {
            set_err(err, errlen, "parameter %d: larger than %u bytes", index, PTX_MAX_PARAM_BYTES);
            return false;
        }
        mark = lx->pos;
        b = next_token(lx);
    }
    lx->pos = mark; /* the separator is read by the caller */
    memset(p, 0, sizeof *p);
    snprintf(p->kind, sizeof p->kind, "%s", type->name + 1);
    p->size = (unsigned)(count * type->size);
    p->align = align ? align : type->size;
    return true;
}

/* ------------------------------------------------------------------------------------------
 * What the body does with its large parameters (see GL_PARAM_COPIED).
 * ------------------------------------------------------------------------------------------ */
#define BIG_PARAM_MIN 64u
#define BIG_PARAM_MAX 4096u
#define BIG_PARAMS 16

typedef struct big_param {
    int index;                          /* in the entry's parameter list */
    token name;
    unsigned size;
    bool addressed;                     /* used other than as the address of an ld.param */
    uint64_t loaded[BIG_PARAM_MAX / 64]; /* one bit per byte read by ld.param */
} big_param;

/* Bytes one `ld.param[.vN].TYPE` reads, or 0 when the mnemonic is not such a load. */
static unsigned load_width(token insn) {
    if (insn.len < 9 || memcmp(insn.text, "ld.param.", 9) != 0) return 0;
    unsigned lanes = 1, elem = 0;
    size_t i = 8;
    while (i < insn.len) {
        size_t j = i + 1;
        while (j < insn.len && insn.text[j] != '.') j++;
        token part = {insn.text + i, j - i};
        if (tok_is(part, ".v2")) lanes = 2;
        else if (tok_is(part, ".v4")) lanes = 4;
        else if (tok_is(part, ".v8")) lanes = 8;
        else if (find_type(part)) elem = find_type(part)->size;
        i = j;
    }
    return lanes * elem;
}

static void mark_loaded(big_param *b, unsigned off, unsigned width) {
    for (unsigned k = off; k < off + width && k < b->size; k++) b->loaded[k / 64] |= 1ull << (k % 64);
}

static bool fully_loaded(const big_param *b) {
    for (unsigned k = 0; k < b->size; k++)
        if (!(b->loaded[k / 64] & (1ull << (k % 64)))) return false;
    return true;
}

/* One mention of big parameter b in the body; prev is the token before it, insn the current
 * instruction's mnemonic. Only `ld.param... [NAME]` or `[NAME+K]` counts as a read. */
static void note_use(lexer *lx, big_param *b, token prev, token insn) {
    unsigned width = load_width(insn);
    if (!tok_is(prev, "[") || width == 0) {
        b->addressed = true;
        return;
    }
    size_t mark = lx->pos;
    unsigned off = 0;
    token t = next_token(lx);
    if (tok_is(t, "+")) {
        token n = next_token(lx);
        if (!tok_number(n, &off)) {
            b->addressed = true;
            return;
        }
    } else {
        lx->pos = mark;
    }
    mark_loaded(b, off, width);
}

/* Scans the body that follows the parameter list (up to its matching brace) and sets
 * GL_PARAM_COPIED on the big parameters it only copies. */
static void analyse_body(lexer *lx, big_param *big, int nbig, gl_param *out, int max) {
    if (nbig == 0) return;
    token t;
    do { /* performance directives (.maxntid 128, 1, 1) come before the body */
        t = next_token(lx);
    } while (t.len && !tok_is(t, "{") && !tok_is(t, ";"));
    if (!tok_is(t, "{")) return;
    int depth = 1, vector = 0; /* block braces; operand braces ({%r1, %r2}) inside a statement */
    bool at_start = true;
    token insn = {"", 0}, prev = t;
    while (depth > 0) {
        t = next_token(lx);
        if (t.len == 0) return; /* unterminated: claim nothing */
        if (!at_start && tok_is(t, "{")) {
            vector++;
        } else if (vector > 0 && tok_is(t, "}")) {
            vector--;
        } else if (tok_is(t, "{") || tok_is(t, "}") || tok_is(t, ";") || tok_is(t, ":")) {
            if (tok_is(t, "{")) depth++;
            else if (tok_is(t, "}")) depth--;
            at_start = true;
        } else if (at_start && tok_is(t, "@")) {
            next_token(lx); /* the predicate register */
        } else if (at_start) {
            insn = t;
            at_start = false;
        } else {
            for (int i = 0; i < nbig; i++)
                if (t.len == big[i].name.len && memcmp(t.text, big[i].name.text, t.len) == 0)
                    note_use(lx, &big[i], prev, insn);
        }
        prev = t;
    }
    for (int i = 0; i < nbig; i++)
        if (!big[i].addressed && fully_loaded(&big[i]) && big[i].index < max)
            out[big[i].index].flags |= GL_PARAM_COPIED;
}

/* Parses the parameter list after the entry name. Returns the count or -1. */
static int parse_entry_params(lexer *lx, const char *entry, gl_param *out, int max, char *err, size_t errlen) {
    size_t mark = lx->pos;
    token t = next_token(lx);
    if (!tok_is(t, "(")) {
        lx->pos = mark; /* `.entry NAME {` — no parameter list */
        return 0;
    }
    int count = 0, nbig = 0;
    big_param big[BIG_PARAMS];
    uint64_t offset = 0;
    t = next_token(lx);
    if (tok_is(t, ")")) return 0;
    for (;;) {
        if (!tok_is(t, ".param")) {
            set_err(err, errlen, "entry '%s': parameter %d: expected .param, got '%.*s'", entry, count,
                    t.len ? tok_width(t) : 3, t.len ? t.text : "EOF");
            return -1;
        }
        gl_param p;
        token name;
        char why[200];
        if (!parse_param(lx, &p, &name, count, why, sizeof why)) {
            set_err(err, errlen, "entry '%s': %s", entry, why);
            return -1;
        }
        offset = (offset + p.align - 1) / p.align * p.align;
        p.offset = (unsigned)offset;
        offset += p.size;
        if (offset > PTX_MAX_PARAM_BYTES) {
            set_err(err, errlen, "entry '%s': parameters larger than %u bytes", entry, PTX_MAX_PARAM_BYTES);
            return -1;
        }
        if (count < max && out) out[count] = p;
        if (out && p.size >= BIG_PARAM_MIN && p.size <= BIG_PARAM_MAX && nbig < BIG_PARAMS) {
            memset(&big[nbig], 0, sizeof big[nbig]);
            big[nbig].index = count;
            big[nbig].name = name;
            big[nbig].size = p.size;
            nbig++;
        }
        count++;
        t = next_token(lx);
        if (tok_is(t, ")")) {
            analyse_body(lx, big, nbig, out, max);
            return count;
        }
        if (!tok_is(t, ",")) {
            set_err(err, errlen, "entry '%s': after parameter %d: expected ',' or ')', got '%.*s'", entry,
                    count - 1, t.len ? tok_width(t) : 3, t.len ? t.text : "EOF");
            return -1;
        }
        t = next_token(lx);
    }
}

/* Appends ", name" to the entry list `list` (capacity cap); once a name does not fit, the
 * list ends with ", ..." and stays as it is. */
static void add_to_list(char *list, size_t cap, size_t *used, token name) {
    if (*used >= cap) return; /* already closed with "..." */
    size_t need = (*used ? 2 : 0) + name.len;
    if (*used + need + 6 > cap) {
        snprintf(list + *used, cap - *used, "%s...", *used ? ", " : "");
        *used = cap;
        return;
    }
    snprintf(list + *used, cap - *used, "%s%.*s", *used ? ", " : "", (int)name.len, name.text);
    *used += need;
}

int gl_ptx_params(const char *ptx, size_t len, const char *entry, gl_param *out, int max,
                  char *err, size_t errlen) {
    if (err && errlen) err[0] = '\0';
    if (ptx == NULL || entry == NULL) {
        set_err(err, errlen, "no PTX or no entry name");
        return -1;
    }
    if (max < 0) max = 0;
    size_t entry_len = strlen(entry);
    lexer lx = {ptx, len, 0};
    char list[160] = "";
    size_t used = 0;
    int nentries = 0;
    for (;;) {
        token t = next_token(&lx);
        if (t.len == 0) break;
        if (!tok_is(t, ".entry")) continue;
        token name = next_token(&lx);
        if (name.len == 0 || is_punct(name.text[0]) || name.text[0] == '.' || name.text[0] == '"') {
            set_err(err, errlen, ".entry without a name");
            return -1;
        }
        if (name.len == entry_len && memcmp(name.text, entry, entry_len) == 0)
            return parse_entry_params(&lx, entry, out, max, err, errlen);
        nentries++;
        add_to_list(list, sizeof list, &used, name);
    }
    if (nentries == 0)
        set_err(err, errlen, "no .entry named '%s' (the PTX has no entries)", entry);
    else
        set_err(err, errlen, "no .entry named '%s' (entries: %s)", entry, list);
    return -1;
}

/* The directives between an entry's parameter list and its body (.maxntid, .reqnctapercluster,
 * .explicitcluster, ...): whether `directive` is one of them. */
bool gl_ptx_entry_has_directive(const char *ptx, size_t len, const char *entry, const char *directive) {
    if (ptx == NULL || entry == NULL) return false;
    size_t entry_len = strlen(entry);
    lexer lx = {ptx, len, 0};
    for (;;) {
        token t = next_token(&lx);
        if (t.len == 0) return false;
        if (!tok_is(t, ".entry")) continue;
        token name = next_token(&lx);
        if (name.len != entry_len || memcmp(name.text, entry, entry_len) != 0) continue;
        int depth = 0; /* the parameter list, if any, then the directives up to the body */
        while ((t = next_token(&lx)).len) {
            if (tok_is(t, "(")) depth++;
            else if (tok_is(t, ")")) depth--;
            else if (depth == 0 && (tok_is(t, "{") || tok_is(t, ";"))) return false;
            else if (depth == 0 && tok_is(t, directive)) return true;
        }
        return false;
    }
}

/* ------------------------------------------------------------------------------------------
 * Name expressions
 * ------------------------------------------------------------------------------------------ */
static bool is_ident_char(char c) {
    return c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

bool gl_name_normalize(const char *name, char *out, size_t cap) {
    size_t n = 0;
    bool space = false;
    for (const char *c = name; *c; c++) {
        if (is_space(*c)) {
            space = true;
            continue;
        }
        if (space && n > 0 && is_ident_char(out[n - 1]) && is_ident_char(*c)) {
            if (n + 1 >= cap) return false;
            out[n++] = ' ';
        }
        space = false;
        if (n + 1 >= cap) return false;
        out[n++] = *c;
    }
    if (cap == 0) return false;
    out[n] = '\0';
    return true;
}
