#include "services/endpoints.hpp"

#include "core/encoding.hpp"
#include "core/resolution_policy.hpp"
#include "core/standard_webhooks.hpp"
#include "core/uuid.hpp"

namespace payrecon {

namespace {

// Seals `secret` for whichever (tenant, endpoint, secret number) the store is about to write it
// under: the additional data binds the sealed bytes to that row.
store::SealFunction sealing(const SealingKeys& keys, const Secret& secret) {
    return [&keys, &secret](const std::string& tenant_id, const std::string& endpoint_id,
                            int secret_no) {
        return keys.seal(secret.reveal(),
                         store::endpoint_secret_aad(tenant_id, endpoint_id, secret_no));
    };
}

} // namespace

tl::expected<CheckedEndpointRequest, EndpointProblem>
check_endpoint_request(EndpointRequest request, const CheckEndpointUrl& check_url) {
    for (const auto& p : request.event_types) {
        if (auto problem = event_pattern_problem(p)) {
            return tl::unexpected(
                EndpointProblem{EndpointProblem::Part::event_types, p, std::move(*problem)});
        }
    }
    if (request.description) {
        if (auto problem = display_name_problem(*request.description, k_max_endpoint_description)) {
            return tl::unexpected(
                EndpointProblem{EndpointProblem::Part::description, {}, std::move(*problem)});
        }
    }
    if (auto refused = check_url(request.url)) {
        return tl::unexpected(EndpointProblem{EndpointProblem::Part::url, {}, std::move(*refused)});
    }
    return CheckedEndpointRequest(std::move(request));
}

AddedEndpoint add_endpoint(store::Db& db, const SealingKeys& keys, const std::string& tenant_id,
                           const CheckedEndpointRequest& checked, const std::string& actor) {
    const EndpointRequest& r = checked.request();
    AddedEndpoint out;
    out.secret = new_endpoint_secret();
    out.endpoint = store::add_endpoint(db, tenant_id, uuid_v7(), r.url, r.event_types,
                                       r.description, actor, sealing(keys, out.secret));
    return out;
}

std::vector<store::EndpointRow> list_endpoints(store::Db& db,
                                               const std::optional<std::string>& tenant_id) {
    return store::list_endpoints(db, tenant_id);
}

std::optional<store::EndpointRow> find_endpoint(store::Db& db, const std::string& endpoint_id) {
    return store::find_endpoint(db, endpoint_id);
}

std::optional<std::string> disable_reason(std::string_view typed) {
    std::string reason = trimmed_note(typed);
    if (reason.empty() || reason.size() > k_max_disable_reason) {
        return std::nullopt;
    }
    return reason;
}

store::EndpointChange disable_endpoint(store::Db& db, const std::string& endpoint_id,
                                       const std::string& actor, const std::string& reason) {
    return store::set_endpoint_enabled(db, endpoint_id, false, actor, reason);
}

store::EndpointChange enable_endpoint(store::Db& db, const std::string& endpoint_id,
                                      const std::string& actor) {
    return store::set_endpoint_enabled(db, endpoint_id, true, actor, "enabled by an operator");
}

std::optional<RotatedSecret> rotate_endpoint_secret(store::Db& db, const SealingKeys& keys,
                                                    const std::string& endpoint_id,
                                                    std::chrono::seconds overlap,
                                                    const std::string& actor) {
    RotatedSecret out;
    out.secret = new_endpoint_secret();
    const auto number =
        store::rotate_endpoint_secret(db, endpoint_id, overlap, actor, sealing(keys, out.secret));
    if (!number) {
        return std::nullopt;
    }
    out.secret_no = *number;
    return out;
}

store::ResealResult reseal_endpoint_secrets(store::Db& db, const SealingKeys& keys,
                                            const std::string& actor) {
    return store::reseal_endpoint_secrets(
        db, actor,
        [&keys](const std::string& tenant_id, const std::string& endpoint_id, int secret_no,
                const std::string& sealed) -> std::optional<std::string> {
            const std::string aad = store::endpoint_secret_aad(tenant_id, endpoint_id, secret_no);
            const auto plain = keys.open(sealed, aad);
            if (!plain) {
                return std::nullopt;
            }
            return keys.seal(plain->reveal(), aad);
        });
}

} // namespace payrecon
