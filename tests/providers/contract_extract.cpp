// payrecon-contract-extract: keeps in the repository the facts of the providers' published OpenAPI
// documents that the wire tests check, so that the tests need nothing outside the checkout.
//
// tests/providers/contracts/ holds, per provider, a selection `<provider>.select.json` (written by
// hand: the document's file name, where it was published, and the JSON pointers to keep, each with
// why) and the contract `<provider>.json` this program writes from it. A contract is the published
// document with everything else removed: every value sits at the same JSON pointer as in the
// published document, so `contract.at(p) == document.at(p)` for each kept pointer `p`. A pointer is
// kept as
//   "value"           the whole value;
//   "names"           an object's member names, each with `{}` as its value (a property list
//                     without the property definitions);
//   ["in", "name"]    an array of objects, each cut down to the listed fields (parameter lists).
// `/openapi`, `/info/title` and `/info/version` are always kept; `x-payrecon-contract` (an OpenAPI
// extension member) names the document, its source and the selection. An entry of "keep" may name
// another JSON document of the same provider, beside the first, with its own `"document"` (PayPal
// publishes Orders and Transaction Search apart): it is kept from that document at the same
// pointer, and must not collide with what the others keep.
//
// Usage:
//   payrecon-contract-extract --contracts DIR --specs DIR          write every contract
//   payrecon-contract-extract --contracts DIR --specs DIR --check  compare, write nothing
//   payrecon-contract-extract --contracts DIR --self-check         each contract is exactly what
//                                                                  its selection keeps of itself
// --self-check needs no published document: it proves that no contract was edited by hand beyond
// its selection and that none lacks a fact its selection names (a selection changed without
// regenerating). Only --check against the published documents proves the values themselves.
// Exits 0 when written or equal, 1 when a contract differs or cannot be extracted (a selected
// pointer the document lacks, a missing file), 2 on bad usage.

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>
#include <yaml.h>

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* k_select_suffix = ".select.json";
constexpr const char* k_meta_key = "x-payrecon-contract";
constexpr std::size_t k_max_changes_shown = 40;

// A selection or a document that cannot give what is asked of it.
struct ExtractError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct Selection {
    std::string provider;   // "stripe": the file name before .select.json
    fs::path select_path;   // tests/providers/contracts/stripe.select.json
    fs::path contract_path; // tests/providers/contracts/stripe.json
    json select;
};

std::optional<std::string> read_text(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return std::nullopt;
    }
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

json read_json(const fs::path& path) {
    const auto text = read_text(path);
    if (!text) {
        throw ExtractError("cannot read " + path.string());
    }
    try {
        return json::parse(*text);
    } catch (const json::parse_error& e) {
        throw ExtractError(path.string() + " is not JSON: " + e.what());
    }
}

// A plain YAML scalar as the YAML 1.2 core schema reads it: null, booleans, integers and floats;
// everything else (and every quoted scalar) a string.
json yaml_scalar(const yaml_event_t& event) {
    const std::string text(reinterpret_cast<const char*>(event.data.scalar.value),
                           event.data.scalar.length);
    if (event.data.scalar.style != YAML_PLAIN_SCALAR_STYLE) {
        return text;
    }
    if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL") {
        return nullptr;
    }
    if (text == "true" || text == "True" || text == "TRUE") {
        return true;
    }
    if (text == "false" || text == "False" || text == "FALSE") {
        return false;
    }
    static const std::regex k_int("^[-+]?[0-9]+$");
    static const std::regex k_float(R"(^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$)");
    try {
        if (std::regex_match(text, k_int)) {
            return json::parse(text.front() == '+' ? text.substr(1) : text);
        }
        if (std::regex_match(text, k_float)) {
            return std::stod(text);
        }
    } catch (const std::exception&) {
        return text; // out of range: kept as written
    }
    return text;
}

