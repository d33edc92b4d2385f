// Copyright The OpenTelemetry Authors
// SPDX-License-Identifier: Apache-2.0

// Metrics as opentelemetry-rust-contrib's opentelemetry-user-events-metrics writes them
// (src/tracepoint/mod.rs): a plain tracepoint registered with LinuxTracepoints'
// tracepoint.h as "otlp_metrics u32 protocol;char[8] version;__rel_loc u8[] buffer;",
// protocol 0 (protobuf), version "v0.19.00", and the buffer an OTLP
// ExportMetricsServiceRequest (its __rel_loc: size << 16, offset 0 from the end of the
// rel_loc field).
//
// otlp_metrics_writer BUFFER_FILE... [--wait-enabled] [--go FILE]
// writes one event per file, in order; prints one JSON line per event written.

#include <tracepoint/tracepoint.h>

#include <fstream>
#include <iterator>
#include <string>

#include "writer.h"

namespace {

char const COMMAND[] = "otlp_metrics u32 protocol;char[8] version;__rel_loc u8[] buffer;";
char const VERSION[8] = {'v', '0', '.', '1', '9', '.', '0', '0'};

tracepoint_provider_state provider = TRACEPOINT_PROVIDER_STATE_INIT;

}  // namespace

int main(int argc, char** argv) {
    writer::Options options = writer::parse(argc, argv);
    if (options.positional.empty()) {
        std::fprintf(stderr, "usage: otlp_metrics_writer BUFFER_FILE... [--wait-enabled] [--go FILE]\n");
        return 2;
    }
    std::vector<std::string> buffers;
    for (auto const& path : options.positional) {
        std::ifstream file(path, std::ios::binary);
        if (!file) {
            std::fprintf(stderr, "cannot read %s\n", path.c_str());
            return 2;
        }
        buffers.emplace_back(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
        if (buffers.back().size() > 0xFFFF) {  // as the Rust writer refuses it
            std::fprintf(stderr, "%s: over 65535 bytes\n", path.c_str());
            return 2;
        }
    }
    int error = tracepoint_open_provider(&provider);
    tracepoint_state metrics = TRACEPOINT_STATE_INIT;
    if (!error) error = tracepoint_connect(&metrics, &provider, COMMAND);
    if (error) {
        std::fprintf(stderr, "register: errno %d\n", error);
        return 1;
    }
    if (!writer::ready(options, [&] { return TRACEPOINT_ENABLED(&metrics) != 0; })) return 1;

    uint32_t protocol = 0;
    for (size_t number = 0; number < buffers.size(); number++) {
        std::string const& buffer = buffers[number];
        uint32_t rel_loc = uint32_t(buffer.size()) << 16;
        struct iovec data[] = {
            {nullptr, 0},  // tracepoint_write's own
            {&protocol, sizeof protocol},
            {const_cast<char*>(VERSION), sizeof VERSION},
            {&rel_loc, sizeof rel_loc},
            {const_cast<char*>(buffer.data()), buffer.size()},
        };
        error = tracepoint_write(&metrics, 5, data);
        if (error) {
            std::fprintf(stderr, "write: errno %d\n", error);
            return 1;
        }
        writer::Json line;
        line.num("protocol", protocol).str("version", std::string(VERSION, 8));
        line.num("size", static_cast<long long>(buffer.size()));
        writer::say(line);
    }
    tracepoint_close_provider(&provider);
    return 0;
}
