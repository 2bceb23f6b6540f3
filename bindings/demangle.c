/*
 * demangle.c — reads a kernel's mangled entry name back into C++ (demangle.h).
 *
 * A recursive-descent reader of the part of the Itanium C++ ABI mangling a __global__ function
 * can have:
 *     _Z <name> [<return type> when the name ends in template arguments] <parameter types>
 * Names are plain, nested in namespaces (N ... E) or std::; types are builtins, pointers,
 * references, cv-qualified types, class/enum names, template parameters (T_) and substitutions
 * (S_: an earlier component, numbered in the order the ABI lists them). Anything else (local
 * names, operators, function and array types, expressions) is refused: the caller then keeps the
 * mangled name. Every string is built in one arena of fixed size and every recursion counts its
 * depth, so no input makes the reader use unbounded memory or stack.
 */
#include "demangle.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MANGLED 16384 /* longer names are refused rather than read */
#define ARENA_BYTES 65536
#define MAX_SUBS 512      /* substitution candidates */
#define MAX_ARGS 64       /* arguments of one template-argument list, packs expanded */
#define MAX_PACKED 256    /* elements of all argument packs of the function */
#define MAX_PARAMS 1024
#define MAX_DEPTH 64

/* A template argument of the function: one text, or a pack of `count` texts from packed[first]. */
typedef struct targ {
    const char *text; /* NULL for a pack */
    int first, count;
} targ;

typedef struct reader {
    const char *p, *end;
    char *arena;
    size_t used;
    const char *subs[MAX_SUBS]; /* NULL entries stand for packs, which no substitution may name */
    int nsubs;
    targ targs[MAX_ARGS];       /* the function's own template arguments, for T_ */
    int ntargs;
    const char *packed[MAX_PACKED];
    int npacked;
    int depth;
    bool bad;
} reader;

static const char *refuse(reader *r) {
    r->bad = true;
    return NULL;
}

static bool refused(reader *r) {
    r->bad = true;
    return false;
}

static bool at(const reader *r, char c) { return r->p < r->end && *r->p == c; }

static bool at2(const reader *r, char c0, char c1) {
    return r->end - r->p >= 2 && r->p[0] == c0 && r->p[1] == c1;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* ---- the arena ---------------------------------------------------------------------------- */
/* Appends len bytes and a NUL; returns where they start, or NULL when the arena is full. */
static char *arena_copy(reader *r, const char *s, size_t len) {
    if (r->bad || len >= ARENA_BYTES - r->used) return (char *)refuse(r);
    char *dst = r->arena + r->used;
    memcpy(dst, s, len);
    dst[len] = '\0';
    r->used += len + 1;
    return dst;
}

/* The concatenation of up to four strings (NULL ones are skipped) as one new string. */
static const char *cat(reader *r, const char *a, const char *b, const char *c, const char *d) {
    const char *parts[4] = {a, b, c, d};
    size_t start = r->used, total = 0;
    for (int i = 0; i < 4; i++) total += parts[i] ? strlen(parts[i]) : 0;
    if (r->bad || total >= ARENA_BYTES - r->used) return refuse(r);
    for (int i = 0; i < 4; i++) {
        if (parts[i] == NULL) continue;
        size_t n = strlen(parts[i]);
        memcpy(r->arena + r->used, parts[i], n); /* parts lie before `used`: no overlap */
        r->used += n;
    }
    r->arena[r->used++] = '\0';
    return r->arena + start;
}

/* texts[0..n-1] joined by ", " */
static const char *join(reader *r, const char *const *texts, int n) {
    size_t start = r->used;
    for (int i = 0; i < n; i++) {
        size_t len = strlen(texts[i]);
        if (r->bad || len + 3 >= ARENA_BYTES - r->used) return refuse(r);
        if (i) {
            memcpy(r->arena + r->used, ", ", 2);
            r->used += 2;
        }
        memcpy(r->arena + r->used, texts[i], len);
        r->used += len;
    }
    if (r->bad || r->used >= ARENA_BYTES) return refuse(r);
    r->arena[r->used++] = '\0';
    return r->arena + start;
}

static void add_candidate(reader *r, const char *text) {
    if (r->nsubs >= MAX_SUBS) {
        refuse(r);
        return;
    }
    r->subs[r->nsubs++] = text;
}

/* ---- numbers and names -------------------------------------------------------------------- */
/* A decimal number of at most 6 digits (no name or value here is longer). */
static bool read_decimal(reader *r, long *out) {
    long v = 0;
    int digits = 0;
    while (r->p < r->end && is_digit(*r->p)) {
        if (++digits > 6) return false;
        v = v * 10 + (*r->p++ - '0');
    }
    *out = v;
    return digits > 0;
}

static bool is_ident_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '_' || c == '$';
}

