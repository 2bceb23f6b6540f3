/*
 * declared.c — a kernel's parameters as declared (declared.h): types from the demangled entry
 * name, names (and an extern "C" kernel's types) from the kernel's definition in its source.
 *
 * The source is read as tokens only, never preprocessed: `__global__`, then the function's name
 * before its parameter list, then `{`. Anything this reading cannot be sure of (a second
 * definition of the name, a declarator with parentheses or brackets, a default argument with
 * angle brackets, a parameter count that differs from the PTX's) leaves the declaration out, and
 * messages fall back to the PTX type. Sizes that contradict the PTX drop a declaration too, so a
 * source that does not belong to the binary cannot put wrong names on its parameters.
 */
#include "declared.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "demangle.h"
#include "ptx.h"

#define DEMANGLED_CAP 65536
#define NAME_MAX_BYTES 64      /* a longer parameter name is not kept */
#define MAX_PARAM_TOKENS 48    /* a longer parameter declaration is not read */
#define PAIR_BYTES (GL_DECL_MAX + 1 + NAME_MAX_BYTES + 1)

/* ---- tokens of C++ source ------------------------------------------------------------------ */
typedef struct lexer {
    const char *p, *end;
    bool line_start; /* only blanks since the last newline: a '#' starts a directive */
} lexer;

typedef struct token {
    const char *s;
    size_t len;   /* 0 at the end of the text */
    bool literal; /* a string or character literal */
} token;

static bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c); }
static bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

static bool tok_is(token t, const char *s) { return t.len == strlen(s) && memcmp(t.s, s, t.len) == 0; }
static bool tok_is_ident(token t) { return t.len > 0 && !t.literal && is_ident_start(t.s[0]); }

/* The character after the current one, NUL at the end of the text. */
static char char_after(const lexer *lx) {
    char c = '\0';
    if (lx->p + 1 < lx->end) c = lx->p[1];
    return c;
}

/* To the end of a preprocessor line: a backslash before the newline continues it. */
static void skip_directive(lexer *lx) {
    while (lx->p < lx->end && *lx->p != '\n') {
        if (*lx->p == '\\' && lx->p + 1 < lx->end && lx->p[1] == '\n') lx->p++;
        lx->p++;
    }
}

static void skip_blank(lexer *lx) {
    while (lx->p < lx->end) {
        char c = *lx->p, next = char_after(lx);
        if (c == '\n') {
            lx->line_start = true;
            lx->p++;
        } else if (is_blank(c) || (c == '\\' && next == '\n')) {
            lx->p += c == '\\' ? 2 : 1;
        } else if (c == '/' && next == '/') {
            while (lx->p < lx->end && *lx->p != '\n') lx->p++;
        } else if (c == '/' && next == '*') {
            const char *close = NULL;
            for (const char *q = lx->p + 2; q + 1 < lx->end && !close; q++)
                if (q[0] == '*' && q[1] == '/') close = q;
            lx->p = close ? close + 2 : lx->end;
        } else if (c == '#' && lx->line_start) {
            skip_directive(lx);
        } else {
            return;
        }
    }
}

/* A quoted literal from its opening quote: escapes honoured, ended by its quote or the line. */
static void skip_quoted(lexer *lx) {
    char quote = *lx->p++;
    while (lx->p < lx->end && *lx->p != quote && *lx->p != '\n') lx->p += *lx->p == '\\' && lx->p + 1 < lx->end ? 2 : 1;
    if (lx->p < lx->end && *lx->p == quote) lx->p++;
}

/* R"delim( ... )delim" from its opening quote; an unterminated one ends the text. */
static void skip_raw_string(lexer *lx) {
    const char *d = ++lx->p; /* after the quote */
    while (lx->p < lx->end && *lx->p != '(' && lx->p - d <= 16) lx->p++;
    if (lx->p >= lx->end || *lx->p != '(') {
        lx->p = lx->end;
        return;
    }
    size_t dlen = (size_t)(lx->p - d);
    for (const char *q = lx->p + 1; q < lx->end; q++)
        if (*q == ')' && (size_t)(lx->end - q) > dlen + 1 && memcmp(q + 1, d, dlen) == 0 && q[1 + dlen] == '"') {
            lx->p = q + dlen + 2;
            return;
        }
    lx->p = lx->end;
}

static bool is_exponent(char c) { return c == 'e' || c == 'E' || c == 'p' || c == 'P'; }

