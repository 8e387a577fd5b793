// The C++ side of `autoparser conformance --cpp`: llama.cpp's own analysis, prompt, grammar and parse for the
// requests autoparser sends, one JSON line in, one JSON line out. Linked against llama.cpp's `common`
// (MIT licence, see NOTICE); our code, written against the public headers of common/chat*.h.
//
// In (one object a line):
//   {"id": "...", "template": "path/to/template.jinja", "bos": "", "eos": "", "analyze": true,
//    "requests": [{"id": "...", "params": {<the chat-case request, tests/data/chat_cases.jsonl "params">},
//                  "now": "2024-07-26", "outputs": [{"text": "...", "is_partial": false}]}]}
// Out (same order, same ids):
//   {"id": "...", "analysis": {<analysis record as tests/data/analysis*.jsonl>},
//    "requests": [{"id": "...", "format": "...", "prompt": "...", "generation_prompt": "...", "grammar": "...",
//                  "grammar_lazy": false, "grammar_triggers": [{"type": 1, "value": "..."}], "preserved_tokens": [],
//                  "additional_stops": [], "thinking_start_tag": "", "thinking_end_tags": [],
//                  "parser": {<the serialised arena>, only with "with_parser": true},
//                  "parsed": [<message> or {"error": "..."}]} or {"id": "...", "error": "..."}]}
// A template or request the C++ refuses gives its exception message in "error", as the goldens record it;
// the driver itself exits non-zero only on unreadable input.
#include "chat-auto-parser.h"
#include "chat.h"
#include "json.h"
#include "peg-parser.h"

#include <nlohmann/json.hpp>

#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

// Our own records are nlohmann's ordered JSON (key order is part of the goldens); llama.cpp's API takes its
// common_json, built from the same text.
using ojson = nlohmann::ordered_json;

static common_json to_common(const ojson & value) {
    return common_json::parse(value.dump());
}

static std::string read_file(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
        throw std::runtime_error("cannot read " + path);
    }
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

template <typename T> static std::string name_of(const T & value) {
    std::ostringstream os;
    os << value;
    return os.str();
}

// The record shape of the analysis goldens (and of autoparser's TemplateAnalysis.to_dict()), key order included.
static ojson analysis_record(const std::string & src, const std::string & bos, const std::string & eos) {
    ojson rec;
    std::unique_ptr<common_chat_template> tmpl;
    try {
        tmpl = std::make_unique<common_chat_template>(src, bos, eos);
    } catch (const std::exception & e) {
        rec["error"] = e.what();
        return rec;
    }
    ojson caps = ojson::object();
    for (const auto & [key, value] : tmpl->original_caps().to_map()) {
        caps[key] = value;
    }
    rec["caps"] = caps;
    autoparser::autoparser ap;
    try {
        ap.analyze_template(*tmpl);
    } catch (const std::exception & e) {
        rec["error"] = e.what();
        return rec;
    }
    rec["analysis_complete"] = ap.analysis_complete;
    rec["user_start"] = ap.user_start;
    rec["assistant_start"] = ap.assistant_start;
    rec["reasoning"] = {{"mode", name_of(ap.reasoning.mode)}, {"start", ap.reasoning.start}, {"end", ap.reasoning.end}};
    rec["content"] = {{"mode", name_of(ap.content.mode)}, {"start", ap.content.start}, {"end", ap.content.end},
                      {"requires_nonnull_content", ap.content.requires_nonnull_content}};
    const auto & f = ap.tools.format;
    const auto & fn = ap.tools.function;
    const auto & a = ap.tools.arguments;
    const auto & id = ap.tools.call_id;
    ojson tools;
    tools["format"] = {{"mode", name_of(f.mode)}, {"section_start", f.section_start}, {"section_end", f.section_end},
                       {"per_call_start", f.per_call_start}, {"per_call_end", f.per_call_end},
                       {"fun_name_is_key", f.fun_name_is_key}, {"tools_array_wrapped", f.tools_array_wrapped},
                       {"openai_wrapper_trigger", f.openai_wrapper_trigger}, {"function_field", f.function_field},
                       {"name_field", f.name_field}, {"args_field", f.args_field}, {"id_field", f.id_field},
                       {"gen_id_field", f.gen_id_field}, {"parameter_order", f.parameter_order}};
    tools["function"] = {{"name_prefix", fn.name_prefix}, {"name_suffix", fn.name_suffix},
                         {"args_separator", fn.args_separator}, {"close", fn.close}};
    tools["arguments"] = {{"start", a.start}, {"end", a.end}, {"name_prefix", a.name_prefix},
                          {"name_suffix", a.name_suffix}, {"value_prefix", a.value_prefix},
                          {"value_suffix", a.value_suffix}, {"separator", a.separator},
                          {"tolerate_intertag_whitespace", a.tolerate_intertag_whitespace}};
    tools["call_id"] = {{"pos", name_of(id.pos)}, {"prefix", id.prefix}, {"suffix", id.suffix}};
    rec["tools"] = tools;
    rec["preserved_tokens"] = ap.preserved_tokens;
    rec["additional_stops"] = ap.additional_stops;
    return rec;
}