/* <source-name> ::= <length> <identifier> */
static const char *source_name(reader *r) {
    long len;
    if (!read_decimal(r, &len) || len <= 0 || len > r->end - r->p) return refuse(r);
    const char *id = r->p;
    for (long i = 0; i < len; i++)
        if (!is_ident_char(id[i])) return refuse(r);
    r->p += len;
    if (len >= 10 && memcmp(id, "_GLOBAL__N", 10) == 0) return cat(r, "(anonymous namespace)", NULL, NULL, NULL);
    return arena_copy(r, id, (size_t)len);
}

/* <seq-id> _ after S: S_ is candidate 0, S<base 36>_ is candidate n + 1. */
static const char *substitution(reader *r) {
    static const struct { char code; const char *name; } std_names[] = {
        {'a', "std::allocator"}, {'b', "std::basic_string"}, {'s', "std::string"},
        {'i', "std::istream"},   {'o', "std::ostream"},      {'d', "std::iostream"}};
    r->p++; /* S */
    for (size_t i = 0; i < sizeof std_names / sizeof std_names[0]; i++)
        if (at(r, std_names[i].code)) {
            r->p++;
            return std_names[i].name;
        }
    long index = 0;
    if (!at(r, '_')) {
        long v = 0;
        int digits = 0;
        while (r->p < r->end && !at(r, '_')) {
            char c = *r->p++;
            int d = is_digit(c) ? c - '0' : (c >= 'A' && c <= 'Z') ? c - 'A' + 10 : -1;
            if (d < 0 || ++digits > 4) return refuse(r);
            v = v * 36 + d;
        }
        index = v + 1;
    }
    if (!at(r, '_') || index >= r->nsubs || r->subs[index] == NULL) return refuse(r);
    r->p++;
    return r->subs[index];
}

/* <template-param> ::= T_ | T <number> _ : the function's template argument it names. */
static const targ *template_param(reader *r) {
    r->p++; /* T */
    long index = 0;
    if (!at(r, '_')) {
        long v;
        if (!read_decimal(r, &v)) return (const targ *)refuse(r);
        index = v + 1;
    }
    if (!at(r, '_') || index >= r->ntargs) return (const targ *)refuse(r);
    r->p++;
    return &r->targs[index];
}

/* ---- types ---------------------------------------------------------------------------------- */
static const char *type(reader *r);
static const char *template_args(reader *r, targ *record, int *nrecord);

static const char *builtin_type(char code) {
    switch (code) {
    case 'v': return "void";
    case 'w': return "wchar_t";
    case 'b': return "bool";
    case 'c': return "char";
    case 'a': return "signed char";
    case 'h': return "unsigned char";
    case 's': return "short";
    case 't': return "unsigned short";
    case 'i': return "int";
    case 'j': return "unsigned int";
    case 'l': return "long";
    case 'm': return "unsigned long";
    case 'x': return "long long";
    case 'y': return "unsigned long long";
    case 'n': return "__int128";
    case 'o': return "unsigned __int128";
    case 'f': return "float";
    case 'd': return "double";
    case 'e': return "long double";
    case 'g': return "__float128";
    default: return NULL;
    }
}

