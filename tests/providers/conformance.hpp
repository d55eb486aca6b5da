#pragma once
// The conformance suite: what every registered provider kind must have and do, checked from its
// descriptor and its test files alone, so that a new kind is covered without a test written for
// it (docs/adding-a-provider.md lists the same steps). Each check returns what is wrong, one line
// per problem starting with the kind, and nothing when the kind conforms; test_conformance.cpp
// runs every check for every kind the registry lists, and shows that a kind lacking a file, a
// contract, a corpus or a status table fails.
//
// A kind's files (Files::standard for the kinds payrecon has):
//   tests/providers/contracts/<kind>.json   its contract: the facts of its published OpenAPI
//                                           document (scripts/contracts writes it)
//   tests/providers/fixtures/<kind>/        recorded responses, scrubbed of secrets, and
//                                           expected.json: per file, the call it answers and what
//                                           the adapter makes of it
//   tests/fuzz/corpus/<kind>/               response bodies, recorded and malformed, replayed
//   providers/<kind>/README.md              its outcome table and its operator's notes

#include "providers/descriptor.hpp"

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace payrecon::conformance {

struct Files {
    std::filesystem::path contract;
    std::filesystem::path fixtures;
    std::filesystem::path corpus;
    std::filesystem::path readme;

    // Where the files of a kind payrecon has live.
    static Files standard(std::string_view kind);
};

using Problems = std::vector<std::string>;

// The files exist: a contract that is JSON, a fixtures folder with expected.json, a corpus that is
// not empty, a README with the sections "## Outcomes" and "## Finding a payment".
Problems check_files(const providers::ProviderDescriptor& d, const Files& f);

// The descriptor is whole (kind, names, credentials, carry limits, factory, status table), its
// settings' examples parse, and the kind is refused settings it does not take.
Problems check_descriptor(const providers::ProviderDescriptor& d);

// The requests against the contract: a create is a POST on a path the contract has, its body's
// fields are ones the contract's request schema defines and every required one is sent, the
// idempotency key is the operation ID on every attempt, the credentials are sent and listed for
// redaction, the deadline passes through; a lookup and a list page are GETs on a contract path with
// query parameters it defines -- or, where the API has none, send nothing and fail.
Problems check_requests(const providers::ProviderDescriptor& d, const Files& f);

// Every status word the contract lists is in the status table, every word of the table is mapped
// by the wire as the table says, and a word mapped to unknown says why.
Problems check_statuses(const providers::ProviderDescriptor& d, const Files& f);

// Every recorded fixture parses and is listed in expected.json, and the adapter makes of it what
// expected.json says.
Problems check_fixtures(const providers::ProviderDescriptor& d, const Files& f);

// Transport failures pass through: not_sent stays not_sent, unknown stays unknown, a truncated body
// is unknown; a failed lookup or list is never an answer.
Problems check_transport_failures(const providers::ProviderDescriptor& d);

// No secret in the fixtures or the corpus (the descriptor's patterns and bearer or basic
// credentials); and through the real transport against a loopback server that echoes every
// request, including its credentials, into its answers, no secret in any result: call records,
// rejections, references.
Problems check_secrets(const providers::ProviderDescriptor& d, const Files& f);

// Every corpus file, answered at every replay status to a submit, a lookup and a list, keeps the
// invariants of conformance::replay.
Problems check_corpus(const providers::ProviderDescriptor& d, const Files& f);

// All of the above.
Problems check_all(const providers::ProviderDescriptor& d, const Files& f);

} // namespace payrecon::conformance