static bool is_literal_prefix(const char *s, size_t len, bool *raw) {
    static const char *const prefixes[] = {"L", "u", "U", "u8", "R", "LR", "uR", "UR", "u8R"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strlen(prefixes[i]) == len && memcmp(prefixes[i], s, len) == 0) {
            *raw = s[len - 1] == 'R';
            return true;
        }
    return false;
}

static token next_token(lexer *lx) {
    skip_blank(lx);
    token t = {lx->p, 0, false};
    if (lx->p >= lx->end) return t;
    lx->line_start = false;
    char c = *lx->p, next = char_after(lx);
    bool raw = false;
    if (is_ident_start(c)) {
        while (lx->p < lx->end && is_ident_char(*lx->p)) lx->p++;
        if (lx->p < lx->end && (*lx->p == '"' || *lx->p == '\'') &&
            is_literal_prefix(t.s, (size_t)(lx->p - t.s), &raw)) {
            if (raw && *lx->p == '"') skip_raw_string(lx);
            else skip_quoted(lx);
            t.literal = true;
        }
    } else if (is_digit(c) || (c == '.' && is_digit(next))) {
        while (lx->p < lx->end && (is_ident_char(*lx->p) || *lx->p == '.' || *lx->p == '\'' ||
                                   ((*lx->p == '+' || *lx->p == '-') && is_exponent(lx->p[-1]))))
            lx->p++;
    } else if (c == '"' || c == '\'') {
        skip_quoted(lx);
        t.literal = true;
    } else if ((c == ':' && next == ':') || (c == '&' && next == '&')) {
        lx->p += 2;
    } else if (c == '.' && next == '.' && lx->p + 2 < lx->end && lx->p[2] == '.') {
        lx->p += 3;
    } else {
        lx->p++;
    }
    t.len = (size_t)(lx->p - t.s);
    return t;
}

/* ---- finding the definition ------------------------------------------------------------------ */
/* After an opening parenthesis: to just after its closing one. False at the end of the text. */
static bool skip_parenthesized(lexer *lx) {
    int depth = 1;
    for (token t = next_token(lx); t.len; t = next_token(lx)) {
        if (t.literal) continue;
        if (tok_is(t, "(")) depth++;
        else if (tok_is(t, ")") && --depth == 0) return true;
    }
    return false;
}

/* `__launch_bounds__(256)`, `__cluster_dims__(2,1,1)`, `__attribute__((...))`: a reserved
 * identifier followed by a parenthesized group is a qualifier, never the function's name. */
static bool is_attribute_macro(token t) { return tok_is_ident(t) && t.len > 2 && t.s[0] == '_' && t.s[1] == '_'; }

/* After `__global__`: the function's name, the lexer just after its '('. A template
 * specialization's name is the identifier before its <...>. False when what follows is no
 * function declaration this reader follows. */
static bool function_name(lexer *lx, token *name) {
    token prev = {0}, template_name = {0};
    int angle = 0;
    for (token t = next_token(lx); t.len; t = next_token(lx)) {
        if (t.literal || tok_is(t, ";") || tok_is(t, "{") || tok_is(t, "}") || tok_is(t, "=")) return false;
        if (tok_is(t, "(")) {
            if (is_attribute_macro(prev)) {
                if (!skip_parenthesized(lx)) return false;
                prev = (token){0};
                continue;
            }
            if (angle != 0) return false;
            *name = tok_is_ident(prev) ? prev : tok_is(prev, ">") ? template_name : (token){0};
            return name->len > 0;
        }
        if (tok_is(t, "<")) {
            if (angle == 0) template_name = prev;
            angle++;
        } else if (tok_is(t, ">") && angle > 0) {
            angle--;
        }
        prev = t;
    }
    return false;
}

/* After a parameter list: true when a body follows (attribute macros and noexcept between). */
static bool body_follows(lexer *lx) {
    for (token t = next_token(lx); t.len; t = next_token(lx)) {
        if (tok_is(t, "{")) return true;
        if (tok_is(t, "noexcept")) continue;
        if (!is_attribute_macro(t)) return false;
        lexer peek = *lx;
        if (tok_is(next_token(&peek), "(")) {
            *lx = peek;
            if (!skip_parenthesized(lx)) return false;
        }
    }
    return false;
}

/* The number of __global__ definitions of `name` in the text; *list is the text between the
 * parentheses of the last one. */