// A YAML file (one document; no anchors or tags needed by the providers' documents) as JSON,
// through libyaml's event parser.
json read_yaml(const fs::path& path) {
    const auto text = read_text(path);
    if (!text) {
        throw ExtractError("cannot read " + path.string());
    }
    yaml_parser_t parser;
    if (yaml_parser_initialize(&parser) == 0) {
        throw ExtractError("cannot start the YAML parser");
    }
    yaml_parser_set_input_string(&parser, reinterpret_cast<const unsigned char*>(text->data()),
                                 text->size());
    // Each open collection, and for a mapping the key waiting for its value.
    struct Open {
        json value;
        std::optional<std::string> key;
    };
    std::vector<Open> stack;
    json root;
    bool done = false;
    const auto add = [&](json value) {
        if (stack.empty()) {
            root = std::move(value);
            return;
        }
        Open& top = stack.back();
        if (top.value.is_array()) {
            top.value.push_back(std::move(value));
        } else if (!top.key) {
            top.key = value.is_string() ? value.get<std::string>() : value.dump();
        } else {
            top.value[*top.key] = std::move(value);
            top.key.reset();
        }
    };
    while (!done) {
        yaml_event_t event;
        if (yaml_parser_parse(&parser, &event) == 0) {
            const std::string problem = parser.problem != nullptr ? parser.problem : "unreadable";
            const auto line = parser.problem_mark.line + 1;
            yaml_parser_delete(&parser);
            throw ExtractError(path.string() + " is not YAML (line " + std::to_string(line) +
                               "): " + problem);
        }
        switch (event.type) {
        case YAML_SCALAR_EVENT:
            add(yaml_scalar(event));
            break;
        case YAML_SEQUENCE_START_EVENT:
            stack.push_back(Open{json::array(), std::nullopt});
            break;
        case YAML_MAPPING_START_EVENT:
            stack.push_back(Open{json::object(), std::nullopt});
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT: {
            json value = std::move(stack.back().value);
            stack.pop_back();
            add(std::move(value));
            break;
        }
        case YAML_ALIAS_EVENT:
            yaml_event_delete(&event);
            yaml_parser_delete(&parser);
            throw ExtractError(path.string() + ": YAML aliases are not read here");
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        default:
            break;
        }
        yaml_event_delete(&event);
    }
    yaml_parser_delete(&parser);
    return root;
}

// A published reference kept as many YAML files that its own build merges (Checkout.com's
// nas_spec: `swagger.yaml`, `paths/` with one file per path, `@` for `/`, and `components/<kind>/`
// with one file per component, in subfolders): the one document they make, each path at
// /paths/<path> and each component at /components/<kind>/<file name without .yaml>, as the
// document's $refs name them.
json read_yaml_tree(const fs::path& dir) {
    json document = read_yaml(dir / "swagger.yaml");
    const auto sorted_files = [](const fs::path& from, bool recursive) {
        std::vector<fs::path> out;
        if (!fs::is_directory(from)) {
            return out;
        }
        if (recursive) {
            for (const auto& e : fs::recursive_directory_iterator(from)) {
                if (e.is_regular_file() && e.path().extension() == ".yaml") {
                    out.push_back(e.path());
                }
            }
        } else {
            for (const auto& e : fs::directory_iterator(from)) {
                if (e.is_regular_file() && e.path().extension() == ".yaml") {
                    out.push_back(e.path());
                }
            }
        }
        std::sort(out.begin(), out.end());
        return out;
    };
    for (const auto& file : sorted_files(dir / "paths", false)) {
        std::string name = file.stem().string();
        if (name.front() == '_') {
            continue; // not a path of the API
        }
        std::replace(name.begin(), name.end(), '@', '/');
        document["paths"]["/" + name] = read_yaml(file);
    }
    if (fs::is_directory(dir / "components")) {
        for (const auto& kind : fs::directory_iterator(dir / "components")) {
            if (!kind.is_directory()) {
                continue;
            }
            for (const auto& file : sorted_files(kind.path(), true)) {
                json& slot =
                    document["components"][kind.path().filename().string()][file.stem().string()];
                if (slot.is_null()) { // the first in path order, where a name repeats
                    slot = read_yaml(file);
                }
            }
        }
    }
    return document;
}

// A published document: JSON, one YAML file, or a directory of YAML files (read_yaml_tree).
json read_document(const fs::path& path) {
    if (fs::is_directory(path)) {
        return read_yaml_tree(path);
    }
    if (path.extension() == ".yaml" || path.extension() == ".yml") {
        return read_yaml(path);
    }
    return read_json(path);
}

// The reference tokens of `pointer`, first to last.
std::vector<std::string> tokens(json::json_pointer pointer) {
    std::vector<std::string> out;
    while (!pointer.empty()) {
        out.push_back(pointer.back());
        pointer.pop_back();
    }
    std::reverse(out.begin(), out.end());
    return out;
}

// Merges `src` into `dst`: objects member by member, `{}` (a kept name) yields to what is kept
// below it. Two different values at one place mean the selection keeps one array two ways.
void merge(json& dst, const json& src, const std::string& where) {
    if (dst.is_null()) {
        dst = src;
        return;
    }
    if (dst.is_object() && src.is_object()) {
        for (const auto& [key, value] : src.items()) {
            merge(dst[key], value, where + "/" + key);
        }
        return;
    }
    if (dst != src) {
        throw ExtractError(where + " is kept twice, in two different ways");
    }
}

