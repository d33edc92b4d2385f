// Copyright The OpenTelemetry Authors
// SPDX-License-Identifier: Apache-2.0

// Logs as the .NET Geneva exporter writes them to user_events (opentelemetry-dotnet-contrib,
// src/OpenTelemetry.Exporter.Geneva/Internal/EventHeader/EventHeaderLogExporter.cs and
// Internal/Tld/, as docs/common-schema.md cites them), built with LinuxTracepoints'
// EventHeaderDynamic.h: event "Log" on PROVIDER_L4K1 (level 4 whatever the severity);
// __csver__ 0x400 as a 2-byte hex int; every string UTF-16 (char16); PartA time (at most 6
// fraction digits, trailing zeros trimmed), ext_dt_traceId and ext_dt_spanId only when
// set, ext_cloud_role, ext_cloud_roleInstance, ext_ex_type and ext_ex_msg for an exception;
// PartB _typeName, severityText, severityNumber (u8), eventId (i32, when not the default),
// body, name (the category); PartC an array of ints, an array of strings, a string, and
// env_properties (a JSON object of the values not mapped to columns).
//
// dotnet_log_writer PROVIDER COUNT ROLE INSTANCE [--wait-enabled] [--go FILE]
// prints one JSON line per log written, with the values it wrote (strings as UTF-8).

#include <eventheader/EventHeaderDynamic.h>

#include <string>

#include "writer.h"

namespace {

// UTF-8 (well formed: the writer's own literals) to UTF-16
std::u16string utf16(std::string const& text) {
    std::u16string out;
    for (size_t i = 0; i < text.size();) {
        unsigned char c = text[i];
        int extra = c < 0x80 ? 0 : c < 0xE0 ? 1 : c < 0xF0 ? 2 : 3;
        uint32_t point = extra == 0 ? c : c & (0x3F >> extra);
        for (int k = 1; k <= extra; k++) point = (point << 6) | (text[i + k] & 0x3F);
        i += 1 + extra;
        if (point >= 0x10000) {
            point -= 0x10000;
            out += char16_t(0xD800 + (point >> 10));
            out += char16_t(0xDC00 + (point & 0x3FF));
        } else {
            out += char16_t(point);
        }
    }
    return out;
}

void add(ehd::EventBuilder& eb, char const* name, std::string const& value) {
    eb.AddString<char16_t>(name, utf16(value), event_field_format_default);
}

}  // namespace

int main(int argc, char** argv) {
    writer::Options options = writer::parse(argc, argv);
    if (options.positional.size() != 4) {
        std::fprintf(stderr, "usage: dotnet_log_writer PROVIDER COUNT ROLE INSTANCE "
                             "[--wait-enabled] [--go FILE]\n");
        return 2;
    }
    std::string const& role = options.positional[2];
    std::string const& instance = options.positional[3];
    int count = std::atoi(options.positional[1].c_str());
    ehd::Provider provider(options.positional[0]);
    auto logs = provider.RegisterSet(event_level_information, 1);
    if (!logs || logs->Errno()) {
        std::fprintf(stderr, "register: errno %d\n", logs ? logs->Errno() : 12);
        return 1;
    }
    if (!writer::ready(options, [&] { return logs->Enabled(); })) return 1;

    static char const* const fractions[] = {"", ".25", ".123456"};
    static char const* const levels[] = {"Information", "Warning", "Error"};
    std::string const tags[] = {"blue", "grün"};
    std::u16string const tags16[] = {utf16(tags[0]), utf16(tags[1])};
    ehd::EventBuilder eb;
    for (int number = 0; number < count; number++) {
        char time[64];
        std::snprintf(time, sizeof time, "2025-07-24T08:09:%02d%sZ", 10 + number % 40,
                      fractions[number % 3]);
        bool traced = number % 2 == 0, failed = number % 3 == 2, has_id = number % 2 == 1;
        char trace[40], span[24];
        std::snprintf(trace, sizeof trace, "0af7651916cd43dd8448eb211c80%04x", number);
        std::snprintf(span, sizeof span, "b7ad6b716920%04x", number);
        uint8_t severity = 9 + 4 * (number % 3);
        int32_t event_id = 100 + number;
        std::string body = "Order " + std::to_string(number) + " shipped to Zürich";
        std::string props = "{\"tenant\":\"t1\",\"n\":" + std::to_string(number) +
                            ",\"deep\":{\"x\":true}}";
        int32_t ids[] = {number, number + 1, number + 2};

        eb.Reset("Log");
        eb.AddValue("__csver__", uint16_t(0x400), event_field_format_hex_int);
        size_t part_a;
        uint8_t a_count = 3;
        eb.AddStruct("PartA", a_count, 0, &part_a);
        add(eb, "time", time);
        if (traced) {
            add(eb, "ext_dt_traceId", trace);
            add(eb, "ext_dt_spanId", span);
            a_count += 2;
        }
        add(eb, "ext_cloud_role", role);
        add(eb, "ext_cloud_roleInstance", instance);
        if (failed) {
            add(eb, "ext_ex_type", "System.TimeoutException");
            add(eb, "ext_ex_msg", "timed out");
            a_count += 2;
        }
        eb.SetStructFieldCount(part_a, a_count);
        size_t part_b;
        uint8_t b_count = 5;
        eb.AddStruct("PartB", b_count, 0, &part_b);
        add(eb, "_typeName", "Log");
        add(eb, "severityText", levels[number % 3]);
        eb.AddValue("severityNumber", severity, event_field_format_default);
        if (has_id) {
            eb.AddValue("eventId", event_id, event_field_format_signed_int);
            b_count++;
        }
        add(eb, "body", body);
        add(eb, "name", "Orders.Shipping");
        eb.SetStructFieldCount(part_b, b_count);
        eb.AddStruct("PartC", 4);
        eb.AddValueRange("ids", &ids[0], &ids[3], event_field_format_signed_int);
        eb.AddStringRange<char16_t>("tags", &tags16[0], &tags16[2], event_field_format_default);
        add(eb, "Id", "ü-42");
        add(eb, "env_properties", props);
        int error = eb.Write(*logs);
        if (error) {
            std::fprintf(stderr, "write: errno %d\n", error);
            return 1;
        }

        writer::Json line;
        line.str("time", time);
        line.add("traceId", traced ? writer::quoted(trace) : "null");
        line.add("spanId", traced ? writer::quoted(span) : "null");
        line.str("role", role).str("roleInstance", instance);
        line.add("exceptionType", failed ? writer::quoted("System.TimeoutException") : "null");
        line.add("exceptionMessage", failed ? writer::quoted("timed out") : "null");
        line.str("severityText", levels[number % 3]).num("severityNumber", severity);
        line.add("eventId", has_id ? std::to_string(event_id) : "null");
        line.str("body", body).str("name", "Orders.Shipping");
        line.add("ids", "[" + std::to_string(ids[0]) + "," + std::to_string(ids[1]) + "," +
                            std::to_string(ids[2]) + "]");
        line.add("tags", "[" + writer::quoted(tags[0]) + "," + writer::quoted(tags[1]) + "]");
        line.str("Id", "ü-42").add("env_properties", props);
        writer::say(line);
    }
    return 0;
}