static int count_definitions(const char *src, size_t len, const char *name, const char **list_begin,
                             const char **list_end) {
    lexer lx = {src, src + len, true};
    int found = 0;
    for (token t = next_token(&lx); t.len; t = next_token(&lx)) {
        if (!tok_is(t, "__global__")) continue;
        token fname;
        if (!function_name(&lx, &fname)) continue;
        const char *begin = lx.p;
        if (!skip_parenthesized(&lx)) break;
        const char *end = lx.p - 1; /* the closing parenthesis */
        if (!body_follows(&lx) || !tok_is(fname, name)) continue;
        found++;
        *list_begin = begin;
        *list_end = end;
    }
    return found;
}

/* ---- one parameter's declaration ------------------------------------------------------------- */
static bool in_list(token t, const char *const *words, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (tok_is(t, words[i])) return true;
    return false;
}

static const char *const qualifiers[] = {"const", "volatile", "__restrict__", "__restrict", "restrict",
                                         "__grid_constant__", "struct", "class", "enum", "union",
                                         "typename", "register"};
static const char *const type_keywords[] = {"void", "bool", "char", "short", "int", "long", "float", "double",
                                            "signed", "unsigned", "auto", "wchar_t", "char8_t", "char16_t",
                                            "char32_t", "__int128"};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static bool is_qualifier(token t) { return in_list(t, qualifiers, COUNT(qualifiers)); }

/* The last token names the parameter when it is an identifier that is no keyword and the
 * tokens before it still hold a type ("unsigned n", "const T* p"; not "const T", "long long"). */
static bool last_is_name(const token *toks, int n) {
    token last = toks[n - 1];
    if (n < 2 || !tok_is_ident(last) || is_qualifier(last) || in_list(last, type_keywords, COUNT(type_keywords)))
        return false;
    for (int i = 0; i < n - 1; i++)
        if ((tok_is_ident(toks[i]) && !is_qualifier(toks[i])) || tok_is(toks[i], ">")) return true;
    return false;
}

/* "const float* __restrict__", "Vec<float, 4>": tokens joined, pointers and template brackets
 * attached. False when longer than cap - 1. */
static bool join_type(const token *toks, int n, char *out, size_t cap) {
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        token t = toks[i];
        bool attach = i == 0 || tok_is(t, "*") || tok_is(t, "&") || tok_is(t, ",") || tok_is(t, ">") ||
                      tok_is(t, "<") || tok_is(t, "::") || tok_is(toks[i - 1], "<") || tok_is(toks[i - 1], "::");
        if (used + t.len + (attach ? 0 : 1) >= cap) return false;
        if (!attach) out[used++] = ' ';
        memcpy(out + used, t.s, t.len);
        used += t.len;
    }
    out[used] = '\0';
    return true;
}

/* Writes type\0name\0 for one parameter's tokens into pair (PAIR_BYTES): both empty when the
 * declarator is not one this reader follows, the name empty when there is none. */
static void read_declaration(const token *toks, int n, char *pair) {
    pair[0] = '\0';
    pair[GL_DECL_MAX + 1] = '\0';
    if (n > MAX_PARAM_TOKENS) return;
    for (int i = 0; i < n; i++)
        if (toks[i].literal || tok_is(toks[i], "(") || tok_is(toks[i], "[") || tok_is(toks[i], "...") ||
            tok_is(toks[i], "&") || tok_is(toks[i], "&&"))
            return;
    bool named = last_is_name(toks, n);
    int ntype = named ? n - 1 : n;
    if (named && toks[n - 1].len >= NAME_MAX_BYTES) return;
    if (!join_type(toks, ntype, pair, GL_DECL_MAX + 1)) return;
    if (named) {
        memcpy(pair + GL_DECL_MAX + 1, toks[n - 1].s, toks[n - 1].len);
        pair[GL_DECL_MAX + 1 + toks[n - 1].len] = '\0';
    }
}

/* Reads the parameter list between begin and end into pairs (max of them). Returns the count,
 * or -1 when the list cannot be split with certainty or holds more than max. */
