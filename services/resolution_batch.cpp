#include "services/resolution_batch.hpp"

#include "core/encoding.hpp"
#include "core/errors.hpp"
#include "core/external_json.hpp"

#include <algorithm>
#include <map>

namespace payrecon {
namespace {

constexpr const char* k_members = "payment_id, generation, as, note, provider_reference, amount, "
                                  "confirm_no_charge, unverified";

// The member of a line that carries each part of a resolution.
std::string member_of(ResolutionProblem::Part part) {
    switch (part) {
    case ResolutionProblem::Part::note:
        return "note";
    case ResolutionProblem::Part::generation:
        return "generation";
    case ResolutionProblem::Part::provider_reference:
        return "provider_reference";
    case ResolutionProblem::Part::confirmation:
        return "confirm_no_charge";
    case ResolutionProblem::Part::amount:
        return "amount";
    case ResolutionProblem::Part::unverified:
        return "unverified";
    }
    return "";
}

bool blank(char c) {
    return c == ' ' || c == '\t';
}

// The decision on one line, or what is wrong with it.
struct Parsed {
    std::optional<ResolveRequest> request;
    std::string problem;
};

Parsed parse_line(const std::string& line) {
    const auto bad = [](std::string what) { return Parsed{std::nullopt, std::move(what)}; };
    if (line.size() > k_max_decision_line) {
        return bad("longer than " + std::to_string(k_max_decision_line) +
                   " bytes: a decision is one short JSON object");
    }
    const auto json = parse_external_json(line);
    if (!json || !json->is_object()) {
        return bad("not a JSON object (one decision per line: {\"payment_id\": \"...\", "
                   "\"generation\": 3, \"as\": \"failed\", \"note\": \"...\"})");
    }
    ResolveRequest r;
    bool have_id = false;
    bool have_generation = false;
    bool have_as = false;
    bool have_note = false;
    for (const auto& [name, value] : json->items()) {
        const auto wrong_type = [&](const char* type) {
            return bad("\"" + printable(name) + "\" must be " + type);
        };
        if (name == "payment_id") {
            if (!value.is_string() || value.get<std::string>().empty()) {
                return wrong_type("a payment ID or operation ID (a string)");
            }
            r.id = value.get<std::string>();
            have_id = true;
        } else if (name == "generation") {
            if (!value.is_number_integer() || value.get<long long>() < 0) {
                return wrong_type("the payment's generation, a whole number (review show prints "
                                  "it)");
            }
            r.generation = value.get<long long>();
            have_generation = true;
        } else if (name == "as") {
            const auto decision = value.is_string() ? parse_resolution(value.get<std::string>())
                                                    : std::optional<OperatorDecision>();
            if (!decision) {
                return wrong_type("\"succeeded\", \"failed\" or \"retry\"");
            }
            r.decision = *decision;
            have_as = true;
        } else if (name == "note") {
            if (!value.is_string()) {
                return wrong_type("a string: what you checked and why");
            }
            r.note = value.get<std::string>();
            have_note = true;
        } else if (name == "provider_reference") {
            if (!value.is_string()) {
                return wrong_type("a string: the provider's ID of the charge");
            }
            r.provider_reference = value.get<std::string>();
        } else if (name == "amount") {
            if (!value.is_string()) {
                return wrong_type("a string in major units of the payment's currency, as "
                                  "\"8.80\"");
            }
            r.charged_amount = value.get<std::string>();
        } else if (name == "confirm_no_charge") {
            if (!value.is_boolean()) {
                return wrong_type("true or false");
            }
            r.confirmed_no_charge = value.get<bool>();
        } else if (name == "unverified") {
            if (!value.is_boolean()) {
                return wrong_type("true or false");
            }
            r.unverified = value.get<bool>();
        } else {
            return bad("unknown member \"" + printable(name) + "\" (a decision has " + k_members +
                       ")");
        }
    }
    for (const auto& [have, name] :
         {std::pair{have_id, "payment_id"}, std::pair{have_generation, "generation"},
          std::pair{have_as, "as"}, std::pair{have_note, "note"}}) {
        if (!have) {
            return bad(std::string("\"") + name + "\" is missing");
        }
    }
    // The rules resolve() checks first, here for the whole file before anything is decided.
    if (const auto problem =
            check_resolution({r.decision, r.note, r.provider_reference, r.confirmed_no_charge,
                              r.generation, r.charged_amount.has_value(), r.unverified})) {
        return bad("\"" + member_of(problem->part) + "\" " + problem->rule);
    }
    return Parsed{std::move(r), {}};
}

} // namespace

bool DecidedLine::applied() const {
    return !refused && (outcome.status == ResolveOutcome::Status::applied ||
                        outcome.status == ResolveOutcome::Status::would_apply);
}

DecisionFile read_decisions(std::istream& in) {
    DecisionFile out;
    std::map<std::string, int> decided_on; // payment as written -> its line
    int number = 0;
    for (std::string line; std::getline(in, line);) {
        ++number;
        if (!line.empty() && line.back() == '\r') {
            line.pop_back();
        }
        const auto first = std::find_if_not(line.begin(), line.end(), blank);
        if (first == line.end() || *first == '#') {
            continue;
        }
        Parsed parsed = parse_line(line);
        if (!parsed.request) {
            out.problems.push_back({number, std::move(parsed.problem)});
            continue;
        }
        const auto [earlier, fresh] = decided_on.emplace(parsed.request->id, number);
        if (!fresh) {
            out.problems.push_back({number, "payment " + printable(parsed.request->id) +
                                                " is decided on line " +
                                                std::to_string(earlier->second) +
                                                " already: one decision per payment"});
            continue;
        }
        out.decisions.push_back({number, std::move(*parsed.request)});
    }
    return out;
}

std::vector<DecidedLine> resolve_each(store::Db& db, const std::vector<DecisionLine>& decisions,
                                      const std::string& operator_name, bool dry_run,
                                      const AskProvider& ask_provider,
                                      const std::function<void(const DecidedLine&)>& on_each) {
    std::vector<DecidedLine> out;
    out.reserve(decisions.size());
    for (const DecisionLine& d : decisions) {
        DecidedLine decided;
        decided.line = d.line;
        decided.request = d.request;
        decided.request.operator_name = operator_name;
        decided.request.dry_run = dry_run;
        try {
            decided.outcome = resolve(db, decided.request, ask_provider);
        } catch (const Refused& e) {
            decided.refused = e.what();
            decided.hint = e.hint();
        }
        out.push_back(std::move(decided));
        if (on_each) {
            on_each(out.back());
        }
    }
    return out;
}

} // namespace payrecon
