#pragma once
// What a provider's 401 or 403 means: it refused our credentials -- wrong, revoked, or without the
// permission asked for -- before executing anything. Nothing about the payment is wrong, and the
// next call of the same account gets the same answer until an operator fixes the configuration:
// the worker stops calling that account, the reconciler and the statement stop asking it, and
// payments it refused so can be sent again on the attempt record's evidence alone
// (resolution_policy's requeue_refusal).

namespace payrecon {

// True for 401 (authentication) and 403 (permission).
constexpr bool refuses_credentials(int http_status) noexcept {
    return http_status == 401 || http_status == 403;
}

} // namespace payrecon