static int read_parameter_list(const char *begin, const char *end, char *pairs, int max) {
    lexer lx = {begin, end, false};
    token toks[MAX_PARAM_TOKENS + 1];
    int ntoks = 0, count = 0, depth = 0, angle = 0;
    bool in_default = false, any = false;
    for (token t = next_token(&lx);; t = next_token(&lx)) {
        bool last = t.len == 0;
        if (!last && !t.literal) {
            if (tok_is(t, "(") || tok_is(t, "[") || tok_is(t, "{")) depth++;
            if (tok_is(t, ")") || tok_is(t, "]") || tok_is(t, "}")) depth--;
            if (depth < 0) return -1;
            if (depth == 0 && (tok_is(t, "<") || tok_is(t, ">"))) {
                if (in_default) return -1; /* "n = a < b, ...": a comparison or a template? */
                angle += tok_is(t, "<") ? 1 : -1;
                if (angle < 0) return -1;
            }
        }
        if (last || (depth == 0 && angle == 0 && tok_is(t, ","))) {
            if (last && depth != 0) return -1;
            if (ntoks == 0) {
                if (last && !any) return 0; /* () */
                return -1;
            }
            if (last && count == 0 && ntoks == 1 && tok_is(toks[0], "void")) return 0;
            if (count >= max) return -1;
            read_declaration(toks, ntoks, pairs + (size_t)count * PAIR_BYTES);
            count++;
            if (last) return count;
            ntoks = 0;
            in_default = false;
            continue;
        }
        any = true;
        if (depth == 0 && tok_is(t, "=")) in_default = true;
        if (in_default) continue;
        if (ntoks <= MAX_PARAM_TOKENS) toks[ntoks++] = t; /* one past the limit marks it too long */
    }
}

/* ---- checking a type against the PTX ----------------------------------------------------------- */
static const struct { const char *type; unsigned size; } known_sizes[] = {
    {"bool", 1}, {"char", 1}, {"signed char", 1}, {"unsigned char", 1}, {"int8_t", 1}, {"uint8_t", 1},
    {"short", 2}, {"unsigned short", 2}, {"short int", 2}, {"unsigned short int", 2}, {"int16_t", 2},
    {"uint16_t", 2}, {"__half", 2}, {"half", 2}, {"__nv_bfloat16", 2}, {"nv_bfloat16", 2}, {"_Float16", 2},
    {"int", 4}, {"unsigned", 4}, {"unsigned int", 4}, {"signed", 4}, {"signed int", 4}, {"float", 4},
    {"int32_t", 4}, {"uint32_t", 4}, {"__half2", 4}, {"__nv_bfloat162", 4},
    {"long", 8}, {"unsigned long", 8}, {"long int", 8}, {"unsigned long int", 8}, {"long long", 8},
    {"unsigned long long", 8}, {"long long int", 8}, {"unsigned long long int", 8}, {"double", 8},
    {"int64_t", 8}, {"uint64_t", 8}, {"size_t", 8}, {"ptrdiff_t", 8}, {"intptr_t", 8}, {"uintptr_t", 8},
    {"__int128", 16}, {"unsigned __int128", 16},
    {"char2", 2}, {"uchar2", 2}, {"char4", 4}, {"uchar4", 4}, {"short2", 4}, {"ushort2", 4},
    {"short4", 8}, {"ushort4", 8}, {"int2", 8}, {"uint2", 8}, {"float2", 8}, {"int4", 16}, {"uint4", 16},
    {"float4", 16}, {"double2", 16}, {"longlong2", 16}, {"ulonglong2", 16}, {"CUtensorMap", 128},
};

/* False when `type` cannot be the PTX parameter p: a pointer that is not 8 bytes, a reference,
 * or a builtin (after its qualifiers) of another size. Types it does not know pass. */
static bool type_fits(const char *type, const gl_param *p) {
    if (strchr(type, '&')) return false; /* no kernel parameter is a reference */
    int angle = 0;
    for (const char *c = type; *c; c++) {
        if (*c == '<') angle++;
        else if (*c == '>') angle--;
        else if (*c == '*' && angle == 0) return p->size == 8;
    }
    char bare[GL_DECL_MAX + 1];
    size_t used = 0;
    lexer lx = {type, type + strlen(type), false};
    for (token t = next_token(&lx); t.len; t = next_token(&lx)) {
        if (is_qualifier(t)) continue;
        if (used + t.len + 1 >= sizeof bare) return true;
        if (used) bare[used++] = ' ';
        memcpy(bare + used, t.s, t.len);
        used += t.len;
    }
    bare[used] = '\0';
    for (size_t i = 0; i < COUNT(known_sizes); i++)
        if (strcmp(bare, known_sizes[i].type) == 0) return p->size == known_sizes[i].size;
    return true;
}

/* ---- putting it together ---------------------------------------------------------------------- */
/* "scale" from "ns::scale<2>" (the demangled name), written into out; false when it is not an
 * identifier. */
