/* Copyright The OpenTelemetry Authors
 * SPDX-License-Identifier: Apache-2.0
 *
 * The reader's native core: ring-buffer pages (or perf samples) of our span and log
 * tracepoints in, each record checked and encoded as its OTLP/JSON item out, or handed
 * back to the Python path (reader/pipeline/native_chunk.py) whenever the core is not
 * sure it would write exactly what the Python path writes. This header is read twice:
 * by the C compiler, and by cffi's cdef (so: declarations and integer constants only).
 */

#define UEV_SPAN 1
#define UEV_LOG 2

#define UEV_INT 0
#define UEV_CHARS 1
#define UEV_TEXT 2

#define UEV_MAX_FIELDS 24
#define UEV_MAX_PLANS 4096

/* what an entry is */
#define UEV_E_SPAN 1   /* a span, checked and encoded */
#define UEV_E_LOG 2    /* a log, checked and encoded */
#define UEV_E_RECORD 3 /* a record the Python path decodes (rec_off, rec_len) */
#define UEV_E_PAGE 4   /* a whole page the Python path decodes (rec_off, rec_len) */

/* what an item is */
#define UEV_OTLP_JSON 0  /* a span's or log's OTLP/JSON object (otlp_json_direct) */
#define UEV_OTLP_PROTO 1 /* its ScopeSpans.spans or ScopeLogs.log_records field
                            (otlp_proto_direct) */

typedef struct {
    uint16_t offset;
    uint16_t size;
    uint8_t kind;      /* UEV_INT, UEV_CHARS or UEV_TEXT */
    uint8_t is_signed; /* as the format says (a signed field is left to Python) */
} uev_field;

typedef struct {
    uint8_t kind;      /* UEV_SPAN or UEV_LOG */
    uint8_t nfields;   /* the schema's, in the order of core.c's SPAN_* or LOG_* */
    uint32_t needed;   /* the bytes a record must have: the end of its last field */
    uev_field f[UEV_MAX_FIELDS];
} uev_plan;

typedef struct {
    uint32_t timestamp_offset;
    uint32_t commit_offset;
    uint32_t data_offset;
} uev_layout;

typedef struct {
    uint64_t timestamp;   /* the kernel's time of the write */
    uint64_t resource_id;
    uint32_t item_off;    /* the item, in the text arena */
    uint32_t item_len;
    uint32_t rec_off;     /* the record (or page), in the input */
    uint32_t rec_len;
    int32_t pid;
    int32_t scope;        /* index in the scope table */
    uint16_t plan;
    uint8_t status;       /* UEV_E_* */
    uint8_t truncated;
} uev_entry;

typedef struct {
    uint32_t off;         /* in the input */
    uint32_t len;
} uev_scope;

typedef struct {
    uint32_t encoding;    /* UEV_OTLP_JSON or UEV_OTLP_PROTO */
    uev_entry *entries;
    size_t entries_cap;
    size_t entries_len;
    char *text;           /* the items: ASCII JSON, or protobuf */
    size_t text_cap;
    size_t text_len;
    uev_scope *scopes;    /* distinct scope texts of this call */
    size_t scopes_cap;
    size_t scopes_len;
    uint64_t pages;       /* pages decoded here (not those handed back) */
    uint64_t missed_pages;
    uint64_t records;     /* records encoded here */
} uev_out;

typedef struct uev_core uev_core;

uev_core *uev_core_new(void);
void uev_core_free(uev_core *core);
/* Decode records of event_id with plan from now on (its index: the entries' plan);
   -1 if the plan is not one the core takes (the Python path decodes them). */
int uev_core_set(uev_core *core, uint16_t event_id, const uev_plan *plan);
void uev_core_clear(uev_core *core);

/* count pages, lens[i] bytes each, one after the other in buf */
void uev_decode_pages(const uev_core *core, const uint8_t *buf, const uint32_t *lens,
                      size_t count, const uev_layout *layout, uev_out *out);
/* count records taken outside pages (perf samples) */
void uev_decode_records(const uev_core *core, const uint8_t *buf, const uint32_t *lens,
                        const uint64_t *timestamps, size_t count, uev_out *out);
