// payrecon-bench-report: how long headless Chromium takes to show the HTML report of many findings
// (tests/reports/many_findings: N findings), against the same report of few findings (the
// baseline, M findings) measured in the same run by the same browser.
//
//   payrecon-bench-report [--findings N] [--baseline M] [--rounds R] [--keep DIR]
//                         defaults 20000, 200, 3; --keep writes the two pages into DIR
//
// Per round, each page is opened in a fresh tab of 1280 x 800 px and timed by the page's own clock
// (performance.now(): from the start of the navigation) to the first frame after the page loaded
// and its script showed the first view (body[data-sort] set): "first render". Then a search for
// the ID of the finding the first view puts last, to the first frame that shows it:
// "search". Printed: each page's size, both times per round, and the ratios N / M.
//
// Needs Chromium (scripts/bootstrap installs Debian's; PAYRECON_CHROMIUM picks another).
#include "core/money.hpp"
#include "reports/writers.hpp"
#include "tests/reports/chromium.hpp"
#include "tests/reports/many_findings.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>

namespace fs = std::filesystem;
using nlohmann::json;
using payrecon::test::DevToolsBrowser;

namespace {

struct Page {
    std::string name;
    fs::path path;
    std::size_t findings = 0;
    std::uintmax_t bytes = 0;
    std::string last_finding; // the ID of the finding the first view puts last
};

struct Timing {
    double first_render_ms = 0;
    double search_ms = 0;
};

// The ID of the finding listed last in the first view: needing attention first, then
// the largest money at risk (in major units) -- what reports/html.cpp orders by.
std::string last_in_first_view(const payrecon::reports::Report& report) {
    const payrecon::reports::Finding* last = nullptr;
    double last_risk = 0;
    for (const auto& f : report.findings) {
        const auto risk = payrecon::reports::at_risk(f);
        const double value = risk ? std::strtod(payrecon::major_units(risk->minor, risk->currency)
                                                    .value_or(std::to_string(risk->minor))
                                                    .c_str(),
                                                nullptr)
                                  : 0.0;
        if (last == nullptr || (last->needs_attention && !f.needs_attention) ||
            (last->needs_attention == f.needs_attention && value <= last_risk)) {
            last = &f;
            last_risk = value;
        }
    }
    return last && last->finding_id ? *last->finding_id : std::string();
}

Page write_page(const fs::path& dir, std::size_t findings) {
    const payrecon::reports::Report report = payrecon::test::many_findings(findings);
    Page page;
    page.name = std::to_string(findings) + " findings";
    page.path = dir / ("report-" + std::to_string(findings) + ".html");
    page.findings = findings;
    payrecon::reports::write_report_file(page.path.string(), report,
                                         payrecon::reports::Format::html);
    page.bytes = fs::file_size(page.path);
    page.last_finding = last_in_first_view(report);
    return page;
}

// `expression`'s value once the promise it returns settles.
json await_value(DevToolsBrowser& browser, const std::string& session,
                 const std::string& expression) {
    const json result = browser.call(
        "Runtime.evaluate",
        {{"expression", expression}, {"awaitPromise", true}, {"returnByValue", true}}, session);
    if (result.contains("exceptionDetails")) {
        throw std::runtime_error("the page threw: " + result["exceptionDetails"].dump());
    }
    return result["result"].value("value", json());
}

// After the next frame has been drawn: a task queued from requestAnimationFrame runs once the
// frame's style, layout and paint are done.
constexpr const char* k_after_frame =
    "new Promise(function (done) { requestAnimationFrame(function () { setTimeout(function () { "
    "done(performance.now()); }, 0); }); })";

Timing measure(DevToolsBrowser& browser, const Page& page) {
    const std::string target =
        browser.call("Target.createTarget", {{"url", "about:blank"}})["targetId"];
    const std::string session = browser.call(
        "Target.attachToTarget", {{"targetId", target}, {"flatten", true}})["sessionId"];
    browser.call("Emulation.setDeviceMetricsOverride",
                 {{"width", 1280}, {"height", 800}, {"deviceScaleFactor", 1}, {"mobile", false}},
                 session);
    browser.call("Page.navigate", {{"url", "file://" + page.path.string()}}, session);
    for (;;) {
        try {
            if (browser.evaluate(session, "document.readyState === 'complete' && "
                                          "location.href !== 'about:blank' && "
                                          "document.body.hasAttribute('data-sort')") == true) {
                break;
            }
        } catch (const std::runtime_error&) {
            // the page's context is replaced while it navigates
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    Timing t;
    t.first_render_ms = await_value(browser, session, k_after_frame).get<double>();
    const json found = await_value(
        browser, session,
        "(function () { var start = performance.now(); var e = "
        "document.getElementById('finding-search'); e.value = " +
            json(page.last_finding).dump() +
            "; e.dispatchEvent(new Event('input', {bubbles: true})); return " + k_after_frame +
            ".then(function (now) { return {ms: now - start, shown: "
            "document.getElementById('shown-count').textContent}; }); })()");
    t.search_ms = found["ms"].get<double>();
    if (found["shown"] != "1") {
        throw std::runtime_error("searching " + page.name + " for " + page.last_finding +
                                 " showed " + found["shown"].dump() + " findings, not 1");
    }
    browser.call("Target.closeTarget", {{"targetId", target}});
    return t;
}

int usage() {
    std::cerr << "usage: payrecon-bench-report [--findings N] [--baseline M] [--rounds R] "
                 "[--keep DIR]\n";
    return 2;
}

} // namespace

int main(int argc, char** argv) {
    std::size_t findings = 20000;
    std::size_t baseline = 200;
    int rounds = 3;
    std::string keep;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (i + 1 >= argc) {
            return usage();
        }
        const std::string value = argv[++i];
        try {
            if (arg == "--findings") {
                findings = std::stoul(value);
            } else if (arg == "--baseline") {
                baseline = std::stoul(value);
            } else if (arg == "--rounds") {
                rounds = std::stoi(value);
            } else if (arg == "--keep") {
                keep = value;
            } else {
                return usage();
            }
        } catch (const std::exception&) {
            return usage();
        }
    }
    if (findings == 0 || baseline == 0 || rounds < 1) {
        return usage();
    }
    const std::string chromium = payrecon::test::find_chromium();
    if (chromium.empty()) {
        std::cerr << "payrecon-bench-report: chromium is not installed: run scripts/bootstrap, or "
                     "set PAYRECON_CHROMIUM to a Chromium binary\n";
        return 1;
    }
    std::string pattern = (fs::temp_directory_path() / "payrecon-bench-report.XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
        std::perror("payrecon-bench-report: mkdtemp");
        return 1;
    }
    const fs::path dir = pattern;
    int rc = 0;
    try {
        const Page big = write_page(dir, findings);
        const Page small = write_page(dir, baseline);
        if (!keep.empty()) {
            fs::create_directories(keep);
            for (const Page* p : {&big, &small}) {
                fs::copy_file(p->path, fs::path(keep) / p->path.filename(),
                              fs::copy_options::overwrite_existing);
            }
        }
        std::printf("bench/report: the HTML report of %zu findings against one of %zu, in "
                    "headless Chromium at 1280 x 800 px, on %u cores\n",
                    findings, baseline, std::thread::hardware_concurrency());
        for (const Page* p : {&big, &small}) {
            std::printf("  %-16s %12ju bytes  %8.1f bytes per finding\n", p->name.c_str(), p->bytes,
                        static_cast<double>(p->bytes) / static_cast<double>(p->findings));
        }
        std::printf("%-6s %16s %16s %8s %12s %12s %8s\n", "round", "first render ms", "baseline ms",
                    "ratio", "search ms", "baseline ms", "ratio");
        DevToolsBrowser browser(chromium, dir / "profile", std::chrono::seconds(300));
        measure(browser, small); // warm-up: the browser's own start-up is no page's
        for (int round = 1; round <= rounds; ++round) {
            const Timing b = measure(browser, big);
            const Timing s = measure(browser, small);
            std::printf("%-6d %16.0f %16.0f %8.2f %12.0f %12.0f %8.2f\n", round, b.first_render_ms,
                        s.first_render_ms, b.first_render_ms / s.first_render_ms, b.search_ms,
                        s.search_ms, b.search_ms / std::max(1.0, s.search_ms));
        }
        std::printf("first render: from the start of the navigation to the first frame after the "
                    "page's first view; search: from typing the ID of the finding "
                    "shown last to the first frame showing it alone. ratio = %zu findings / %zu.\n",
                    findings, baseline);
    } catch (const std::exception& e) {
        std::cerr << "payrecon-bench-report: " << e.what() << "\n";
        rc = 1;
    }
    std::error_code ignored;
    fs::remove_all(dir, ignored);
    return rc;
}
