/* Copyright The OpenTelemetry Authors
 * SPDX-License-Identifier: Apache-2.0
 *
 * A checked span or log as its OTLP/JSON item, as reader/outputs/exporters/
 * otlp_json_direct.py writes it (span_item, log_item): part of core.c, which includes it
 * (one translation unit: the parser, the checks and both encoders share their helpers).
 */

/* json.encoder.encode_basestring_ascii for one code point (CPython's
   ascii_escape_unichar: lowercase hex, astral as a surrogate pair) */
static void put_escaped(writer *w, uint32_t c) {
    static const char hex[] = "0123456789abcdef";
    char u[12];
    if (c >= 0x20 && c <= 0x7e && c != '"' && c != '\\') {
        char b = (char)c;
        put(w, &b, 1);
        return;
    }
    switch (c) {
    case '\\': PUTS(w, "\\\\"); return;
    case '"': PUTS(w, "\\\""); return;
    case '\b': PUTS(w, "\\b"); return;
    case '\f': PUTS(w, "\\f"); return;
    case '\n': PUTS(w, "\\n"); return;
    case '\r': PUTS(w, "\\r"); return;
    case '\t': PUTS(w, "\\t"); return;
    }
    if (c >= 0x10000) {
        uint32_t v = c - 0x10000, high = 0xD800 | (v >> 10), low = 0xDC00 | (v & 0x3FF);
        u[0] = '\\', u[1] = 'u', u[2] = hex[high >> 12], u[3] = hex[(high >> 8) & 15];
        u[4] = hex[(high >> 4) & 15], u[5] = hex[high & 15];
        u[6] = '\\', u[7] = 'u', u[8] = hex[low >> 12], u[9] = hex[(low >> 8) & 15];
        u[10] = hex[(low >> 4) & 15], u[11] = hex[low & 15];
        put(w, u, 12);
        return;
    }
    u[0] = '\\', u[1] = 'u', u[2] = hex[c >> 12], u[3] = hex[(c >> 8) & 15];
    u[4] = hex[(c >> 4) & 15], u[5] = hex[c & 15];
    put(w, u, 6);
}

/* One code point of valid UTF-8 (checked before: utf8_valid) at s[*i]. */
static uint32_t next_code_point(const uint8_t *s, uint32_t *i) {
    uint32_t c = s[*i];
    if (c < 0x80) {
        *i += 1;
        return c;
    }
    if (c < 0xE0) {
        c = ((c & 0x1F) << 6) | (s[*i + 1] & 0x3F);
        *i += 2;
    } else if (c < 0xF0) {
        c = ((c & 0x0F) << 12) | ((s[*i + 1] & 0x3Fu) << 6) | (s[*i + 2] & 0x3F);
        *i += 3;
    } else {
        c = ((c & 0x07) << 18) | ((s[*i + 1] & 0x3Fu) << 12) | ((s[*i + 2] & 0x3Fu) << 6) |
            (s[*i + 3] & 0x3F);
        *i += 4;
    }
    return c;
}

/* _quote(text): a str as json.dumps writes it. ``json``: s is the inside of a JSON string
   (its escapes, checked by the parser, are decoded first), else a plain text. */
static void put_quoted(writer *w, const uint8_t *s, uint32_t n, int json) {
    uint32_t i = 0;
    PUTS(w, "\"");
    while (i < n && !w->full) {
        uint32_t c = s[i];
        if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') {
            uint32_t run = i + 1;
            while (run < n && s[run] >= 0x20 && s[run] < 0x7F && s[run] != '"' && s[run] != '\\')
                run++;
            put(w, (const char *)s + i, run - i);
            i = run;
            continue;
        }
        if (json && c == '\\') {
            switch (s[i + 1]) {
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'n': c = '\n'; break;
            case 'r': c = '\r'; break;
            case 't': c = '\t'; break;
            default: c = s[i + 1]; /* " \ / */
            }
            i += 2;
        } else {
            c = next_code_point(s, &i);
        }
        put_escaped(w, c);
    }
    PUTS(w, "\"");
}

/* --- otlp_json_direct: _value, _attributes --------------------------------------------- */

