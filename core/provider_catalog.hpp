#pragma once
// The providers a deployment is configured to send to, as the intake checks a new payment against
// them (the provider configuration's keys, each with what its adapter can carry). Pure data: the
// providers' registry builds it, the intake reads it.

#include "core/carry_limits.hpp"

#include <chrono>
#include <map>
#include <string>

namespace payrecon {

// A provider this deployment is configured to send to (a key of the provider configuration).
struct KnownProvider {
    std::string name;   // what payments name: "stripe", "stripe-eu"
    std::string kind;   // its adapter: stripe, adyen, square
    CarryLimits limits; // what its adapter can carry of a payment
    // Authorisations (issue 32): whether it can authorise only (capture "manual"), capture one
    // authorisation in several parts, and how long it keeps one (0: not known).
    bool manual_capture = false;
    bool multiple_captures = false;
    std::chrono::seconds authorization_validity{0};
};

// The providers of the deployment's provider configuration. A payment naming any other provider
// would be accepted and never sent: no worker could claim it.
struct ProviderCatalog {
    std::map<std::string, KnownProvider> providers; // by name

    // The names, comma-separated, for messages: "stripe, stripe-eu".
    std::string names() const;
};

} // namespace payrecon