// A fact the provider documents outside its published document (an endpoint its reference does
// not list yet): {"pointer", "documented": the value, "source": where it is documented, "why"}.
// It is written into the contract at `pointer` as given. The document must not say otherwise:
// where it has the pointer, its value must be the same (the contract itself, under --self-check;
// a newer document that now publishes it).
void keep_documented(const json& document, const json& item, json& out, const std::string& what) {
    if (!item.contains("source") || !item["source"].is_string() || !item.contains("why") ||
        !item["why"].is_string() || !item.contains("pointer") || !item["pointer"].is_string()) {
        throw ExtractError(what +
                           ": a documented entry is {\"pointer\", \"documented\", "
                           "\"source\", \"why\"}; got " +
                           item.dump());
    }
    const std::string pointer_text = item["pointer"].get<std::string>();
    const json::json_pointer pointer(pointer_text);
    if (document.contains(pointer) && document.at(pointer) != item["documented"]) {
        throw ExtractError(what + ": the document has " + pointer_text +
                           ", and not as the selection documents it: keep it from the document "
                           "(\"keep\") or correct the selection");
    }
    json& to = out[pointer];
    merge(to, item["documented"], pointer_text);
}

// Copies what `item` keeps of `document` into `out`, at the same pointer.
void keep(const json& document, const json& item, json& out, const std::string& what) {
    if (item.is_object() && item.contains("documented")) {
        keep_documented(document, item, out, what);
        return;
    }
    if (!item.is_object() || !item.contains("pointer") || !item["pointer"].is_string() ||
        !item.contains("keep") || !item.contains("why") || !item["why"].is_string()) {
        throw ExtractError(what +
                           ": each entry of \"keep\" is {\"pointer\": ..., \"keep\": ..., "
                           "\"why\": ...}; got " +
                           item.dump());
    }
    const std::string pointer_text = item["pointer"].get<std::string>();
    std::optional<json::json_pointer> pointer;
    try {
        pointer.emplace(pointer_text);
    } catch (const json::parse_error& e) {
        throw ExtractError(what + ": " + pointer_text + " is not a JSON pointer: " + e.what());
    }
    const std::vector<std::string> path = tokens(*pointer);
    if (path.empty()) {
        throw ExtractError(what + ": keeping the whole document is not a selection");
    }
    // Walk the document and the contract together, through objects only: an array index in a
    // pointer would leave holes in the contract's arrays.
    const json* from = &document;
    json* to = &out;
    std::string walked;
    for (const std::string& token : path) {
        if (!from->is_object()) {
            throw ExtractError(what + ": " + pointer_text + " goes through " +
                               (walked.empty() ? "/" : walked) +
                               ", which is not an object; keep the array with [\"field\", ...]");
        }
        walked += "/" + token;
        const auto it = from->find(token);
        if (it == from->end()) {
            throw ExtractError(what + ": the document has no " + pointer_text + " (" + walked +
                               " is missing). The published contract changed: decide what that "
                               "means for the adapter, then update the selection");
        }
        from = &*it;
        if (to->is_null()) {
            *to = json::object();
        }
        to = &(*to)[token];
    }

    const json& mode = item["keep"];
    json kept;
    if (mode == "value") {
        kept = *from;
    } else if (mode == "names") {
        if (!from->is_object()) {
            throw ExtractError(what + ": " + pointer_text + " is not an object: keep \"value\"");
        }
        kept = json::object();
        for (const auto& [key, value] : from->items()) {
            kept[key] = json::object();
        }
    } else if (mode.is_array() && !mode.empty() &&
               std::all_of(mode.begin(), mode.end(), [](const json& f) { return f.is_string(); })) {
        if (!from->is_array()) {
            throw ExtractError(what + ": " + pointer_text + " is not an array of objects");
        }
        kept = json::array();
        for (const json& element : *from) {
            if (!element.is_object()) {
                throw ExtractError(what + ": " + pointer_text +
                                   " holds something other than an object");
            }
            json cut = json::object();
            for (const json& field : mode) {
                const auto f = element.find(field.get<std::string>());
                if (f != element.end()) {
                    cut[field.get<std::string>()] = *f;
                }
            }
            kept.push_back(std::move(cut));
        }
    } else {
        throw ExtractError(what + ": \"keep\" of " + pointer_text +
                           " is \"value\", \"names\" or a list of field names; got " + mode.dump());
    }
    merge(*to, kept, pointer_text);
}

