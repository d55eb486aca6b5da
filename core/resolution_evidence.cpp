#include "core/resolution_evidence.hpp"

#include "core/money.hpp"

#include <algorithm>

namespace payrecon {
namespace {

// Where the records of one reference stand: the furthest along of them, and the first record
// that says so.
struct Standing {
    SeenOutcome outcome = SeenOutcome::unsettled;
    const SeenRecord* record = nullptr;
};

Standing standing_of(const std::vector<SeenRecord>& seen, std::string_view reference) {
    Standing out;
    for (const auto& r : seen) {
        if (!r.reference || *r.reference != reference) {
            continue;
        }
        if (out.record == nullptr || r.outcome > out.outcome) {
            out.outcome = r.outcome;
            out.record = &r;
        }
    }
    return out;
}

// The references `seen` names, in the order first seen.
std::vector<std::string> references_of(const std::vector<SeenRecord>& seen) {
    std::vector<std::string> out;
    for (const auto& r : seen) {
        if (r.reference && !r.reference->empty() &&
            std::find(out.begin(), out.end(), *r.reference) == out.end()) {
            out.push_back(*r.reference);
        }
    }
    return out;
}

// How the charged records of `reference` compare with `expected_minor` in `currency`: another
// currency, then another amount, then confirmed by one with an amount; silent if none had one.
EvidenceCheck compare_charge(const std::vector<SeenRecord>& seen, std::string_view reference,
                             long long expected_minor, std::string_view currency) {
    const SeenRecord* other_amount = nullptr;
    const SeenRecord* agreeing = nullptr;
    for (const auto& r : seen) {
        if (!r.reference || *r.reference != reference || r.outcome != SeenOutcome::charged) {
            continue;
        }
        if (r.currency && !same_currency(*r.currency, currency)) {
            return {EvidenceCheck::Verdict::other_currency, r};
        }
        if (!r.amount_minor) {
            continue;
        }
        if (*r.amount_minor != expected_minor) {
            other_amount = other_amount != nullptr ? other_amount : &r;
        } else {
            agreeing = agreeing != nullptr ? agreeing : &r;
        }
    }
    if (other_amount != nullptr) {
        return {EvidenceCheck::Verdict::other_amount, *other_amount};
    }
    if (agreeing != nullptr) {
        return {EvidenceCheck::Verdict::confirmed, *agreeing};
    }
    return {};
}

bool has(const std::vector<OperatorDecision>& decisions, OperatorDecision d) {
    return std::find(decisions.begin(), decisions.end(), d) != decisions.end();
}

} // namespace

std::string_view to_string(EvidenceSource source) {
    switch (source) {
    case EvidenceSource::statement:
        return "statement";
    case EvidenceSource::webhook:
        return "webhook";
    case EvidenceSource::lookup:
        return "lookup";
    }
    return "statement";
}

std::string_view to_string(SeenOutcome outcome) {
    switch (outcome) {
    case SeenOutcome::unsettled:
        return "unsettled";
    case SeenOutcome::declined:
        return "declined";
    case SeenOutcome::charged:
        return "charged";
    case SeenOutcome::refunded:
        return "refunded";
    }
    return "unsettled";
}

SeenOutcome seen_outcome(EvidenceSource source, std::string_view state) {
    if (state == "succeeded") {
        return SeenOutcome::charged;
    }
    if (state == (source == EvidenceSource::webhook ? "failed" : "declined")) {
        return SeenOutcome::declined;
    }
    if (state == "refunded" && source == EvidenceSource::statement) {
        return SeenOutcome::refunded;
    }
    return SeenOutcome::unsettled;
}

std::string_view to_string(EvidenceCheck::Verdict verdict) {
    using V = EvidenceCheck::Verdict;
    switch (verdict) {
    case V::silent:
        return "silent";
    case V::confirmed:
        return "confirmed";
    case V::declined:
        return "declined";
    case V::refunded:
        return "refunded";
    case V::other_amount:
        return "other_amount";
    case V::other_currency:
        return "other_currency";
    case V::other_reference:
        return "other_reference";
    }
    return "silent";
}

bool contradicts(EvidenceCheck::Verdict verdict) {
    return verdict != EvidenceCheck::Verdict::silent &&
           verdict != EvidenceCheck::Verdict::confirmed;
}

const SeenRecord* standing_charge(const std::vector<SeenRecord>& seen) {
    for (const auto& reference : references_of(seen)) {
        const Standing s = standing_of(seen, reference);
        if (s.outcome == SeenOutcome::charged) {
            return s.record;
        }
    }
    return nullptr;
}

EvidenceCheck check_reference_against(const std::vector<SeenRecord>& seen,
                                      std::string_view reference, long long expected_minor,
                                      std::string_view currency) {
    const Standing own = standing_of(seen, reference);
    if (own.record != nullptr) {
        switch (own.outcome) {
        case SeenOutcome::refunded:
            return {EvidenceCheck::Verdict::refunded, *own.record};
        case SeenOutcome::charged:
            return compare_charge(seen, reference, expected_minor, currency);
        case SeenOutcome::declined:
            return {EvidenceCheck::Verdict::declined, *own.record};
        case SeenOutcome::unsettled:
            return {};
        }
    }
    if (const SeenRecord* other = standing_charge(seen)) {
        return {EvidenceCheck::Verdict::other_reference, *other};
    }
    return {};
}

std::vector<ResolutionSuggestion>
suggest_resolutions(const std::vector<OperatorDecision>& allowed,
                    const std::vector<SeenRecord>& seen, long long amount_minor,
                    std::string_view currency, const std::optional<std::string>& own_reference) {
    using D = OperatorDecision;
    std::vector<ResolutionSuggestion> out;
    if (const SeenRecord* charge = standing_charge(seen)) {
        const EvidenceCheck check =
            compare_charge(seen, *charge->reference, amount_minor, currency);
        if (check.verdict != EvidenceCheck::Verdict::other_currency) {
            ResolutionSuggestion s{D::succeeded, charge->reference, std::nullopt};
            if (check.verdict == EvidenceCheck::Verdict::other_amount) {
                s.charged_minor = check.record->amount_minor;
            }
            out.push_back(std::move(s));
        }
        out.push_back({D::failed, std::nullopt, std::nullopt});
        return out;
    }
    // No charge stands: one declined, or one refunded, says the money did not move (or went back).
    const bool no_charge = std::any_of(seen.begin(), seen.end(), [](const SeenRecord& r) {
        return r.outcome == SeenOutcome::declined || r.outcome == SeenOutcome::refunded;
    });
    // A reference of the payment's own is offered only where nothing seen of it contradicts it.
    std::optional<std::string> reference;
    if (own_reference && !own_reference->empty() &&
        !contradicts(
            check_reference_against(seen, *own_reference, amount_minor, currency).verdict)) {
        reference = own_reference;
    }
    if (no_charge) {
        out.push_back({D::failed, std::nullopt, std::nullopt});
        for (const D d : allowed) {
            if (d != D::failed && d != D::succeeded) {
                out.push_back({d, std::nullopt, std::nullopt});
            }
        }
        if (has(allowed, D::succeeded)) {
            out.push_back({D::succeeded, reference, std::nullopt});
        }
        return out;
    }
    for (const D d : allowed) {
        out.push_back({d, d == D::succeeded ? reference : std::nullopt, std::nullopt});
    }
    return out;
}

ReferenceGate gate_reference(EvidenceCheck::Verdict evidence, bool can_ask_provider,
                             bool unverified) {
    if (contradicts(evidence)) {
        return ReferenceGate::refuse_contradicted;
    }
    if (evidence == EvidenceCheck::Verdict::confirmed) {
        return ReferenceGate::accept_evidence;
    }
    if (unverified) {
        return ReferenceGate::accept_unverified;
    }
    return can_ask_provider ? ReferenceGate::ask_provider : ReferenceGate::refuse_unchecked;
}

} // namespace payrecon