static ojson message_json(const common_chat_msg & m) {
    ojson calls = ojson::array();
    for (const auto & c : m.tool_calls) {
        calls.push_back({{"name", c.name}, {"arguments", c.arguments}, {"id", c.id}});
    }
    return {{"role", m.role}, {"content", m.content}, {"reasoning_content", m.reasoning_content},
            {"tool_calls", calls}, {"tool_name", m.tool_name}, {"tool_call_id", m.tool_call_id}};
}

// The clock templates read. llama.cpp takes it from the system, not from the request's `now`: the jinja
// runtime's strftime_now from time(nullptr), the `datetime` / `date_string` variables from
// system_clock::now(). So the goldens hold the date they were made on; to render them again the driver answers
// both calls itself (an executable's definition interposes the C library's for the shared libraries it loads;
// every other clock goes to the real clock_gettime).
static std::time_t g_now = 0;  // 0: the real clock

extern "C" int clock_gettime(clockid_t id, struct timespec * ts) {
    using real_fn = int (*)(clockid_t, struct timespec *);
    static const auto real = reinterpret_cast<real_fn>(dlsym(RTLD_NEXT, "clock_gettime"));
    if (id == CLOCK_REALTIME && g_now != 0) {
        ts->tv_sec = g_now;
        ts->tv_nsec = 0;
        return 0;
    }
    return real(id, ts);
}

extern "C" std::time_t time(std::time_t * out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out != nullptr) {
        *out = ts.tv_sec;
    }
    return ts.tv_sec;
}

