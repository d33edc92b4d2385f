/* Copyright The OpenTelemetry Authors
 * SPDX-License-Identifier: Apache-2.0
 *
 * A checked span or log as its OTLP protobuf field (ScopeSpans.spans, ScopeLogs.
 * log_records), the bytes reader/outputs/exporters/otlp_proto_direct.py writes (span_item,
 * log_item): fields in field-number order, defaults left out as proto3 leaves them, a
 * length-delimited field's length put before it once its payload is written. Part of
 * core.c, which includes it.
 */

static void pb_raw(writer *w, const char *bytes, size_t n) { put(w, bytes, n); }

#define PB(w, literal) pb_raw((w), (literal), sizeof(literal) - 1)

static void pb_varint(writer *w, uint64_t v) {
    char b[10];
    size_t n = 0;
    while (v >= 0x80) {
        b[n++] = (char)((v & 0x7F) | 0x80);
        v >>= 7;
    }
    b[n++] = (char)v;
    put(w, b, n);
}

static void pb_fixed(writer *w, uint64_t v, size_t size) {
    char b[8];
    size_t i;
    for (i = 0; i < size; i++)
        b[i] = (char)(v >> (8 * i));
    put(w, b, size);
}

/* A length-delimited field: its tag now, its length once its payload is written. */
static size_t pb_open(writer *w, const char *tag) {
    put(w, tag, 1);
    return w->len;
}

static void pb_close(writer *w, size_t start) {
    char b[10];
    size_t len = w->len - start, n = 0;
    uint64_t v = len;
    if (w->full)
        return;
    while (v >= 0x80) {
        b[n++] = (char)((v & 0x7F) | 0x80);
        v >>= 7;
    }
    b[n++] = (char)v;
    if (n > w->cap - w->len) {
        w->full = 1;
        return;
    }
    memmove(w->buf + start + n, w->buf + start, len);
    memcpy(w->buf + start, b, n);
    w->len += n;
}

/* A string field: a JSON string's inside (its escapes decoded) or a plain text's UTF-8. */
static void pb_string(writer *w, const char *tag, const uint8_t *s, uint32_t n, int escaped) {
    size_t start = pb_open(w, tag);
    if (!escaped) {
        put(w, (const char *)s, n);
    } else {
        uint32_t i = 0;
        while (i < n && !w->full) {
            char c = (char)j_char(s, &i);
            put(w, &c, 1);
        }
    }
    pb_close(w, start);
}

