/* Copyright The OpenTelemetry Authors
 * SPDX-License-Identifier: Apache-2.0
 *
 * The reader's native core (core.h). Every rule here mirrors a Python function, named
 * beside it; where a record is anything but the plain case those functions were measured
 * on, the core hands it back (UEV_E_RECORD, UEV_E_PAGE) instead of guessing, so the
 * output is the Python path's by construction: tests/reader/native/ check it byte for
 * byte over generated and mutated pages. Nothing is read past what a length allows: every
 * offset and size comes from the input and is checked before use.
 */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

struct uev_core {
    uint16_t index[65536]; /* event id -> plan number + 1 (0: none) */
    uev_plan plans[UEV_MAX_PLANS];
    unsigned count;
};

/* The schemas' fields, in their order (record/schema.py SPAN, LOG). */
enum {
    SPAN_START, SPAN_END, SPAN_DURATION, SPAN_RESOURCE_ID, SPAN_TRACE_ID, SPAN_SPAN_ID, SPAN_PARENT_ID,
    SPAN_DROPPED_ATTRIBUTES, SPAN_DROPPED_EVENTS, SPAN_DROPPED_LINKS, SPAN_KIND,
    SPAN_STATUS_CODE, SPAN_TRACE_FLAGS, SPAN_PARENT_FLAGS, SPAN_TRUNCATED, SPAN_NAME,
    SPAN_STATUS_DESCRIPTION, SPAN_TRACE_STATE, SPAN_ATTRIBUTES, SPAN_EVENTS, SPAN_LINKS,
    SPAN_SCOPE, SPAN_FIELDS
};
static const uint8_t span_kinds[SPAN_FIELDS] = {
    UEV_INT, UEV_INT, UEV_INT, UEV_INT, UEV_CHARS, UEV_CHARS, UEV_CHARS, UEV_INT, UEV_INT, UEV_INT,
    UEV_INT, UEV_INT, UEV_INT, UEV_INT, UEV_INT, UEV_TEXT, UEV_TEXT, UEV_TEXT, UEV_TEXT,
    UEV_TEXT, UEV_TEXT, UEV_TEXT};
static const uint8_t span_sizes[SPAN_FIELDS] = {8, 8, 8, 8, 32, 16, 16, 4, 4, 4, 1, 1, 1, 1, 1,
                                                4, 4, 4, 4, 4, 4, 4};
enum {
    LOG_TIME, LOG_OBSERVED_TIME, LOG_RESOURCE_ID, LOG_TRACE_ID, LOG_SPAN_ID,
    LOG_DROPPED_ATTRIBUTES, LOG_SEVERITY_NUMBER, LOG_TRACE_FLAGS, LOG_FLAGS, LOG_TRUNCATED,
    LOG_SEVERITY_TEXT, LOG_EVENT_NAME, LOG_BODY, LOG_ATTRIBUTES, LOG_SCOPE, LOG_FIELDS
};
static const uint8_t log_kinds[LOG_FIELDS] = {
    UEV_INT, UEV_INT, UEV_INT, UEV_CHARS, UEV_CHARS, UEV_INT, UEV_INT, UEV_INT, UEV_INT,
    UEV_INT, UEV_TEXT, UEV_TEXT, UEV_TEXT, UEV_TEXT, UEV_TEXT};
static const uint8_t log_sizes[LOG_FIELDS] = {8, 8, 8, 32, 16, 4, 1, 1, 1, 1, 4, 4, 4, 4, 4};

/* record.flags */
#define PARENT_PRESENT 1
#define PARENT_REMOTE 2
#define HAS_SEVERITY_TEXT 1 /* LOG_SEVERITY_TEXT */
#define HAS_EVENT_NAME 2    /* LOG_EVENT_NAME */
/* otlp_span_flags.py */
#define CONTEXT_HAS_IS_REMOTE_MASK 0x100
#define CONTEXT_IS_REMOTE_MASK 0x200