static int put_value(writer *w, const jdoc *d, uint32_t node, int clean);

/* The KeyValues of an object (its pairs), "" keys left out when ``clean``; how many. */
static int put_key_values(writer *w, const jdoc *d, uint32_t object, int clean, int *written) {
    uint32_t k = j_first(object), i;
    *written = 0;
    for (i = 0; i < d->n[object].count; i++) {
        uint32_t value = d->n[k].next;
        if (d->n[k].len || !clean) {
            if (*written)
                PUTS(w, ",");
            if (d->n[k].len) {
                PUTS(w, "{\"key\":");
                put_quoted(w, d->n[k].s, d->n[k].len, 1);
                PUTS(w, ",\"value\":");
            } else {
                PUTS(w, "{\"value\":");
            }
            if (put_value(w, d, value, clean))
                return -1;
            PUTS(w, "}");
            ++*written;
        }
        k = d->n[value].next;
    }
    return 0;
}

/* _value(value, clean): -1 where the Python path would leave the value out (an integer
   beyond 64 bits cannot be here: the parser refused it) */
static int put_value(writer *w, const jdoc *d, uint32_t node, int clean) {
    const jnode *v = &d->n[node];
    switch (v->type) {
    case J_STR:
        PUTS(w, "{\"stringValue\":");
        put_quoted(w, v->s, v->len, 1);
        PUTS(w, "}");
        return 0;
    case J_TRUE: PUTS(w, "{\"boolValue\":true}"); return 0;
    case J_FALSE: PUTS(w, "{\"boolValue\":false}"); return 0;
    case J_NULL: PUTS(w, "{}"); return 0;
    case J_INT:
        if (!j_in_s64(v))
            return -1;
        PUTS(w, "{\"intValue\":\"");
        if (v->neg)
            PUTS(w, "-");
        put_u64(w, v->mag);
        PUTS(w, "\"}");
        return 0;
    case J_ARR: {
        uint32_t item = j_first(node), i;
        if (!v->count) {
            PUTS(w, "{\"arrayValue\":{}}");
            return 0;
        }
        PUTS(w, "{\"arrayValue\":{\"values\":[");
        for (i = 0; i < v->count; i++) {
            if (i)
                PUTS(w, ",");
            if (put_value(w, d, item, clean))
                return -1;
            item = d->n[item].next;
        }
        PUTS(w, "]}}");
        return 0;
    }
    case J_OBJ: {
        size_t start = w->len;
        int written;
        PUTS(w, "{\"kvlistValue\":{\"values\":[");
        if (put_key_values(w, d, node, clean, &written))
            return -1;
        if (!written) {
            w->len = start;
            PUTS(w, "{\"kvlistValue\":{}}");
        } else {
            PUTS(w, "]}}");
        }
        return 0;
    }
    }
    return -1;
}

/* ``,"attributes":[...]`` of an attributes object, if it writes any (_attributes). */
static int put_attributes(writer *w, const jdoc *d, uint32_t object, const char *before) {
    size_t start = w->len;
    int written;
    if (!d->n[object].count)
        return 0;
    put(w, before, strlen(before));
    PUTS(w, "\"attributes\":[");
    if (put_key_values(w, d, object, 1, &written))
        return -1;
    if (!written)
        w->len = start;
    else
        PUTS(w, "]");
    return 0;
}

/* otlp_json_direct._event, of a checked event */
static int put_event(writer *w, jdoc *d, uint32_t node) {
    event_fields e;
    size_t start;
    int written = 0;
    if (get_event(d, node, &e))
        return -1;
    PUTS(w, "{");
    if (e.time_ns) {
        PUTS(w, "\"timeUnixNano\":\"");
        put_u64(w, e.time_ns);
        PUTS(w, "\"");
        written = 1;
    }
    if (d->n[e.name].len) {
        if (written)
            PUTS(w, ",");
        PUTS(w, "\"name\":");
        put_quoted(w, d->n[e.name].s, d->n[e.name].len, 1);
        written = 1;
    }
    start = w->len;
    if (put_attributes(w, d, e.attributes, written ? "," : ""))
        return -1;
    if (w->len != start)
        written = 1;
    if (e.dropped) {
        if (written)
            PUTS(w, ",");
        PUTS(w, "\"droppedAttributesCount\":");
        put_u64(w, e.dropped);
    }
    PUTS(w, "}");
    return 0;
}

