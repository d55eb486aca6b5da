#include "tests/providers/conformance.hpp"

#include "core/errors.hpp"
#include "net/transport.hpp"
#include "providers/registry.hpp"
#include "tests/providers/conformance_replay.hpp"
#include "tests/providers/loopback_server.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

namespace payrecon::conformance {
namespace {

namespace fs = std::filesystem;
using net::HttpRequest;
using net::HttpResult;
using net::SendClass;
using nlohmann::json;
using providers::Outcome;
using providers::ProviderDescriptor;

std::optional<std::string> read(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return std::nullopt;
    }
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

std::optional<json> read_json(const fs::path& path) {
    const auto text = read(path);
    if (!text) {
        return std::nullopt;
    }
    try {
        return json::parse(*text);
    } catch (const json::parse_error&) {
        return std::nullopt;
    }
}

// The regular files of `dir`, sorted; empty if it is not a directory.
std::vector<fs::path> files_in(const fs::path& dir) {
    std::vector<fs::path> out;
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
        return out;
    }
    for (const auto& e : fs::directory_iterator(dir)) {
        if (e.is_regular_file()) {
            out.push_back(e.path());
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

std::string percent_decode(std::string_view s) {
    const auto hex = [](char c) -> int {
        return c >= '0' && c <= '9'   ? c - '0'
               : c >= 'A' && c <= 'F' ? c - 'A' + 10
               : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                      : -1;
    };
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
            out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
            i += 2;
        } else {
            out += s[i] == '+' ? ' ' : s[i];
        }
    }
    return out;
}

// The names of an x-www-form-urlencoded list ("a=1&metadata%5Bk%5D=2" -> a, metadata): decoded,
// cut at the first '['.
std::set<std::string> form_names(std::string_view text) {
    std::set<std::string> out;
    std::size_t start = 0;
    while (start <= text.size() && !text.empty()) {
        const std::size_t end = std::min(text.find('&', start), text.size());
        const std::string_view pair = text.substr(start, end - start);
        const std::string name = percent_decode(pair.substr(0, pair.find('=')));
        if (!name.empty()) {
            out.insert(name.substr(0, name.find('[')));
        }
        start = end + 1;
    }
    return out;
}

std::string header(const HttpRequest& r, std::string_view name) {
    for (const auto& [k, v] : r.headers) {
        if (std::equal(k.begin(), k.end(), name.begin(), name.end(), [](char a, char b) {
                return std::tolower(static_cast<unsigned char>(a)) ==
                       std::tolower(static_cast<unsigned char>(b));
            })) {
            return v;
        }
    }
    return {};
}

// A send function that records what it is asked and answers API requests from `answers` (the last
// one again once they run out), token requests with a token.
struct Recorder {
    Recorder(const providers::ProviderConfig& c, std::vector<HttpResult> a)
        : config(c), answers(std::move(a)) {}

    const providers::ProviderConfig& config;
    std::vector<HttpResult> answers;
    std::vector<HttpRequest> sent; // API requests only
    std::size_t next = 0;