static int hex_digit(uint8_t c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

/* An id's bytes, big-endian, from its lowercase hex (checked before). */
static void pb_id(writer *w, const uint8_t *hex, size_t bytes) {
    char b[16];
    size_t i;
    for (i = 0; i < bytes; i++)
        b[i] = (char)(hex_digit(hex[2 * i]) << 4 | hex_digit(hex[2 * i + 1]));
    put(w, b, bytes);
}

static int pb_value(writer *w, const jdoc *d, uint32_t node, int clean);

/* KeyValue fields with ``tag`` of an object's pairs (_attributes; "" keys kept unless
   ``clean``). */
static int pb_key_values(writer *w, const jdoc *d, uint32_t object, const char *tag, int clean) {
    uint32_t k = j_first(object), i;
    for (i = 0; i < d->n[object].count; i++) {
        uint32_t value = d->n[k].next;
        if (d->n[k].len || !clean) {
            size_t pair = pb_open(w, tag), any;
            if (d->n[k].len)
                pb_string(w, "\x0a", d->n[k].s, d->n[k].len, d->n[k].esc);
            any = pb_open(w, "\x12");
            if (pb_value(w, d, value, clean))
                return -1;
            pb_close(w, any);
            pb_close(w, pair);
        }
        k = d->n[value].next;
    }
    return 0;
}

/* _value: an AnyValue's fields. */
static int pb_value(writer *w, const jdoc *d, uint32_t node, int clean) {
    const jnode *v = &d->n[node];
    switch (v->type) {
    case J_STR: pb_string(w, "\x0a", v->s, v->len, v->esc); return 0;
    case J_TRUE: PB(w, "\x10\x01"); return 0;
    case J_FALSE: PB(w, "\x10\x00"); return 0;
    case J_NULL: return 0;
    case J_INT:
        if (!j_in_s64(v))
            return -1;
        PB(w, "\x18");
        pb_varint(w, v->neg ? (uint64_t)0 - v->mag : v->mag);
        return 0;
    case J_ARR: {
        uint32_t item = j_first(node), i;
        size_t array = pb_open(w, "\x2a");
        for (i = 0; i < v->count; i++) {
            size_t one = pb_open(w, "\x0a");
            if (pb_value(w, d, item, clean))
                return -1;
            pb_close(w, one);
            item = d->n[item].next;
        }
        pb_close(w, array);
        return 0;
    }
    case J_OBJ: {
        size_t list = pb_open(w, "\x32");
        if (pb_key_values(w, d, node, "\x0a", clean))
            return -1;
        pb_close(w, list);
        return 0;
    }
    }
    return -1;
}

/* otlp_proto_direct._event, of a checked event */
static int pb_event(writer *w, jdoc *d, uint32_t node) {
    event_fields e;
    size_t event;
    if (get_event(d, node, &e))
        return -1;
    event = pb_open(w, "\x5a");
    if (e.time_ns) {
        PB(w, "\x09");
        pb_fixed(w, e.time_ns, 8);
    }
    if (d->n[e.name].len)
        pb_string(w, "\x12", d->n[e.name].s, d->n[e.name].len, d->n[e.name].esc);
    if (pb_key_values(w, d, e.attributes, "\x1a", 1))
        return -1;
    if (e.dropped) {
        PB(w, "\x20");
        pb_varint(w, e.dropped);
    }
    pb_close(w, event);
    return 0;
}

/* otlp_proto_direct._link, of a checked link */
static int pb_link(writer *w, jdoc *d, uint32_t node) {
    link_fields l;
    size_t link;
    if (get_link(d, node, &l))
        return -1;
    link = pb_open(w, "\x6a");
    PB(w, "\x0a\x10");
    pb_id(w, d->n[l.trace_id].s, 16);
    PB(w, "\x12\x08");
    pb_id(w, d->n[l.span_id].s, 8);
    if (pb_key_values(w, d, l.attributes, "\x22", 1))
        return -1;
    if (l.dropped) {
        PB(w, "\x28");
        pb_varint(w, l.dropped);
    }
    PB(w, "\x35");
    pb_fixed(w, l.remote ? CONTEXT_HAS_IS_REMOTE_MASK | CONTEXT_IS_REMOTE_MASK
                         : CONTEXT_HAS_IS_REMOTE_MASK, 4);
    pb_close(w, link);
    return 0;
}

static int pb_list(writer *w, jdoc *d, text t, int (*one)(writer *, jdoc *, uint32_t)) {
    uint32_t item, count, i;
    if (get_list(d, t, &item, &count))
        return -1;
    for (i = 0; i < count; i++) {
        if (one(w, d, item))
            return -1;
        item = d->n[item].next;
    }
    return 0;
}

/* RecordChecker.span (but its scope), then otlp_proto_direct.span_item. */
static int proto_span(writer *w, jdoc *d, const fields *f) {
    const uint64_t *v = f->ints;
    const text *t = f->texts;
    uint32_t attributes;
    uint64_t code = v[SPAN_STATUS_CODE];
    uint32_t flags = CONTEXT_HAS_IS_REMOTE_MASK;
    size_t span;
    char kind[2];
    if (!span_ok(f))
        return -1;
    span = pb_open(w, "\x12");
    PB(w, "\x0a\x10");
    pb_id(w, t[SPAN_TRACE_ID].s, 16);
    PB(w, "\x12\x08");
    pb_id(w, t[SPAN_SPAN_ID].s, 8);
    if (v[SPAN_PARENT_FLAGS] & PARENT_PRESENT) {
        PB(w, "\x22\x08");
        pb_id(w, t[SPAN_PARENT_ID].s, 8);
        if (v[SPAN_PARENT_FLAGS] & PARENT_REMOTE)
            flags |= CONTEXT_IS_REMOTE_MASK;
    }
    if (t[SPAN_NAME].len)
        pb_string(w, "\x2a", t[SPAN_NAME].s, t[SPAN_NAME].len, 0);
    kind[0] = '\x30', kind[1] = (char)(v[SPAN_KIND] + 1);
    put(w, kind, 2);
    if (v[SPAN_START]) {
        PB(w, "\x39");
        pb_fixed(w, v[SPAN_START], 8);
    }
    if (v[SPAN_END]) {
        PB(w, "\x41");
        pb_fixed(w, v[SPAN_END], 8);
    }
    if (get_object(d, t[SPAN_ATTRIBUTES], &attributes) ||
        pb_key_values(w, d, attributes, "\x4a", 1))
        return -1;
    if (v[SPAN_DROPPED_ATTRIBUTES]) {
        PB(w, "\x50");
        pb_varint(w, v[SPAN_DROPPED_ATTRIBUTES]);
    }
    if (pb_list(w, d, t[SPAN_EVENTS], pb_event))
        return -1;
    if (v[SPAN_DROPPED_EVENTS]) {
        PB(w, "\x60");
        pb_varint(w, v[SPAN_DROPPED_EVENTS]);
    }
    if (pb_list(w, d, t[SPAN_LINKS], pb_link))
        return -1;
    if (v[SPAN_DROPPED_LINKS]) {
        PB(w, "\x70");
        pb_varint(w, v[SPAN_DROPPED_LINKS]);
    }
    if (code == 2 && t[SPAN_STATUS_DESCRIPTION].len) {
        size_t status = pb_open(w, "\x7a");
        pb_string(w, "\x12", t[SPAN_STATUS_DESCRIPTION].s, t[SPAN_STATUS_DESCRIPTION].len, 0);
        PB(w, "\x18\x02");
        pb_close(w, status);
    } else if (code == 2) {
        PB(w, "\x7a\x02\x18\x02");
    } else if (code == 1) {
        PB(w, "\x7a\x02\x18\x01");
    } else {
        PB(w, "\x7a\x00");
    }
    PB(w, "\x85\x01");
    pb_fixed(w, flags, 4);
    pb_close(w, span);
    return 0;
}

/* RecordChecker.log (but its scope), then otlp_proto_direct.log_item. */
static int proto_log(writer *w, jdoc *d, const fields *f) {
    const uint64_t *v = f->ints;
    const text *t = f->texts;
    uint32_t body, attributes;
    size_t log, any;
    if (!log_ok(f))
        return -1;
    log = pb_open(w, "\x12");
    if (v[LOG_TIME]) {
        PB(w, "\x09");
        pb_fixed(w, v[LOG_TIME], 8);
    }
    if (v[LOG_SEVERITY_NUMBER]) {
        PB(w, "\x10");
        pb_varint(w, v[LOG_SEVERITY_NUMBER]);
    }
    if ((v[LOG_FLAGS] & HAS_SEVERITY_TEXT) && t[LOG_SEVERITY_TEXT].len)
        pb_string(w, "\x1a", t[LOG_SEVERITY_TEXT].s, t[LOG_SEVERITY_TEXT].len, 0);
    if (j_parse(d, t[LOG_BODY].s, t[LOG_BODY].len, &body))
        return -1;
    any = pb_open(w, "\x2a");
    if (pb_value(w, d, body, 0))
        return -1;
    pb_close(w, any);
    if (get_object(d, t[LOG_ATTRIBUTES], &attributes) ||
        pb_key_values(w, d, attributes, "\x32", 1))
        return -1;
    if (v[LOG_DROPPED_ATTRIBUTES]) {
        PB(w, "\x38");
        pb_varint(w, v[LOG_DROPPED_ATTRIBUTES]);
    }
    if (v[LOG_TRACE_FLAGS]) {
        PB(w, "\x45");
        pb_fixed(w, v[LOG_TRACE_FLAGS], 4);
    }
    if (!all_zero_digits(t[LOG_TRACE_ID].s, 32)) {
        PB(w, "\x4a\x10");
        pb_id(w, t[LOG_TRACE_ID].s, 16);
    }
    if (!all_zero_digits(t[LOG_SPAN_ID].s, 16)) {
        PB(w, "\x52\x08");
        pb_id(w, t[LOG_SPAN_ID].s, 8);
    }
    if (v[LOG_OBSERVED_TIME]) {
        PB(w, "\x59");
        pb_fixed(w, v[LOG_OBSERVED_TIME], 8);
    }
    if ((v[LOG_FLAGS] & HAS_EVENT_NAME) && t[LOG_EVENT_NAME].len)
        pb_string(w, "\x62", t[LOG_EVENT_NAME].s, t[LOG_EVENT_NAME].len, 0);
    pb_close(w, log);
    return 0;
}