static bool unqualified_name(const char *qualified, char *out, size_t cap) {
    size_t end = strlen(qualified);
    if (end > 0 && qualified[end - 1] == '>') { /* back over the template arguments */
        int depth = 0;
        while (end > 0) {
            char c = qualified[--end];
            if (c == '>') depth++;
            else if (c == '<' && --depth == 0) break;
        }
        if (depth != 0) return false;
    }
    size_t start = end;
    while (start > 0 && qualified[start - 1] != ':') start--;
    if (end == start || end - start >= cap || !is_ident_start(qualified[start])) return false;
    for (size_t i = start; i < end; i++)
        if (!is_ident_char(qualified[i])) return false;
    memcpy(out, qualified + start, end - start);
    out[end - start] = '\0';
    return true;
}

/* The parameter types the entry name gives (pointers into demangled) and the function's own
 * name into base; returns false when nothing can be known (a mangled name that does not
 * demangle to n parameters, or a name that is no identifier). */
static bool types_from_entry(const char *entry, int n, char *demangled, const char **types, char *base,
                             size_t base_cap) {
    if (entry[0] == '_' && entry[1] == 'Z') {
        if (gl_demangle(entry, demangled, DEMANGLED_CAP) != n) return false;
        const char *s = demangled;
        if (!unqualified_name(s, base, base_cap)) return false;
        for (int i = 0; i < n; i++) {
            s += strlen(s) + 1;
            types[i] = s;
        }
        return true;
    }
    size_t len = strlen(entry);
    if (len == 0 || len >= base_cap || !is_ident_start(entry[0])) return false;
    for (size_t i = 0; i < len; i++)
        if (!is_ident_char(entry[i])) return false;
    memcpy(base, entry, len + 1);
    return true;
}

/* False when a type the definition declares contradicts its PTX parameter: then the definition
 * found is not the one compiled (or not read right), and none of its names are used. */
static bool source_fits(const char *pairs, const gl_param *params, int n) {
    for (int i = 0; i < n; i++) {
        const char *type = pairs + (size_t)i * PAIR_BYTES;
        if (*type && !type_fits(type, &params[i])) return false;
    }
    return true;
}

size_t gl_declarations_cap(int n) { return (size_t)(n > 0 ? n : 0) * (GL_DECL_MAX + 1) + 1; }

/* Writes "type name" (or "type") for each parameter whose type fits its PTX parameter. */
static int write_declarations(const gl_param *params, int n, const char *const *types, const char *const *names,
                              char *out) {
    int known = 0;
    char *w = out;
    for (int i = 0; i < n; i++) {
        const char *t = types[i], *name = names[i] && *names[i] ? names[i] : NULL;
        size_t tlen = t ? strlen(t) : 0, nlen = name ? strlen(name) : 0;
        bool fits = tlen > 0 && tlen + (name ? nlen + 1 : 0) <= GL_DECL_MAX && type_fits(t, &params[i]);
        if (fits) {
            memcpy(w, t, tlen);
            w += tlen;
            if (name) {
                *w++ = ' ';
                memcpy(w, name, nlen);
                w += nlen;
            }
            known++;
        }
        *w++ = '\0';
    }
    return known;
}

int gl_param_declarations(const char *entry, const char *src, size_t src_len, const gl_param *params,
                          int n, char *out, size_t cap) {
    if (out == NULL || n < 0) return -1;
    if (cap < gl_declarations_cap(n)) {
        if (cap >= (size_t)n) memset(out, 0, (size_t)n);
        return -1;
    }
    memset(out, 0, (size_t)n);
    if (n == 0 || entry == NULL) return 0;
    char *demangled = malloc(DEMANGLED_CAP);
    char *pairs = src ? malloc((size_t)n * PAIR_BYTES) : NULL;
    const char **types = calloc((size_t)n * 2, sizeof *types);
    int known = -1;
    char base[256];
    if (demangled && types && (pairs || !src)) {
        const char **names = types + n;
        known = 0;
        if (types_from_entry(entry, n, demangled, types, base, sizeof base)) {
            const char *begin = NULL, *end = NULL;
            if (src && count_definitions(src, src_len, base, &begin, &end) == 1 &&
                read_parameter_list(begin, end, pairs, n) == n && source_fits(pairs, params, n)) {
                for (int i = 0; i < n; i++) {
                    const char *pair = pairs + (size_t)i * PAIR_BYTES;
                    if (*pair == '\0') continue; /* a declarator this reader does not follow */
                    if (types[i] == NULL) types[i] = pair;
                    names[i] = pair + GL_DECL_MAX + 1;
                }
            }
            known = write_declarations(params, n, types, names, out);
        }
    }
    free(types);
    free(pairs);
    free(demangled);
    return known;
}