    providers::SendFunction fn() {
        return [this](const HttpRequest& r) {
            if (is_token_request(r, config)) {
                return token_answer();
            }
            sent.push_back(r);
            if (answers.empty()) {
                return answer(500, "");
            }
            const HttpResult& a = answers[std::min(next, answers.size() - 1)];
            ++next;
            return a;
        };
    }
};

// The contract operation a request is for: the contract path the request's path ends with (the
// longest; a "{name}" segment matches any one segment), and its `method`. nullptr if none.
const json* operation(const json& contract, const std::string& base_url, const HttpRequest& r,
                      std::string* matched = nullptr) {
    if (!contract.contains("paths") || r.url.rfind(base_url, 0) != 0) {
        return nullptr;
    }
    const std::string rest = r.url.substr(base_url.size());
    const std::string path = rest.substr(0, rest.find('?'));
    std::string method = r.method;
    std::transform(method.begin(), method.end(), method.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    const auto segments = [](const std::string& p) {
        std::vector<std::string> out;
        std::stringstream s(p);
        for (std::string seg; std::getline(s, seg, '/');) {
            if (!seg.empty()) {
                out.push_back(seg);
            }
        }
        return out;
    };
    const auto have = segments(path);
    const json* best = nullptr;
    std::size_t best_len = 0;
    for (const auto& [key, item] : contract["paths"].items()) {
        const auto want = segments(key);
        if (want.empty() || want.size() > have.size() || want.size() <= best_len ||
            !item.contains(method)) {
            continue;
        }
        bool match = true;
        for (std::size_t i = 0; i < want.size(); ++i) {
            const std::string& h = have[have.size() - want.size() + i];
            match = match && (want[i] == h || (want[i].front() == '{' && want[i].back() == '}'));
        }
        if (match) {
            best = &item[method];
            best_len = want.size();
            if (matched != nullptr) {
                *matched = key;
            }
        }
    }
    return best;
}

// `value` with a "$ref": "#/..." followed within the contract.
const json* resolve(const json& contract, const json& value) {
    if (value.is_object() && value.contains("$ref") && value["$ref"].is_string()) {
        const std::string ref = value["$ref"];
        if (ref.rfind("#", 0) != 0) {
            return nullptr;
        }
        const json::json_pointer pointer(ref.substr(1));
        return contract.contains(pointer) ? &contract[pointer] : nullptr;
    }
    return &value;
}

// Checks one API request against the contract.
void check_request_against(const std::string& kind, const std::string& what, const json& contract,
                           const std::string& base_url, const HttpRequest& r, Problems& out) {
    std::string path;
    const json* op = operation(contract, base_url, r, &path);
    const std::string at = kind + ": " + what + " " + r.method + " " + r.url + ": ";
    if (op == nullptr) {
        out.push_back(at + "the contract has no such operation (its paths end the URL's path)");
        return;
    }
    // Query parameters, against the operation's list.
    const auto q = r.url.find('?');
    if (q != std::string::npos) {
        std::set<std::string> defined;
        if (op->contains("parameters")) {
            for (const auto& listed : (*op)["parameters"]) {
                // A parameter may be a "$ref" to the document's components (PayPal's are).
                const json* p = resolve(contract, listed);
                if (p != nullptr && p->is_object() && p->value("in", "") == "query") {
                    defined.insert(p->value("name", ""));
                }
            }
        }
        for (const auto& name : form_names(std::string_view(r.url).substr(q + 1))) {
            if (defined.count(name) == 0) {
                out.push_back(at + "query parameter '" + name +
                              "' is not one the contract defines");
            }
        }
    }
    if (r.body.empty()) {
        return;
    }
    std::string content_type = header(r, "Content-Type");
    content_type = content_type.substr(0, content_type.find(';'));
    const json* schema = nullptr;
    if (op->contains("requestBody") && (*op)["requestBody"].contains("content") &&
        (*op)["requestBody"]["content"].contains(content_type) &&
        (*op)["requestBody"]["content"][content_type].contains("schema")) {
        schema = resolve(contract, (*op)["requestBody"]["content"][content_type]["schema"]);
    }
    std::vector<const json*> alternatives; // a oneOf (Checkout.com: a payment or a payout)
    if (schema != nullptr && schema->contains("oneOf") && (*schema)["oneOf"].is_array()) {
        for (const auto& alternative : (*schema)["oneOf"]) {
            if (const json* a = resolve(contract, alternative);
                a != nullptr && a->contains("properties")) {
                alternatives.push_back(a);
            }
        }
        schema = alternatives.empty() ? nullptr : alternatives.front();
    }
    if (schema == nullptr || !schema->contains("properties")) {
        out.push_back(at + "the contract has no request schema with properties for " +
                      (content_type.empty() ? "(no Content-Type)" : content_type));
        return;
    }
    std::set<std::string> sent;
    if (content_type == "application/json") {
        try {
            const json body = json::parse(r.body);
            for (const auto& [k, v] : body.items()) {
                sent.insert(k);
            }
        } catch (const json::parse_error&) {
            out.push_back(at + "the body is not JSON");
            return;
        }
    } else if (content_type == "application/x-www-form-urlencoded") {
        sent = form_names(r.body);
    } else {
        out.push_back(at + "a body of type '" + content_type + "' the suite cannot read");
        return;
    }
    // Of a oneOf, the alternative that defines every field sent is the one the request is.
    for (const json* a : alternatives) {
        if (std::all_of(sent.begin(), sent.end(),
                        [a](const std::string& n) { return (*a)["properties"].contains(n); })) {
            schema = a;
            break;
        }
    }
    for (const auto& name : sent) {
        if (!(*schema)["properties"].contains(name)) {
            out.push_back(at + "field '" + name + "' is not one the contract's schema defines");
        }
    }
    if (schema->contains("required")) {
        for (const auto& name : (*schema)["required"]) {
            if (sent.count(name.get<std::string>()) == 0) {
                out.push_back(at + "required field '" + name.get<std::string>() + "' not sent");
            }
        }
    }
}

// The value under which a request carries its idempotency key: a header or a top-level JSON or
// form field whose name holds "idempotency", or PayPal's PayPal-Request-Id header ("To enforce
// idempotency on REST API POST calls, use the PayPal-Request-Id request header",
// developer.paypal.com/reference/guidelines/idempotency). Empty if none.
std::string idempotency_key(const HttpRequest& r) {
    const auto has_word = [](std::string name) {
        std::transform(name.begin(), name.end(), name.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        return name.find("idempotency") != std::string::npos || name == "paypal-request-id";
    };
    for (const auto& [k, v] : r.headers) {
        if (has_word(k)) {
            return v;
        }
    }
    try {
        const json body = json::parse(r.body);
        for (const auto& [k, v] : body.items()) {
            if (has_word(k) && v.is_string()) {
                return v.get<std::string>();
            }
        }
    } catch (const json::parse_error&) {
    }
    return {};
}

const char* const k_base = "https://conformance.provider.test";

} // namespace

Files Files::standard(std::string_view kind) {
    const fs::path root(PAYRECON_SOURCE_DIR);
    const std::string k(kind);
    return Files{root / "tests/providers/contracts" / (k + ".json"),
                 root / "tests/providers/fixtures" / k, root / "tests/fuzz/corpus" / k,
                 root / "providers" / k / "README.md"};
}

Problems check_files(const ProviderDescriptor& d, const Files& f) {
    Problems out;
    const std::string k(d.kind);
    if (!read_json(f.contract)) {
        out.push_back(k + ": no contract (a JSON file at " + f.contract.string() +
                      ", written by scripts/contracts from its selection)");
    }
    if (!fs::is_directory(f.fixtures)) {
        out.push_back(k + ": no fixtures directory " + f.fixtures.string());
    } else if (!read_json(f.fixtures / "expected.json")) {
        out.push_back(k + ": no expected.json in " + f.fixtures.string());
    } else if (files_in(f.fixtures).size() < 2) {
        out.push_back(k + ": no recorded fixture in " + f.fixtures.string());
    }
    if (files_in(f.corpus).empty()) {
        out.push_back(k + ": no fuzz corpus at " + f.corpus.string());
    }
    const auto readme = read(f.readme);
    if (!readme) {
        out.push_back(k + ": no README at " + f.readme.string());
    } else {
        for (const std::string section : {"\n## Outcomes\n", "\n## Finding a payment\n"}) {
            if (readme->find(section) == std::string::npos) {
                out.push_back(k + ": its README has no section '" +
                              section.substr(1, section.size() - 2) + "'");
            }
        }
    }
    return out;
}

Problems check_descriptor(const ProviderDescriptor& d) {
    Problems out;
    const std::string k(d.kind);
    if (k.empty() || !std::regex_match(k, std::regex("^[a-z0-9_]{1,32}$"))) {
        out.push_back("'" + k + "': a kind is 1 to 32 of a-z, 0-9, '_'");
    }
    if (d.display_name.empty() || d.reference_name.empty()) {
        out.push_back(k + ": no display_name or reference_name (messages need them)");
    }
    if (d.credentials.empty()) {
        out.push_back(k + ": accepts no credentials");
    }
    if (d.carry_limits == nullptr) {
        out.push_back(k + ": no carry_limits");
    } else if (d.carry_limits().provider.empty()) {
        out.push_back(k + ": its carry limits name no provider");
    }
    if (d.create == nullptr) {
        out.push_back(k + ": no factory (create)");
    }
    if (d.statuses.map == nullptr || d.statuses.rules.empty()) {
        out.push_back(k + ": no status table");
    }
    if (d.api.max_key_length == 0) {
        out.push_back(k + ": no max_key_length (the longest idempotency key its API takes)");
    }
    if (!d.settings.empty() && d.parse_settings == nullptr) {
        out.push_back(k + ": settings without a parser");
    }
    if (!out.empty()) {
        return out;
    }
    try {
        const auto c = config(d, k_base);
        if (!d.settings.empty() && c.settings == nullptr) {
            out.push_back(k + ": its parser returned no settings");
        }
        const auto p = d.create(c, [](const HttpRequest&) { return answer(500, ""); });
        if (p->kind() != d.kind) {
            out.push_back(k + ": its adapter says it is of kind " + std::string(p->kind()));
        }
        if (p->capabilities().max_key_length != d.api.max_key_length ||
            p->capabilities().lookup_by_operation_id != d.api.lookup ||
            p->capabilities().list_transactions != d.api.list ||
            p->capabilities().list_refunds != (d.api.list_refunds && d.api.list)) {
            out.push_back(k + ": its adapter's capabilities are not its descriptor's api");
        }
    } catch (const std::exception& e) {
        out.push_back(k + ": its settings' examples do not make a configuration: " + e.what());
        return out;
    }
    // Another kind's settings are refused, naming the field.
    for (const auto* other : providers::registered()) {
        for (const auto& s : other->settings) {
            if (std::any_of(d.settings.begin(), d.settings.end(),
                            [&s](const auto& own) { return own.name == s.name; })) {
                continue;
            }
            json entry = config_entry(d, k_base);
            entry[std::string(s.name)] = std::string(s.example);
            try {
                providers::parse_config(json{{"providers", {{"c", entry}}}}.dump(), "c.json",
                                        &environment);
                out.push_back(k + ": accepts " + std::string(other->kind) + "'s setting " +
                              std::string(s.name));
            } catch (const ConfigError& e) {
                if (std::string(e.what()).find("providers.c." + std::string(s.name)) ==
                    std::string::npos) {
                    out.push_back(k + ": refuses " + std::string(s.name) +
                                  " without naming it: " + e.what());
                }
            }
        }
    }
    return out;
}

Problems check_requests(const ProviderDescriptor& d, const Files& f) {
    Problems out;
    const std::string k(d.kind);
    const auto contract = read_json(f.contract);
    if (!contract) {
        return {k + ": no contract to check its requests against"};
    }
    const auto c = config(d, k_base);
    const auto secrets = conformance::secrets(c);
    const auto check_credentials = [&](const HttpRequest& r, const std::string& what) {
        for (const Secret& s : providers::secrets_of(c.credentials)) {
            const bool listed =
                std::any_of(r.secrets_to_redact.begin(), r.secrets_to_redact.end(),
                            [&s](const Secret& t) { return t.reveal() == s.reveal(); });
            if (!listed) {
                out.push_back(k + ": " + what +
                              ": a secret of its credentials is not listed in "
                              "secrets_to_redact");
            }
        }
        // The key, the encoded basic pair or the access token, in some header.
        bool authenticated = false;
        for (const auto& [name, value] : r.headers) {
            for (const std::string& s : secrets) {
                authenticated = authenticated || value.find(s) != std::string::npos;
            }
        }
        if (!authenticated) {
            out.push_back(k + ": " + what + ": carries none of its credentials");
        }
    };

    // Create, twice (the first answered 503): the same key both times.
    Recorder rec{c, {answer(503, ""), answer(503, "")}};
    const auto p = d.create(c, rec.fn());
    auto o = order();
    o.deadline = std::chrono::steady_clock::now() + std::chrono::hours(1);
    p->submit(o);
    p->submit(o);
    if (rec.sent.size() != 2) {
        out.push_back(k + ": two submits sent " + std::to_string(rec.sent.size()) +
                      " API requests, not 2");
    }
    for (std::size_t i = 0; i < rec.sent.size(); ++i) {
        const HttpRequest& r = rec.sent[i];
        const std::string what = "create (attempt " + std::to_string(i + 1) + ")";
        if (r.method != "POST" || !r.mutating) {
            out.push_back(k + ": " + what + " is not a mutating POST");
        }
        if (idempotency_key(r) != o.operation_id) {
            out.push_back(k + ": " + what +
                          " does not carry the operation ID as its idempotency "
                          "key (a header or body field named *idempotency*)");
        }
        if (r.deadline != o.deadline) {
            out.push_back(k + ": " + what + " does not carry the order's deadline");
        }
        check_credentials(r, what);
        check_request_against(k, what, *contract, k_base, r, out);
    }

    // Lookup and list: GETs on contract paths, or nothing sent where the API has none.
    const auto reads = [&](const std::string& what, bool offered,
                           const std::function<bool(providers::Provider&)>& call) {
        Recorder r{c, {answer(500, "")}};
        const auto provider = d.create(c, r.fn());
        const bool answered = call(*provider);
        if (answered) {
            out.push_back(k + ": " + what + " answered from a 500");
        }
        if (!offered) {
            if (!r.sent.empty()) {
                out.push_back(k + ": " + what + " sent a request although its API has none");
            }
            return;
        }
        if (r.sent.empty()) {
            out.push_back(k + ": " + what + " sent nothing although its API offers it");
            return;
        }
        const HttpRequest& req = r.sent.front();
        if (req.method != "GET" || req.mutating) {
            out.push_back(k + ": " + what + " is not a GET marked as a lookup (mutating false)");
        }
        check_credentials(req, what);
        check_request_against(k, what, *contract, k_base, req, out);
    };
    reads("lookup", d.api.lookup, [](providers::Provider& provider) {
        return provider.lookup(order()).status != providers::LookupResult::Status::failed;
    });
    reads("capture lookup", d.api.manual_capture && d.api.capture_lookup,
          [](providers::Provider& provider) {
              return provider.lookup_capture(authorization_order()).status !=
                     providers::LookupResult::Status::failed;
          });

    // Capture and void, twice each (answered 503): mutating POSTs on contract paths, the same key
    // both times where the kind sends one -- the capture's own operation ID, never its charge's. A
    // kind that cannot authorise sends nothing and answers rejected.
    for (const auto kind : {OperationKind::capture, OperationKind::void_authorization}) {
        Recorder r{c, {answer(503, ""), answer(503, "")}};
        const auto provider = d.create(c, r.fn());
        auto a = authorization_order(kind);
        a.deadline = std::chrono::steady_clock::now() + std::chrono::hours(1);
        const auto call = [&] {
            return kind == OperationKind::capture ? provider->capture(a)
                                                  : provider->void_authorization(a);
        };
        const auto first = call();
        call();
        const std::string name(to_string(kind));
        if (!d.api.manual_capture) {
            if (!r.sent.empty() || first.outcome != Outcome::rejected) {
                out.push_back(k + ": a " + name +
                              " of a kind that cannot authorise was sent, or not rejected");
            }
            continue;
        }
        if (r.sent.size() != 2) {
            out.push_back(k + ": two " + name + "s sent " + std::to_string(r.sent.size()) +
                          " API requests, not 2");
        }
        for (std::size_t i = 0; i < r.sent.size(); ++i) {
            const HttpRequest& req = r.sent[i];
            const std::string what = name + " (attempt " + std::to_string(i + 1) + ")";
            if (req.method != "POST" || !req.mutating) {
                out.push_back(k + ": " + what + " is not a mutating POST");
            }
            const std::string key = idempotency_key(req);
            if (!key.empty() && key != a.operation_id) {
                out.push_back(k + ": " + what + " carries a key that is not its operation ID");
            }
            if (key != idempotency_key(r.sent.front())) {
                out.push_back(k + ": " + what + " carries another key than the first attempt");
            }
            if (req.deadline != a.deadline) {
                out.push_back(k + ": " + what + " does not carry the order's deadline");
            }
            check_credentials(req, what);
            check_request_against(k, what, *contract, k_base, req, out);
        }
    }
    reads("list", d.api.list,
          [](providers::Provider& provider) { return provider.list(window(), std::nullopt).ok; });
    return out;
}

Problems check_statuses(const ProviderDescriptor& d, const Files& f) {
    Problems out;
    const std::string k(d.kind);
    const auto& t = d.statuses;
    if (t.map == nullptr || t.rules.empty()) {
        return {k + ": no status table"};
    }
    std::set<std::string> table;
    for (const auto& rule : t.rules) {
        const std::string word(rule.word);
        if (!table.insert(word).second) {
            out.push_back(k + ": status '" + word + "' is in the table twice");
        }
        if (t.map(rule.word) != rule.outcome) {
            out.push_back(k + ": status '" + word + "' maps to " +
                          std::string(to_string(t.map(rule.word))) + ", the table says " +
                          std::string(to_string(rule.outcome)));
        }
        if (rule.outcome == Outcome::unknown && rule.why.empty()) {
            out.push_back(k + ": status '" + word + "' is unknown without saying why");
        }
        if (rule.outcome == Outcome::not_sent || rule.outcome == Outcome::rejected) {
            out.push_back(k + ": status '" + word + "' of a payment the provider holds cannot be " +
                          std::string(to_string(rule.outcome)));
        }
    }
    for (const std::string stranger : {"", "not-a-status-word", "SUCCEEDED-ISH"}) {
        if (t.map(stranger) != Outcome::unknown) {
            out.push_back(k + ": the unlisted word '" + stranger + "' is not unknown");
        }
    }
    const auto contract = read_json(f.contract);
    const json::json_pointer pointer{std::string(t.contract_pointer)};
    if (!contract || t.contract_pointer.empty() || !contract->contains(pointer)) {
        out.push_back(k + ": the contract has no status list at '" +
                      std::string(t.contract_pointer) + "'");
        return out;
    }
    const json& listed = (*contract)[pointer];
    std::set<std::string> words;
    if (listed.is_array()) {
        for (const auto& w : listed) {
            words.insert(w.get<std::string>());
        }
    } else if (listed.is_string()) {
        // Prose ("Indicates whether the payment is APPROVED, PENDING, ..."): its upper-case words.
        const std::string prose = listed.get<std::string>();
        static const std::regex k_word("\\b[A-Z][A-Z_]{2,}\\b");
        for (auto it = std::sregex_iterator(prose.begin(), prose.end(), k_word);
             it != std::sregex_iterator(); ++it) {
            words.insert(it->str());
        }
    }
    if (words.empty()) {
        out.push_back(k + ": the contract's status list at '" + std::string(t.contract_pointer) +
                      "' names no word");
    }
    for (const auto& w : words) {
        if (table.count(w) == 0) {
            out.push_back(k + ": the contract's status '" + w + "' is not in the status table");
        }
    }
    for (const auto& w : table) {
        if (words.count(w) == 0) {
            out.push_back(k + ": the table's status '" + w + "' is not one the contract lists");
        }
    }
    return out;
}

Problems check_fixtures(const ProviderDescriptor& d, const Files& f) {
    Problems out;
    const std::string k(d.kind);
    const auto expected = read_json(f.fixtures / "expected.json");
    if (!expected || !expected->is_object()) {
        return {k + ": no expected.json in " + f.fixtures.string()};
    }
    for (const auto& path : files_in(f.fixtures)) {
        const std::string name = path.filename().string();
        if (name != "expected.json" && !expected->contains(name)) {
            out.push_back(k + ": fixture " + name + " is not in expected.json");
        }
    }
    const auto c = config(d, k_base);
    for (const auto& [name, e] : expected->items()) {
        const std::string at = k + ": fixture " + name + ": ";
        const auto body = read(f.fixtures / name);
        if (!body) {
            out.push_back(at + "listed in expected.json, but there is no such file");
            continue;
        }
        if (!json::accept(*body)) {
            out.push_back(at + "is not JSON");
            continue;
        }
        const std::string call = e.value("call", "");
        Recorder rec{c, {answer(e.value("status", 200), *body)}};
        const auto p = d.create(c, rec.fn());
        if (call == "submit") {
            const auto r = p->submit(order());
            if (std::string(to_string(r.outcome)) != e.value("outcome", "")) {
                out.push_back(at + "submit came to " + std::string(to_string(r.outcome)) +
                              ", expected.json says " + e.value("outcome", "(nothing)"));
            }
            if (e.contains("code") && (!r.rejection || r.rejection->code != e["code"])) {
                out.push_back(at + "not rejected with code " + e["code"].dump());
            }
            if (e.contains("reference") && r.provider_reference != e["reference"]) {
                out.push_back(at + "not the provider reference " + e["reference"].dump());
            }
        } else if (call == "lookup") {
            const auto r = p->lookup(order());
            const std::string status = r.status == providers::LookupResult::Status::found ? "found"
                                       : r.status == providers::LookupResult::Status::not_found
                                           ? "not_found"
                                           : "failed";
            if (status != e.value("lookup", "")) {
                out.push_back(at + "lookup came to " + status + ", expected.json says " +
                              e.value("lookup", "(nothing)"));
            }
        } else if (call == "list") {
            const auto r = p->list(window(), std::nullopt);
            if (!r.ok || static_cast<int>(r.items.size()) != e.value("items", -1) ||
                r.next_cursor.has_value() != e.value("next_cursor", false)) {
                out.push_back(at + "list came to ok=" + std::to_string(r.ok) + " with " +
                              std::to_string(r.items.size()) + " items" +
                              (r.next_cursor ? " and a cursor" : "") +
                              ", not what expected.json says");
            }
        } else if (call == "capture" || call == "void") {
            // A kind that authorises: the capture or void of authorization_order().
            const auto a = authorization_order(
                call == "capture" ? OperationKind::capture : OperationKind::void_authorization);
            const auto r = call == "capture" ? p->capture(a) : p->void_authorization(a);
            if (std::string(to_string(r.outcome)) != e.value("outcome", "")) {
                out.push_back(at + call + " came to " + std::string(to_string(r.outcome)) +
                              ", expected.json says " + e.value("outcome", "(nothing)"));
            }
            if (e.contains("reference") && r.provider_reference != e["reference"]) {
                out.push_back(at + "not the provider reference " + e["reference"].dump());
            }
        } else if (call == "lookup_capture") {
            const auto r = p->lookup_capture(authorization_order(
                e.value("kind", "capture") == "void" ? OperationKind::void_authorization
                                                     : OperationKind::capture));
            const std::string status = r.status == providers::LookupResult::Status::found ? "found"
                                       : r.status == providers::LookupResult::Status::not_found
                                           ? "not_found"
                                           : "failed";
            if (status != e.value("lookup", "")) {
                out.push_back(at + "lookup_capture came to " + status + ", expected.json says " +
                              e.value("lookup", "(nothing)"));
            }
        } else {
            out.push_back(at +
                          "expected.json names no call (submit, lookup, list, capture, void or "
                          "lookup_capture)");
        }
    }
    return out;
}

Problems check_transport_failures(const ProviderDescriptor& d) {
    Problems out;
    const std::string k(d.kind);
    const auto c = config(d, k_base);
    const auto failure = [](SendClass cls, int curl, bool truncated = false) {
        HttpResult r;
        r.cls = cls;
        r.curl_code = curl;
        r.truncated = truncated;
        r.error = "simulated";
        return r;
    };
    const std::vector<std::pair<HttpResult, Outcome>> cases = {
        {failure(SendClass::not_sent, 7), Outcome::not_sent},
        {failure(SendClass::unknown, 28), Outcome::unknown},
        {failure(SendClass::unknown, 52), Outcome::unknown},
        {failure(SendClass::unknown, 23, true), Outcome::unknown},
    };
    for (const auto& [result, outcome] : cases) {
        Recorder rec{c, {result}};
        const auto p = d.create(c, rec.fn());
        const auto r = p->submit(order());
        if (r.outcome != outcome) {
            out.push_back(k + ": a transport " + std::string(to_string(outcome)) + " (curl " +
                          std::to_string(result.curl_code) + ") came to " +
                          std::string(to_string(r.outcome)));
        }
        if (p->lookup(order()).status != providers::LookupResult::Status::failed) {
            out.push_back(k + ": a lookup whose call failed is an answer");
        }
        if (p->list(window(), std::nullopt).ok) {
            out.push_back(k + ": a list page whose call failed is ok");
        }
        if (p->list_refunds(window(), std::nullopt).ok) {
            out.push_back(k + ": a page of refunds whose call failed is ok");
        }
        if (!d.api.manual_capture) {
            continue;
        }
        for (const auto kind : {OperationKind::capture, OperationKind::void_authorization}) {
            const auto a = authorization_order(kind);
            const auto m =
                kind == OperationKind::capture ? p->capture(a) : p->void_authorization(a);
            if (m.outcome != outcome) {
                out.push_back(k + ": a " + std::string(to_string(kind)) + "'s transport " +
                              std::string(to_string(outcome)) + " (curl " +
                              std::to_string(result.curl_code) + ") came to " +
                              std::string(to_string(m.outcome)));
            }
            if (p->lookup_capture(a).status != providers::LookupResult::Status::failed) {
                out.push_back(k + ": a capture lookup whose call failed is an answer");
            }
        }
    }
    return out;
}

Problems check_secrets(const ProviderDescriptor& d, const Files& f) {
    Problems out;
    const std::string k(d.kind);
    std::vector<std::regex> patterns = {std::regex(R"(Bearer [A-Za-z0-9._~+/=-]{8,})"),
                                        std::regex(R"(Basic [A-Za-z0-9+/=]{8,})"),
                                        std::regex(R"(-----BEGIN [A-Z ]*PRIVATE KEY)")};
    for (const auto& p : d.secret_patterns) {
        patterns.emplace_back(std::string(p));
    }
    if (d.secret_patterns.empty()) {
        out.push_back(k + ": its descriptor says nothing of what its secrets look like");
    }
    std::vector<fs::path> recorded = files_in(f.fixtures);
    const auto corpus = files_in(f.corpus);
    recorded.insert(recorded.end(), corpus.begin(), corpus.end());
    for (const auto& path : recorded) {
        const auto text = read(path);
        for (const auto& re : patterns) {
            if (text && std::regex_search(*text, re)) {
                out.push_back(k + ": " + path.string() + " holds something like a secret");
            }
        }
    }

    // A hostile server that echoes every request -- its credentials too -- into its answers, at
    // every status adapters tell apart.
    std::atomic<int> n{0};
    test::LoopbackServer server([&n](test::LoopbackConnection& connection) {
        while (const auto r = connection.read_request()) {
            std::string echo;
            for (const auto& [name, value] : r->headers) {
                echo += name + ": " + value + "\n";
            }
            echo += r->body;
            if (r->target == k_token_path) {
                connection.write(test::http_response(
                    200, std::string(R"({"access_token":")") + k_access_token +
                             R"(","token_type":"Bearer","expires_in":3600,"echo":)" +
                             json(echo).dump() + "}"));
                continue;
            }
            static const std::vector<int> k_statuses = {200, 400, 401, 402, 403,
                                                        404, 409, 422, 429, 500};
            const int status = k_statuses[static_cast<std::size_t>(n++) % k_statuses.size()];
            connection.write(test::http_response(
                status,
                json{{"error", {{"message", echo}, {"code", echo}}},
                     {"errors",
                      {{{"category", "INVALID_REQUEST_ERROR"}, {"code", echo}, {"detail", echo}}}},
                     {"message", echo},
                     {"errorCode", echo},
                     {"errorType", "validation"}}
                    .dump(),
                {{"X-Echo", echo.substr(0, echo.find('\n'))}}));
        }
    });
    const auto c = config(d, server.url(""));
    const auto secrets = conformance::secrets(c);
    const auto p = providers::create_provider(c);
    std::vector<std::string> seen;
    for (int i = 0; i < 10; ++i) {
        const auto r = p->submit(order());
        seen.insert(seen.end(),
                    {r.call.error_class, r.call.detail, r.provider_reference.value_or(""),
                     r.rejection ? r.rejection->code + " " + r.rejection->message : ""});
    }
    for (int i = 0; i < 3; ++i) {
        const auto l = p->lookup(order());
        seen.insert(seen.end(), {l.call.error_class, l.call.detail});
        const auto page = p->list(window(), std::nullopt);
        seen.insert(seen.end(), {page.call.error_class, page.call.detail});
        const auto refunds = p->list_refunds(window(), std::nullopt);
        seen.insert(seen.end(), {refunds.call.error_class, refunds.call.detail});
        if (d.api.manual_capture) {
            const auto a = authorization_order();
            for (const auto& m : {p->capture(a), p->void_authorization(a)}) {
                seen.insert(seen.end(),
                            {m.call.error_class, m.call.detail, m.provider_reference.value_or(""),
                             m.rejection ? m.rejection->code + " " + m.rejection->message : ""});
            }
            const auto found = p->lookup_capture(a);
            seen.insert(seen.end(), {found.call.error_class, found.call.detail});
        }
    }
    if (server.requests_received() == 0) {
        out.push_back(k + ": the echoing server saw no request");
    }
    for (const auto& text : seen) {
        for (const auto& s : secrets) {
            if (text.find(s) != std::string::npos) {
                out.push_back(k + ": a secret reached a result: " + text.substr(0, 200));
            }
        }
    }
    return out;
}

Problems check_corpus(const ProviderDescriptor& d, const Files& f) {
    Problems out;
    const auto inputs = files_in(f.corpus);
    if (inputs.empty()) {
        return {std::string(d.kind) + ": no fuzz corpus at " + f.corpus.string()};
    }
    const auto c = config(d, k_base);
    for (const auto& path : inputs) {
        const auto body = read(path).value_or("");
        for (const int status : replay_statuses()) {
            if (const auto broken = replay(d, c, body, status)) {
                out.push_back(*broken + " (" + path.filename().string() + ")");
            }
        }
    }
    return out;
}

Problems check_all(const ProviderDescriptor& d, const Files& f) {
    Problems out = check_files(d, f);
    auto add = [&out](Problems more) { out.insert(out.end(), more.begin(), more.end()); };
    add(check_descriptor(d));
    if (!out.empty()) {
        return out; // the rest needs a whole descriptor and its files
    }
    add(check_requests(d, f));
    add(check_statuses(d, f));
    add(check_fixtures(d, f));
    add(check_transport_failures(d));
    add(check_secrets(d, f));
    add(check_corpus(d, f));
    return out;
}

} // namespace payrecon::conformance