// The contract `selection` keeps of `document`; an entry that names another document is kept from
// `other_document(its name)`.
json extract(const Selection& selection, const json& document,
             const std::function<const json&(const std::string&)>& other_document) {
    const json& s = selection.select;
    const std::string what = selection.select_path.filename().string();
    if (!s.is_object() || !s.contains("document") || !s["document"].is_string() ||
        !s.contains("source") || !s["source"].is_string() || !s.contains("keep") ||
        !s["keep"].is_array()) {
        throw ExtractError(what + ": a selection is {\"document\": file name, \"source\": where it "
                                  "was published, \"keep\": [...]}");
    }
    json out = json::object();
    for (const char* always : {"/openapi", "/info/title", "/info/version"}) {
        keep(document,
             json{{"pointer", always}, {"keep", "value"}, {"why", "the document's identity"}}, out,
             what);
    }
    for (const json& item : s["keep"]) {
        const bool elsewhere = item.is_object() && item.contains("document");
        if (elsewhere && !item["document"].is_string()) {
            throw ExtractError(what + ": an entry's \"document\" is a file name; got " +
                               item["document"].dump());
        }
        keep(elsewhere ? other_document(item["document"].get<std::string>()) : document, item, out,
             what);
    }
    out[k_meta_key] = json{
        {"document", s["document"]},
        {"source", s["source"]},
        {"selection", selection.select_path.filename().string()},
        {"regenerate", "scripts/contracts; edit the selection, not this file"},
    };
    return out;
}

std::string render(const json& contract) {
    return contract.dump(2, ' ', false, json::error_handler_t::strict) + "\n";
}

std::vector<Selection> selections(const fs::path& contracts_dir) {
    std::vector<Selection> out;
    if (!fs::is_directory(contracts_dir)) {
        throw ExtractError(contracts_dir.string() + " is not a directory");
    }
    for (const auto& entry : fs::directory_iterator(contracts_dir)) {
        const std::string name = entry.path().filename().string();
        const std::string suffix = k_select_suffix;
        if (name.size() > suffix.size() && name.ends_with(suffix)) {
            Selection s;
            s.provider = name.substr(0, name.size() - suffix.size());
            s.select_path = entry.path();
            s.contract_path = contracts_dir / (s.provider + ".json");
            s.select = read_json(entry.path());
            out.push_back(std::move(s));
        }
    }
    std::sort(out.begin(), out.end(),
              [](const Selection& a, const Selection& b) { return a.provider < b.provider; });
    if (out.empty()) {
        throw ExtractError(contracts_dir.string() + " holds no *" + std::string(k_select_suffix));
    }
    return out;
}

// Contracts with no selection beside them: nothing would regenerate or check them.
std::vector<fs::path> orphans(const fs::path& contracts_dir, const std::vector<Selection>& all) {
    std::vector<fs::path> out;
    for (const auto& entry : fs::directory_iterator(contracts_dir)) {
        const std::string name = entry.path().filename().string();
        if (!name.ends_with(".json") || name.ends_with(k_select_suffix)) {
            continue;
        }
        const bool selected = std::any_of(all.begin(), all.end(), [&](const Selection& s) {
            return s.contract_path.filename() == entry.path().filename();
        });
        if (!selected) {
            out.push_back(entry.path());
        }
    }
    return out;
}

// Says how the checked-in `text` differs from `expected`, as JSON Patch operations that would
// turn the checked-in contract into the extracted one.
void describe_difference(const std::string& text, const json& expected, std::ostream& err) {
    json checked_in;
    try {
        checked_in = json::parse(text);
    } catch (const json::parse_error& e) {
        err << "  the checked-in file is not JSON: " << e.what() << "\n";
        return;
    }
    const json patch = json::diff(checked_in, expected);
    if (patch.empty()) {
        err << "  the same JSON, formatted differently from what the extractor writes\n";
        return;
    }
    err << "  " << patch.size()
        << " change(s) from the checked-in contract to the extracted one:\n";
    std::size_t shown = 0;
    for (const json& op : patch) {
        if (shown++ == k_max_changes_shown) {
            err << "  ...\n";
            break;
        }
        std::string value = op.contains("value") ? " " + op["value"].dump() : "";
        if (value.size() > 120) {
            value = value.substr(0, 117) + "...";
        }
        err << "  " << op["op"].get<std::string>() << " " << op["path"].get<std::string>() << value
            << "\n";
    }
}

enum class Mode { write, check, self_check };