/* D-prefixed builtins; Dp (pack expansion) is read where parameters are. */
static const char *d_builtin(reader *r) {
    static const struct { const char *code; const char *name; } names[] = {
        {"Dh", "half"}, {"DF16_", "_Float16"}, {"Dn", "decltype(nullptr)"},
        {"Ds", "char16_t"}, {"Di", "char32_t"}, {"Du", "char8_t"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t n = strlen(names[i].code);
        if ((size_t)(r->end - r->p) >= n && memcmp(r->p, names[i].code, n) == 0) {
            r->p += n;
            return names[i].name;
        }
    }
    return refuse(r);
}

/* "const float" for a named type, "float* const" for a pointer or reference */
static const char *qualified(reader *r, const char *inner, const char *quals) {
    size_t n = strlen(inner);
    bool indirect = n > 0 && (inner[n - 1] == '*' || inner[n - 1] == '&');
    return indirect ? cat(r, inner, " ", quals, NULL) : cat(r, quals, " ", inner, NULL);
}

/* <CV-qualifiers> <type>: one candidate for the qualified type (not one per qualifier) */
static const char *cv_type(reader *r) {
    bool restrict_ = at(r, 'r');
    r->p += restrict_;
    bool volatile_ = at(r, 'V');
    r->p += volatile_;
    bool const_ = at(r, 'K');
    r->p += const_;
    const char *inner = type(r);
    if (inner == NULL) return NULL;
    const char *quals = cat(r, const_ ? "const" : NULL, const_ && volatile_ ? " " : NULL,
                            volatile_ ? "volatile" : NULL, NULL);
    if (quals && restrict_) quals = cat(r, quals, *quals ? " " : NULL, "__restrict__", NULL);
    const char *t = quals ? qualified(r, inner, quals) : NULL;
    if (t) add_candidate(r, t);
    return t;
}

/* A name followed by template arguments: the template's name is a candidate, then the whole. */
static const char *with_template_args(reader *r, const char *name, bool name_is_candidate) {
    if (name_is_candidate) add_candidate(r, name);
    const char *args = template_args(r, NULL, NULL);
    return args ? cat(r, name, args, NULL, NULL) : NULL;
}

static const char *nested_name(reader *r, targ *record, int *nrecord, bool *templated);

/* <class-enum-type>: a plain, std:: or nested name, or a substitution, maybe with template
 * arguments. Adds the type itself as a candidate unless it is a bare substitution. */
static const char *class_type(reader *r) {
    const char *t;
    if (at(r, 'N')) {
        bool templated;
        t = nested_name(r, NULL, NULL, &templated);
    } else if (at2(r, 'S', 't')) {
        r->p += 2;
        const char *n = source_name(r);
        t = n ? cat(r, "std::", n, NULL, NULL) : NULL;
        if (t && at(r, 'I')) t = with_template_args(r, t, true);
    } else if (at(r, 'S')) {
        t = substitution(r);
        if (t && !at(r, 'I')) return t; /* already a candidate */
        if (t) t = with_template_args(r, t, false);
    } else {
        t = source_name(r);
        if (t && at(r, 'I')) t = with_template_args(r, t, true);
    }
    if (t) add_candidate(r, t);
    return t;
}

static const char *type(reader *r) {
    if (r->bad || r->p >= r->end) return refuse(r);
    if (++r->depth > MAX_DEPTH) return refuse(r);
    const char *t = NULL, *inner;
    char c = *r->p;
    const char *builtin = builtin_type(c);
    if (builtin) {
        r->p++;
        t = builtin;
    } else if (c == 'r' || c == 'V' || c == 'K') {
        t = cv_type(r);
    } else if (c == 'P' || c == 'R' || c == 'O') {
        r->p++;
        inner = type(r);
        t = inner ? cat(r, inner, c == 'P' ? "*" : c == 'R' ? "&" : "&&", NULL, NULL) : NULL;
        if (t) add_candidate(r, t);
    } else if (c == 'D') {
        t = d_builtin(r);
    } else if (c == 'T') {
        const targ *a = template_param(r);
        /* a template template parameter with arguments, or a pack outside Dp: not read */
        if (a && (a->text == NULL || at(r, 'I'))) t = refuse(r);
        else if (a) t = a->text;
        if (t) add_candidate(r, t);
    } else if (is_digit(c) || c == 'N' || c == 'S') {
        t = class_type(r);
    } else {
        t = refuse(r);
    }
    r->depth--;
    return r->bad ? NULL : t;
}

/* ---- template arguments -------------------------------------------------------------------- */
/* L <type> <value> E: "2", "-3", "2u", "true", "(char)97"; L <enum type> <value> E: "(Mode)1" */
static const char *literal(reader *r) {
    r->p++; /* L */
    const char *cast = NULL, *suffix = "";
    char code = '\0';
    if (r->p < r->end) code = *r->p;
    if (at2(r, 'D', 'n')) {
        r->p += 2;
        if (!at(r, 'E')) return refuse(r);
        r->p++;
        return "nullptr";
    }
    if (is_digit(code) || code == 'N' || code == 'S') { /* an enum's type: a candidate like any */
        cast = class_type(r);
        if (cast == NULL) return NULL;
    } else {
        switch (code) {
        case 'b': case 'i': break;
        case 'j': suffix = "u"; break;
        case 'l': suffix = "l"; break;
        case 'm': suffix = "ul"; break;
        case 'x': suffix = "ll"; break;
        case 'y': suffix = "ull"; break;
        case 'c': case 'a': case 'h': case 's': case 't': cast = builtin_type(code); break;
        default: return refuse(r);
        }
        r->p++;
    }
    bool negative = at(r, 'n');
    if (negative) r->p++;
    const char *digits = r->p;
    long v;
    if (!read_decimal(r, &v) || !at(r, 'E')) return refuse(r);
    size_t ndigits = (size_t)(r->p - digits);
    r->p++; /* E */
    if (code == 'b') {
        if (negative || v > 1) return refuse(r);
        return v ? "true" : "false";
    }
    const char *number = arena_copy(r, digits, ndigits);
    if (number == NULL) return NULL;
    if (cast) return cat(r, "(", cast, negative ? ")-" : ")", number);
    return cat(r, negative ? "-" : NULL, number, suffix, NULL);
}

/* One template argument into *out: a type, a literal, X T_ E or a pack (J ... E). */
static bool template_arg(reader *r, targ *out, bool in_pack) {
    out->text = NULL;
    out->first = out->count = 0;
    if (at(r, 'L')) {
        out->text = literal(r);
    } else if (at(r, 'X')) { /* an expression: only one that names a template argument is read */
        r->p++;
        const targ *a = at(r, 'T') ? template_param(r) : NULL;
        if (a == NULL || a->text == NULL || !at(r, 'E')) return refused(r);
        r->p++;
        out->text = a->text;
    } else if (at(r, 'J')) {
        if (in_pack) return refused(r); /* a pack inside a pack */
        r->p++;
        out->first = r->npacked;
        while (!r->bad && !at(r, 'E')) {
            targ element;
            if (!template_arg(r, &element, true)) break;
            if (r->npacked >= MAX_PACKED) return refused(r);
            r->packed[r->npacked++] = element.text;
            out->count++;
        }
        if (r->bad || !at(r, 'E')) return refused(r);
        r->p++;
        return true;
    } else {
        out->text = type(r);
    }
    return out->text != NULL;
}

/* I <template-arg>+ E -> "<2, float>" (a pack's elements in place). With `record`, the
 * arguments are kept as the function's (for T_ in its parameter types). */
static const char *template_args(reader *r, targ *record, int *nrecord) {
    if (++r->depth > MAX_DEPTH) return refuse(r);
    r->p++; /* I */
    targ args[MAX_ARGS];
    const char *texts[MAX_ARGS];
    int nargs = 0, ntexts = 0;
    while (!r->bad && !at(r, 'E')) {
        if (nargs >= MAX_ARGS || !template_arg(r, &args[nargs], false)) return refuse(r);
        const targ *a = &args[nargs++];
        if (a->text) {
            if (ntexts >= MAX_ARGS) return refuse(r); /* packs before it took the room */
            texts[ntexts++] = a->text;
        } else {
            for (int i = 0; i < a->count; i++) {
                if (ntexts >= MAX_ARGS) return refuse(r);
                texts[ntexts++] = r->packed[a->first + i];
            }
        }
    }
    if (r->bad || !at(r, 'E') || nargs == 0) return refuse(r);
    r->p++;
    r->depth--;
    if (record) {
        memcpy(record, args, (size_t)nargs * sizeof args[0]);
        *nrecord = nargs;
    }
    const char *list = join(r, texts, ntexts);
    return list ? cat(r, "<", list, ">", NULL) : NULL;
}

/* ---- names ---------------------------------------------------------------------------------- */
/* N <prefix>... E: every prefix but the whole name is a candidate (a template's name before its
 * arguments counts as a prefix); a leading substitution or std:: is not one again. With
 * `record`, the last template arguments are the function's. */
static const char *nested_name(reader *r, targ *record, int *nrecord, bool *templated) {
    r->p++; /* N */
    if (at(r, 'r') || at(r, 'V') || at(r, 'K') || at(r, 'R') || at(r, 'O'))
        return refuse(r); /* a member function's qualifiers: no kernel has them */
    const char *cur = NULL;
    bool cur_is_candidate = false;
    *templated = false;
    while (!r->bad && !at(r, 'E')) {
        if (cur == NULL && at2(r, 'S', 't')) {
            r->p += 2;
            cur = "std";
            cur_is_candidate = true; /* already counted: std:: is never a candidate */
        } else if (cur == NULL && at(r, 'S')) {
            cur = substitution(r);
            cur_is_candidate = true;
        } else if (cur != NULL && at(r, 'I')) {
            const char *args = template_args(r, record, nrecord);
            cur = args ? cat(r, cur, args, NULL, NULL) : NULL;
            cur_is_candidate = false;
            *templated = true;
        } else if (r->p < r->end && is_digit(*r->p)) {
            const char *part = source_name(r);
            cur = part == NULL ? NULL : cur ? cat(r, cur, "::", part, NULL) : part;
            cur_is_candidate = false;
            *templated = false;
        } else {
            return refuse(r);
        }
        if (cur == NULL) return refuse(r);
        if (!at(r, 'E') && !cur_is_candidate) add_candidate(r, cur);
    }
    if (r->bad || cur == NULL || !at(r, 'E')) return refuse(r);
    r->p++;
    return cur;
}

/* The function's <name>; *templated when it ends in template arguments (then a return type
 * comes before the parameters). */
static const char *function_name(reader *r, bool *templated) {
    *templated = false;
    if (at(r, 'N')) return nested_name(r, r->targs, &r->ntargs, templated);
    const char *name;
    if (at2(r, 'S', 't')) {
        r->p += 2;
        const char *n = source_name(r);
        name = n ? cat(r, "std::", n, NULL, NULL) : NULL;
    } else if (r->p < r->end && is_digit(*r->p)) {
        name = source_name(r);
    } else {
        return refuse(r); /* local names (Z), operators, constructors: no kernel is one */
    }
    if (name == NULL || !at(r, 'I')) return name;
    add_candidate(r, name); /* <unscoped-template-name> */
    *templated = true;
    const char *args = template_args(r, r->targs, &r->ntargs);
    return args ? cat(r, name, args, NULL, NULL) : NULL;
}

/* Dp T_: a pack expansion of one of the function's template argument packs, read as the pack's
 * types one by one. Returns how many it appended to params, or -1. */
static int pack_expansion(reader *r, const char **params, int n) {
    r->p += 2; /* Dp */
    const targ *a = at(r, 'T') ? template_param(r) : NULL;
    if (a == NULL || a->text != NULL || n + a->count > MAX_PARAMS) {
        refuse(r);
        return -1;
    }
    add_candidate(r, NULL); /* the template parameter */
    add_candidate(r, NULL); /* the expansion */
    for (int i = 0; i < a->count; i++) params[n + i] = r->packed[a->first + i];
    return a->count;
}

/* The parameter types after the name (and return type): "v" alone is none. */
static int parameters(reader *r, const char **params) {
    if (r->end - r->p == 1 && *r->p == 'v') {
        r->p++;
        return 0;
    }
    int n = 0;
    bool read_any = false; /* an empty pack expansion is still a parameter list */
    while (!r->bad && r->p < r->end) {
        read_any = true;
        if (at2(r, 'D', 'p')) {
            int added = pack_expansion(r, params, n);
            if (added < 0) return -1;
            n += added;
            continue;
        }
        const char *t = type(r);
        if (t == NULL || strcmp(t, "void") == 0 || n >= MAX_PARAMS) {
            refuse(r);
            return -1;
        }
        params[n++] = t;
    }
    return r->bad || !read_any ? -1 : n;
}

/* name\0type\0type\0... into out; false when it does not fit */
static bool write_result(char *out, size_t cap, const char *name, const char *const *params, int n) {
    size_t used = 0;
    for (int i = -1; i < n; i++) {
        const char *s = i < 0 ? name : params[i];
        size_t len = strlen(s);
        if (len >= cap - used) return false;
        memcpy(out + used, s, len + 1);
        used += len + 1;
    }
    return true;
}

int gl_demangle(const char *mangled, char *out, size_t cap) {
    if (out == NULL || cap == 0) return -1;
    out[0] = '\0';
    if (mangled == NULL) return -1;
    size_t len = strnlen(mangled, MAX_MANGLED + 1);
    if (len < 3 || len > MAX_MANGLED || mangled[0] != '_' || mangled[1] != 'Z') return -1;
    reader *r = calloc(1, sizeof *r);
    char *arena = malloc(ARENA_BYTES);
    const char **params = malloc(MAX_PARAMS * sizeof *params);
    int n = -1;
    if (r && arena && params) {
        r->arena = arena;
        r->p = mangled + 2;
        r->end = mangled + len;
        bool templated;
        const char *name = function_name(r, &templated);
        if (name && templated) (void)type(r); /* the return type: read for its candidates */
        if (name && !r->bad) n = parameters(r, params);
        if (n >= 0 && (r->p != r->end || !write_result(out, cap, name, params, n))) n = -1;
    }
    if (n < 0) out[0] = '\0';
    free(params);
    free(arena);
    free(r);
    return n;
}