/* --- the core's plans ------------------------------------------------------------------ */

uev_core *uev_core_new(void) { return calloc(1, sizeof(uev_core)); }

void uev_core_free(uev_core *core) { free(core); }

void uev_core_clear(uev_core *core) {
    memset(core->index, 0, sizeof(core->index));
    core->count = 0;
}

int uev_core_set(uev_core *core, uint16_t event_id, const uev_plan *plan) {
    const uint8_t *kinds, *sizes;
    unsigned n, i;
    if (plan->kind == UEV_SPAN) {
        kinds = span_kinds, sizes = span_sizes, n = SPAN_FIELDS;
    } else if (plan->kind == UEV_LOG) {
        kinds = log_kinds, sizes = log_sizes, n = LOG_FIELDS;
    } else {
        return -1;
    }
    if (plan->nfields != n || core->count >= UEV_MAX_PLANS || plan->needed > 0xFFFF + 4u)
        return -1;
    for (i = 0; i < n; i++) {
        const uev_field *f = &plan->f[i];
        if (f->kind != kinds[i] || f->size != sizes[i] || f->is_signed)
            return -1;
        if ((uint32_t)f->offset + f->size > plan->needed)
            return -1;
    }
    core->plans[core->count] = *plan;
    core->index[event_id] = (uint16_t)(core->count + 1);
    return (int)core->count++;
}

/* --- output ------------------------------------------------------------------------------ */

typedef struct {
    char *buf;
    size_t len, cap;
    int full;
} writer;