/* otlp_json_direct._link, of a checked link */
static int put_link(writer *w, jdoc *d, uint32_t node) {
    link_fields l;
    if (get_link(d, node, &l))
        return -1;
    PUTS(w, "{\"traceId\":\"");
    put(w, (const char *)d->n[l.trace_id].s, 32);
    PUTS(w, "\",\"spanId\":\"");
    put(w, (const char *)d->n[l.span_id].s, 16);
    PUTS(w, "\"");
    if (put_attributes(w, d, l.attributes, ","))
        return -1;
    if (l.dropped) {
        PUTS(w, ",\"droppedAttributesCount\":");
        put_u64(w, l.dropped);
    }
    if (l.remote)
        PUTS(w, ",\"flags\":768}");
    else
        PUTS(w, ",\"flags\":256}");
    return 0;
}

/* A JSON list of objects (events, links), each written by one; -1: the Python path. */
static int put_list(writer *w, jdoc *d, text t, const char *key,
                    int (*one)(writer *, jdoc *, uint32_t)) {
    uint32_t item, count, i;
    if (get_list(d, t, &item, &count))
        return -1;
    if (!count)
        return 0;
    put(w, key, strlen(key));
    PUTS(w, "[");
    for (i = 0; i < count; i++) {
        if (i)
            PUTS(w, ",");
        if (one(w, d, item))
            return -1;
        item = d->n[item].next;
    }
    PUTS(w, "]");
    return 0;
}

/* RecordChecker.span (but its scope, which Python checks once per text), then
   otlp_json_direct.span_item. */
static int json_span(writer *w, jdoc *d, const fields *f) {
    const uint64_t *v = f->ints;
    const text *t = f->texts;
    uint32_t attributes;
    uint64_t code = v[SPAN_STATUS_CODE];
    int flags = CONTEXT_HAS_IS_REMOTE_MASK;
    if (!span_ok(f))
        return -1;
    PUTS(w, "{\"traceId\":\"");
    put(w, (const char *)t[SPAN_TRACE_ID].s, 32);
    PUTS(w, "\",\"spanId\":\"");
    put(w, (const char *)t[SPAN_SPAN_ID].s, 16);
    PUTS(w, "\"");
    if (v[SPAN_PARENT_FLAGS] & PARENT_PRESENT) {
        PUTS(w, ",\"parentSpanId\":\"");
        put(w, (const char *)t[SPAN_PARENT_ID].s, 16);
        PUTS(w, "\"");
        if (v[SPAN_PARENT_FLAGS] & PARENT_REMOTE)
            flags |= CONTEXT_IS_REMOTE_MASK;
    }
    if (t[SPAN_NAME].len) {
        PUTS(w, ",\"name\":");
        put_quoted(w, t[SPAN_NAME].s, t[SPAN_NAME].len, 0);
    }
    PUTS(w, ",\"kind\":");
    put_u64(w, v[SPAN_KIND] + 1);
    if (v[SPAN_START]) {
        PUTS(w, ",\"startTimeUnixNano\":\"");
        put_u64(w, v[SPAN_START]);
        PUTS(w, "\"");
    }
    if (v[SPAN_END]) {
        PUTS(w, ",\"endTimeUnixNano\":\"");
        put_u64(w, v[SPAN_END]);
        PUTS(w, "\"");
    }
    if (get_object(d, t[SPAN_ATTRIBUTES], &attributes) || put_attributes(w, d, attributes, ","))
        return -1;
    if (v[SPAN_DROPPED_ATTRIBUTES]) {
        PUTS(w, ",\"droppedAttributesCount\":");
        put_u64(w, v[SPAN_DROPPED_ATTRIBUTES]);
    }
    if (put_list(w, d, t[SPAN_EVENTS], ",\"events\":", put_event))
        return -1;
    if (v[SPAN_DROPPED_EVENTS]) {
        PUTS(w, ",\"droppedEventsCount\":");
        put_u64(w, v[SPAN_DROPPED_EVENTS]);
    }
    if (put_list(w, d, t[SPAN_LINKS], ",\"links\":", put_link))
        return -1;
    if (v[SPAN_DROPPED_LINKS]) {
        PUTS(w, ",\"droppedLinksCount\":");
        put_u64(w, v[SPAN_DROPPED_LINKS]);
    }
    if (code == 2 && t[SPAN_STATUS_DESCRIPTION].len) {
        PUTS(w, ",\"status\":{\"message\":");
        put_quoted(w, t[SPAN_STATUS_DESCRIPTION].s, t[SPAN_STATUS_DESCRIPTION].len, 0);
        PUTS(w, ",\"code\":2}");
    } else if (code) {
        PUTS(w, ",\"status\":{\"code\":");
        put_u64(w, code);
        PUTS(w, "}");
    } else {
        PUTS(w, ",\"status\":{}");
    }
    PUTS(w, ",\"flags\":");
    put_u64(w, (uint64_t)flags);
    PUTS(w, "}");
    return 0;
}

