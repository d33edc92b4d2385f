// Copyright The OpenTelemetry Authors
// SPDX-License-Identifier: Apache-2.0

// Spans as opentelemetry-rust-contrib's opentelemetry-user-events-trace writes them
// (src/trace/exporter.rs, as docs/common-schema.md cites it), built with LinuxTracepoints'
// EventHeaderDynamic.h: event "Span" on PROVIDER_L4K1; __csver__ 1024 as a 4-byte unsigned
// int; PartA time (the end, RFC 3339 with 0, 3, 6 or 9 fraction digits and Z),
// ext_dt_traceId, ext_dt_spanId, ext_cloud_role, ext_cloud_roleInstance; PartB _typeName,
// name, parentId (absent for a root), startTime, success, kind, the renamed attributes,
// links as JSON and statusMessage on an error; PartC the other attributes (bool, i64, f64,
// string).
//
// rust_span_writer PROVIDER COUNT ROLE INSTANCE [--wait-enabled] [--go FILE]
// prints one JSON line per span written, with the values it wrote.

#include <eventheader/EventHeaderDynamic.h>

#include <string>

#include "writer.h"

namespace {

std::string hex(std::string const& stem, int number) {
    char tail[8];
    std::snprintf(tail, sizeof tail, "%02x", number & 0xff);
    return stem + tail;
}

// chrono's to_rfc3339_opts(AutoSi, true): 0, 3, 6 or 9 fraction digits, then Z
std::string end_time(int number) {
    static char const* const fractions[] = {"", ".123", ".123456", ".123456789"};
    char text[64];
    std::snprintf(text, sizeof text, "2025-07-11T10:00:%02d%sZ", 1 + number % 50,
                  fractions[number % 4]);
    return text;
}

}  // namespace

int main(int argc, char** argv) {
    writer::Options options = writer::parse(argc, argv);
    if (options.positional.size() != 4) {
        std::fprintf(stderr, "usage: rust_span_writer PROVIDER COUNT ROLE INSTANCE "
                             "[--wait-enabled] [--go FILE]\n");
        return 2;
    }
    std::string const& role = options.positional[2];
    std::string const& instance = options.positional[3];
    int count = std::atoi(options.positional[1].c_str());
    ehd::Provider provider(options.positional[0]);
    auto spans = provider.RegisterSet(event_level_information, 1);
    if (!spans || spans->Errno()) {
        std::fprintf(stderr, "register: errno %d\n", spans ? spans->Errno() : 12);
        return 1;
    }
    if (!writer::ready(options, [&] { return spans->Enabled(); })) return 1;

    std::string const trace_stem = "5b8efff798038103d269b633813fc6";
    std::string const span_stem = "eee19b7ec3c1b1";
    std::string const start = "2025-07-11T10:00:00.500Z";
    ehd::EventBuilder eb;
    for (int number = 0; number < count; number++) {
        std::string trace = hex(trace_stem, number / 4), span = hex(span_stem, number);
        std::string parent = number % 4 ? hex(span_stem, number - number % 4) : "";
        std::string time = end_time(number), name = "GET /users/" + std::to_string(number);
        uint32_t kind = number % 5;
        bool success = number % 3 != 2;
        std::string links = number % 4 == 1
            ? "[{\"toTraceId\":\"" + hex(trace_stem, 200) + "\",\"toSpanId\":\"" +
                  hex(span_stem, 200) + "\"},{\"toTraceId\":\"" + hex(trace_stem, 201) +
                  "\",\"toSpanId\":\"" + hex(span_stem, 201) + "\"}]"
            : "";
        int64_t retries = -number;
        double ratio = 0.25 * number;
        bool cached = number % 2;

        eb.Reset("Span");
        eb.AddValue("__csver__", uint32_t(1024), event_field_format_unsigned_int);
        size_t part_a;
        eb.AddStruct("PartA", 5, 0, &part_a);
        eb.AddString<char>("time", time, event_field_format_default);
        eb.AddString<char>("ext_dt_traceId", trace, event_field_format_default);
        eb.AddString<char>("ext_dt_spanId", span, event_field_format_default);
        eb.AddString<char>("ext_cloud_role", role, event_field_format_default);
        eb.AddString<char>("ext_cloud_roleInstance", instance, event_field_format_default);
        size_t part_b;
        uint8_t b_count = 6;
        eb.AddStruct("PartB", b_count, 0, &part_b);
        eb.AddString<char>("_typeName", "Span", event_field_format_default);
        eb.AddString<char>("name", name, event_field_format_default);
        if (!parent.empty()) {
            eb.AddString<char>("parentId", parent, event_field_format_default);
            b_count++;
        }
        eb.AddString<char>("startTime", start, event_field_format_default);
        eb.AddValue("success", success, event_field_format_boolean);
        eb.AddValue("kind", kind, event_field_format_unsigned_int);
        eb.AddString<char>("httpMethod", "GET", event_field_format_default);
        if (success) {
            eb.AddValue("httpStatusCode", int64_t(200), event_field_format_signed_int);
            b_count++;
        } else {
            eb.AddString<char>("statusMessage", "upstream down", event_field_format_default);
            b_count++;
        }
        if (!links.empty()) {
            eb.AddString<char>("links", links, event_field_format_default);
            b_count++;
        }
        eb.SetStructFieldCount(part_b, b_count);
        eb.AddStruct("PartC", 4);
        eb.AddString<char>("user", "ann", event_field_format_default);
        eb.AddValue("retries", retries, event_field_format_signed_int);
        eb.AddValue("ratio", ratio, event_field_format_float);
        eb.AddValue("cached", cached, event_field_format_boolean);
        int error = eb.Write(*spans);
        if (error) {
            std::fprintf(stderr, "write: errno %d\n", error);
            return 1;
        }

        writer::Json attributes;
        attributes.str("user", "ann").num("retries", retries).add("ratio", std::to_string(ratio));
        attributes.boolean("cached", cached);
        writer::Json line;
        line.str("name", name).str("traceId", trace).str("spanId", span);
        line.add("parentId", parent.empty() ? "null" : writer::quoted(parent));
        line.str("startTime", start).str("time", time).num("kind", kind);
        line.boolean("success", success).str("httpMethod", "GET");
        line.add("httpStatusCode", success ? "200" : "null");
        line.add("statusMessage", success ? "null" : writer::quoted("upstream down"));
        line.add("links", links.empty() ? "[]" : links);
        line.str("role", role).str("roleInstance", instance);
        line.add("attributes", attributes.text());
        writer::say(line);
    }
    return 0;
}