// "YYYY-MM-DD" (or empty: the real clock) as local midnight of that day, the time autoparser's request reads
// from a bare date (datetime(Y, M, D)), so a template that prints the hour prints the same one on both sides.
static std::time_t parse_now(const std::string & text) {
    if (text.empty()) {
        return 0;
    }
    std::tm tm = {};
    if (sscanf(text.c_str(), "%d-%d-%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday) != 3) {
        throw std::runtime_error("'now' is not a YYYY-MM-DD date: " + text);
    }
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    tm.tm_isdst = -1;
    return std::mktime(&tm);
}

static common_chat_templates_inputs inputs_of(const ojson & p, const std::string & now) {
    common_chat_templates_inputs in;
    const auto get = [&](const char * key, const ojson & fallback) { return p.contains(key) ? p[key] : fallback; };
    in.messages = common_chat_msgs_parse_oaicompat(to_common(get("messages", ojson::array())));
    const auto tools = get("tools", nullptr);
    if (!tools.is_null()) {
        in.tools = common_chat_tools_parse_oaicompat(to_common(tools));
    }
    in.tool_choice = (common_chat_tool_choice) get("tool_choice", 0).get<int>();
    in.reasoning_format = common_reasoning_format_from_name(get("reasoning_format", "none").get<std::string>());
    in.enable_thinking = get("enable_thinking", true).get<bool>();
    in.parallel_tool_calls = get("parallel_tool_calls", false).get<bool>();
    in.add_generation_prompt = get("add_generation_prompt", true).get<bool>();
    in.json_schema = get("json_schema", "").get<std::string>();
    in.continue_final_message = (common_chat_continuation) get("continue_final_message", 0).get<int>();
    const auto kwargs = get("chat_template_kwargs", ojson::object());  // kept alive for the loop
    for (const auto & [key, value] : kwargs.items()) {
        in.chat_template_kwargs[key] = value.get<std::string>();
    }
    in.use_jinja = true;
    g_now = parse_now(now);
    if (g_now != 0) {
        in.now = std::chrono::system_clock::from_time_t(g_now);
    }
    return in;
}

static ojson run_request(const common_chat_templates * tmpls, const ojson & req) {
    ojson out;
    out["id"] = req.value("id", "");
    try {
        const auto inputs = inputs_of(req.value("params", ojson::object()), req.value("now", ""));
        const auto params = common_chat_templates_apply(tmpls, inputs);
        out["format"] = common_chat_format_name(params.format);
        out["prompt"] = params.prompt;
        out["generation_prompt"] = params.generation_prompt;
        out["grammar"] = params.grammar;
        out["grammar_lazy"] = params.grammar_lazy;
        ojson triggers = ojson::array();
        for (const auto & t : params.grammar_triggers) {
            triggers.push_back({{"type", (int) t.type}, {"value", t.value}});
        }
        out["grammar_triggers"] = triggers;
        out["preserved_tokens"] = params.preserved_tokens;
        out["additional_stops"] = params.additional_stops;
        out["thinking_start_tag"] = params.thinking_start_tag;
        out["thinking_end_tags"] = params.thinking_end_tags;
        if (req.value("with_parser", false)) {
            // the serialised PEG arena, node ids included (what grammar rule names such as `until-<id>` embed)
            out["parser"] = ojson::parse(params.parser.empty() ? "null" : params.parser);
        }
        ojson parsed = ojson::array();
        common_peg_arena arena;
        if (!params.parser.empty()) {
            arena.load(params.parser);
        }
        for (const auto & o : req.value("outputs", ojson::array())) {
            try {
                common_chat_parser_params pp(params);
                const auto text = o.value("text", "");
                const bool partial = o.value("is_partial", false);
                parsed.push_back(message_json(params.parser.empty() ? common_chat_parse(text, partial, pp)
                                                                    : common_chat_peg_parse(arena, text, partial, pp)));
            } catch (const std::exception & e) {
                parsed.push_back({{"error", e.what()}});
            }
        }
        out["parsed"] = parsed;
    } catch (const std::exception & e) {
        out["error"] = e.what();
    }
    return out;
}

int main(int argc, char ** argv) {
    if (argc > 2 || (argc == 2 && std::string(argv[1]) != "-")) {
        fprintf(stderr, "usage: %s < requests.jsonl > results.jsonl\n", argv[0]);
        return 2;
    }
    std::string line;
    while (std::getline(std::cin, line)) {
        if (line.empty()) {
            continue;
        }
        ojson job;
        try {
            job = ojson::parse(line);
        } catch (const std::exception & e) {
            fprintf(stderr, "oracle: unreadable input line: %s\n", e.what());
            return 2;
        }
        ojson out;
        out["id"] = job.value("id", "");
        std::string src;
        try {
            src = read_file(job.at("template").get<std::string>());
        } catch (const std::exception & e) {
            out["error"] = e.what();
            std::cout << out.dump(-1, ' ', false, ojson::error_handler_t::replace) << "\n" << std::flush;
            continue;
        }
        const std::string bos = job.value("bos", ""), eos = job.value("eos", "");
        if (job.value("analyze", false)) {
            out["analysis"] = analysis_record(src, bos, eos);
        }
        ojson results = ojson::array();
        const auto requests = job.value("requests", ojson::array());
        if (!requests.empty()) {
            common_chat_templates_ptr tmpls;
            try {
                tmpls = common_chat_templates_init(nullptr, src, bos, eos);
            } catch (const std::exception & e) {
                for (const auto & req : requests) {
                    results.push_back({{"id", req.value("id", "")}, {"error", e.what()}});
                }
            }
            if (tmpls) {
                for (const auto & req : requests) {
                    results.push_back(run_request(tmpls.get(), req));
                }
            }
        }
        out["requests"] = results;
        std::cout << out.dump(-1, ' ', false, ojson::error_handler_t::replace) << "\n" << std::flush;
    }
    return 0;
}