/* RecordChecker.log (but its scope), then otlp_json_direct.log_item. */
static int json_log(writer *w, jdoc *d, const fields *f) {
    const uint64_t *v = f->ints;
    const text *t = f->texts;
    uint32_t body, attributes;
    int written = 0;
    if (!log_ok(f))
        return -1;
    PUTS(w, "{");
    if (v[LOG_TIME]) {
        PUTS(w, "\"timeUnixNano\":\"");
        put_u64(w, v[LOG_TIME]);
        PUTS(w, "\"");
        written = 1;
    }
    if (v[LOG_SEVERITY_NUMBER]) {
        if (written)
            PUTS(w, ",");
        PUTS(w, "\"severityNumber\":");
        put_u64(w, v[LOG_SEVERITY_NUMBER]);
        written = 1;
    }
    if ((v[LOG_FLAGS] & HAS_SEVERITY_TEXT) && t[LOG_SEVERITY_TEXT].len) {
        if (written)
            PUTS(w, ",");
        PUTS(w, "\"severityText\":");
        put_quoted(w, t[LOG_SEVERITY_TEXT].s, t[LOG_SEVERITY_TEXT].len, 0);
        written = 1;
    }
    if (written)
        PUTS(w, ",");
    PUTS(w, "\"body\":");
    if (j_parse(d, t[LOG_BODY].s, t[LOG_BODY].len, &body) || put_value(w, d, body, 0))
        return -1;
    if (get_object(d, t[LOG_ATTRIBUTES], &attributes) || put_attributes(w, d, attributes, ","))
        return -1;
    if (v[LOG_DROPPED_ATTRIBUTES]) {
        PUTS(w, ",\"droppedAttributesCount\":");
        put_u64(w, v[LOG_DROPPED_ATTRIBUTES]);
    }
    if (v[LOG_TRACE_FLAGS]) {
        PUTS(w, ",\"flags\":");
        put_u64(w, v[LOG_TRACE_FLAGS]);
    }
    if (!all_zero_digits(t[LOG_TRACE_ID].s, 32)) {
        PUTS(w, ",\"traceId\":\"");
        put(w, (const char *)t[LOG_TRACE_ID].s, 32);
        PUTS(w, "\"");
    }
    if (!all_zero_digits(t[LOG_SPAN_ID].s, 16)) {
        PUTS(w, ",\"spanId\":\"");
        put(w, (const char *)t[LOG_SPAN_ID].s, 16);
        PUTS(w, "\"");
    }
    if (v[LOG_OBSERVED_TIME]) {
        PUTS(w, ",\"observedTimeUnixNano\":\"");
        put_u64(w, v[LOG_OBSERVED_TIME]);
        PUTS(w, "\"");
    }
    if ((v[LOG_FLAGS] & HAS_EVENT_NAME) && t[LOG_EVENT_NAME].len) {
        PUTS(w, ",\"eventName\":");
        put_quoted(w, t[LOG_EVENT_NAME].s, t[LOG_EVENT_NAME].len, 0);
    }
    PUTS(w, "}");
    return 0;
}