static void put(writer *w, const char *s, size_t n) {
    if (w->full || n > w->cap - w->len) {
        w->full = 1;
        return;
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
}

#define PUTS(w, literal) put((w), (literal), sizeof(literal) - 1)

static void put_u64(writer *w, uint64_t v) {
    char digits[20];
    int n = 0;
    do {
        digits[19 - n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    put(w, digits + 20 - n, (size_t)n);
}

/* --- input checks ------------------------------------------------------------------------ */

/* Strict UTF-8, as Python's decoder takes it (no surrogates, no overlongs, <= U+10FFFF). */
static int utf8_valid(const uint8_t *s, uint32_t n) {
    uint32_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80)
                return 0;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            uint8_t lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
            if (i + 2 >= n || s[i + 1] < lo || s[i + 1] > hi || (s[i + 2] & 0xC0) != 0x80)
                return 0;
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            uint8_t lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
            if (i + 3 >= n || s[i + 1] < lo || s[i + 1] > hi || (s[i + 2] & 0xC0) != 0x80 ||
                (s[i + 3] & 0xC0) != 0x80)
                return 0;
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

static int is_hex_lower(const uint8_t *s, uint32_t n) {
    uint32_t i;
    for (i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

static int all_zero_digits(const uint8_t *s, uint32_t n) {
    uint32_t i;
    for (i = 0; i < n; i++)
        if (s[i] != '0')
            return 0;
    return 1;
}

/* A plain-text field (record.plain_text.decode_plain) the core writes as it is: one that
   starts with " or { holds the value encoding, left to Python. */
static int plain(const uint8_t *s, uint32_t n) { return !(n && (s[0] == '"' || s[0] == '{')); }

/* --- the value encoding: the JSON that anyvalue.decode reads without a tag --------------- */

enum { J_NULL = 1, J_FALSE, J_TRUE, J_INT, J_STR, J_ARR, J_OBJ };

#define J_NODES 4096
#define J_DEPTH 16
#define J_PAIRS 128

typedef struct {
    const uint8_t *s; /* a string's inside, a number's digits */
    uint32_t len;
    uint32_t count;   /* array: items; object: pairs */
    uint32_t next;    /* the next sibling (0: none) */
    uint8_t type;
    uint8_t neg;      /* an integer's sign */
    uint8_t esc;      /* a string with escapes */
    uint64_t mag;     /* an integer's magnitude */
} jnode;

typedef struct {
    jnode n[J_NODES];
    uint32_t count;
} jdoc;

/* 0: parsed; -1: not the plain case (the Python path decides). Only what json reads the
   same way from the first character to the last: no whitespace, no floats (their repr is
   Python's), no \u escapes, no integer beyond 64 bits, no duplicate or escaped keys, no
   deeper than J_DEPTH. */
static int j_value(jdoc *d, const uint8_t *s, uint32_t n, uint32_t *pos, int depth, uint32_t *out);

static int j_string(jdoc *d, const uint8_t *s, uint32_t n, uint32_t *pos, uint32_t *out) {
    uint32_t i = *pos + 1, start = i;
    uint8_t esc = 0;
    jnode *node;
    for (;;) {
        if (i >= n)
            return -1;
        if (s[i] == '"')
            break;
        if (s[i] < 0x20)
            return -1;
        if (s[i] == '\\') {
            if (i + 1 >= n)
                return -1;
            switch (s[i + 1]) {
            case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
                break;
            default:
                return -1;
            }
            esc = 1;
            i += 2;
            continue;
        }
        i++;
    }
    if (d->count >= J_NODES)
        return -1;
    *out = d->count;
    node = &d->n[d->count++];
    memset(node, 0, sizeof(*node));
    node->type = J_STR, node->s = s + start, node->len = i - start, node->esc = esc;
    *pos = i + 1;
    return 0;
}

static int j_number(jdoc *d, const uint8_t *s, uint32_t n, uint32_t *pos, uint32_t *out) {
    uint32_t i = *pos, digits;
    uint8_t neg = 0;
    uint64_t mag = 0;
    jnode *node;
    if (s[i] == '-')
        neg = 1, i++;
    if (i >= n || s[i] < '0' || s[i] > '9')
        return -1;
    if (s[i] == '0') {
        i++;
    } else {
        for (digits = 0; i < n && s[i] >= '0' && s[i] <= '9'; i++, digits++) {
            uint64_t digit = (uint64_t)(s[i] - '0');
            if (digits >= 20 || mag > (UINT64_MAX - digit) / 10)
                return -1;
            mag = mag * 10 + digit;
        }
    }
    if (i < n && (s[i] == '.' || s[i] == 'e' || s[i] == 'E' || (s[i] >= '0' && s[i] <= '9')))
        return -1;
    if (d->count >= J_NODES)
        return -1;
    *out = d->count;
    node = &d->n[d->count++];
    memset(node, 0, sizeof(*node));
    node->type = J_INT, node->neg = neg && mag, node->mag = mag;
    *pos = i;
    return 0;
}

static int j_word(jdoc *d, const uint8_t *s, uint32_t n, uint32_t *pos, uint32_t *out) {
    static const char *words[] = {"null", "false", "true"};
    static const uint8_t types[] = {J_NULL, J_FALSE, J_TRUE};
    int k;
    for (k = 0; k < 3; k++) {
        uint32_t len = (uint32_t)strlen(words[k]);
        if (n - *pos >= len && memcmp(s + *pos, words[k], len) == 0) {
            jnode *node;
            if (d->count >= J_NODES)
                return -1;
            *out = d->count;
            node = &d->n[d->count++];
            memset(node, 0, sizeof(*node));
            node->type = types[k];
            *pos += len;
            return 0;
        }
    }
    return -1;
}

/* The next character of a JSON string's inside (its escapes, checked, decoded). */
static uint8_t j_char(const uint8_t *s, uint32_t *i) {
    uint8_t c = s[(*i)++];
    if (c != '\\')
        return c;
    c = s[(*i)++];
    switch (c) {
    case 'b': return '\b';
    case 'f': return '\f';
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    }
    return c; /* " \ / */
}

/* Whether two keys are the same text once their escapes are decoded ("a/b", "a\/b"). */
static int same_key(const jnode *a, const jnode *b) {
    uint32_t i = 0, j = 0;
    if (!a->esc && !b->esc)
        return a->len == b->len && memcmp(a->s, b->s, a->len) == 0;
    while (i < a->len && j < b->len)
        if (j_char(a->s, &i) != j_char(b->s, &j))
            return 0;
    return i == a->len && j == b->len;
}

static int j_container(jdoc *d, const uint8_t *s, uint32_t n, uint32_t *pos, int depth,
                       uint32_t *out) {
    int object = s[*pos] == '{';
    uint8_t close = object ? '}' : ']';
    uint32_t me, last = 0, count = 0, i = *pos + 1;
    if (depth >= J_DEPTH || d->count >= J_NODES)
        return -1;
    me = d->count++;
    memset(&d->n[me], 0, sizeof(jnode));
    d->n[me].type = object ? J_OBJ : J_ARR;
    if (i < n && s[i] == close) {
        *pos = i + 1;
        *out = me;
        return 0;
    }
    for (;;) {
        uint32_t key = 0, value;
        if (object) {
            uint32_t k, p;
            if (i >= n || s[i] != '"' || j_string(d, s, n, &i, &key))
                return -1;
            if (d->n[key].len && d->n[key].s[0] == '~')
                return -1; /* a tag, or a user's key escaped: _restore's */
            /* a repeated key: json keeps the last value at the first key's place (and
               the check is quadratic: a large object goes to Python) */
            if (count >= J_PAIRS)
                return -1;
            for (k = me + 1, p = 0; p < count; p++, k = d->n[d->n[k].next].next)
                if (same_key(&d->n[k], &d->n[key]))
                    return -1;
            if (i >= n || s[i] != ':')
                return -1;
            i++;
        }
        if (i >= n || j_value(d, s, n, &i, depth + 1, &value))
            return -1;
        if (object) {
            if (last)
                d->n[last].next = key;
            d->n[key].next = value;
        } else if (last) {
            d->n[last].next = value;
        }
        last = value;
        count++;
        if (i < n && s[i] == ',') {
            i++;
            continue;
        }
        if (i < n && s[i] == close)
            break;
        return -1;
    }
    d->n[me].count = count;
    *pos = i + 1;
    *out = me;
    return 0;
}

static int j_value(jdoc *d, const uint8_t *s, uint32_t n, uint32_t *pos, int depth,
                   uint32_t *out) {
    uint8_t c;
    if (*pos >= n)
        return -1;
    c = s[*pos];
    if (c == '{' || c == '[')
        return j_container(d, s, n, pos, depth, out);
    if (c == '"')
        return j_string(d, s, n, pos, out);
    if (c == '-' || (c >= '0' && c <= '9'))
        return j_number(d, s, n, pos, out);
    return j_word(d, s, n, pos, out);
}

/* anyvalue.decode(text), the plain case: a key that starts with ~ (a tag, or a user's key
   escaped) or a \u escape (which may spell one: j_string) is _restore's, in Python. */
static int j_parse(jdoc *d, const uint8_t *s, uint32_t n, uint32_t *root) {
    uint32_t pos = 0;
    d->count = 1; /* a fresh tree: node 0 means "none" */
    if (j_value(d, s, n, &pos, 0, root) || pos != n)
        return -1;
    return 0;
}

/* the first child of a container node: nodes are laid out in order */
static uint32_t j_first(uint32_t node) { return node + 1; }

/* An object's value for key (a plain ASCII key), 0 if none. */
static uint32_t j_get(const jdoc *d, uint32_t object, const char *key) {
    uint32_t k = j_first(object), i, len = (uint32_t)strlen(key);
    for (i = 0; i < d->n[object].count; i++) {
        uint32_t value = d->n[k].next;
        if (d->n[k].len == len && memcmp(d->n[k].s, key, len) == 0)
            return value;
        k = d->n[value].next;
    }
    return 0;
}

static int j_in_s64(const jnode *v) {
    return v->neg ? v->mag <= (uint64_t)1 << 63 : v->mag <= (uint64_t)INT64_MAX;
}

/* A count: _int(value, 0, high) of an integer node (not a bool). */
static int j_count(const jdoc *d, uint32_t node, uint64_t high, uint64_t *value) {
    if (!node || d->n[node].type != J_INT || d->n[node].neg || d->n[node].mag > high)
        return -1;
    *value = d->n[node].mag;
    return 0;
}

static int j_is_hex_id(const jdoc *d, uint32_t node, uint32_t len) {
    const jnode *v = &d->n[node];
    return node && v->type == J_STR && !v->esc && v->len == len && is_hex_lower(v->s, len);
}


/* --- a record's fields ---------------------------------------------------------------------- */

typedef struct {
    const uint8_t *s;
    uint32_t len;
} text;

typedef struct {
    const uint8_t *record;
    uint32_t size;
    const uev_plan *plan;
    uint64_t ints[UEV_MAX_FIELDS];
    text texts[UEV_MAX_FIELDS];
} fields;

/* RecordUnpacker.unpack: -1 where it raises (or a text is not what the core writes). */
static int unpack(fields *f, const uint8_t *record, uint32_t size, const uev_plan *plan) {
    unsigned i;
    if (size < plan->needed)
        return -1;
    f->record = record, f->size = size, f->plan = plan;
    for (i = 0; i < plan->nfields; i++) {
        const uev_field *field = &plan->f[i];
        const uint8_t *at = record + field->offset;
        if (field->kind == UEV_INT) {
            uint64_t v = 0;
            unsigned b;
            for (b = 0; b < field->size; b++)
                v |= (uint64_t)at[b] << (8 * b);
            f->ints[i] = v;
        } else if (field->kind == UEV_CHARS) {
            unsigned b;
            for (b = 0; b < field->size; b++)
                if (at[b] >= 0x80)
                    return -1; /* not ASCII */
            f->texts[i].s = at, f->texts[i].len = field->size;
        } else {
            uint32_t loc = (uint32_t)at[0] | ((uint32_t)at[1] << 8) | ((uint32_t)at[2] << 16) |
                           ((uint32_t)at[3] << 24);
            uint32_t first = field->offset + 4u + (loc & 0xFFFF), length = loc >> 16;
            if (length == 0 || first + length - 1 >= size)
                return -1;
            f->texts[i].s = record + first, f->texts[i].len = length - 1;
            if (!utf8_valid(f->texts[i].s, f->texts[i].len))
                return -1;
        }
    }
    return 0;
}


/* --- the checks of validation.RecordChecker the core makes itself ---------------------------- */

/* RecordChecker._event's: an object with a name (a string), time_ns (a count), attributes
   (an object) and, maybe, dropped (a 32-bit count). */
typedef struct {
    uint32_t name, attributes;
    uint64_t time_ns, dropped;
} event_fields;

/* An event's or a link's "attributes" (an object) and its optional "dropped" count. */
static int get_attributes_dropped(const jdoc *d, uint32_t node, uint32_t *attributes,
                                  uint64_t *dropped) {
    uint32_t count;
    *attributes = j_get(d, node, "attributes");
    if (!*attributes || d->n[*attributes].type != J_OBJ)
        return -1;
    *dropped = 0;
    count = j_get(d, node, "dropped");
    return count ? j_count(d, count, 0xFFFFFFFFu, dropped) : 0;
}

static int get_event(const jdoc *d, uint32_t event, event_fields *e) {
    if (d->n[event].type != J_OBJ)
        return -1;
    e->name = j_get(d, event, "name");
    if (!e->name || d->n[e->name].type != J_STR)
        return -1;
    if (j_count(d, j_get(d, event, "time_ns"), UINT64_MAX, &e->time_ns))
        return -1;
    return get_attributes_dropped(d, event, &e->attributes, &e->dropped);
}

/* RecordChecker._link's (a trace state is checked in Python: only "" here). */
typedef struct {
    uint32_t trace_id, span_id, attributes;
    uint64_t dropped;
    int remote;
} link_fields;

static int get_link(const jdoc *d, uint32_t link, link_fields *l) {
    uint32_t is_remote, trace_state;
    uint64_t trace_flags;
    if (d->n[link].type != J_OBJ)
        return -1;
    is_remote = j_get(d, link, "is_remote");
    if (!is_remote || (d->n[is_remote].type != J_TRUE && d->n[is_remote].type != J_FALSE))
        return -1;
    l->remote = d->n[is_remote].type == J_TRUE;
    l->trace_id = j_get(d, link, "trace_id");
    l->span_id = j_get(d, link, "span_id");
    if (!j_is_hex_id(d, l->trace_id, 32) || !j_is_hex_id(d, l->span_id, 16))
        return -1;
    if (j_count(d, j_get(d, link, "trace_flags"), 0xFF, &trace_flags))
        return -1;
    trace_state = j_get(d, link, "trace_state");
    if (!trace_state || d->n[trace_state].type != J_STR || d->n[trace_state].len)
        return -1;
    return get_attributes_dropped(d, link, &l->attributes, &l->dropped);
}

/* A JSON list's items, parsed into d: its first item and count; -1 if not a list. */
static int get_list(jdoc *d, text t, uint32_t *first, uint32_t *count) {
    uint32_t root;
    if (j_parse(d, t.s, t.len, &root) || d->n[root].type != J_ARR)
        return -1;
    *first = j_first(root);
    *count = d->n[root].count;
    return 0;
}

/* An attributes text, parsed into d: the object. */
static int get_object(jdoc *d, text t, uint32_t *object) {
    return j_parse(d, t.s, t.len, object) || d->n[*object].type != J_OBJ ? -1 : 0;
}

/* RecordChecker.span's checks of the fixed fields and plain texts (a trace state is
   checked in Python: only "" here). */
static int span_ok(const fields *f) {
    const uint64_t *v = f->ints;
    const text *t = f->texts;
    if (!is_hex_lower(t[SPAN_TRACE_ID].s, 32) || all_zero_digits(t[SPAN_TRACE_ID].s, 32))
        return 0;
    if (!is_hex_lower(t[SPAN_SPAN_ID].s, 16) || all_zero_digits(t[SPAN_SPAN_ID].s, 16))
        return 0;
    if ((v[SPAN_PARENT_FLAGS] & PARENT_PRESENT) && !is_hex_lower(t[SPAN_PARENT_ID].s, 16))
        return 0;
    return !t[SPAN_TRACE_STATE].len && plain(t[SPAN_NAME].s, t[SPAN_NAME].len) &&
           v[SPAN_KIND] <= 4 && v[SPAN_STATUS_CODE] <= 2 &&
           plain(t[SPAN_STATUS_DESCRIPTION].s, t[SPAN_STATUS_DESCRIPTION].len);
}

/* RecordChecker.log's checks of the fixed fields and plain texts. */
static int log_ok(const fields *f) {
    const uint64_t *v = f->ints;
    const text *t = f->texts;
    if (!is_hex_lower(t[LOG_TRACE_ID].s, 32) || !is_hex_lower(t[LOG_SPAN_ID].s, 16))
        return 0;
    if (v[LOG_SEVERITY_NUMBER] > 24)
        return 0;
    if ((v[LOG_FLAGS] & HAS_SEVERITY_TEXT) &&
        !plain(t[LOG_SEVERITY_TEXT].s, t[LOG_SEVERITY_TEXT].len))
        return 0;
    return !(v[LOG_FLAGS] & HAS_EVENT_NAME) || plain(t[LOG_EVENT_NAME].s, t[LOG_EVENT_NAME].len);
}

#include "otlp_json.c"
#include "otlp_proto.c"

/* --- records and pages ------------------------------------------------------------------ */

typedef struct {
    const uev_core *core;
    const uint8_t *input;
    uev_out *out;
    writer w;
    jdoc *doc;
    fields f;
} run;

static uev_entry *new_entry(run *r) {
    /* the caller sized entries for every record the input can hold, and a page each */
    uev_entry *e = &r->out->entries[r->out->entries_len++];
    memset(e, 0, sizeof(*e));
    return e;
}

static int32_t scope_of(run *r, const text *scope) {
    uev_out *out = r->out;
    size_t i;
    uint32_t off = (uint32_t)(scope->s - r->input);
    for (i = out->scopes_len; i-- > 0;) {
        const uev_scope *known = &out->scopes[i];
        if (known->len == scope->len && memcmp(r->input + known->off, scope->s, scope->len) == 0)
            return (int32_t)i;
    }
    if (out->scopes_len >= out->scopes_cap)
        return -1;
    out->scopes[out->scopes_len].off = off;
    out->scopes[out->scopes_len].len = scope->len;
    return (int32_t)out->scopes_len++;
}

/* One record (at least 8 bytes, or handed back): an entry. */
static void one_record(run *r, uint64_t timestamp, const uint8_t *record, uint32_t size) {
    uev_entry *e = new_entry(r);
    uint16_t number;
    const uev_plan *plan;
    size_t text_start = r->w.len;
    int failed;
    e->timestamp = timestamp;
    e->rec_off = (uint32_t)(record - r->input);
    e->rec_len = size;
    e->status = UEV_E_RECORD;
    if (size < 8)
        return;
    number = r->core->index[(uint16_t)(record[0] | (record[1] << 8))];
    if (!number)
        return;
    plan = &r->core->plans[number - 1];
    if (unpack(&r->f, record, size, plan))
        return;
    if (r->out->encoding == UEV_OTLP_PROTO)
        failed = plan->kind == UEV_SPAN ? proto_span(&r->w, r->doc, &r->f)
                                        : proto_log(&r->w, r->doc, &r->f);
    else
        failed = plan->kind == UEV_SPAN ? json_span(&r->w, r->doc, &r->f)
                                        : json_log(&r->w, r->doc, &r->f);
    if (failed || r->w.full) {
        r->w.len = text_start;
        r->w.full = 0;
        return;
    }
    e->scope = scope_of(r, &r->f.texts[plan->kind == UEV_SPAN ? SPAN_SCOPE : LOG_SCOPE]);
    if (e->scope < 0) {
        r->w.len = text_start;
        return;
    }
    e->status = plan->kind == UEV_SPAN ? UEV_E_SPAN : UEV_E_LOG;
    e->plan = (uint16_t)(number - 1);
    e->pid = (int32_t)((uint32_t)record[4] | ((uint32_t)record[5] << 8) |
                       ((uint32_t)record[6] << 16) | ((uint32_t)record[7] << 24));
    e->resource_id = r->f.ints[plan->kind == UEV_SPAN ? SPAN_RESOURCE_ID : LOG_RESOURCE_ID];
    e->truncated = (uint8_t)r->f.ints[plan->kind == UEV_SPAN ? SPAN_TRUNCATED : LOG_TRUNCATED];
    e->item_off = (uint32_t)text_start;
    e->item_len = (uint32_t)(r->w.len - text_start);
    r->out->records++;
}

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

#define PADDING 29
#define TIME_EXTEND 30
#define MAX_DATA_TYPE_LEN 28
#define MISSED_EVENTS (1u << 31)
#define MISSED_STORED (1u << 30)
#define TS_MASK ((UINT64_C(1) << 59) - 1)

/* ring_buffer.parse_page and _events: 0, or -1 where they raise PageError (or a timestamp
   would pass 64 bits, which Python's integers allow) and the page is handed back whole. */
static int one_page(run *r, const uint8_t *page, uint32_t size, const uev_layout *layout) {
    uint64_t ts;
    uint32_t commit, position, end, length;
    if (size < layout->data_offset || (uint64_t)layout->timestamp_offset + 8 > size ||
        (uint64_t)layout->commit_offset + 4 > size)
        return -1;
    ts = (uint64_t)le32(page + layout->timestamp_offset) |
         ((uint64_t)le32(page + layout->timestamp_offset + 4) << 32);
    commit = le32(page + layout->commit_offset);
    position = layout->data_offset;
    if ((uint64_t)position + (commit & (MISSED_STORED - 1)) > size)
        return -1;
    end = position + (commit & (MISSED_STORED - 1));
    if ((commit & MISSED_STORED) && (uint64_t)end + 8 > size)
        return -1;
    while (position < end) {
        uint32_t header, type_len, delta, array = 0, payload;
        if (end - position < 4)
            return -1;
        header = le32(page + position);
        type_len = header & 0x1F;
        delta = header >> 5;
        if (type_len == 0 || type_len == PADDING || type_len >= TIME_EXTEND) {
            if (end - position < 8)
                return -1;
            array = le32(page + position + 4);
        }
        if (type_len <= MAX_DATA_TYPE_LEN) {
            if (type_len) {
                length = type_len * 4;
                payload = position + 4;
            } else {
                if (array < 4)
                    return -1;
                length = array - 4;
                payload = position + 8;
            }
            if ((uint64_t)payload + length > end)
                return -1;
            if (ts + delta < ts)
                return -1;
            ts += delta;
            one_record(r, ts, page + payload, length);
            position = payload + length;
        } else if (type_len == PADDING) {
            if (delta == 0)
                break;
            if ((uint64_t)position + 4 + array > end)
                return -1;
            position += 4 + array;
        } else if (type_len == TIME_EXTEND) {
            uint64_t add = ((uint64_t)array << 27) + delta;
            if (ts + add < ts)
                return -1;
            ts += add;
            position += 8;
        } else {
            ts = (ts & ~TS_MASK) | (((uint64_t)array << 27) | delta);
            position += 8;
        }
    }
    r->out->pages++;
    if (commit & MISSED_EVENTS)
        r->out->missed_pages++;
    return 0;
}

static int start(run *r, const uev_core *core, const uint8_t *input, uev_out *out) {
    r->core = core, r->input = input, r->out = out;
    r->w.buf = out->text, r->w.len = out->text_len, r->w.cap = out->text_cap, r->w.full = 0;
    r->doc = malloc(sizeof(jdoc));
    return r->doc ? 0 : -1;
}

void uev_decode_pages(const uev_core *core, const uint8_t *buf, const uint32_t *lens,
                      size_t count, const uev_layout *layout, uev_out *out) {
    run r;
    size_t i, at = 0;
    int no_memory = start(&r, core, buf, out);
    for (i = 0; i < count; i++) {
        size_t entries = out->entries_len, text_len = r.w.len, scopes = out->scopes_len;
        uint64_t records = out->records;
        if (no_memory || one_page(&r, buf + at, lens[i], layout)) {
            uev_entry *e;
            out->entries_len = entries, r.w.len = text_len, out->scopes_len = scopes;
            out->records = records;
            e = new_entry(&r);
            e->status = UEV_E_PAGE, e->rec_off = (uint32_t)at, e->rec_len = lens[i];
        }
        at += lens[i];
    }
    out->text_len = r.w.len;
    free(r.doc);
}

void uev_decode_records(const uev_core *core, const uint8_t *buf, const uint32_t *lens,
                        const uint64_t *timestamps, size_t count, uev_out *out) {
    run r;
    size_t i, at = 0;
    int no_memory = start(&r, core, buf, out);
    for (i = 0; i < count; i++) {
        if (no_memory) {
            uev_entry *e = new_entry(&r);
            e->status = UEV_E_RECORD, e->timestamp = timestamps[i];
            e->rec_off = (uint32_t)at, e->rec_len = lens[i];
        } else {
            one_record(&r, timestamps[i], buf + at, lens[i]);
        }
        at += lens[i];
    }
    out->text_len = r.w.len;
    free(r.doc);
}