int usage(const std::string& why) {
    std::cerr << "payrecon-contract-extract: " << why << "\n"
              << "usage: payrecon-contract-extract --contracts DIR --specs DIR [--check]\n"
              << "       payrecon-contract-extract --contracts DIR --self-check\n";
    return 2;
}

// Writes or checks the contract of one selection; false when it differs or cannot be extracted.
bool process(const Selection& s, Mode mode, const std::optional<fs::path>& specs_dir) {
    const std::optional<std::string> checked_in = read_text(s.contract_path);
    json document;
    std::string document_name = "the contract itself";
    if (mode == Mode::self_check) {
        if (!checked_in) {
            throw ExtractError("cannot read " + s.contract_path.string() +
                               ": run scripts/contracts where the published documents are");
        }
        document = read_json(s.contract_path);
    } else {
        if (!s.select.contains("document") || !s.select["document"].is_string()) {
            throw ExtractError(s.select_path.string() + " names no \"document\"");
        }
        const fs::path path = *specs_dir / s.select["document"].get<std::string>();
        document_name = path.string();
        document = read_document(path);
    }
    // The other documents entries name: beside the first; under --self-check, the contract itself.
    std::map<std::string, json> others;
    const auto other_document = [&](const std::string& name) -> const json& {
        if (mode == Mode::self_check) {
            return document;
        }
        auto it = others.find(name);
        if (it == others.end()) {
            it = others.emplace(name, read_json(*specs_dir / name)).first;
        }
        return it->second;
    };
    const json contract = extract(s, document, other_document);
    const std::string text = render(contract);
    if (mode == Mode::write) {
        if (checked_in == text) {
            std::cout << s.contract_path.string() << ": unchanged\n";
            return true;
        }
        std::ofstream out(s.contract_path, std::ios::binary | std::ios::trunc);
        out << text;
        out.close();
        if (!out) {
            throw ExtractError("cannot write " + s.contract_path.string());
        }
        std::cout << s.contract_path.string() << ": written\n";
        return true;
    }
    if (checked_in == text) {
        std::cout << s.contract_path.string() << ": matches "
                  << (mode == Mode::check ? "the published document" : "its selection") << "\n";
        return true;
    }
    std::cerr << s.contract_path.string() << " is not what " << s.select_path.filename().string()
              << " keeps of " << document_name << "\n";
    if (checked_in) {
        describe_difference(*checked_in, contract, std::cerr);
    } else {
        std::cerr << "  the contract is missing\n";
    }
    std::cerr << (mode == Mode::check
                      ? "  Regenerate with scripts/contracts and review the diff: a field or enum "
                        "value gone from the published document may be one an adapter sends or "
                        "reads.\n"
                      : "  A contract is written by scripts/contracts, never by hand: regenerate "
                        "it where the published documents are.\n");
    return false;
}

} // namespace

int main(int argc, char** argv) {
    const std::vector<std::string> args(argv + 1, argv + argc);
    std::optional<fs::path> contracts_dir;
    std::optional<fs::path> specs_dir;
    Mode mode = Mode::write;
    for (std::size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "--contracts" && i + 1 < args.size()) {
            contracts_dir = args[++i];
        } else if (args[i] == "--specs" && i + 1 < args.size()) {
            specs_dir = args[++i];
        } else if (args[i] == "--check") {
            mode = Mode::check;
        } else if (args[i] == "--self-check") {
            mode = Mode::self_check;
        } else {
            return usage("unknown or incomplete argument " + args[i]);
        }
    }
    if (!contracts_dir) {
        return usage("--contracts is required");
    }
    if ((mode == Mode::self_check) == specs_dir.has_value()) {
        return usage(mode == Mode::self_check
                         ? "--self-check reads no published document: drop --specs"
                         : "--specs is required");
    }

    int failures = 0;
    try {
        const std::vector<Selection> all = selections(*contracts_dir);
        for (const fs::path& orphan : orphans(*contracts_dir, all)) {
            std::cerr << orphan.string() << " has no selection (" << orphan.stem().string()
                      << k_select_suffix << ") beside it\n";
            ++failures;
        }
        for (const Selection& s : all) {
            try {
                if (!process(s, mode, specs_dir)) {
                    ++failures;
                }
            } catch (const ExtractError& e) {
                ++failures;
                std::cerr << s.provider << ": " << e.what() << "\n";
            }
        }
    } catch (const ExtractError& e) {
        std::cerr << "payrecon-contract-extract: " << e.what() << "\n";
        return 1;
    }
    return failures == 0 ? 0 : 1;
}
