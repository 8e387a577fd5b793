// The C++ reference's figures for tools/data/parse_bench.jsonl, measured on this machine (autoparser's own
// benchmark driver, linked against llama.cpp's `common`; llama.cpp is MIT-licensed, see NOTICE).
//
// For each request: generate the parser as llama.cpp's server does (common_chat_templates_apply, reasoning
// format auto), then time one full parse of the output (best mean of repeated runs) and a streamed total
// where the output arrives 4 bytes at a time and the whole prefix is parsed again at every step, as the
// server does. Prints one tab-separated line per request:
//   id  bytes  full_parse_us  streamed_total_ms  steps
// Usage: bench_chat <requests.jsonl>   (each line's "template" is a path to the template file)
#include "chat.h"
#include "json.h"
#include "peg-parser.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

using clk = std::chrono::steady_clock;

static std::string read_file(const std::string & path) {
    std::ifstream f(path);
    if (!f) {
        throw std::runtime_error("cannot read " + path);
    }
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// best-of-`repeat` mean time per call, in seconds, each round running for at least `min_time`
template <typename F> static double best_mean(F f, double min_time, int repeat) {
    double best = 1e9;
    for (int r = 0; r < repeat; r++) {
        int n = 0;
        double elapsed = 0;
        auto t0 = clk::now();
        do {
            f();
            n++;
            elapsed = std::chrono::duration<double>(clk::now() - t0).count();
        } while (elapsed < min_time);
        best = std::min(best, elapsed / n);
    }
    return best;
}

int main(int argc, char ** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s <requests.jsonl>\n", argv[0]);
        return 2;
    }
    std::ifstream in(argv[1]);
    if (!in) {
        fprintf(stderr, "cannot read %s\n", argv[1]);
        return 2;
    }
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) {
            continue;
        }
        const auto c = common_json::parse(line);
        auto tmpls = common_chat_templates_ptr(common_chat_templates_init(nullptr, read_file(c["template"].get<std::string>())));
        common_chat_templates_inputs inputs;
        inputs.messages = common_chat_msgs_parse_oaicompat(c["messages"]);
        if (c.contains("tools") && !c["tools"].is_null()) {
            inputs.tools = common_chat_tools_parse_oaicompat(c["tools"]);
        }
        inputs.reasoning_format = COMMON_REASONING_FORMAT_AUTO;
        inputs.add_generation_prompt = true;
        inputs.use_jinja = true;
        const auto params = common_chat_templates_apply(tmpls.get(), inputs);
        common_peg_arena arena;
        arena.load(params.parser);
        common_chat_parser_params pp(params);
        pp.reasoning_format = COMMON_REASONING_FORMAT_AUTO;

        const std::string out = c["outputs"][0].get<std::string>();
        const double full = best_mean([&] { common_chat_peg_parse(arena, out, false, pp); }, 0.3, 5);
        size_t steps = 0;
        const double streamed = best_mean([&] {
            steps = 0;
            for (size_t i = 4;; i += 4) {
                const bool last = i >= out.size();
                common_chat_peg_parse(arena, out.substr(0, std::min(i, out.size())), !last, pp);
                steps++;
                if (last) {
                    break;
                }
            }
        }, 0.5, 3);
        printf("%s\t%zu\t%.1f\t%.3f\t%zu\n", c["id"].get<std::string>().c_str(), out.size(), full * 1e6,
               streamed * 1e3, steps);
        fflush(stdout);
    }
    return 0;
}
