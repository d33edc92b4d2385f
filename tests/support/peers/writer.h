// Copyright The OpenTelemetry Authors
// SPDX-License-Identifier: Apache-2.0

// What the test writers share: their command line, the bounded waits before they write,
// and the JSON line in which each says what it wrote (so a test compares a reader's
// output with the values written, not with values it guessed).

#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>

namespace writer {

// Seconds a writer waits for its tracepoint to be enabled, or for the go file: a bound on
// a test, generous for an emulated guest on a loaded host.
constexpr int WAIT_SECONDS = 180;

struct Options {
    std::vector<std::string> positional;
    bool wait_enabled = false;  // --wait-enabled: write only once something listens
    std::string go;             // --go FILE: write only once FILE exists
};

inline Options parse(int argc, char** argv) {
    Options options;
    for (int i = 1; i < argc; i++) {
        if (!std::strcmp(argv[i], "--wait-enabled")) {
            options.wait_enabled = true;
        } else if (!std::strcmp(argv[i], "--go") && i + 1 < argc) {
            options.go = argv[++i];
        } else {
            options.positional.emplace_back(argv[i]);
        }
    }
    return options;
}

inline bool wait_for(std::function<bool()> done) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(WAIT_SECONDS);
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
}

// Waits as asked; false (after saying why on stderr) when a bound ran out.
inline bool ready(Options const& options, std::function<bool()> enabled) {
    if (!options.go.empty()) {
        std::fprintf(stderr, "registered; waiting for %s\n", options.go.c_str());
        struct stat st;
        if (!wait_for([&] { return stat(options.go.c_str(), &st) == 0; })) {
            std::fprintf(stderr, "no %s within %d s\n", options.go.c_str(), WAIT_SECONDS);
            return false;
        }
    }
    if (options.wait_enabled && !wait_for(enabled)) {
        std::fprintf(stderr, "not enabled within %d s\n", WAIT_SECONDS);
        return false;
    }
    return true;
}

inline std::string quoted(std::string const& text) {
    std::string out = "\"";
    for (unsigned char c : text) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c < 0x20) {
            char escaped[8];
            std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
            out += escaped;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out + "\"";
}

// One JSON object, members in the order added; values already JSON text.
class Json {
public:
    Json& add(std::string const& name, std::string const& json_value) {
        text_ += (text_.empty() ? "{" : ",") + quoted(name) + ":" + json_value;
        return *this;
    }
    Json& str(std::string const& name, std::string const& value) {
        return add(name, quoted(value));
    }
    Json& num(std::string const& name, long long value) {
        return add(name, std::to_string(value));
    }
    Json& boolean(std::string const& name, bool value) {
        return add(name, value ? "true" : "false");
    }
    std::string text() const { return text_.empty() ? "{}" : text_ + "}"; }

private:
    std::string text_;
};

inline void say(Json const& line) {
    std::printf("%s\n", line.text().c_str());
    std::fflush(stdout);
}

}  // namespace writer
